"""First view of a then→now diff in the panel vs ``git diff --no-index`` of the same two files.

Run: ``.venv/bin/python tests/perf/bench_diff.py`` (DATABASE_URL selects PostgreSQL).
Server time of the panel's response (Django test Client, signed in, diff cache cleared before
every view, so each is a first view) for the expanded restore point of a 1.5 MB stylesheet with
2% of its lines changed, against ``git diff --no-index`` of the same pair, interleaved in one
run. Also the 28 KB demo stylesheet's diff and the change-set list with 200 points.

Compare (docs/architecture.md#reviewing): the compare view of two refs 200 restore points apart (the
stylesheet rewritten 10 times among 190 page writes), first view, for the 28 KB and the 1.5 MB
stylesheet, against ``git diff --no-index`` of the same two states: ``compare_vs_git``.
Find: the Change sets list with a search term over 5,000 named sets (``search_ms``) and its
growth from 500 sets (``search_growth``; goal <= 2.0: indexed, not a scan of sources).

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
    from django.conf import settings

    # The compare and search histories keep every point (retention would prune the oldest).
    settings.VERSIONS_POINTS_PER_APP = 100_000
    cmp = bench_compare(client, big_old, small_old, small_new)
    found = bench_search(client)

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
                **cmp,
                **found,
            }
        )
    )


def _history(slug: str, old: str, new_versions: list[str], points: int = 200) -> tuple[str, str]:
    """An app whose stylesheet goes from ``old`` through ``new_versions`` among page writes,
    ``points`` restore points in all after the first set; returns the two refs (the set that
    wrote ``old``, and draft)."""
    from versions import services
    from versions.models import App

    app = App.objects.create(slug=slug, name=slug)
    first = services.write_artifact(
        app, "pltf_stylesheet", "Sheet", old, requested_by="b", tool="t", run_id=f"{slug}-0"
    )
    every = max(1, points // len(new_versions))
    version = iter(new_versions)
    for i in range(points):
        run = f"{slug}-{i + 1}"
        text = next(version, None) if (i + 1) % every == 0 else None
        if text is not None:
            services.write_artifact(
                app, "pltf_stylesheet", "Sheet", text, requested_by="a", tool="t", run_id=run
            )
        else:
            services.write_artifact(
                app,
                "pltf_page",
                f"p{i % 9}",
                f"<p>{i}</p>\n",
                requested_by="a",
                tool="t",
                run_id=run,
            )
    assert first.change_set_id
    return first.change_set_id, "draft"


def bench_compare(client, big_old: str, small_old: str, small_new: str) -> dict[str, float]:
    """Compare two refs 200 points apart, first view, vs git diff of the same two states."""
    from django.urls import reverse

    from versions import diffing
    from versions.views.diffs import clear_cache

    big_versions = [change_lines(big_old, 0.002 * k) for k in range(1, 11)]
    small_versions = [change_lines(small_old, 0.01 * k, seed=3) for k in range(1, 10)]
    small_versions.append(small_new)
    refs = {
        "big": (_history("cmp-big", big_old, big_versions), big_old, big_versions[-1]),
        "small": (_history("cmp-small", small_old, small_versions), small_old, small_new),
    }

    def view(slug: str, left: str, right: str) -> None:
        clear_cache()
        diffing._CACHE.clear()
        url = reverse("versions:compare", args=[slug, f"{left}...{right}"])
        response = client.get(url)
        assert response.status_code == 200 and b"diff-table" in response.content

    out: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, ((left, right), old, new) in refs.items():
            slug = f"cmp-{name}"
            pa, pb = Path(tmp) / f"{name}-old.css", Path(tmp) / f"{name}-new.css"
            pa.write_text(old)
            pb.write_text(new)
            cmd = ["git", "diff", "--no-index", "--no-color", str(pa), str(pb)]

            def git() -> None:
                subprocess.run(cmd, capture_output=True, check=False)  # noqa: B023

            for _ in range(2):
                view(slug, left, right)
                git()
            ours, theirs = [], []
            for _ in range(REPEAT):
                ours.append(timed(lambda: view(slug, left, right)))  # noqa: B023
                theirs.append(timed(git))
            out[f"compare_{name}_ms"] = round(statistics.median(ours), 2)
            out[f"compare_{name}_git_ms"] = round(statistics.median(theirs), 2)
    print(
        f"compare, 200 points apart: 1.5 MB {out['compare_big_ms']:.1f} ms "
        f"(git {out['compare_big_git_ms']:.1f} ms), 28 KB {out['compare_small_ms']:.1f} ms "
        f"(git {out['compare_small_git_ms']:.1f} ms)"
    )
    out["compare_vs_git"] = round(out["compare_big_ms"] / out["compare_big_git_ms"], 2)
    out["compare_small_vs_git"] = round(out["compare_small_ms"] / out["compare_small_git_ms"], 2)
    return out


TOPICS = [
    "pricing",
    "checkout",
    "header",
    "footer",
    "quotes",
    "login",
    "search",
    "theme",
    "api",
    "emails",
]


def _named_sets(slug: str, count: int) -> None:
    """``count`` agent turns, one write each, every one named ("Turn N: <topic> …")."""
    from versions import services
    from versions.models import App

    app = App.objects.create(slug=slug, name=slug)
    for i in range(count):
        topic = TOPICS[i % len(TOPICS)]
        receipt = services.write_artifact(
            app,
            "pltf_page",
            f"{topic}-{i % 40}",
            f"<p>{i}</p>\n",
            requested_by=f"agent{i % 7}",
            tool=f"devzone-agent:write_{topic}",
            run_id=f"{slug}-{i}",
        )
        assert receipt.change_set_id
        services.name_change_set(receipt.change_set_id, f"Turn {i}: {topic} copy, reviewed", by="b")


def _analyze() -> None:
    """Fresh planner statistics (the sets were inserted a moment ago)."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")


def bench_search(client) -> dict[str, float]:
    """The Change sets list with a search term (a tenth of the sets match) at 500 and 5,000."""
    from django.urls import reverse

    hx = {"HTTP_HX_REQUEST": "true"}
    out: dict[str, float] = {}
    for count in (500, 5000):
        slug = f"search-{count}"
        _named_sets(slug, count)
        _analyze()  # as a database that autovacuum keeps analysed would plan it
        url = reverse("versions:change_sets", args=[slug]) + "?q=checkout&kind=change"

        def search() -> None:
            response = client.get(url, **hx)  # noqa: B023
            assert response.status_code == 200 and b"checkout copy" in response.content

        for _ in range(2):
            search()
        out[f"search_{count}_ms"] = round(
            statistics.median(timed(search) for _ in range(REPEAT)), 2
        )
    out["search_ms"] = out["search_5000_ms"]
    out["search_growth"] = round(out["search_5000_ms"] / out["search_500_ms"], 2)
    print(
        f"search over 500 sets {out['search_500_ms']:.1f} ms, over 5,000 sets "
        f"{out['search_5000_ms']:.1f} ms (growth {out['search_growth']})"
    )
    return out


if __name__ == "__main__":
    main()
