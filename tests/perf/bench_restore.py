"""Restore all of 100 artifacts of 28 KB, against django-reversion and a byte-copying floor.

Run: ``.venv/bin/python tests/perf/bench_restore.py`` (DATABASE_URL selects PostgreSQL; the
benchmark then works in a fresh database of its own, dropped at exit).

In one run, on one database:
- ours: ``restore_change_set`` of a set of 100 artifacts of 28 KB (each back to its 28 KB
  state before the set);
- ``vs_reversion``: django-reversion's ``Revision.revert()`` of 100 registered objects holding
  the same texts;
- ``vs_floor``: raw SQL copying the same bytes, 100 point inserts + 100 updates of 28 KB in one
  transaction — what any restore that copies sources must at least pay;
- ``size_growth``: Restore all of 100 × 1 MB over Restore all of 100 × 1 KB.

On SQLite every timed operation (ours and both baselines alike) starts from a checkpointed WAL
(``wal_checkpoint(RESTART)``, untimed): each then pays for the checkpoints its own writes
trigger and none for pages another left behind. Without it the one checkpoint per round
(SQLite's 1000-page autocheckpoint) lands wherever the round's WAL happens to cross the limit —
in the size phase, on every 1 MB restore and never on the 1 KB one: a cost of the interleaving,
not of the size. A restore writes a few hundred WAL pages, so its amortised share of
checkpoints is not in these medians; the floor's own ~1,400 pages always cross the limit, so it
pays its own checkpoint (as it did before: it always did).

Each restore set is named after its round (untimed), which pins it, so the app stays under its
retention cap and what is timed is the restore itself. What an app over its cap pays on top
(the retention pass that prunes as many points as the restore added) is printed as
``ms_with_pruning``. Rounds interleave ours and the baselines, so load drift hits all alike.
Prints its figures last as one line of JSON. Ratios are ours / theirs: lower is better.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _setup import setup_django  # noqa: E402

N = 100
ROUNDS = 40


def timed(func: Callable[[], object]) -> float:
    start = time.perf_counter()
    func()
    return (time.perf_counter() - start) * 1000


def sized_text(size: int, seed: str) -> str:
    """A CSS-like text of exactly ``size`` ASCII bytes, distinct per seed."""
    line_no = 0
    parts: list[str] = []
    total = 0
    while total < size:
        line = f".{seed}-rule-{line_no} {{ padding: {line_no % 17}px; color: #{line_no:06x}; }}\n"
        parts.append(line)
        total += len(line)
        line_no += 1
    return "".join(parts)[:size]


def edited(text: str, tag: str) -> str:
    """The same text with its first line changed, like an agent's edit."""
    head, _, rest = text.partition("\n")
    return (f"/* {tag} */ " + head)[: len(head)] + "\n" + rest


def main() -> None:
    vendor = setup_django(with_reversion=True)
    import reversion
    from django.db import connection, models, transaction
    from reversion.models import Revision

    from versions import services
    from versions.models import STYLESHEET, App

    def settle() -> None:
        """Untimed: on SQLite, checkpoint the WAL so the next write starts it over (the file kept)."""
        if vendor == "sqlite":
            with connection.cursor() as cursor:
                cursor.execute("PRAGMA wal_checkpoint(RESTART)")

    # --- ours -------------------------------------------------------------------------------
    def make_set(slug: str, size: int) -> str:
        app = App.objects.create(slug=slug, name=slug)
        set_id = None
        for turn in ("setup", "turn"):
            for i in range(N):
                text = sized_text(size, f"{slug}{i}")
                receipt = services.write_artifact(
                    app,
                    STYLESHEET,
                    f"sheet-{i}",
                    text if turn == "setup" else edited(text, turn),
                    requested_by="bench",
                    tool="bench",
                    run_id=turn,
                )
                set_id = receipt.change_set_id
        assert set_id is not None
        # Named (as a release would be), so retention never prunes the set under test.
        services.name_change_set(set_id, f"bench: {slug}", by="bench")
        return set_id

    def restore_once(set_id: str, *, pin: bool = True) -> float:
        """Time one Restore all of ``set_id``; then (untimed) pin it and undo it."""
        receipt = None

        def run() -> None:
            nonlocal receipt
            receipt = services.restore_change_set(set_id, by="bench")

        settle()
        ms = timed(run)
        assert receipt is not None and receipt.kind == "restore" and len(receipt.items) == N
        undo = services.restore_change_set(receipt.set_id, by="bench")
        if pin:
            services.name_change_set(receipt.set_id, "bench restore", by="bench")
            services.name_change_set(undo.set_id, "bench undo", by="bench")
        return ms

    size_28k = 28 * 1024
    ours_set = make_set("bench-28k", size_28k)

    # --- django-reversion ---------------------------------------------------------------------
    class BenchDoc(models.Model):
        text = models.TextField()

        class Meta:
            app_label = "versions"
            db_table = "bench_reversion_doc"

    with connection.schema_editor() as editor:
        editor.create_model(BenchDoc)
    reversion.register(BenchDoc)
    with reversion.create_revision():
        docs = [BenchDoc.objects.create(text=sized_text(size_28k, f"rv{i}")) for i in range(N)]
    before = Revision.objects.latest("pk")
    with reversion.create_revision():
        for doc in docs:
            doc.text = edited(doc.text, "turn")
            doc.save()
    after = Revision.objects.latest("pk")

    def revert_once() -> float:
        settle()
        ms = timed(before.revert)
        after.revert()  # back to the agent's texts, not timed
        return ms

    # --- the floor: raw SQL copying the same bytes --------------------------------------------
    blob = "BYTEA" if vendor == "postgresql" else "BLOB"
    with connection.cursor() as cursor:
        cursor.execute(f"CREATE TABLE bench_floor_point (id VARCHAR(40) PRIMARY KEY, data {blob})")
        cursor.execute(f"CREATE TABLE bench_floor_doc (id INTEGER PRIMARY KEY, data {blob})")
        for i in range(N):
            cursor.execute(
                "INSERT INTO bench_floor_doc (id, data) VALUES (%s, %s)",
                [i, sized_text(size_28k, f"fl{i}").encode()],
            )
    payloads = [sized_text(size_28k, f"fl{i}").encode() for i in range(N)]
    counter = iter(range(10**9))

    def floor_timed() -> float:
        settle()
        return timed(floor_once)

    def floor_once() -> None:
        with transaction.atomic(), connection.cursor() as cursor:
            for i in range(N):
                cursor.execute(
                    "INSERT INTO bench_floor_point (id, data) VALUES (%s, %s)",
                    [f"p{next(counter)}", payloads[i]],
                )
                cursor.execute(
                    "UPDATE bench_floor_doc SET data = %s WHERE id = %s", [payloads[i], i]
                )

    for _ in range(3):  # warm-up
        restore_once(ours_set)
        revert_once()
        floor_timed()
    ours_t, rev_t, floor_t = [], [], []
    for _ in range(ROUNDS):
        ours_t.append(restore_once(ours_set))
        rev_t.append(revert_once())
        floor_t.append(floor_timed())
    assert BenchDoc.objects.filter(text__startswith="/* turn */").count() == N
    ours_ms = statistics.median(ours_t)
    reversion_ms = statistics.median(rev_t)
    floor_ms = statistics.median(floor_t)

    # --- size growth: 100 × 1 KB vs 100 × 1 MB --------------------------------------------------
    small_set = make_set("bench-1k", 1024)
    large_set = make_set("bench-1m", 1024 * 1024)
    for _ in range(3):  # warm-up
        restore_once(small_set)
        restore_once(large_set)
    small_t, large_t = [], []
    for _ in range(ROUNDS):
        small_t.append(restore_once(small_set))
        large_t.append(restore_once(large_set))
    small_ms = statistics.median(small_t)
    large_ms = statistics.median(large_t)

    # --- with the retention pass an app over its cap pays after each restore -------------------
    for _ in range(3):  # fill the app up to its cap
        restore_once(ours_set, pin=False)
    pruning_ms = statistics.median([restore_once(ours_set, pin=False) for _ in range(10)])

    print(f"database: {vendor}; {N} artifacts; {ROUNDS} rounds each, medians")
    print(
        f"restore all 28 KB: {ours_ms:.2f} ms; reversion revert: {reversion_ms:.2f} ms; "
        f"byte-copy floor: {floor_ms:.2f} ms; 1 KB: {small_ms:.2f} ms; 1 MB: {large_ms:.2f} ms; "
        f"28 KB with retention at 200: {pruning_ms:.2f} ms"
    )
    print(
        json.dumps(
            {
                "bench": "restore",
                "db": vendor,
                "n": N,
                "ms": round(ours_ms, 2),
                "reversion_ms": round(reversion_ms, 2),
                "floor_ms": round(floor_ms, 2),
                "ms_1kb": round(small_ms, 2),
                "ms_1mb": round(large_ms, 2),
                "ms_with_pruning": round(pruning_ms, 2),
                "vs_reversion": round(ours_ms / reversion_ms, 3),
                "vs_floor": round(ours_ms / floor_ms, 3),
                "size_growth": round(large_ms / small_ms, 3),
            }
        )
    )


if __name__ == "__main__":
    main()
