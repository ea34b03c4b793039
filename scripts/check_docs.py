#!/usr/bin/env python3
"""Keeps the docs honest: what they name must exist in the tree and the build.

Usage: python3 scripts/check_docs.py BUILD_DIR   (ctest -L docs; the standard library only)

The docs name files, options, tests and benchmark cases, and each of those
moves on while the prose stays; this check reads every doc (README.md,
docs/**/*.md, and every other *.md git tracks) against the tree and the
programs in BUILD_DIR, and prints one line per stale name, file:line: what
is wrong and what to change (exit status 1), or a one-line summary (0). It
needs a build: a missing BUILD_DIR/models/train is reported as such.

Rules:
- links: a relative [text](path) resolves to a file or folder inside the
  repository, and a #anchor into a .md file names one of its headings
  (GitHub's slug: lower case, punctuation but - and _ dropped, spaces to -,
  -1, -2 for repeats);
- paths: a word that starts with a tracked top-level folder (kernels/...,
  `tests/kernels/*_emu.cpp`) exists as a file, a folder, a glob's or a brace
  list's matches, or a program BUILD_DIR holds (bench/kernels); `path:line`
  and `path:symbol` count up to the colon; out/, data/, build*/ and .deps/
  are generated, untracked, so never taken for paths;
- train's options, where the docs give them to train: (a) in a command (a
  code-block line, backslash continuations joined, or a code span), every
  --option after the word that runs train (a path ending in models/train, a
  bare `train` first, or scripts/train.sh and scripts/slurm/*.sbatch, which
  pass their arguments on) to the command's end (| && || ; #) is in `train
  --help`, `-` and `_` alike as train reads them; (b) a code span of options
  alone (`--tp N`) is train's when its paragraph (a table row, a list item)
  names train and no other program; anywhere else it is whose the prose
  says, so it need only be some program's or script's here (the --help of
  the programs the docs run, argparse in *.py, the words of *.sh and
  *.sbatch, the doc's own commands): an external tool's option passes where
  a command or script here shows it, a typo or a dropped option does not;
- `engine_tests "<spec>"` selects a test (`--list-test-names-only`: Catch2
  v2's exit status is the count); `bench/kernels --filter X` is part of a
  case name (the workbench has no listing option: `kernels --quick --json`);
- a folder's README.md (comm/README.md) names every tracked entry of its folder;
- no doc cites files outside the repository (../shared, DESIGN.md, STYLE.md);
- symbols, test names and counts: the code a span names exists, a ctest name
  is a test, a count of the code says how to recount it and is right
  (scripts/check_docs_code.py says how).

Usage for the checker's own test: --root DIR checks the docs of another tree
(a folder that need not be a git checkout) against BUILD_DIR's programs.
"""
import glob
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

import check_docs_code

ROOT = Path(__file__).resolve().parent.parent
if len(sys.argv) == 4 and sys.argv[1] == "--root":  # the checker's test: a seeded tree
    ROOT = Path(sys.argv[2]).resolve()
    del sys.argv[1:3]
problems = []
counts = {"files": 0, "links": 0, "paths": 0, "options": 0, "test specs": 0, "bench filters": 0, "symbols": 0,
          "test names": 0, "counts": 0}


def problem(where, msg):
    file, _, line = where.partition(":")
    problems.append((file, int(line or 0), msg))


def tracked_files():
    try:
        cmd = ["git", "-C", str(ROOT), "ls-files"]
        return subprocess.run(cmd, capture_output=True, text=True, check=True).stdout.split()
    except (OSError, subprocess.CalledProcessError):  # not a git checkout: what is there, less the generated
        generated = re.compile(r"^(build[^/]*|out|data|\.deps|\.git)/|__pycache__")
        files = (str(p.relative_to(ROOT)) for p in ROOT.rglob("*") if p.is_file())
        return [f for f in files if not generated.search(f)]


def doc_files():
    docs = {"README.md"} | {str(p.relative_to(ROOT)) for p in (ROOT / "docs").rglob("*.md")}
    return sorted(d for d in docs | {f for f in TRACKED if f.endswith(".md")} if (ROOT / d).is_file())


TRACKED = tracked_files()
TOP = sorted({f.split("/")[0] for f in TRACKED if "/" in f}, key=len, reverse=True)
PATH_RE = re.compile(r"(?<![\w./~$@-])(?:\./)?((?:%s)/(?:[\w.*?+%%:-]|/|\{[^}\s]*\})*)" % "|".join(map(re.escape, TOP)))
OUTSIDE_RE = re.compile(r"\.\./shared|\b(DESIGN|STYLE)\.md")
SPAN_RE = re.compile(r"(?<!`)(`+)(?!`)(.+?)(?<!`)\1(?!`)", re.S)
LINK_RE = re.compile(r"!?\[((?:[^\]\[]|\[[^\]]*\])*)\]\(\s*([^)\s]+)(?:\s+\"[^\"]*\")?\s*\)")
OTHER_WORDS = re.compile(r"\b(workbench|mpirun|srun|sbatch|nsys|ncu|Nsight|cmake|ctest|tensorboard|TensorBoard)\b")
SHELL = ("", "sh", "bash", "shell", "console")  # fence languages whose lines are commands
SEPARATORS = {"|", "||", "&&", ";", "&", "(", ")"}
# Programs other than train, as a command's first word or a span of their
# own; OTHER_WORDS, the same in prose. A paragraph that names one is not
# train's alone, so its option spans are not held to train's --help (rule b).
OTHER_PROGRAMS = {"mpirun", "srun", "sbatch", "#SBATCH", "nsys", "ncu", "cmake", "ctest", "gdb", "tensorboard",
                  "pytest", "python3", "pip", "kernels", "collectives", "loader", "tp_layers", "train_mlp",
                  "prepare_weather", "prepare_text", "prepare_fashion_mnist", "engine_tests", "h5py", "workbench",
                  "tokenize", "generate"}


class Doc:
    """A markdown file split into prose (code blocks blanked, line numbers kept) and code-block lines."""

    def __init__(self, rel):
        self.rel = rel
        self.lines = (ROOT / rel).read_text(encoding="utf-8").split("\n")
        self.code = []  # (line number, text, fence language)
        prose, fence, lang = [], None, ""
        for n, line in enumerate(self.lines, 1):
            m = re.match(r"\s*(`{3,}|~{3,})\s*([\w+-]*)", line)
            if fence is None and m:
                fence, lang = m.group(1), m.group(2).lower()
                prose.append("")
            elif fence is not None:
                if line.strip().startswith(fence[0] * len(fence)) and not line.strip().strip(fence[0]):
                    fence = None
                else:
                    self.code.append((n, line, lang))
                prose.append("")
            else:
                prose.append(line)
        self.prose = "\n".join(prose)
        self.spans = []  # (line number, offset, text) of inline code spans
        for m in SPAN_RE.finditer(self.prose):
            if "\n\n" not in m.group(2):
                self.spans.append((self.line_of(m.start()), m.start(), m.group(2).strip()))

    def line_of(self, offset):
        return self.prose.count("\n", 0, offset) + 1

    def headings(self):
        slugs, seen = set(), {}
        for line in self.prose.split("\n"):
            m = re.match(r" {0,3}#{1,6}\s+(.*?)\s*#*\s*$", line)
            if m:
                s = slug(m.group(1))
                k = seen.get(s, 0)
                seen[s] = k + 1
                slugs.add(s if k == 0 else f"{s}-{k}")
        return slugs


def slug(heading):
    """GitHub's anchor for a heading: its text, lower case, punctuation but - and _ dropped, spaces to -."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)
    text = re.sub(r"[`*]|<[^>]+>", "", text).strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def commands(text):
    """Shell words of each command in text: split at | && || ; and cut at a # comment."""
    lex = shlex.shlex(text.replace("\\\n", " "), posix=True, punctuation_chars=";&|()")
    lex.whitespace_split = True
    try:
        words = list(lex)
    except ValueError:  # an unbalanced quote in prose-like text: plain words
        words = text.split()
    out, cur = [], []
    for w in words:
        if w in SEPARATORS or set(w) <= set(";&|()"):
            out.append(cur)
            cur = []
        else:
            cur.append(w)
    return [c for c in out + [cur] if c]


def runs(words, program):
    """Index of the word that runs program (its path in the build, e.g. tests/engine_tests), or None."""
    for i, w in enumerate(words):
        if w.endswith("/" + program) or (w == program.split("/")[-1] and all(re.match(r"\w+=", x) for x in words[:i])):
            return i
    return None


def runs_train(words):
    """Index of the word that runs train, itself or through a script that passes its arguments on."""
    for i, w in enumerate(words):
        if w.endswith("scripts/train.sh") or re.search(r"(^|/)scripts/slurm/[\w.-]+\.sbatch$", w):
            return i
    return runs(words, "models/train")


def program_of(words):
    """'train', 'other' or None: the program a command runs. A lone path (`scripts/setup.sh`)
    names a file, not a run; a lone tool name (`mpirun`) names that tool."""
    if runs_train(words) is not None:
        return "train"
    words = [w for w in words if not re.match(r"\w+=", w)]
    while words and words[0] in ("bash", "sudo", "env", "time", "exec"):
        words = words[1:]
    if not words:
        return None
    base = words[0].split("/")[-1]
    if base in OTHER_PROGRAMS or (len(words) > 1 and (re.search(r"\.(sh|py)$", base) or "/" in words[0])):
        return "other"
    return None


def check_paths_and_citations(doc, build):
    for n, line in enumerate(doc.lines, 1):
        if OUTSIDE_RE.search(line):
            problem(f"{doc.rel}:{n}", f"cites a file outside the repository ({OUTSIDE_RE.search(line).group(0)}): "
                    "cite the repository's own file, or drop it")
        # A link's target is relative to the doc (check_links), not to the root.
        for m in PATH_RE.finditer(re.sub(r"\]\([^)]*\)", "]", line)):
            path = m.group(1).split(":")[0].rstrip(".,;")
            if not path or path.endswith("/.") or "/" not in path:
                continue
            counts["paths"] += 1
            if not path_exists(path, build):
                problem(f"{doc.rel}:{n}", f"path '{path}' does not exist: correct it or drop it")


def expand_braces(path):
    m = re.search(r"\{([^{}]*)\}", path)
    if not m:
        return [path]
    return [x for alt in m.group(1).split(",") for x in expand_braces(path[:m.start()] + alt + path[m.end():])]


def path_exists(path, build):
    for p in expand_braces(path):
        if any(c in p for c in "*?["):
            if not glob.glob(str(ROOT / p)):
                return False
        elif not (ROOT / p).exists():
            if not ((build / p).is_file() and os.access(build / p, os.X_OK)):
                return False
    return True


def check_links(doc, headings_of):
    prose = SPAN_RE.sub(lambda m: " " * len(m.group(0)) if "\n\n" not in m.group(2) else m.group(0), doc.prose)
    for m in LINK_RE.finditer(prose):
        target = m.group(2).strip("<>")
        if re.match(r"[a-z][\w+.-]*:", target):  # http:, https:, mailto:
            continue
        counts["links"] += 1
        where = f"{doc.rel}:{doc.line_of(m.start())}"
        path, _, anchor = target.partition("#")
        dest = (ROOT / doc.rel).parent / path if path else ROOT / doc.rel
        if not dest.exists() or not dest.resolve().is_relative_to(ROOT):
            problem(where, f"link '{target}' points to no file in the repository: "
                    f"correct the path (relative to {doc.rel})")
            continue
        if anchor and dest.suffix == ".md":
            rel = os.path.relpath(dest.resolve(), ROOT)
            if anchor not in headings_of(rel):
                problem(where, f"link '{target}': {rel} has no heading whose anchor is '#{anchor}'")


def paragraphs(doc):
    """(start, end) offsets in doc.prose of paragraphs: blank-line blocks, split at table rows and list items."""
    starts, pos = [0], 0
    for line in doc.prose.split("\n"):
        if not line.strip() or re.match(r"\s*(\||[-*+] |\d+\. )", line):
            starts.append(pos)
        pos += len(line) + 1
    starts = sorted(set(starts)) + [len(doc.prose)]
    return list(zip(starts, starts[1:]))


def check_options(doc, train_opts, known_opts, run):
    def check(where, opt, known=None):
        name = norm(opt)
        counts["options"] += 1
        if known is None and name not in train_opts:
            problem(where, f"train has no option '{opt.split('=')[0]}' (see train --help): correct or drop it")
        elif known is not None and name not in known:
            problem(where, f"'{opt.split('=')[0]}' is an option of no program or script here (train --help, "
                    "the other programs' --help, scripts' argparse and command lines): correct or drop it")

    shown = set()  # options of every command the doc shows, whoever runs them

    def examine(where, text):
        for words in commands(text):
            if not words[0].startswith("--"):  # a command, not a lone option
                shown.update(norm(w) for w in words if w.startswith("--"))
            i = runs_train(words)
            for w in words[i + 1:] if i is not None else []:
                if w.startswith("--") and len(w) > 2:
                    check(where, w)
            i = runs(words, "tests/engine_tests")
            if i is not None:
                run["specs"].append((where, words[i + 1:]))
            i = runs(words, "bench/kernels")
            if i is not None:
                run["filters"] += [(where, f) for f in filters(words[i + 1:])]

    joined, start = "", None
    for n, line, lang in doc.code:
        if lang not in SHELL:
            continue
        text = re.sub(r"^\$ ", "", line)
        joined, start = (joined + "\n" + text, start) if joined else (text, n)
        if not text.rstrip().endswith("\\"):
            examine(f"{doc.rel}:{start}", re.sub(r"(^|\s)#.*", "", joined))
            joined = ""
    for n, _, text in doc.spans:
        examine(f"{doc.rel}:{n}", text)
    # (b) spans that are only options: train's where their paragraph names train alone.
    for a, b in paragraphs(doc):
        spans = [s for s in doc.spans if a <= s[1] < b]
        named = {program_of(c) for s in spans for c in commands(s[2])[:1]} - {None}
        if OTHER_WORDS.search(SPAN_RE.sub("", doc.prose[a:b])):
            named.add("other")
        for n, _, text in spans:
            if text.startswith("--"):
                check(f"{doc.rel}:{n}", text.split()[0], None if named == {"train"} else known_opts | shown)


def norm(opt):
    return opt[2:].split("=")[0].replace("-", "_")


def filters(words):
    out = []
    for i, w in enumerate(words):
        if w == "--filter" and i + 1 < len(words):
            out.append(words[i + 1])
        elif w.startswith("--filter="):
            out.append(w.split("=", 1)[1])
    return out


def check_folder_readme(doc):
    folder = str(Path(doc.rel).parent)
    if folder in (".", "docs") or not Path(doc.rel).name == "README.md":
        return
    entries = {f[len(folder) + 1:].split("/")[0] for f in TRACKED if f.startswith(folder + "/")}
    text = "\n".join(doc.lines)
    for e in sorted(entries - {"README.md"}):
        if not re.search(r"(?<![\w.])%s(?![\w])" % re.escape(e), text):
            problem(f"{doc.rel}:1", f"{folder}/{e} is not listed: add a line for it")


# The other programs the docs run; their --help lists their options.
OTHER_BUILT = ["models/train_mlp", "models/prepare_weather", "models/prepare_text", "models/tokenize", "models/generate", "models/prepare_fashion_mnist", "bench/kernels",
               "bench/collectives", "bench/loader", "bench/tp_layers"]


def known_options(build, train_opts):
    """Every option some program or script here takes or passes on: the set a lone option must be in."""
    known = set(train_opts)
    for rel in OTHER_BUILT:
        if os.access(build / rel, os.X_OK):
            r = run_tool([str(build / rel), "--help"], timeout=30)
            known |= {norm(o) for o in re.findall(r"--[A-Za-z][\w-]*", r.stdout + r.stderr)}
    for f in TRACKED:
        if f.endswith((".py", ".sh", ".sbatch")) and (ROOT / f).is_file():
            text = (ROOT / f).read_text(encoding="utf-8", errors="replace")
            if f.endswith(".py"):
                known |= {norm(o) for o in re.findall(r"add_argument\([^)]*?[\"'](--[A-Za-z][\w-]*)", text)}
            else:
                known |= {norm(o) for o in re.findall(r"(?<![\w-])--[A-Za-z][\w-]*", text)}
    return known


def run_tool(args, timeout=60):
    try:
        return subprocess.run(args, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        sys.exit(f"{args[0]}: no answer in {timeout} s to {' '.join(args[1:])}: is the build broken?")


def main():
    if len(sys.argv) != 2:
        print("usage: check_docs.py BUILD_DIR", file=sys.stderr)
        return 2
    build = Path(sys.argv[1])
    train = build / "models" / "train"
    if not os.access(train, os.X_OK):
        print(f"{train}: missing: build first (cmake --build {build}), then rerun the docs check")
        return 1
    # Its options: the usage line's and each line's first word, not those its descriptions quote (nsys's).
    help_text = run_tool([str(train), "--help"]).stdout
    train_opts = {norm(o) for o in re.findall(r"(?m)^\s*(--[A-Za-z][\w-]*)", help_text)} | {"help"}
    train_opts |= {norm(o) for o in re.findall(r"--[A-Za-z][\w-]*", help_text.split("\n")[0])}
    known = known_options(build, train_opts)
    docs = [Doc(d) for d in doc_files()]
    by_rel = {d.rel: d for d in docs}
    cache = {}

    def headings_of(rel):
        if rel not in cache:
            cache[rel] = (by_rel.get(rel) or Doc(rel)).headings()
        return cache[rel]

    run = {"specs": [], "filters": []}
    words = check_docs_code.source_words(ROOT, TRACKED)
    tests = check_docs_code.ctest_names(build)
    catch = check_docs_code.catch_names(build)
    ctx = {"root": ROOT, "tracked": TRACKED, "tests": tests, "test_count": lambda spec: count_tests(build, spec)}
    used = set()
    for doc in docs:
        counts["files"] += 1
        check_paths_and_citations(doc, build)
        check_links(doc, headings_of)
        check_options(doc, train_opts, known, run)
        check_folder_readme(doc)
        check_docs_code.check_symbols(doc, words, tests, problem, counts, used)
        check_docs_code.check_counts(doc, ctx, problem, counts)
        check_docs_code.check_quoted_tests(doc, catch, problem, counts)
    if ROOT == Path(__file__).resolve().parent.parent:
        check_docs_code.unused_external(used, problem)
    check_test_specs(build, run["specs"])
    check_bench_filters(build, run["filters"])
    for file, line, msg in sorted(problems):
        print(f"{file}:{line}: {msg}")
    if problems:
        return 1
    print("docs: " + ", ".join(f"{v} {k}" for k, v in counts.items()) + " checked")
    return 0


def check_test_specs(build, specs):
    tests = build / "tests" / "engine_tests"
    for where, args in specs:
        flags = [a for a in args if a == "-#"]
        for spec in (a for a in args if not a.startswith("-")):
            if "<" in spec or "..." in spec:
                continue  # a placeholder, not a spec
            counts["test specs"] += 1
            if not os.access(tests, os.X_OK):
                problem(where, f"{tests} is missing: build first to check the spec '{spec}'")
                continue
            r = run_tool([str(tests)] + flags + [spec, "--list-test-names-only"])
            if r.returncode == 0 or not r.stdout.strip():
                problem(where, f"engine_tests '{spec}' selects no test: name an existing test or tag")


def count_tests(build, spec):
    """engine_tests' test cases under spec, or an error string."""
    tests = build / "tests" / "engine_tests"
    if not os.access(tests, os.X_OK):
        return f"{tests} is missing: build first"
    r = run_tool([str(tests), spec, "--list-test-names-only"])
    return len([line for line in r.stdout.split("\n") if line.strip()])


def check_bench_filters(build, wanted):
    if not wanted:
        return
    kernels = build / "bench" / "kernels"
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "cases.json"
        r = run_tool([str(kernels), "--quick", "--json", str(out)]) if os.access(kernels, os.X_OK) else None
        names = {x["name"] for x in json.loads(out.read_text())["results"]} if out.exists() else set()
    for where, f in wanted:
        counts["bench filters"] += 1
        if r is None or not names:
            problem(where, f"cannot list the workbench's cases ({kernels} --quick --json failed or is missing): "
                    "build first")
        elif not any(f in name for name in names):
            problem(where, f"bench/kernels --filter '{f}' matches no case ({', '.join(sorted(names))}): correct it")


if __name__ == "__main__":
    sys.exit(main())
