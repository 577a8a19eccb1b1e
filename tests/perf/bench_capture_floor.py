"""The floor of a capture on SQLite: its statements alone, on the raw ``sqlite3`` connection.

Run: ``.venv/bin/python tests/perf/bench_capture_floor.py`` (SQLite only). It times, in one run,
Django's plain ``save()`` of a row holding a 28 KB text (``bench_capture``'s baseline) and the
statements a capture of the same text runs — hash, BEGIN IMMEDIATE, the lock-and-read, the
blob, change set and point inserts, the artifact update, COMMIT — with no Python of ours around
them. ``floor_vs_plain_save`` is what no capture code could beat with this schema. Prints one
line of JSON last, with each step's median in microseconds, and ``wal_pages``: the pages each
kind of write appends to the WAL. The plain save rewrites a row whose text keeps its length, so
SQLite writes only the page that changed; a capture stores the new source whole (its blob's
overflow pages) besides the point, set and artifact rows and their index entries.
"""

from __future__ import annotations

import hashlib
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _setup import edited, plain_save_row, setup_django, stylesheet_28kb  # noqa: E402

N = 150


def main() -> None:
    vendor = setup_django()
    if vendor != "sqlite":
        print(json.dumps({"bench": "capture_floor", "db": vendor, "skipped": "SQLite only"}))
        return
    from django.db import connection

    from versions import ids, services
    from versions.models import App, Artifact, Blob
    from versions.services import _sql

    base = stylesheet_28kb()

    def variant(i: int) -> str:
        return edited(base, i)

    save_plain = plain_save_row(base)
    app = App.objects.create(slug="floor", name="Floor")
    services.write_artifact(app, "pltf_stylesheet", "App", base, requested_by="b", tool="b")
    artifact_id = Artifact.objects.get(app=app).pk
    statements = {name: sql.replace("%s", "?") for name, sql in _sql._sql("sqlite").items()}
    raw = connection.connection
    steps: dict[str, list[float]] = {}

    def floor(i: int) -> None:
        src = variant(i).encode()
        marks = [time.perf_counter()]
        sha = hashlib.sha256(src).hexdigest()
        marks.append(time.perf_counter())
        cursor = raw.cursor()
        cursor.execute("BEGIN IMMEDIATE")
        marks.append(time.perf_counter())
        # The app's id, unpinned, the limit's depth, the sweep batch; the artifact's key.
        lock_params = [app.pk, False, 199, 1, app.pk, "pltf_stylesheet", "App"]
        locked = cursor.execute(statements["lock_read"], lock_params).fetchone()
        marks.append(time.perf_counter())
        at = connection.ops.adapt_datetimefield_value(ids.ms_to_datetime(ids.now_ms() + i))
        point_id = ids.point_id(ids.now_ms() + i)
        data, compressed = Blob.pack(src)
        cursor.execute(
            statements["insert_blob"], [sha, data, len(src), len(src), compressed, at, None, 0]
        )
        marks.append(time.perf_counter())
        set_id = ids.change_set_id(point_id)
        cursor.execute(statements["insert_set"], [set_id, app.pk, at, "b", "", "", "[]", ""])
        marks.append(time.perf_counter())
        cursor.execute(
            statements["insert_point"],
            [point_id, app.pk, artifact_id, locked[1], locked[2], locked[3], True, True, sha]
            + ["b", "b", "b", at, 1, 1, "", "", set_id, False],
        )
        marks.append(time.perf_counter())
        cursor.execute(
            statements["update_artifact"], [sha, sha, len(src), False, at, "b", artifact_id]
        )
        marks.append(time.perf_counter())
        cursor.execute("COMMIT")
        marks.append(time.perf_counter())
        names = ("hash", "begin", "lock_read", "blob", "set", "point", "artifact", "commit")
        for name, start, end in zip(names, marks, marks[1:], strict=False):
            steps.setdefault(name, []).append((end - start) * 1e6)
        steps.setdefault("total", []).append((marks[-1] - marks[0]) * 1e6)

    def plain(i: int) -> None:
        save_plain(variant(i))

    plain_us: list[float] = []
    for round_ in range(3):  # alternating rounds: drift hits both alike
        for i in range(N // 3):
            start = time.perf_counter()
            plain(1000 * round_ + i)
            plain_us.append((time.perf_counter() - start) * 1e6)
        for i in range(N // 3):
            floor(1000 * round_ + i)
    plain_med = statistics.median(plain_us)
    wal = f"{connection.settings_dict['NAME']}-wal"

    def wal_pages(func: Callable[[int], object], i: int) -> int:
        """WAL pages (frames) one call of ``func`` appends: what its commit writes."""
        raw.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        before = os.path.getsize(wal)
        func(i)
        page_size = raw.execute("PRAGMA page_size").fetchone()[0]
        header = 32 if before == 0 else 0
        return (os.path.getsize(wal) - before - header) // (page_size + 24)

    def capture(i: int) -> None:
        services.write_artifact(
            app, "pltf_stylesheet", "App", variant(i), requested_by="b", tool="b"
        )

    pages = {
        "plain_save": wal_pages(plain, 9000),
        "floor": wal_pages(floor, 9001),
        "write_artifact": wal_pages(capture, 9002),
    }
    medians = {name: round(statistics.median(v), 1) for name, v in steps.items()}
    print(f"plain save {plain_med:.1f} µs; the capture's statements alone {medians['total']} µs")
    print(f"WAL pages written per write: {pages}")
    print(
        json.dumps(
            {
                "bench": "capture_floor",
                "db": vendor,
                "n": N,
                "plain_save_us": round(plain_med, 1),
                "floor_us": medians["total"],
                "floor_vs_plain_save": round(medians["total"] / plain_med, 2),
                "steps_us": medians,
                "wal_pages": pages,
            }
        )
    )


if __name__ == "__main__":
    main()
