"""Micro-benchmark of ``versions.diffing`` alone vs ``git diff --no-index`` on the same pair.

Run: ``.venv/bin/python tests/perf/bench_diff_engine.py [--size 1500000] [--changed 0.02]``.
Prints its figures last as one line of JSON: each engine's medians in ms and ``vs_git`` (its
first view — compute and render page 1 — over ``git diff --no-index``; lower is better).

``lines``: the same pair as UTF-8 bytes (as the panel reads sources), its lines split and coded
in Arrow (``versions.linecodes``) over the pure-Python path, and ``crossover``: that ratio for
sources from 8 KB to 512 KB (where ``linecodes.MIN_BYTES`` comes from), interleaved.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from versions import diffing, linecodes  # noqa: E402

PROPS = [
    ("color", ["#333", "#1a73e8", "red", "rgb(0, 0, 0)", "inherit"]),
    ("margin", ["0", "0 auto", "4px 8px", "1rem 0"]),
    ("padding", ["0", "2px", "8px 12px", "0.5rem"]),
    ("display", ["block", "flex", "grid", "inline-block", "none"]),
    ("font-size", ["12px", "14px", "1rem", "1.25em"]),
    ("border", ["1px solid #ddd", "none", "2px dashed #c00"]),
    ("background", ["#fff", "transparent", "linear-gradient(#fff, #eee)"]),
    ("line-height", ["1.2", "1.5", "20px"]),
]


def make_stylesheet(size: int, seed: int = 1) -> str:
    """A plausible CSS file of about ``size`` characters."""
    rnd = random.Random(seed)
    out: list[str] = []
    total = i = 0
    while total < size:
        block = [f".c{i}-{rnd.choice(['btn', 'card', 'row', 'nav', 'item'])} > a:hover {{"]
        for _ in range(rnd.randint(3, 8)):
            prop, vals = rnd.choice(PROPS)
            block.append(f"  {prop}: {rnd.choice(vals)};")
        block.append("}")
        block.append("")
        text = "\n".join(block) + "\n"
        out.append(text)
        total += len(text)
        i += 1
    return "".join(out)


def change_lines(text: str, fraction: float, seed: int = 2) -> str:
    """Modify ``fraction`` of the lines (edit values, drop or insert a few)."""
    rnd = random.Random(seed)
    lines = text.split("\n")
    for idx in rnd.sample(range(len(lines) - 1), int(len(lines) * fraction)):
        kind = rnd.random()
        if kind < 0.7:
            lines[idx] = lines[idx].replace(":", ": /* v2 */", 1) + " /* changed */"
        elif kind < 0.85:
            lines[idx] = "  outline: 1px dotted #f0f;"
        else:
            lines[idx] = lines[idx] + "\n  transition: all 0.2s ease;"
    return "\n".join(lines)


def best(fn: Callable[[], object], repeat: int) -> tuple[float, float]:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times), statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", type=int, default=1_500_000)
    ap.add_argument("--changed", type=float, default=0.02)
    ap.add_argument("--repeat", type=int, default=15)
    args = ap.parse_args()
    old = make_stylesheet(args.size)
    new = change_lines(old, args.changed)
    with tempfile.TemporaryDirectory() as tmp:
        engines = run(old, new, Path(tmp), args)
    figures = {"bench": "diff_engine", "size": len(old), "changed": args.changed}
    lines = {"full": arrow_vs_python(old.encode(), new.encode(), args.repeat)}
    print(f"1.5 MB as bytes, compute_diff, Arrow's line coding over Python's: {lines['full']}")
    crossover = {}
    for size in (8_000, 16_000, 32_000, 64_000, 128_000, 256_000, 512_000):
        small_old = make_stylesheet(size // 2)
        small_new = change_lines(small_old, args.changed)
        crossover[size] = arrow_vs_python(small_old.encode(), small_new.encode(), 41)
    print("the same at sizes (both sides together, bytes):", crossover)
    print(json.dumps({**figures, "engines": engines, "lines": {**lines, "crossover": crossover}}))


def arrow_vs_python(old: bytes, new: bytes, repeat: int) -> float:
    """compute_diff with the lines coded in Arrow over the pure-Python coding (medians,
    interleaved); both paths give the same diff."""
    saved = linecodes.MIN_BYTES
    arrow: list[float] = []
    python: list[float] = []
    try:
        for _ in range(repeat):
            for threshold, out in ((0, arrow), (2**62, python)):
                linecodes.MIN_BYTES = threshold
                t0 = time.perf_counter()
                diffing.compute_diff(old, new)
                out.append(time.perf_counter() - t0)
    finally:
        linecodes.MIN_BYTES = saved
    return round(statistics.median(arrow) / statistics.median(python), 2)


def run(old: str, new: str, tmp: Path, args: argparse.Namespace) -> dict[str, dict[str, float]]:
    """Time git and our engine(s), interleaved, on one pair of files; each engine's medians."""
    figures: dict[str, dict[str, float]] = {}
    pa, pb = tmp / "old.css", tmp / "new.css"
    pa.write_text(old)
    pb.write_text(new)
    cmd = ["git", "diff", "--no-index", "--no-color", str(pa), str(pb)]
    git_out = subprocess.run(cmd, capture_output=True, text=True).stdout
    git_add = sum(1 for ln in git_out.splitlines() if ln.startswith("+") and ln[:3] != "+++")
    git_del = sum(1 for ln in git_out.splitlines() if ln.startswith("-") and ln[:3] != "---")

    print(f"old {len(old):,} chars / {old.count(chr(10)):,} lines; new {len(new):,} chars")
    for engine in diffing.ENGINES:
        res = diffing.compute_diff(old, new, engine=engine)
        print(
            f"[{engine}] +{res.lines_added} -{res.lines_removed} (git +{git_add} -{git_del}), "
            f"{res.hunk_count} hunks, {res.num_pages()} pages, method {res.method}"
        )
        reps = args.repeat if engine == "cpp" else 3
        # Interleave ours and git's runs so machine noise hits both alike.
        t_git: list[float] = []
        t_comp: list[float] = []
        t_first: list[float] = []
        t_count: list[float] = []

        def first_view(e: diffing.EngineName = engine) -> object:
            return diffing.compute_diff(old, new, engine=e).page(1)

        for _ in range(reps):
            t_git.append(best(lambda: subprocess.run(cmd, capture_output=True), 1)[0])
            t_comp.append(best(partial(diffing.compute_diff, old, new, engine=engine), 1)[0])
            t_first.append(best(first_view, 1)[0])
            t_count.append(best(partial(diffing.count_line_changes, old, new, engine=engine), 1)[0])
        for label, key, ts in [
            ("git diff --no-index", "git_ms", t_git),
            ("compute_diff", "compute_ms", t_comp),
            ("compute + page(1) render", "first_view_ms", t_first),
            ("count_line_changes", "count_ms", t_count),
        ]:
            med = statistics.median(ts) * 1e3
            print(f"  {label:26s} min {min(ts) * 1e3:7.2f} ms  median {med:7.2f}")
            figures.setdefault(engine, {})[key] = round(med, 2)
        vs_git = statistics.median(t_first) / statistics.median(t_git)
        print(f"  first view / git: min {min(t_first) / min(t_git):.2f}x, median {vs_git:.2f}x")
        figures[engine]["vs_git"] = round(vs_git, 2)
    return figures


if __name__ == "__main__":
    main()
