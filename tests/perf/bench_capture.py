"""Capture cost: write_artifact of a 28 KB source vs a plain save of a row with the same text.

Run: ``.venv/bin/python tests/perf/bench_capture.py`` (DATABASE_URL selects PostgreSQL).
Prints its figures last as one line of JSON with ``vs_plain_save`` (ours / plain; lower is better).
The peer, measured in the same rounds: django-reversion saving the same row inside
``create_revision()`` (``reversion_vs_plain_save``; ``vs_reversion`` is ours / theirs).

On SQLite the plain save is an UPDATE of a row whose text keeps its length: SQLite then writes
only the page holding the edit (one WAL page), while a capture must store the new 28 KB source
beside the old one (``bench_capture_floor`` counts the pages).
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _setup import (  # noqa: E402
    edited,
    plain_save_row,
    reversion_save_row,
    setup_django,
    stylesheet_28kb,
)

# Writes measured per figure: below the retention limit they all stay under the app's 200 points.
N = 190
ROUNDS = 4


def interleaved_medians(*funcs: Callable[[int], object], n: int, offset: int) -> list[float]:
    """Median ms of each ``func(i)`` over ``n`` calls, in alternating rounds (so drift in the
    machine's load hits all alike) long enough that each runs with its own caches warm, after
    a few calls of each to warm up."""
    for i in range(3):
        for func in funcs:
            func(offset - 1 - i)
    times: list[list[float]] = [[] for _ in funcs]
    per_round = n // ROUNDS
    for round_ in range(ROUNDS):
        for func, func_ms in zip(funcs, times, strict=True):
            for i in range(per_round):
                start = time.perf_counter()
                func(offset + round_ * per_round + i)
                func_ms.append((time.perf_counter() - start) * 1000)
    return [statistics.median(func_ms) for func_ms in times]


def main() -> None:
    vendor = setup_django(with_reversion=True)
    from versions import services
    from versions.models import App

    base = stylesheet_28kb()

    def variant(i: int) -> str:
        return edited(base, i)

    app = App.objects.create(slug="bench", name="Bench")
    services.write_artifact(app, "pltf_stylesheet", "App", base, requested_by="b", tool="bench")
    save_plain = plain_save_row(base)
    save_reversion = reversion_save_row(base)

    def plain(i: int) -> None:
        save_plain(variant(i))

    def capture(i: int) -> None:
        services.write_artifact(
            app, "pltf_stylesheet", "App", variant(i), requested_by="b", tool="bench"
        )

    def reversion(i: int) -> None:
        save_reversion(variant(i))

    # Below the retention limit: every capture stays under the app's 200 points.
    plain_med, ours_med, reversion_med = interleaved_medians(
        plain, capture, reversion, n=N, offset=10_000
    )

    # An agent's turn: each write joins the change set of the turn's first one.
    turn_app = App.objects.create(slug="bench-turn", name="Bench turn")
    services.write_artifact(turn_app, "pltf_stylesheet", "App", base, requested_by="b", tool="b")

    def turn_write(i: int) -> None:
        services.write_artifact(
            turn_app, "pltf_stylesheet", "App", variant(i), requested_by="b", tool="b", turn_id="t"
        )

    turn_plain, turn_ours = interleaved_medians(plain, turn_write, n=N, offset=30_000)

    # At the retention limit (the app keeps its newest 200 points), every capture also prunes
    # the oldest point, its emptied set and its blob: what a busy app pays in steady state.
    from django.conf import settings

    from versions.models import RestorePoint

    keep = int(getattr(settings, "VERSIONS_POINTS_PER_APP", 200))
    extra = 0
    while RestorePoint.objects.filter(app=app).count() < keep:
        capture(50_000 + extra)
        extra += 1
    limit_plain_med, limit_ours_med = interleaved_medians(plain, capture, n=N, offset=60_000)

    print(f"database: {vendor}; source: {len(base.encode())} bytes; {N} writes each")
    print(f"plain save: {plain_med:.3f} ms median; write_artifact: {ours_med:.3f} ms median")
    print(f"django-reversion's save of the row with a version: {reversion_med:.3f} ms median")
    print(f"a write joining its turn: {turn_ours:.3f} ms median (plain save {turn_plain:.3f} ms)")
    print(
        f"at the retention limit: plain save {limit_plain_med:.3f} ms; "
        f"write_artifact {limit_ours_med:.3f} ms (also prunes a point)"
    )
    print(
        json.dumps(
            {
                "bench": "capture",
                "db": vendor,
                "n": N,
                "ms": round(ours_med, 3),
                "plain_save_ms": round(plain_med, 3),
                "vs_plain_save": round(ours_med / plain_med, 2),
                "reversion_ms": round(reversion_med, 3),
                "reversion_vs_plain_save": round(reversion_med / plain_med, 2),
                "vs_reversion": round(ours_med / reversion_med, 2),
                "turn_ms": round(turn_ours, 3),
                "turn_vs_plain_save": round(turn_ours / turn_plain, 2),
                "at_limit_ms": round(limit_ours_med, 3),
                "at_limit_vs_plain_save": round(limit_ours_med / limit_plain_med, 2),
            }
        )
    )


if __name__ == "__main__":
    main()
