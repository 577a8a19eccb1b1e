"""Capture cost: write_artifact of a 28 KB source vs a plain save of a row with the same text.

Run: ``.venv/bin/python tests/perf/bench_capture.py`` (DATABASE_URL selects PostgreSQL).
Prints its figures last as one line of JSON with ``vs_plain_save`` (ours / plain; lower is better).
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _setup import median_ms, setup_django  # noqa: E402

N = 200


def main() -> None:
    vendor = setup_django()
    from django.db import connection, models

    from versions import services
    from versions.models import App

    class PlainRow(models.Model):
        text = models.TextField()

        class Meta:
            app_label = "versions"
            db_table = "bench_plain_row"

    with connection.schema_editor() as editor:
        editor.create_model(PlainRow)

    lines = [f".rule-{i} {{ padding: {i % 17}px; color: #{i:06x}; }}\n" for i in range(700)]
    base = "".join(lines)
    while len(base.encode()) < 28 * 1024:
        base += "/* padding */\n"
    base = base[: 28 * 1024]

    def variant(i: int) -> str:
        # One line changed per write, like an agent's edit; every write differs.
        return base.replace(".rule-5 {", f".rule-5-{i} {{", 1)

    app = App.objects.create(slug="bench", name="Bench")
    services.write_artifact(app, "pltf_stylesheet", "App", base, requested_by="b", tool="bench")
    row = PlainRow.objects.create(text=base)

    def plain(i: int) -> None:
        row.text = variant(i)
        row.save()

    def capture(i: int) -> None:
        services.write_artifact(
            app, "pltf_stylesheet", "App", variant(i), requested_by="b", tool="bench"
        )

    # Interleave rounds so drift in machine load hits both alike.
    plain_ms, ours_ms = [], []
    for round_ in range(4):
        plain_ms.append(median_ms(lambda i, r=round_: plain(i + 10_000 * r), N // 4))
        ours_ms.append(median_ms(lambda i, r=round_: capture(i + 10_000 * r), N // 4))
    plain_med = sorted(plain_ms)[len(plain_ms) // 2]
    ours_med = sorted(ours_ms)[len(ours_ms) // 2]

    # An agent's turn: each write joins the change set of the turn's first one.
    turn_app = App.objects.create(slug="bench-turn", name="Bench turn")
    services.write_artifact(turn_app, "pltf_stylesheet", "App", base, requested_by="b", tool="b")

    def turn_write(i: int) -> None:
        services.write_artifact(
            turn_app, "pltf_stylesheet", "App", variant(i), requested_by="b", tool="b", turn_id="t"
        )

    turn_plain, turn_ours = [], []
    for round_ in range(2):
        turn_plain.append(median_ms(lambda i, r=round_: plain(i + 30_000 + 1000 * r), N // 4))
        turn_ours.append(median_ms(lambda i, r=round_: turn_write(i + 1000 * r), N // 4))
    turn_ratio = statistics.median(o / p for o, p in zip(turn_ours, turn_plain, strict=True))

    # At the retention limit (the app keeps its newest 200 points), every capture also prunes
    # the oldest point, its emptied set and its blob: what a busy app pays in steady state.
    from django.conf import settings

    from versions.models import RestorePoint

    keep = int(getattr(settings, "VERSIONS_POINTS_PER_APP", 200))
    extra = 0
    while RestorePoint.objects.filter(app=app).count() < keep:
        capture(50_000 + extra)
        extra += 1
    limit_plain, limit_ours = [], []
    for round_ in range(4):
        limit_plain.append(median_ms(lambda i, r=round_: plain(i + 60_000 + 1000 * r), N // 4))
        limit_ours.append(median_ms(lambda i, r=round_: capture(i + 60_000 + 1000 * r), N // 4))
    limit_plain_med = sorted(limit_plain)[len(limit_plain) // 2]
    limit_ours_med = sorted(limit_ours)[len(limit_ours) // 2]

    print(f"database: {vendor}; source: {len(base.encode())} bytes; {N} writes each")
    print(f"plain save: {plain_med:.3f} ms median; write_artifact: {ours_med:.3f} ms median")
    print(f"a write joining its turn: {statistics.median(turn_ours):.3f} ms median")
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
                "turn_ms": round(statistics.median(turn_ours), 3),
                "turn_vs_plain_save": round(turn_ratio, 2),
                "at_limit_ms": round(limit_ours_med, 3),
                "at_limit_vs_plain_save": round(limit_ours_med / limit_plain_med, 2),
            }
        )
    )


if __name__ == "__main__":
    main()
