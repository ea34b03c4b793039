#!/usr/bin/python3
"""Plots of the engine's machine-readable outputs, as PNG files.

  plot.py metrics RUN.jsonl [RUN2.jsonl ...] [--labels a,b] -o loss.png
      The metrics.jsonl of models/train (docs/train.md, "Output"), one or
      more runs overlaid: train and val loss, tokens/s (the ViT: images/s)
      and MFU against the step. 15 x 4.5 in at 100 dpi: 1500 x 450 px.
  plot.py roofline kernels.json [--impl cpu,cuda,cublaslt] -o roofline.png
      The --json file of bench/kernels (docs/bench.md) on a log-log
      roofline, one panel per device: 7 x 5.5 in each at 100 dpi, so
      700 x 550 px for the cpu alone, 1400 x 550 px with a GPU panel.
  plot.py timeline LOG [LOG ...] [--steps A:B] [--title T] -o timeline.png
      The range logs of ENGINE_RANGE_LOG (docs/profiling.md), one row per
      file (per rank under mpirun): forward, backward, point-to-point waits
      (send, recv, p2p), optimizer, communication and data ranges as bars on
      a millisecond axis, steps A to B only with --steps. 15 in wide and
      1.5 in + 0.5 in per row at 100 dpi: 1500 x 250 px for two ranks.

Why: runs (O0 vs O2, np=1 vs 2, our attention vs cuDNN) compare at a glance
on one figure, a roofline shows which kernels are far from their limit, and
a timeline shows where each rank waits (a pipeline's bubbles).
Sizes are fixed (no bbox_inches="tight"): the pixel size depends only on the
input (tests/cli/test_plot_cli.sh checks it). Bad input: one line on stderr,
"plot: FILE[:LINE]: why", exit status 1, and no PNG (it is written to a
temporary name beside the output and renamed once complete). A metrics
file's last line without its newline (a run still writing) is skipped with
a warning.
"""
import argparse
import json
import os
import re
import sys
import tempfile

DPI = 100
METRICS_SIZE = (15, 4.5)  # inches; x DPI = pixels
ROOFLINE_PANEL = (7, 5.5)
IMPL_STYLE = {"cpu": ("o", "C0"), "cuda": ("s", "C1"), "cublaslt": ("^", "C2"), "cudnn": ("D", "C3")}  # marker, colour
TIMELINE_WIDTH, TIMELINE_BASE, TIMELINE_ROW = 15, 1.5, 0.5  # inches: height = base + row x files
# The ranges a timeline draws, by the start of their names: (legend label, prefixes, colour).
TIMELINE_KINDS = (
    ("forward", ("forward",), "C0"),
    ("backward", ("backward",), "C1"),
    ("send / recv / p2p", ("send", "recv", "p2p"), "C3"),  # the pipeline's point-to-point waits
    ("optimizer", ("optimizer",), "C2"),
    ("communication", ("communication",), "C4"),  # DDP's wait for the gradient buckets
    ("data", ("data",), "C7"),
)


class PlotError(Exception):
    """Bad input: main prints it as the one-line error."""


def read_text(path):
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except (OSError, UnicodeDecodeError) as e:
        raise PlotError(f"{path}: {getattr(e, 'strerror', None) or e}")
    if not text.strip():
        raise PlotError(f"{path}: empty file")
    return text


def load_metrics(path):
    """Returns (train lines, val lines) of one metrics.jsonl as dicts."""
    train, val = [], []
    text = read_text(path)
    lines = text.splitlines()
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            j = json.loads(line)
        except json.JSONDecodeError as e:
            # train writes whole lines and flushes each; a last line without
            # its newline is one being written (or a killed run's), which
            # train --resume drops too. Any other bad line is an error.
            if n == len(lines) and not text.endswith("\n"):
                print(f"plot: {path}:{n}: skipped a torn last line", file=sys.stderr)
                continue
            raise PlotError(f"{path}:{n}: not JSON ({e.msg})")
        if not isinstance(j, dict) or "step" not in j:
            raise PlotError(f"{path}:{n}: not a metrics object with a step")
        if "loss" in j:
            train.append(j)
        elif "val_loss" in j:
            val.append(j)
    if not train:
        raise PlotError(f"{path}: no training lines (objects with step and loss)")
    return train, val


def run_names(paths):
    """The run's directory name (out/gpt2-tiny/metrics.jsonl -> gpt2-tiny), or
    the file's stem when it is not called metrics.jsonl; more of the path
    while two names are the same."""
    parts = []
    for p in paths:
        comps = [c for c in os.path.abspath(p).split(os.sep) if c]
        last = comps.pop()
        if last != "metrics.jsonl" or not comps:
            comps.append(os.path.splitext(last)[0])
        parts.append(comps)
    for k in range(1, max(len(c) for c in parts) + 1):
        names = ["/".join(c[-k:]) for c in parts]
        if len(set(names)) == len(names):
            break
    return names


def series(lines, key):
    """(steps, values) of the lines where key holds a number (mfu may be null)."""
    pts = [(j["step"], j[key]) for j in lines if isinstance(j.get(key), (int, float))]
    return [p[0] for p in pts], [p[1] for p in pts]


def plot_metrics(plt, args):
    runs = [load_metrics(p) for p in args.files]
    names = args.labels.split(",") if args.labels else run_names(args.files)
    fig, (ax_loss, ax_rate, ax_mfu) = plt.subplots(1, 3, figsize=METRICS_SIZE, dpi=DPI)
    units, no_mfu = set(), []
    for i, ((train, val), name) in enumerate(zip(runs, names)):
        color = f"C{i % 10}"  # one colour per run across the three panels
        ax_loss.plot(*series(train, "loss"), color=color, lw=1, alpha=0.8, label=f"{name} train")
        if val:
            ax_loss.plot(*series(val, "val_loss"), "o--", color=color, ms=4, label=f"{name} val")
        key = "images_per_s" if "images_per_s" in train[0] else "tokens_per_s"
        units.add("images/s" if key == "images_per_s" else "tokens/s")
        ax_rate.plot(*series(train, key), color=color, lw=1, label=name)
        steps, mfu = series(train, "mfu")
        if mfu:
            ax_mfu.plot(steps, [100 * m for m in mfu], color=color, lw=1, label=name)
        else:
            no_mfu.append(name)
    ax_loss.set(title="loss", xlabel="step", ylabel="loss")
    ax_rate.set(title="throughput", xlabel="step", ylabel=" or ".join(sorted(units)))
    ax_mfu.set(title="MFU", xlabel="step", ylabel="% of peak FLOP/s")
    if no_mfu:  # mfu is null where the device's peak is unknown (train prints GFLOP/s then)
        everyone = len(no_mfu) == len(runs)
        ax_mfu.text(0.5, 0.5 if everyone else 0.05, "no MFU" + ("" if everyone else ": " + ", ".join(no_mfu)),
                    ha="center", va="center" if everyone else "bottom", transform=ax_mfu.transAxes)
        if everyone:
            ax_mfu.set(xticks=[], yticks=[])
    for ax in (ax_loss, ax_rate, ax_mfu):
        ax.grid(alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def load_bench(path):
    try:
        doc = json.loads(read_text(path))
    except json.JSONDecodeError as e:
        raise PlotError(f"{path}:{e.lineno}: not JSON ({e.msg})")
    if not (isinstance(doc, dict) and isinstance(doc.get("results"), list) and isinstance(doc.get("machine"), dict)):
        raise PlotError(f'{path}: not a bench/kernels --json file (no "results" list or "machine")')
    return doc


def device_of(impl):
    return "cpu" if impl == "cpu" else "gpu"


def draw_roof(ax, x_lo, x_hi, bw_label, bw_gbps, per_gbps, ceilings, unit):
    """The slope y = bw x intensity (per_gbps: GB/s x FLOP/byte to the unit) up to
    the highest ceiling, then each ceiling flat from its ridge point."""
    slope = bw_gbps * per_gbps
    top = max(c[1] for c in ceilings)
    ax.plot([x_lo, top / slope], [slope * x_lo, top], "k-", lw=1.2)
    texts = [ax.text(x_lo * 1.2, slope * x_lo * 1.5, f"{bw_label} {bw_gbps:,.0f} GB/s", fontsize=8)]
    for label, peak in ceilings:
        ax.plot([peak / slope, x_hi], [peak, peak], "k-" if peak == top else "k--", lw=1)
        # Right-aligned under the line: the points crowd the ridge, the far right is empty.
        texts.append(ax.text(x_hi / 1.1, peak / 1.06, f"{label} {peak:,.3g} {unit}", ha="right", va="top",
                             fontsize=8))
    return texts


def place_labels(ax, points, taken):
    """Greedy: a label takes the first of four spots that overlaps no earlier text
    (taken: the roof's), or is left out (counted); a name already written within
    12 px is not repeated (a kernel's shapes and dtypes often share a spot)."""
    renderer = ax.figure.canvas.get_renderer()
    boxes = [t.get_window_extent(renderer) for t in taken]
    named, left_out = [], 0  # (name, pixel position) of the labelled points
    for name, x, y in points:
        px, py = ax.transData.transform((x, y))
        if any(n == name and abs(px - qx) < 12 and abs(py - qy) < 12 for n, qx, qy in named):
            continue
        for dx, dy in ((3, 2), (3, -2), (-3, 2), (-3, -2)):
            t = ax.annotate(name, (x, y), xytext=(dx, dy), textcoords="offset points", fontsize=6,
                            ha="left" if dx > 0 else "right", va="bottom" if dy > 0 else "top")
            box = t.get_window_extent(renderer)
            if not any(box.overlaps(b) for b in boxes):
                boxes.append(box)
                named.append((name, px, py))
                break
            t.remove()
        else:
            left_out += 1
    return left_out


def plot_roofline(plt, args):
    doc = load_bench(args.file)
    m = doc["machine"]
    impls = args.impl.split(",") if args.impl else None
    rows, emu, empty = [], 0, 0
    for r in doc["results"]:
        if impls and r.get("impl") not in impls:
            continue
        if r.get("impl", "").split("/")[0] == "emu":  # ours ("emu") and the ladder's rungs ("emu/naive")
            emu += 1
        elif not (r.get("median_ms", 0) > 0 and r.get("bytes", 0) > 0 and r.get("flops", 0) > 0):
            empty += 1  # a note-only row (no GPU answers), or no FLOPs (embedding_fwd): no point on a log axis
        else:
            rows.append(r)
    for n, what in ((emu, "emu rows: emulated times are not GPU times"),
                    (empty, "rows without a time, bytes or flops")):
        if n:
            print(f"roofline: left out {n} {what}")
    gpu_peaks = m.get("gpu_peaks")
    if impls:
        devices = sorted({device_of(i) for i in impls if i != "emu"}) or ["cpu"]
    else:
        devices = ["cpu"] + (["gpu"] if gpu_peaks or any(device_of(r["impl"]) == "gpu" for r in rows) else [])
    w, h = ROOFLINE_PANEL
    fig, axes = plt.subplots(1, len(devices), figsize=(w * len(devices), h), dpi=DPI, squeeze=False)
    labels = []  # (axes, [(name, x, y)], the roof's texts): named once the layout is final
    for ax, dev in zip(axes[0], devices):
        pts = [r for r in rows if device_of(r["impl"]) == dev]
        if dev == "cpu":
            unit, scale, bw_label, bw = "GFLOP/s", 1e3, "copy", m.get("cpu_copy_gbps", 0)
            ceilings = [("SGEMM", 1e3 * m.get("cpu_sgemm_tflops", 0))]
            ax.set_title(f"cpu, {m.get('cpu_threads', '?')} threads: measured peaks (copy, SGEMM)", fontsize=10)
        else:
            unit, scale, bw_label, bw, ceilings = "TFLOP/s", 1.0, "HBM", 0, []
            if gpu_peaks:
                bw = gpu_peaks["hbm_gbps"]
                ceilings = [("FP32", gpu_peaks["fp32_tflops"]), ("TF32", gpu_peaks["tf32_tflops"]),
                            ("BF16/FP16", gpu_peaks["bf16_tflops"])]
            peaks = f"datasheet peaks ({m.get('gpu_peak')})" if gpu_peaks else "no datasheet peaks for it"
            ax.set_title(f"{m.get('gpu') or 'GPU'}: {peaks}", fontsize=10)
        per_gbps = scale / 1e3  # GB/s x FLOP/byte = GFLOP/s; scale takes TFLOP/s to the unit
        has_roof = bw > 0 and ceilings and all(c[1] > 0 for c in ceilings)
        # The x range covers the points and every ridge point, with room for the labels.
        xs = [r["flops"] / r["bytes"] for r in pts]
        xs += [c[1] / (bw * per_gbps) for c in ceilings] if has_roof else []
        x_lo, x_hi = (min(xs) / 2, max(xs) * 10) if xs else (0.01, 100)
        texts = draw_roof(ax, x_lo, x_hi, bw_label, bw, per_gbps, ceilings, unit) if has_roof else []
        for impl in sorted({r["impl"] for r in pts}):
            mine = [r for r in pts if r["impl"] == impl]
            marker, color = IMPL_STYLE.get(impl, ("x", "C3"))
            ax.scatter([r["flops"] / r["bytes"] for r in mine], [r["tflops"] * scale for r in mine],
                       marker=marker, color=color, s=22, label=impl, zorder=3)
        labels.append((ax, [(r["name"], r["flops"] / r["bytes"], r["tflops"] * scale) for r in pts], texts))
        if not pts:
            ax.text(0.5, 0.5, "no measured rows", ha="center", va="center", transform=ax.transAxes)
        ax.set(xscale="log", yscale="log", xlim=(x_lo, x_hi), xlabel="arithmetic intensity (FLOP/byte)",
               ylabel=f"achieved {unit}")
        ax.grid(which="both", alpha=0.2)
        if pts:
            ax.legend(fontsize=8, loc="lower right")
    quick = " --quick" if doc.get("options", {}).get("quick") else ""
    fig.suptitle(f"bench/kernels{quick}: roofline, median times", fontsize=11)
    fig.tight_layout()  # first, so the labels are placed in the final pixels
    left_out = sum(place_labels(ax, points, texts) for ax, points, texts in labels)
    if left_out:
        print(f"roofline: {left_out} point labels left out where they would overlap")
    return fig


RANGE_PUSH = re.compile(r"push (\d+) (.*)")
RANGE_POP = re.compile(r"pop (\d+)")
STEP_RANGE = re.compile(r"step (\d+)")
MICRO_BATCH = re.compile(r"(?:forward|backward)(?: .*)? (\d+)")  # "forward 3": micro-batch 3


def load_ranges(path):
    """The ranges of one ENGINE_RANGE_LOG file in push order, each
    [name, start us, end us, index of the enclosing range or -1]."""
    ranges, open_, last = [], [], 0
    for n, line in enumerate(read_text(path).splitlines(), 1):
        if m := RANGE_PUSH.fullmatch(line):
            ranges.append([m[2], int(m[1]), None, open_[-1] if open_ else -1])
            open_.append(len(ranges) - 1)
        elif m := RANGE_POP.fullmatch(line):
            if not open_:
                raise PlotError(f"{path}:{n}: a pop with no open range")
            r = ranges[open_.pop()]
            r[2] = max(int(m[1]), r[1])  # the wall clock may step back (NTP): never a negative width
        elif line == "pop" or line.startswith("push "):
            raise PlotError(f"{path}:{n}: a range log without times ('{line}'), written by an older build: "
                            "re-run with a current build")
        elif line.strip():
            raise PlotError(f"{path}:{n}: not a range log line (want 'push TIME NAME' or 'pop TIME')")
        else:
            continue
        last = max(last, int(m[1]))
    if open_:  # a process that exited inside ranges: draw them to its last event
        print(f"plot: {path}: {len(open_)} range(s) left open (the innermost '{ranges[open_[-1]][0]}'), "
              "drawn to the last event", file=sys.stderr)
        for i in open_:
            ranges[i][2] = max(last, ranges[i][1])
    return ranges


def range_kind(name):
    """The index in TIMELINE_KINDS of the kind a range name starts with, or None."""
    for k, (_, prefixes, _) in enumerate(TIMELINE_KINDS):
        if name.startswith(prefixes):
            return k
    return None


def steps_window(ranges, steps):
    """(indices of the ranges inside the window, its start and end in us), or
    (None, why, None) when the window is not in the log. Without steps, everything."""
    if steps is None:
        return list(range(len(ranges))), min(r[1] for r in ranges), max(r[2] for r in ranges)
    first, last = steps
    numbers = {i: int(m[1]) for i, r in enumerate(ranges) if (m := STEP_RANGE.fullmatch(r[0]))}
    roots = [i for i, s in numbers.items() if first <= s <= last]
    if not roots:
        have = f"the log has steps {min(numbers.values())} to {max(numbers.values())}" if numbers else \
            "the log has no 'step N' ranges"
        want = f"range 'step {first}'" if first == last else f"ranges 'step {first}' to 'step {last}'"
        return None, f"no {want} ({have})", None
    inside = set(roots)
    for i, r in enumerate(ranges):  # an enclosing range comes first in push order
        if r[3] in inside:
            inside.add(i)
    return sorted(inside), min(ranges[i][1] for i in roots), max(ranges[i][2] for i in roots)


def rank_of(path):
    """N of a FILE.rankN name (ENGINE_RANGE_LOG under mpirun), else None."""
    m = re.search(r"\.rank(\d+)$", path)
    return int(m[1]) if m else None


def row_labels(paths):
    """"rank N" for FILE.rankN, else the file name; the file names, then the
    paths, while two labels are the same."""
    for labels in ([os.path.basename(p) if rank_of(p) is None else f"rank {rank_of(p)}" for p in paths],
                   [os.path.basename(p) for p in paths], list(paths)):
        if len(set(labels)) == len(labels):
            break
    return labels


def widest_gap(start, end, inner):
    """The widest (a, b) of start..end that none of the inner (start, end) spans covers."""
    best, at = (start, start), start
    for a, b in sorted(inner) + [(end, end)]:
        if a - at > best[1] - best[0]:
            best = (at, a)
        at = max(at, b)
    return best


def covered(spans):
    """Microseconds covered by a list of (start, end): overlaps count once."""
    total, reach = 0, None
    for a, b in sorted(spans):
        if reach is None or a > reach:
            total += b - a
            reach = b
        elif b > reach:
            total += b - reach
            reach = b
    return total


def plot_timeline(plt, args):
    from matplotlib.patches import Patch
    # Rows by rank; files without a .rankN suffix after them, in the order given (sorted is stable).
    paths = sorted(args.files, key=lambda p: (rank_of(p) is None, rank_of(p) or 0))
    logs = [load_ranges(p) for p in paths]
    where = "the whole log" if not args.steps else f"step {args.steps[0]}" if args.steps[0] == args.steps[1] else \
        f"steps {args.steps[0]} to {args.steps[1]}"
    prefixes = [p for _, ps, _ in TIMELINE_KINDS for p in ps]
    nothing_drawn = f"no range whose name starts with {', '.join(prefixes[:-1])} or {prefixes[-1]}"
    rows, missing = [], {}  # rows: (label, drawn ranges as (name, kind, start, end, depth, inner), window start, end)
    for path, label, ranges in zip(paths, row_labels(paths), logs):
        keep, lo, hi = steps_window(ranges, args.steps)
        if keep is None:
            missing.setdefault(lo, []).append(path)
            continue
        # depth: how many drawn ranges enclose a drawn one (it draws on top, thinner); owner: the innermost
        # drawn range around a range, whose list of inner drawn spans (where its number is hidden) it joins.
        depth, owner, drawn = {}, {}, []
        for i in keep:
            name, start, end, parent = ranges[i]
            k = range_kind(name)
            if k is None:
                depth[i], owner[i] = depth.get(parent, 0), owner.get(parent)
                continue
            depth[i], owner[i] = depth.get(parent, 0) + 1, len(drawn)
            if owner.get(parent) is not None:
                drawn[owner[parent]][5].append((start, end))
            drawn.append((name, k, start, end, depth[i] - 1, []))
        if not drawn:
            missing.setdefault(nothing_drawn, []).append(path)
        rows.append((label, drawn, lo, hi))
    if missing:
        raise PlotError("; ".join(f"{', '.join(ps)}: nothing to draw in {where}: {why}" for why, ps in missing.items()))
    t0, t1 = min(r[2] for r in rows), max(r[3] for r in rows)
    span_ms = max((t1 - t0) / 1e3, 1e-3)

    fig, ax = plt.subplots(figsize=(TIMELINE_WIDTH, TIMELINE_BASE + TIMELINE_ROW * len(rows)), dpi=DPI)
    w, h = fig.get_size_inches()
    left = max(0.9, 0.12 + 0.075 * max(len(r[0]) for r in rows))  # inches: room for the longest label
    fig.subplots_adjust(left=left / w, right=1 - 0.3 / w, top=1 - 0.45 / h, bottom=0.55 / h)
    ax.set_xlim(0, span_ms)
    ax.set_ylim(len(rows) - 0.5, -0.5)  # the first rank on top
    px_per_ms = ax.get_window_extent().width / span_ms
    used = set()
    for y, (label, drawn, lo, hi) in enumerate(rows):
        # One call per kind and depth; deeper (nested) bars on top, as pushed.
        groups = {}
        for name, k, start, end, d, inner in drawn:
            groups.setdefault((k, d), []).append(((start - t0) / 1e3, (end - start) / 1e3))
            used.add(k)
            if mb := MICRO_BATCH.fullmatch(name):  # the number where no nested bar hides it, if it fits
                a, b = widest_gap(start, end, inner)
                if (b - a) / 1e3 * px_per_ms >= 6 * len(mb[1]) + 4:
                    ax.text((a + b - 2 * t0) / 2e3, y, mb[1], ha="center", va="center", fontsize=7, color="white",
                            zorder=3 + 2 * d)
        for (k, d), bars in groups.items():
            height = 0.8 * 0.7 ** d
            ax.broken_barh(bars, (y - height / 2, height), facecolors=TIMELINE_KINDS[k][2], edgecolor="white",
                           linewidth=0.4, zorder=2 + 2 * d)
        share = {}
        for _, k, start, end, *_ in drawn:
            share.setdefault(k, []).append((start, end))
        parts = [f"{TIMELINE_KINDS[k][0]} {100 * covered(share[k]) / max(hi - lo, 1):.0f}%" for k in sorted(share)]
        print(f"timeline: {label}: {(hi - lo) / 1e3:.3f} ms; {', '.join(parts)}")
    ax.set_yticks(range(len(rows)), [r[0] for r in rows])
    ax.set_xlabel(f"ms from the first event of {where}")
    ax.grid(axis="x", alpha=0.3)
    ax.set_axisbelow(True)
    ax.set_title(args.title or f"ranges, {where}", loc="left", fontsize=10)
    ax.legend(handles=[Patch(color=TIMELINE_KINDS[k][2], label=TIMELINE_KINDS[k][0]) for k in sorted(used)],
              loc="lower right", bbox_to_anchor=(1, 1), ncol=len(used), fontsize=8, frameon=False)
    return fig


def step_range(text):
    """--steps A:B, 1 <= A <= B."""
    m = re.fullmatch(r"(\d+):(\d+)", text)
    if not m or not 1 <= int(m[1]) <= int(m[2]):
        raise argparse.ArgumentTypeError(f"'{text}': expected A:B, steps A to B (1-based, inclusive) with 1 <= A <= B")
    return int(m[1]), int(m[2])


def save(fig, out):
    """Writes to a temporary file beside out and renames it, so an error
    leaves no half-written PNG."""
    fd, tmp = tempfile.mkstemp(prefix=".plot-", suffix=".png", dir=os.path.dirname(os.path.abspath(out)))
    try:
        with os.fdopen(fd, "wb") as f:
            fig.savefig(f, format="png", dpi=DPI)
        umask = os.umask(0)  # mkstemp made it 0600; give it a new file's usual mode
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, out)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    w, h = fig.get_size_inches() * DPI
    print(f"wrote {out} ({round(w)} x {round(h)} px)")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    pm = sub.add_parser("metrics", help="loss, throughput and MFU of metrics.jsonl files")
    pm.add_argument("files", nargs="+", metavar="RUN.jsonl")
    pm.add_argument("--labels", help="comma-separated run names, one per file (default: their directories)")
    pm.add_argument("-o", "--out", required=True, help="the PNG to write")
    pr = sub.add_parser("roofline", help="a roofline of bench/kernels --json FILE")
    pr.add_argument("file", metavar="kernels.json")
    pr.add_argument("--impl", help="comma-separated impls to show (cpu, cuda, cublaslt; default: all)")
    pr.add_argument("-o", "--out", required=True, help="the PNG to write")
    pt = sub.add_parser("timeline", help="a timeline of ENGINE_RANGE_LOG files, one row per rank")
    pt.add_argument("files", nargs="+", metavar="LOG")
    pt.add_argument("--steps", type=step_range, metavar="A:B",
                    help="only what is inside the ranges 'step A' to 'step B' (default: everything)")
    pt.add_argument("--title", help="the figure's title")
    pt.add_argument("-o", "--out", required=True, help="the PNG to write")
    args = ap.parse_args()
    if args.cmd == "metrics" and args.labels and len(args.labels.split(",")) != len(args.files):
        pm.error(f"--labels has {len(args.labels.split(','))} names for {len(args.files)} files")
    try:
        import matplotlib
        matplotlib.use("Agg")  # no display: write files only
        import matplotlib.pyplot as plt
    except ImportError:
        sys.exit(f"plot: matplotlib is missing from {sys.executable}: run scripts/setup.sh (installs Debian's "
                 "python3-matplotlib) and use /usr/bin/python3")
    try:
        fig = {"metrics": plot_metrics, "roofline": plot_roofline, "timeline": plot_timeline}[args.cmd](plt, args)
        save(fig, args.out)
    except PlotError as e:
        sys.exit(f"plot: {e}")
    except OSError as e:  # the inputs were read by then: this is the output
        sys.exit(f"plot: {args.out}: cannot write ({e.strerror or e})")


if __name__ == "__main__":
    main()
