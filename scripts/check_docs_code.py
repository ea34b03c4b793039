"""The docs' claims about the code: the symbols they name and the counts they state.

Part of scripts/check_docs.py (its rules 'symbols', 'test names' and 'counts'):
- symbols: a code span that is one identifier (`layernorm_forward`,
  `gpu::AdamWTensor`, `ENGINE_EMU_FMA`, `attention_qkv(...)`, `Tensor.grad`)
  or a source file's bare name (`test_adamw_emu.cpp`) names something the
  tracked sources (every tracked file but the docs) or the tree's file names
  hold, whole word for whole word; `name_N` counts as the `name_` a source
  builds it from. Not checked: math subscripts (`x_i`, `s_ij`), vendor APIs by
  their prefix (cuda*, cublas*, CUBLASLT_*, nccl*, MPI_*, ...), and the names
  in EXTERNAL below, each with why;
- test names: a span shaped as a ctest name whose first part ctest knows
  (`dist.np4`, `emu.*`) matches a test of `ctest -N` in the build; a quoted
  "prefix: words" whose prefix starts a Catch2 test case's name (engine_tests,
  dist_tests: "sampler: every kept sample once per epoch, ...") is one of
  them (a trailing * as a wildcard, line breaks as spaces);
- counts: a number the docs state about the code carries a marker saying how
  to recount it, right after it: `103 test cases<!-- count: tests [emu] -->`.
  Kinds: `tests SPEC` (engine_tests' test cases under SPEC), `ctest REGEX`
  (ctest's tests matching REGEX), `files GLOB...` (tracked files),
  `lines REGEX GLOB...` (lines of tracked files matching REGEX); `recorded`
  marks a figure of a past run, which the code now need not match. An unmarked
  "N test cases", "N tests", "N kernels" or "N launchers" in the prose is a
  problem: mark it, or drop the number.
"""
import fnmatch
import re
import subprocess

# Names that are not this repository's, so not in its sources: the doc names
# them to compare or to explain. Each entry must still be named by some doc.
EXTERNAL = {
    "T1": "ThreadSanitizer's thread numbers in a report",
    "wgmma": "Hopper's warpgroup MMA instruction (PTX)",
    "wmma": "CUDA's warp matrix API",
    "multi_tensor_apply": "apex's / PyTorch's foreach kernel launcher",
    "min_8bit_size": "bitsandbytes' optimizer option",
    "SummaryWriter": "PyTorch's TensorBoard writer",
    "estimate_mfu": "nanoGPT's MFU function",
    "MODE_INSTANCE": "cuDNN's CUDNN_SOFTMAX_MODE_INSTANCE, shortened",
    "__activemask": "a CUDA intrinsic the emulator lacks",
    "__start_emu_shared": "the linker's section symbols, an idea the emulator declined",
    "__stop_emu_shared": "the linker's section symbols, an idea the emulator declined",
    "allow_smem": "the helper gpu::allow_dynamic_smem replaced (a fix's history in gpu.md)",
    "ladder_softmax_forward_online": "the launcher an exercise asks the reader to write",
    "EPILOGUE_DEFAULT": "cuBLASLt's CUBLASLT_EPILOGUE_DEFAULT, shortened",
    "EPILOGUE_BIAS": "cuBLASLt's CUBLASLT_EPILOGUE_BIAS, shortened",
    "EPILOGUE_GELU_BIAS": "cuBLASLt's CUBLASLT_EPILOGUE_GELU_BIAS, shortened",
    "EPILOGUE_GELU_AUX_BIAS": "cuBLASLt's CUBLASLT_EPILOGUE_GELU_AUX_BIAS, shortened",
    "EPILOGUE_AUX_POINTER": "cuBLASLt's CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, shortened",
    "EPILOGUE_BGRADB": "cuBLASLt's CUBLASLT_EPILOGUE_BGRADB, shortened",
    "STRIDED_BATCH_OFFSET": "cuBLASLt's CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, shortened",
}
VENDOR = re.compile(r"^(cuda|cublas|cudnn|CUDNN_|CUBLAS|nccl|NCCL_|MPI_|OMPI_|PMIX_|SLURM_|H5|cupti|CUPTI_|nvtx)")
IDENT = re.compile(r"([A-Za-z_~][\w:.<>,~]*?)(?:<[^()]*>)?(\(.*\))?")
SOURCE_FILE = re.compile(r"[\w.+-]+\.(cpp|h|cu|cuh|py|sh|sbatch|cmake)")
MATH = re.compile(r"[a-z]{1,4}_[a-z0-9]{1,2}")
CTEST_NAME = re.compile(r"[\w-]+\.[\w.*:-]+")
COUNT_MARK = re.compile(r"<!--\s*count:\s*(.*?)\s*-->")
STATED_COUNT = re.compile(r"\b(\d+) (test cases|tests|kernels|launchers)\b(?!\s*<!--\s*count:)")
SOURCE_SUFFIXES = (".cpp", ".h", ".cu", ".cuh", ".c", ".py", ".sh", ".sbatch", ".cmake", ".txt", ".json", ".toml",
                   ".yml", ".yaml", ".in", "CMakeLists.txt", "run")


def source_words(root, tracked):
    """Every identifier in the tracked sources, and every tracked file's name with and without its suffix."""
    words = set()
    for f in tracked:
        name = f.rsplit("/", 1)[-1]
        words |= {name, name.split(".")[0]}
        if f.endswith(".md") or not f.endswith(SOURCE_SUFFIXES):
            continue
        try:
            words |= set(re.findall(r"[A-Za-z_~]\w*", (root / f).read_text(encoding="utf-8", errors="replace")))
        except OSError:
            pass
    return words


def ctest_names(build):
    try:
        r = subprocess.run(["ctest", "--test-dir", str(build), "-N"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return []
    return re.findall(r"(?m)^\s*Test\s+#\d+:\s+(\S+)", r.stdout)


def catch_names(build):
    """The test cases of engine_tests and dist_tests (--list-test-names-only)."""
    names = []
    for rel in ("tests/engine_tests", "tests/dist_tests"):
        try:
            r = subprocess.run([str(build / rel), "--list-test-names-only"], capture_output=True, text=True, timeout=60)
            names += [line.strip() for line in r.stdout.split("\n") if line.strip()]
        except (OSError, subprocess.TimeoutExpired):
            pass
    return names


QUOTED = re.compile(r'"([^"\n]{3,200}(?:\n[^"\n]{0,200}){0,3})"')


def check_quoted_tests(doc, names, problem, counts):
    prefixes = {n.split(": ")[0] for n in names if ": " in n}
    for m in QUOTED.finditer(doc.prose):
        text = " ".join(m.group(1).split())
        if ": " not in text or text.split(": ")[0] not in prefixes or "..." in text:
            continue  # not a test's name, or a placeholder
        counts["test names"] += 1
        if not any(fnmatch.fnmatchcase(n, text) for n in names):
            problem(f"{doc.rel}:{doc.line_of(m.start())}", f'no test case is named "{text}" (engine_tests, '
                    "dist_tests --list-test-names-only): name one that exists")


def known_word(word, words):
    if word in words or VENDOR.match(word) or word in EXTERNAL:
        return True
    m = re.fullmatch(r"(\w+_)\d+", word) or re.fullmatch(r"lib(\w+)\.(a|so)", word)
    return bool(m and m.group(1) in words)


def check_symbols(doc, words, tests, problem, counts, used):
    prefixes = {t.split(".")[0] for t in tests if "." in t}
    for n, _, text in doc.spans:
        where = f"{doc.rel}:{n}"
        if CTEST_NAME.fullmatch(text) and text.split(".")[0] in prefixes:
            counts["test names"] += 1
            if not any(fnmatch.fnmatchcase(t, text) or t.startswith(text.rstrip("*")) and text.endswith("*")
                       for t in tests):
                problem(where, f"ctest has no test '{text}' (ctest --test-dir BUILD -N): correct or drop it")
            continue
        if "/" in text or text.startswith("-"):
            continue  # paths and options: their own rules
        if SOURCE_FILE.fullmatch(text) or re.fullmatch(r"lib\w+\.(a|so)", text):
            counts["symbols"] += 1
            if not known_word(text, words) and not known_word(text.split(".")[0], words):
                problem(where, f"no tracked file is named '{text}': correct the name or drop it")
            continue
        m = IDENT.fullmatch(text)
        if not m or " " in m.group(1) or MATH.fullmatch(m.group(1)):
            continue
        counts["symbols"] += 1
        missing = [w for w in re.findall(r"[A-Za-z_~]\w*", m.group(1)) if not known_word(w, words)]
        used.update(w for w in re.findall(r"[A-Za-z_~]\w*", m.group(1)) if w in EXTERNAL)
        if missing:
            problem(where, f"no source names '{missing[0]}' (`{text}`): name what the code has now, or drop it "
                    "(a name from elsewhere: EXTERNAL in scripts/check_docs_code.py)")


def unused_external(used, problem):
    for name in sorted(set(EXTERNAL) - used):
        problem("scripts/check_docs_code.py:1", f"EXTERNAL lists '{name}', which no doc names: drop the entry")


def recount(kind, args, ctx):
    """The count a marker's command gives, or an error string."""
    if kind == "recorded":
        return None
    if kind == "tests" and args:
        return ctx["test_count"](" ".join(args))
    if kind == "ctest" and len(args) == 1:
        return sum(1 for t in ctx["tests"] if re.search(args[0], t))
    if kind == "files" and args:
        return sum(1 for f in ctx["tracked"] if any(fnmatch.fnmatchcase(f, g) for g in args))
    if kind == "lines" and len(args) >= 2:
        rx = re.compile(args[0])
        total = 0
        for f in ctx["tracked"]:
            if any(fnmatch.fnmatchcase(f, g) for g in args[1:]):
                text = (ctx["root"] / f).read_text(encoding="utf-8", errors="replace")
                total += sum(1 for line in text.split("\n") if rx.search(line))
        return total
    return "unknown"


def check_counts(doc, ctx, problem, counts):
    # A marker shown in a code span is an example of the syntax, not a claim.
    prose = re.sub(r"(`+)(?!`).+?(?<!`)\1", lambda m: " " * len(m.group(0)), doc.prose)
    for n, line in enumerate(prose.split("\n"), 1):
        where = f"{doc.rel}:{n}"
        for m in STATED_COUNT.finditer(line):
            problem(where, f"'{m.group(0)}' is a count of the code with no way to recount it: add "
                    "<!-- count: KIND ARGS --> after it (scripts/check_docs_code.py) or drop the number")
        for m in COUNT_MARK.finditer(line):
            counts["counts"] += 1
            words = m.group(1).split()
            stated = re.findall(r"\d+", line[:m.start()])
            got = recount(words[0] if words else "", words[1:], ctx)
            if got == "unknown":
                problem(where, f"count marker '{m.group(1)}': the kinds are tests SPEC, ctest REGEX, files GLOB..., "
                        "lines REGEX GLOB..., recorded")
            elif isinstance(got, str):
                problem(where, f"count marker '{m.group(1)}': {got}")
            elif got is not None and (not stated or int(stated[-1]) != got):
                said = stated[-1] if stated else "no number"
                problem(where, f"states {said} where '{m.group(1)}' counts {got} now: write {got}")
