"""First view of a then→now diff in the panel vs ``git diff --no-index`` of the same two files.

Run: ``.venv/bin/python tests/perf/bench_diff.py`` (DATABASE_URL selects PostgreSQL).
Server time of the panel's response (Django test Client, signed in, diff cache cleared before
every view, so each is a first view) for the expanded restore point of a 1.5 MB stylesheet with
2% of its lines changed, against ``git diff --no-index`` of the same pair, interleaved in one
run. Also the 28 KB demo stylesheet's diff and the change-set list with 200 points.
Prints its figures last as one line of JSON with ``vs_git`` (ours / git; lower is better).
"""

from __future__ import annotations

import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _setup import ROOT, setup_django  # noqa: E402

REPEAT = 9
PROPS = [
    ("color", ["#333", "#1a73e8", "red", "rgb(0, 0, 0)", "inherit"]),
    ("margin", ["0", "0 auto", "4px 8px", "1rem 0"]),
    ("padding", ["0", "2px", "8px 12px", "0.5rem"]),
    ("display", ["block", "flex", "grid", "inline-block", "none"]),
    ("font-size", ["12px", "14px", "1rem", "1.25em"]),
    ("border", ["1px solid #ddd", "none", "2px dashed #c00"]),
]


def make_stylesheet(size: int, seed: int = 1) -> str:
    """A plausible CSS file of about ``size`` characters."""
    rnd = random.Random(seed)
    out: list[str] = []
    total = i = 0
    while total < size:
        block = [f".c{i}-{rnd.choice(['btn', 'card', 'row', 'nav', 'item'])} > a:hover {{"]
        block += [
            f"  {p}: {rnd.choice(v)};" for p, v in rnd.sample(PROPS, rnd.randint(2, len(PROPS)))
        ]
        text = "\n".join([*block, "}", ""]) + "\n"
        out.append(text)
        total += len(text)
        i += 1
    return "".join(out)[:size].rsplit("\n", 1)[0] + "\n"


def change_lines(text: str, fraction: float, seed: int = 2) -> str:
    """Edit ``fraction`` of the lines in place (values changed, a few lines replaced)."""
    rnd = random.Random(seed)
    lines = text.split("\n")
    for idx in rnd.sample(range(len(lines) - 1), int(len(lines) * fraction)):
        if rnd.random() < 0.8:
            lines[idx] = lines[idx].replace(":", ": /* v2 */", 1)
        else:
            lines[idx] = "  outline: 1px dotted #f0f;"
    return "\n".join(lines)


def timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1000


def main() -> None:
    vendor = setup_django()
    from django.contrib.auth.models import User
    from django.test import Client
    from django.urls import reverse

    from versions import diffing, services
    from versions.models import App
    from versions.views.diffs import clear_cache

    big_old = make_stylesheet(1_500_000)
    big_new = change_lines(big_old, 0.02)
    app = App.objects.create(slug="bench", name="Bench")
    services.write_artifact(app, "pltf_stylesheet", "Big", big_old, requested_by="b", tool="t")
    big_point = services.write_artifact(
        app, "pltf_stylesheet", "Big", big_new, requested_by="agent", tool="t"
    ).restore_point_id
    demo = ROOT / "fixtures" / "demo"
    small_old = (demo / "before" / "App.css").read_text()
    small_new = (demo / "agent_turn" / "App.css").read_text()
    services.write_artifact(app, "pltf_stylesheet", "App", small_old, requested_by="b", tool="t")
    small_point = services.write_artifact(
        app, "pltf_stylesheet", "App", small_new, requested_by="agent", tool="t"
    ).restore_point_id
    many = App.objects.create(slug="many", name="Many")
    for i in range(200):
        services.write_artifact(
            many, "pltf_page", f"p{i % 9}", f"<p>{i}</p>\n", requested_by="a", tool="t"
        )

    client = Client()
    client.force_login(User.objects.create_superuser("bench", "b@example.com", "x"))
    hx = {"HTTP_HX_REQUEST": "true"}

    def view(point_id: str) -> None:
        clear_cache()  # a first view: nothing memoised
        diffing._CACHE.clear()
        response = client.get(reverse("versions:restore_point", args=["bench", point_id]), **hx)
        assert response.status_code == 200 and b"diff-table" in response.content

    def set_list() -> None:
        response = client.get(reverse("versions:change_sets", args=["many"]), **hx)
        assert response.status_code == 200

    with tempfile.TemporaryDirectory() as tmp:
        pa, pb = Path(tmp) / "old.css", Path(tmp) / "new.css"
        pa.write_text(big_old)
        pb.write_text(big_new)
        cmd = ["git", "diff", "--no-index", "--no-color", str(pa), str(pb)]

        def git() -> None:
            subprocess.run(cmd, capture_output=True, check=False)

        for _ in range(2):  # warm-up: imports, template loading, page cache
            view(big_point)
            git()
        ours, theirs = [], []
        for _ in range(REPEAT):  # interleaved, so machine noise hits both alike
            ours.append(timed(lambda: view(big_point)))
            theirs.append(timed(git))
    small = [timed(lambda: view(small_point)) for _ in range(REPEAT)]
    listing = [timed(set_list) for _ in range(REPEAT)]

    ms, git_ms = statistics.median(ours), statistics.median(theirs)
    print(f"database: {vendor}")
    print(
        f"1.5 MB stylesheet ({len(big_old):,} chars), 2% lines changed: ours {ms:.1f} ms, "
        f"git diff --no-index {git_ms:.1f} ms (medians of {REPEAT})"
    )
    print(f"28 KB App stylesheet diff, first view: {statistics.median(small):.1f} ms")
    print(f"change-set list with 200 points: {statistics.median(listing):.1f} ms")
    print(
        json.dumps(
            {
                "bench": "diff",
                "db": vendor,
                "n": REPEAT,
                "bytes": len(big_old.encode()),
                "ms": round(ms, 2),
                "git_ms": round(git_ms, 2),
                "small_ms": round(statistics.median(small), 2),
                "list_200_ms": round(statistics.median(listing), 2),
                "vs_git": round(ms / git_ms, 2),
            }
        )
    )


if __name__ == "__main__":
    main()
