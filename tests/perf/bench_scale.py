"""Scale: what one app costs with 2,000 other apps in the database, and what history costs
against git (docs/architecture.md#scale).

Run: ``.venv/bin/python tests/perf/bench_scale.py`` (DATABASE_URL selects PostgreSQL; the
benchmark then works in a fresh database of its own, dropped at exit). ``--apps N`` changes
the number of bulk apps (default 2,000).

In one run, on one database:
- ``storage_vs_git``: the bytes the blob table grows by (table, TOAST and indexes on
  PostgreSQL; its pages and its indexes' on SQLite) when one 28 KB stylesheet is written 200
  times with one-line edits through ``services.write_artifact``, over what ``git gc`` keeps of
  the same 201 versions, committed one by one with the git binary: its pack and the pack's
  index, as ours counts the table's indexes (``storage_vs_git_pack``: over the pack alone).
  The table already holds another artifact's history, so what is counted is what this history
  adds, not the forks and metapages a table pays once;
- ``read_vs_full``: reading a source at the end of a delta chain (the 15th delta against its
  full copy) over reading a full copy of the same size, through the panel's reader
  (``selectors.blob_sources``, one query);
- ``page_growth``: the worst, over the apps list, Change sets, Restore points, an expanded set
  and Since release, of the panel's own view (Django's test Client, a superuser signed in)
  with 2,000 apps × 100 points of other apps in the database over the same view with 30 (a
  page of the apps list and a bit: a full page either way). The big database is a copy of the
  small one with the bulk added, and the requests alternate between the two, so load drift on
  a noisy machine hits both alike;
  the measured app is built through the services, the bulk with multi-row INSERTs (COPY on
  PostgreSQL), then ``ANALYZE``;
- with ``--hot``, the hot shape instead (docs/performance.md#hot-apps): a measured app of 420
  artifacts written ~2,700 times in ~1,000 turns (one of 420 writes, one of 300, the rest of
  2) through the services, ending at its retention limit (2,600); ``table_storage_vs_git``: the
  blob table's whole size (rows, TOAST, indexes) for that history alone over ``git gc
  --aggressive`` of the same history as one commit per turn, with the table's parts beside
  it; ``hot_page_growth``: the worst of its panel pages (apps list, Change sets and a deep
  page, Restore points and a deep page, the 300-artifact set expanded, Since release) with
  2,000 apps of which 20 hot over the same app among 30 small apps; ``restore_growth``: Restore
  all of the 300-artifact set (alternating with its undo), big over small; ``--hot
  --storage-only`` builds the history and prints ``table_storage_vs_git`` alone (a minute);
  ``hot_prune_vs_write``: on the big database, a write in the hot app at its limit (it prunes)
  over a plain write in an app below it;
- ``prune_vs_write``: on the big database, a write at the retention limit (it prunes a point)
  over a write below it: the medians of 200 writes each, in blocks of 10 that alternate, with
  the ratio of their quartiles beside it (``prune_vs_write_spread``: how far the machine's
  noise moves it) and of their means (``prune_vs_write_mean``: every write counted, the one
  in ``VERSIONS_SWEEP_BATCH`` that settles the app's debt included).
  ``prune_vs_write_small``: the same on the small database, which shows whether what a prune
  costs grows with the database.
Prints its figures last as one line of JSON. Ratios are ours / theirs (or big / small): lower
is better.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _setup import setup_django, stylesheet_28kb  # noqa: E402

VERSIONS = 200  # writes after the first: 201 versions
BULK_POINTS = 100  # points per bulk app
BULK_ARTIFACTS = 5
BULK_SETS = 20  # change sets per bulk app (turns of 5 points)
PAGE_RUNS = 15
SMALL_APPS = 30  # other apps in the small database: more than the apps list's page of 24
WRITE_RUNS = 200
WRITE_ROUNDS = 20  # blocks of 10 writes each, alternating between the two apps


def median_of(func: Callable[[], object], n: int, warmup: int = 3) -> float:
    for _ in range(warmup):
        func()
    times = []
    for _ in range(n):
        start = time.perf_counter()
        func()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def interleaved_times(
    funcs: list[Callable[[int], object]], n: int, rounds: int = 4
) -> list[list[float]]:
    """The ms of each ``func(i)``, ``n`` runs each, in alternating rounds so load drift hits
    all alike."""
    for func in funcs:
        func(-1)
    times: list[list[float]] = [[] for _ in funcs]
    for round_ in range(rounds):
        for func, out in zip(funcs, times, strict=True):
            for i in range(n // rounds):
                start = time.perf_counter()
                func(round_ * n + i)
                out.append((time.perf_counter() - start) * 1000)
    return times


def interleaved(funcs: list[Callable[[int], object]], n: int, rounds: int = 4) -> list[float]:
    """Median ms of each ``func(i)`` (:func:`interleaved_times`)."""
    return [statistics.median(t) for t in interleaved_times(funcs, n, rounds)]


def versions_of(base: str, count: int) -> list[str]:
    """``count`` versions of ``base``, each one line away from the one before."""
    lines = base.splitlines(keepends=True)
    out = ["".join(lines)]
    for i in range(1, count):
        at = (i * 37) % len(lines)
        lines[at] = f".rule-{at}-v{i} {{ padding: {i % 17}px; color: #{i:06x}; }}\n"
        out.append("".join(lines))
    return out


# --- storage ------------------------------------------------------------------------------------


def blob_table_bytes() -> int:
    """The blob table's size on disk: rows, TOAST and indexes."""
    from django.db import connection

    from versions.models import Blob

    table = Blob._meta.db_table
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("SELECT pg_total_relation_size(%s)", [table])
            return int(cursor.fetchone()[0])
        cursor.execute(
            "SELECT SUM(pgsize) FROM dbstat WHERE name = %s OR name IN "
            "(SELECT name FROM sqlite_master WHERE tbl_name = %s AND type = 'index')",
            [table, table],
        )
        return int(cursor.fetchone()[0] or 0)


def git_packed_bytes(texts: list[str]) -> tuple[int, int]:
    """Sizes of the pack ``git gc`` makes of ``texts`` committed one by one, and of its index."""
    folder = Path(tempfile.mkdtemp(prefix="versions-bench-git-"))
    try:
        env = {
            **os.environ,
            "GIT_AUTHOR_NAME": "b",
            "GIT_AUTHOR_EMAIL": "b@b",
            "GIT_COMMITTER_NAME": "b",
            "GIT_COMMITTER_EMAIL": "b@b",
        }

        def git(*args: str, stdin: bytes | None = None) -> None:
            subprocess.run(
                ["git", "-C", str(folder), *args],
                check=True,
                env=env,
                input=stdin,
                capture_output=True,
            )

        git("init", "-q")
        for i, text in enumerate(texts):
            (folder / "style.css").write_text(text)
            git("add", "style.css")
            git("commit", "-q", "--no-verify", "-m", f"v{i}")
        git("gc", "-q")
        packs = folder / ".git" / "objects" / "pack"
        return (
            sum(p.stat().st_size for p in packs.glob("*.pack")),
            sum(p.stat().st_size for p in packs.glob("*.idx")),
        )
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def measure_storage() -> dict[str, Any]:
    from versions import selectors, services
    from versions.models import App, Blob

    texts = versions_of(stylesheet_28kb(), VERSIONS + 1)
    other = App.objects.create(slug="bench-other", name="Other")
    for text in versions_of(stylesheet_28kb().replace("rule", "other"), 40):
        services.write_artifact(other, "pltf_stylesheet", "App", text, requested_by="b", tool="b")
    app = App.objects.create(slug="bench-storage", name="Storage")
    if_vacuum()
    before = blob_table_bytes()
    for text in texts:
        services.write_artifact(app, "pltf_stylesheet", "App", text, requested_by="b", tool="b")
    if_vacuum()
    grown = blob_table_bytes() - before
    pack, idx = git_packed_bytes(texts)
    shas = [hashlib.sha256(t.encode()).hexdigest() for t in texts]
    if not any(f.name == "chain" for f in Blob._meta.get_fields()):
        # Before delta storage: every version a full copy; nothing to compare reads with.
        return {
            "storage_bytes": grown,
            "git_bytes": pack + idx,
            "git_pack_bytes": pack,
            "storage_vs_git": round(grown / (pack + idx), 2),
            "storage_vs_git_pack": round(grown / pack, 2),
            "deltas": 0,
            "versions": len(texts),
            "read_delta_ms": None,
            "read_full_ms": None,
            "read_vs_full": None,
            "orm_read_vs_full": None,
        }
    rows = dict(Blob.objects.filter(sha256__in=shas).values_list("sha256", "chain"))
    deltas = sum(1 for s in shas if rows.get(s))
    # The end of a chain (the 15th delta) and a full copy of the same artifact.
    end = next(s for s in reversed(shas) if rows.get(s) == 15)
    full = next(s for s in reversed(shas) if rows.get(s) == 0 and s != end)
    delta_ms, full_ms = interleaved(
        [lambda _i: selectors.blob_sources([end]), lambda _i: selectors.blob_sources([full])],
        n=400,
    )
    orm_delta_ms, orm_full_ms = interleaved(
        [lambda _i: Blob.objects.get(sha256=end).raw, lambda _i: Blob.objects.get(sha256=full).raw],
        n=400,
    )
    return {
        "storage_bytes": grown,
        "git_bytes": pack + idx,
        "git_pack_bytes": pack,
        "storage_vs_git": round(grown / (pack + idx), 2),
        "storage_vs_git_pack": round(grown / pack, 2),
        "deltas": deltas,
        "versions": len(texts),
        "read_delta_ms": round(delta_ms, 4),
        "read_full_ms": round(full_ms, 4),
        "read_vs_full": round(delta_ms / full_ms, 2),
        "orm_read_vs_full": round(orm_delta_ms / orm_full_ms, 2),
    }


def if_vacuum() -> None:
    """Settle the table's size (SQLite: checkpoint the WAL so dbstat sees every page)."""
    from django.db import connection

    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            cursor.execute("PRAGMA wal_checkpoint(TRUNCATE)")


# --- the measured app and the panel's pages -----------------------------------------------------


def build_measured_app(slug: str) -> dict[str, str]:
    """An app of 5 artifacts written 100 times through the services (one set per write), its
    release at the 20th set; the URLs of the pages to time."""
    from versions import services
    from versions.models import App, ChangeSet

    app = App.objects.create(slug=slug, name=slug)
    texts = {name: versions_of(stylesheet_28kb()[:4096], 21) for name in "abcde"}
    for i in range(100):
        name = "abcde"[i % 5]
        services.write_artifact(
            app, "pltf_stylesheet", name, texts[name][i // 5], requested_by="b", tool="b"
        )
    sets = list(
        ChangeSet.objects.filter(app=app).order_by("created_on").values_list("id", flat=True)
    )
    services.mark_release(sets[19], by="b")
    base = f"/apps/{slug}/versions/"
    return {
        "apps_list": "/",
        "change_sets": base,
        "restore_points": f"{base}points/",
        "expanded_set": f"{base}change-sets/{sets[-1]}/",
        "since_release": f"{base}since-release/",
    }


def clone_database() -> Any:
    """A second database, a copy of the benchmark's as it is now (PostgreSQL: ``CREATE
    DATABASE … TEMPLATE``; SQLite: the file), dropped at exit; returns a connection to it, to
    put in place of the default one with :func:`use`."""
    import atexit

    from django.db import connection
    from django.db.utils import load_backend

    settings_dict = dict(connection.settings_dict)
    name = str(settings_dict["NAME"])
    connection.close()
    if connection.vendor == "postgresql":
        import psycopg
        from _setup import _drop_database

        url = os.environ["DATABASE_URL"]
        copy = f"{name}_big"
        with psycopg.connect(url.rsplit("/", 1)[0] + "/postgres", autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {copy} WITH (FORCE)")
            conn.execute(f"CREATE DATABASE {copy} TEMPLATE {name}")
        atexit.register(_drop_database, url.rsplit("/", 1)[0] + "/postgres", copy)
    else:
        copy = f"{name}-big"
        shutil.copyfile(name, copy)
    settings_dict["NAME"] = copy
    backend = load_backend(str(settings_dict["ENGINE"]))
    return backend.DatabaseWrapper(settings_dict, "default")


def use(wrapper: Any) -> None:
    """Make ``wrapper`` the default connection of this thread."""
    from django.db import connections

    connections["default"] = wrapper


def time_pages_interleaved(
    client: Any, urls: dict[str, str], small: Any, big: Any
) -> tuple[dict[str, float], dict[str, float]]:
    """Median ms of each page on the small and on the big database, requests alternating
    between the two (load drift on a noisy machine hits both alike)."""
    small_ms, big_ms = {}, {}
    for key, url in urls.items():

        def get(db: Any, url: str = url) -> Callable[[int], None]:
            def run(_i: int) -> None:
                use(db)
                response = client.get(url)
                assert response.status_code == 200, (url, response.content[:300])

            return run

        small_ms[key], big_ms[key] = interleaved([get(small), get(big)], n=PAGE_RUNS * 2)
    return small_ms, big_ms


def bulk_fill(apps: int, first: int = 0) -> float:
    """Add ``apps`` apps × 100 points (5 artifacts, 20 sets of 5 points) with bulk SQL, numbered
    from ``first``; the seconds it took."""
    from django.db import connection, transaction

    from versions import ids
    from versions.models import App, Artifact, Blob, ChangeSet, RestorePoint

    start = time.perf_counter()
    now = datetime.now(UTC) - timedelta(days=30)
    with transaction.atomic():
        App.objects.bulk_create(
            [App(slug=f"bulk-{i}", name=f"Bulk {i}") for i in range(first, first + apps)],
            batch_size=2000,
        )
        app_ids = list(
            App.objects.filter(slug__in=[f"bulk-{i}" for i in range(first, first + apps)])
            .order_by("pk")
            .values_list("pk", flat=True)
        )
        blobs, artifacts, sets, points = [], [], [], []
        for n, app_id in enumerate(app_ids, start=first):
            texts = [f"/* bulk {n} v{v} */\n" + "p { margin: 0; }\n" * 8 for v in range(21)]
            shas = [hashlib.sha256(t.encode()).hexdigest() for t in texts]
            for text, sha in zip(texts, shas, strict=True):
                blobs.append((sha, text.encode(), len(text), len(text), False, now, None, 0))
            for a in range(BULK_ARTIFACTS):
                artifacts.append(
                    (
                        app_id,
                        "pltf_stylesheet",
                        f"a{a}",
                        shas[20],
                        shas[20],
                        len(texts[20]),
                        False,
                        None,
                        None,
                        now,
                        "b",
                    )
                )
            for s in range(BULK_SETS):
                ms = ids.datetime_to_ms(now) + n * 1000 + s * 10
                first = ids.point_id(ms)
                set_id = ids.change_set_id(first)
                at = ids.ms_to_datetime(ms)
                sets.append((set_id, app_id, "change", "", at, "b", None, None, "", f"t{s}", "[]"))
                for a in range(BULK_ARTIFACTS):
                    pid = first if a == 0 else ids.point_id(ms + a)
                    points.append(
                        (
                            pid,
                            app_id,
                            (n, a),
                            "capture",
                            shas[s],
                            shas[s],
                            len(texts[s]),
                            True,
                            True,
                            shas[s + 1],
                            "b",
                            "b",
                            ids.ms_to_datetime(ms + a),
                            1,
                            1,
                            "",
                            f"t{s}",
                            "",
                            set_id,
                            False,
                        )
                    )
        # Full copies; before delta storage the table had no base and chain (runs on both).
        blob_columns = ["sha256", "data", "size", "chars", "compressed", "created_on"]
        if any(f.name == "base" for f in Blob._meta.get_fields()):
            blob_columns += ["base_id", "chain"]
        else:
            blobs = [row[:6] for row in blobs]
        _copy(Blob, blob_columns, blobs)
        _copy(
            Artifact,
            [
                "app_id",
                "collection",
                "name",
                "blob_id",
                "sha256",
                "size",
                "deleted",
                "route_key",
                "pruned_until",
                "updated_on",
                "updated_by",
            ],
            artifacts,
        )
        art_ids = {
            (app_id, name): pk
            for pk, app_id, name in Artifact.objects.filter(app_id__in=app_ids).values_list(
                "pk", "app_id", "name"
            )
        }
        _copy(
            ChangeSet,
            [
                "id",
                "app_id",
                "kind",
                "name",
                "created_on",
                "created_by",
                "restored_from_id",
                "receipt",
                "run_id",
                "turn_id",
                "pruned",
            ],
            sets,
        )
        points = [(p[0], p[1], art_ids[(p[1], f"a{p[2][1]}")], *p[3:]) for p in points]
        _copy(
            RestorePoint,
            [
                "id",
                "app_id",
                "artifact_id",
                "kind",
                "previous_blob_id",
                "previous_sha256",
                "previous_size",
                "previous_existed",
                "source_stored",
                "new_sha256",
                "requested_by",
                "tool",
                "created_on",
                "lines_added",
                "lines_removed",
                "run_id",
                "turn_id",
                "name",
                "change_set_id",
                "pinned",
            ],
            points,
        )
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    return time.perf_counter() - start


def _copy(model: Any, columns: list[str], rows: list[tuple[Any, ...]]) -> None:
    """Insert ``rows``: COPY on PostgreSQL, multi-row INSERTs elsewhere."""
    from django.db import connection

    table = connection.ops.quote_name(model._meta.db_table)
    cols = ", ".join(connection.ops.quote_name(c) for c in columns)
    if connection.vendor == "postgresql":
        rows = _stored_keys(model, columns, rows)
        connection.ensure_connection()
        raw = connection.connection
        with raw.cursor() as cursor, cursor.copy(f"COPY {table} ({cols}) FROM STDIN") as copy:
            for row in rows:
                copy.write_row(row)
        return
    per = max(1, 999 // len(columns))
    with connection.cursor() as cursor:
        for start in range(0, len(rows), per):
            chunk = rows[start : start + per]
            values = ", ".join(["(" + ", ".join(["%s"] * len(columns)) + ")"] * len(chunk))
            params = [
                connection.ops.adapt_datetimefield_value(v) if isinstance(v, datetime) else v
                for row in chunk
                for v in row
            ]
            cursor.execute(f"INSERT INTO {table} ({cols}) VALUES {values}", params)  # noqa: S608


def _stored_keys(
    model: Any, columns: list[str], rows: list[tuple[Any, ...]]
) -> list[tuple[Any, ...]]:
    """``rows`` with their blob keys as the database stores them (bytes on PostgreSQL, where
    the model has ``BlobKeyField``; text before it)."""
    from django.db import connection

    from versions import models

    key_field = getattr(models, "BlobKeyField", None)
    fields = {f.column: f for f in model._meta.concrete_fields}
    keyed = [
        (i, fields[c])
        for i, c in enumerate(columns)
        if key_field is not None
        and isinstance(getattr(fields[c], "target_field", fields[c]), key_field)
    ]
    if not keyed:
        return rows
    out = []
    for row in rows:
        values = list(row)
        for i, field in keyed:
            values[i] = field.get_db_prep_save(values[i], connection)
        out.append(tuple(values))
    return out


def write_cost(slug_below: str, slug_limit: str) -> tuple[list[float], list[float]]:
    """A write below the retention limit and one at it (which prunes a point): their ms."""
    from django.conf import settings

    from versions import services
    from versions.models import App, RestorePoint

    keep = int(getattr(settings, "VERSIONS_POINTS_PER_APP", 200))
    base = stylesheet_28kb()
    # Two apps below the limit, written in turn, so neither reaches it in WRITE_RUNS writes.
    below = [App.objects.create(slug=f"{slug_below}-{k}", name="below") for k in range(2)]
    limit = App.objects.create(slug=slug_limit, name="limit")

    def writer(app: Any, tag: str) -> Callable[[int], None]:
        def write(i: int) -> None:
            text = base.replace(".rule-5 {", f".rule-5-{tag}{i} {{", 1)
            services.write_artifact(app, "pltf_stylesheet", "App", text, requested_by="b", tool="b")

        return write

    write_limit = writer(limit, "l")
    i = 0
    while RestorePoint.objects.filter(app=limit).count() < keep:
        write_limit(100_000 + i)
        i += 1
    below_writers = [writer(app, "b") for app in below]

    def write_below(i: int) -> None:
        below_writers[i % 2](i)

    below_ms, limit_ms = interleaved_times(
        [write_below, write_limit], n=WRITE_RUNS, rounds=WRITE_ROUNDS
    )
    assert all(RestorePoint.objects.filter(app=app).count() < keep for app in below)
    assert RestorePoint.objects.filter(app=limit).count() == keep  # each write pruned one
    return below_ms, limit_ms


def ratio_and_spread(below: list[float], limit: list[float]) -> tuple[float, str]:
    """The medians' ratio, and the ratios of the lower and of the upper quartiles."""
    low_b, _, high_b = statistics.quantiles(below, n=4)
    low_l, _, high_l = statistics.quantiles(limit, n=4)
    ratio = statistics.median(limit) / statistics.median(below)
    return round(ratio, 2), f"{low_l / low_b:.2f}-{high_l / high_b:.2f}"


# --- the hot shape (docs/performance.md#scale-hot-apps) ---------------------------------------

HOT_ARTIFACTS = 420
HOT_LIMIT = 2600  # VERSIONS_POINTS_PER_APP of the hot shape: the measured app ends at it
HOT_BULK_APPS = 19  # other hot apps in the big database (20 with the measured one)
HOT_BULK_POINTS = 2500
HOT_BULK_SETS = 1000
RESTORE_RUNS = 8


def hot_page_text(n: int, version: int) -> str:
    """Artifact ``n``'s ``version``: a 1.5 KB page, one line different from the one before."""
    lines = [f"<li>item {i} of page {n}</li>\n" for i in range(60)]
    lines[version % 60] = f"<li>item {version % 60} of page {n}, version {version}</li>\n"
    return f"<h1>Page {n}</h1>\n" + "".join(lines)


def build_hot_app(slug: str) -> tuple[dict[str, str], str, list[list[tuple[str, str]]]]:
    """The measured hot app, through the services: a first turn writing its 420 artifacts,
    700 turns of 2 writes, a turn of 300 writes (the set Restore all times), 300 more turns
    of 2; about 1,000 sets and 2,720 writes, ending at the retention limit. Returns the pages'
    URLs, the 300-artifact set and the history as turns of (name, text), for git."""
    from versions import services
    from versions.models import App, ChangeSet

    app = App.objects.create(slug=slug, name=slug)
    versions = dict.fromkeys(range(HOT_ARTIFACTS), 0)
    turns: list[list[tuple[str, str]]] = []

    def turn(names: list[int], run: str) -> str:
        done: list[tuple[str, str]] = []
        receipt = None
        for n in names:
            versions[n] += 1
            text = hot_page_text(n, versions[n])
            receipt = services.write_artifact(
                app, "pltf_page", f"p{n:03d}", text, requested_by="b", tool="b", run_id=run
            )
            done.append((f"p{n:03d}", text))
        turns.append(done)
        assert receipt is not None and receipt.change_set_id
        return receipt.change_set_id

    turn(list(range(HOT_ARTIFACTS)), "first")
    for t in range(700):
        turn([(t * 7) % HOT_ARTIFACTS, (t * 13 + 5) % HOT_ARTIFACTS], f"small-{t}")
    big_set = turn(list(range(50, 350)), "big")
    for t in range(700, 1000):
        turn([(t * 7) % HOT_ARTIFACTS, (t * 13 + 5) % HOT_ARTIFACTS], f"small-{t}")
    sets = list(
        ChangeSet.objects.filter(app=app).order_by("created_on").values_list("id", flat=True)
    )
    services.mark_release(sets[len(sets) // 2], by="b")
    base = f"/apps/{slug}/versions/"
    return (
        {
            "apps_list": "/",
            "change_sets": base,
            "change_sets_deep": f"{base}?page=30",
            "restore_points": f"{base}points/",
            "restore_points_deep": f"{base}points/?page=20",
            "expanded_set": f"{base}change-sets/{big_set}/",
            "since_release": f"{base}since-release/",
        },
        big_set,
        turns,
    )


def bulk_fill_hot(apps: int) -> float:
    """Add ``apps`` hot apps with bulk SQL: 420 artifacts, 1,000 sets, 2,500 points each."""
    from django.db import connection, transaction

    from versions import ids
    from versions.models import App, Artifact, Blob, ChangeSet, RestorePoint

    start = time.perf_counter()
    now = datetime.now(UTC) - timedelta(days=20)
    with transaction.atomic():
        App.objects.bulk_create([App(slug=f"hot-{i}", name=f"Hot {i}") for i in range(apps)])
        app_ids = list(
            App.objects.filter(slug__startswith="hot-").order_by("pk").values_list("pk", flat=True)
        )
        blobs, artifacts, sets, points = [], [], [], []
        for n, app_id in enumerate(app_ids):
            texts = [f"<!-- hot {n} v{v} -->\n" + "<p>hot</p>\n" * 40 for v in range(8)]
            shas = [hashlib.sha256(t.encode()).hexdigest() for t in texts]
            blobs += [(sha, t.encode(), len(t), len(t), False, now, None, 0) for t, sha in
                      zip(texts, shas, strict=True)]  # fmt: skip
            for a in range(HOT_ARTIFACTS):
                artifacts.append(
                    (app_id, "pltf_page", f"p{a:03d}", shas[0], shas[0], len(texts[0]), False,
                     None, None, now, "b")
                )  # fmt: skip
            per_set = HOT_BULK_POINTS // HOT_BULK_SETS
            for s in range(HOT_BULK_SETS):
                ms = ids.datetime_to_ms(now) + n * 10_000_000 + s * 1000
                first = ids.point_id(ms)
                set_id = ids.change_set_id(first)
                at = ids.ms_to_datetime(ms)
                sets.append((set_id, app_id, "change", "", at, "b", None, None, "", f"t{s}", "[]"))
                for k in range(per_set if s else HOT_BULK_POINTS - per_set * (HOT_BULK_SETS - 1)):
                    pid = first if k == 0 else ids.point_id(ms + k)
                    v = (s + k) % 7
                    points.append(
                        (pid, app_id, (n, (s * 3 + k) % HOT_ARTIFACTS), "capture", shas[v],
                         shas[v], len(texts[v]), True, True, shas[v + 1], "b", "b",
                         ids.ms_to_datetime(ms + k), 1, 1, "", f"t{s}", "", set_id, False)
                    )  # fmt: skip
        blob_columns = ["sha256", "data", "size", "chars", "compressed", "created_on"]
        blob_columns += ["base_id", "chain"]
        _copy(Blob, blob_columns, blobs)
        _copy(
            Artifact,
            ["app_id", "collection", "name", "blob_id", "sha256", "size", "deleted", "route_key",
             "pruned_until", "updated_on", "updated_by"],
            artifacts,
        )  # fmt: skip
        art_ids = {
            (app_id, name): pk
            for pk, app_id, name in Artifact.objects.filter(app_id__in=app_ids).values_list(
                "pk", "app_id", "name"
            )
        }
        _copy(
            ChangeSet,
            ["id", "app_id", "kind", "name", "created_on", "created_by", "restored_from_id",
             "receipt", "run_id", "turn_id", "pruned"],
            sets,
        )  # fmt: skip
        points = [(p[0], p[1], art_ids[(p[1], f"p{p[2][1]:03d}")], *p[3:]) for p in points]
        _copy(
            RestorePoint,
            ["id", "app_id", "artifact_id", "kind", "previous_blob_id", "previous_sha256",
             "previous_size", "previous_existed", "source_stored", "new_sha256", "requested_by",
             "tool", "created_on", "lines_added", "lines_removed", "run_id", "turn_id", "name",
             "change_set_id", "pinned"],
            points,
        )  # fmt: skip
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    return time.perf_counter() - start


def git_history_bytes(turns: list[list[tuple[str, str]]]) -> int:
    """What ``git gc --aggressive`` keeps (pack and index) of ``turns`` as commits, one a turn."""
    folder = Path(tempfile.mkdtemp(prefix="versions-bench-git-"))
    env = {**os.environ, "GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@b",
           "GIT_COMMITTER_NAME": "b", "GIT_COMMITTER_EMAIL": "b@b"}  # fmt: skip
    try:

        def git(*args: str) -> None:
            subprocess.run(["git", "-C", str(folder), *args], check=True, env=env,
                           capture_output=True)  # fmt: skip

        git("init", "-q")
        for i, done in enumerate(turns):
            for name, text in done:
                (folder / f"{name}.html").write_text(text)
            git("add", "-A")
            git("commit", "-q", "--no-verify", "-m", f"turn {i}")
        git("gc", "-q", "--aggressive")
        packs = folder / ".git" / "objects" / "pack"
        return sum(p.stat().st_size for p in packs.iterdir() if p.suffix in (".pack", ".idx"))
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def blob_table_parts(vacuum: bool = False) -> dict[str, int]:
    """The blob table's bytes by part (PostgreSQL): rows (heap), TOAST, each index, the whole;
    its rows and their stored bytes. ``vacuum``: after a plain VACUUM (dead rows' space made
    free for reuse; the files keep their size)."""
    from django.db import connection

    with connection.cursor() as cursor:
        if vacuum:
            cursor.execute("VACUUM versions_blob")
        cursor.execute(
            "SELECT pg_relation_size('versions_blob'), "
            "COALESCE(pg_total_relation_size(reltoastrelid), 0), "
            "pg_indexes_size('versions_blob'), pg_total_relation_size('versions_blob'), "
            "(SELECT COUNT(*) FROM versions_blob), "
            "(SELECT COALESCE(SUM(octet_length(data)), 0) FROM versions_blob) "
            "FROM pg_class WHERE relname = 'versions_blob'"
        )
        heap, toast, indexes, total, rows, data = cursor.fetchone()
        cursor.execute(
            "SELECT indexrelid::regclass::text, pg_relation_size(indexrelid) FROM pg_index "
            "WHERE indrelid = 'versions_blob'::regclass"
        )
        each = dict(cursor.fetchall())
        cursor.execute(
            "SELECT n_dead_tup, n_live_tup FROM pg_stat_user_tables WHERE relname = 'versions_blob'"
        )
        dead, live = cursor.fetchone()
    return {"heap": heap, "toast": toast, "indexes": indexes, "total": total, "rows": rows,
            "data_bytes": data, "dead_rows": dead,
            **{f"index_{k}": v for k, v in each.items()}}  # fmt: skip


def restore_times(set_id: str, small: Any, big: Any) -> tuple[float, float]:
    """Median ms of Restore all of ``set_id`` on each database, alternating with its undo
    (restoring the restore set), small and big in turn."""
    from versions import services

    last: dict[int, str | None] = {id(small): None, id(big): None}

    def run(db: Any) -> Callable[[int], None]:
        def once(_i: int) -> None:
            use(db)
            undo = last[id(db)]
            receipt = services.restore_change_set(undo or set_id, by="b")
            assert receipt.kind == "restore", receipt
            last[id(db)] = None if undo else receipt.set_id

        return once

    small_ms, big_ms = interleaved([run(small), run(big)], n=RESTORE_RUNS * 2, rounds=4)
    return small_ms, big_ms


def main_hot(args: argparse.Namespace) -> None:
    from django.contrib.auth import get_user_model
    from django.db import connections
    from django.test import Client, override_settings

    vendor = connections["default"].vendor
    user = get_user_model().objects.create_superuser("bench", "b@b.b", "pw")
    client = Client()
    client.force_login(user)
    with override_settings(VERSIONS_POINTS_PER_APP=HOT_LIMIT):
        started = time.perf_counter()
        urls, big_set, turns = build_hot_app("measured-hot")
        print(f"hot app: {sum(len(t) for t in turns)} writes in {len(turns)} turns, "
              f"{time.perf_counter() - started:.0f} s")  # fmt: skip
        storage = blob_table_parts() if vendor == "postgresql" else {}
        vacuumed = blob_table_parts(vacuum=True) if vendor == "postgresql" else {}
        git_bytes = git_history_bytes(turns)
        print("blob table:", storage, "after VACUUM:", vacuumed, "git gc --aggressive:", git_bytes)
        if args.storage_only:
            print(json.dumps({"bench": "scale-hot-storage", "db": vendor, "blob_table": storage,
                              "git_aggressive_bytes": git_bytes,
                              "table_storage_vs_git": round(storage["total"] / git_bytes, 2)
                              if storage else None}))  # fmt: skip
            return
        bulk_fill(SMALL_APPS)
        small_db = connections["default"]
        big_db = clone_database()
        use(big_db)
        seconds = bulk_fill_hot(HOT_BULK_APPS)
        seconds += bulk_fill(args.apps - SMALL_APPS - HOT_BULK_APPS - 1, first=SMALL_APPS)
        print(f"bulk: {args.apps} apps ({HOT_BULK_APPS + 1} hot) in {seconds:.0f} s")
        small, big = time_pages_interleaved(client, urls, small_db, big_db)
        print("small:", {k: round(v, 2) for k, v in small.items()})
        print("big:", {k: round(v, 2) for k, v in big.items()})
        growth = {k: big[k] / small[k] for k in urls}
        restore_small, restore_big = restore_times(big_set, small_db, big_db)
        use(big_db)
        below, limit = hot_write_cost("measured-hot")
    ratio, spread = ratio_and_spread(below, limit)
    print(
        json.dumps(
            {
                "bench": "scale-hot",
                "db": vendor,
                "apps": args.apps,
                "hot_apps": HOT_BULK_APPS + 1,
                "pages_small_ms": {k: round(v, 2) for k, v in small.items()},
                "pages_big_ms": {k: round(v, 2) for k, v in big.items()},
                "hot_page_growth_by_page": {k: round(v, 2) for k, v in growth.items()},
                "hot_page_growth": round(max(growth.values()), 2),
                "restore_small_ms": round(restore_small, 1),
                "restore_big_ms": round(restore_big, 1),
                "restore_growth": round(restore_big / restore_small, 2),
                "hot_write_below_ms": round(statistics.median(below), 3),
                "hot_write_at_limit_ms": round(statistics.median(limit), 3),
                "hot_prune_vs_write": ratio,
                "hot_prune_vs_write_spread": spread,
                "blob_table": storage,
                "blob_table_vacuumed": vacuumed,
                "git_aggressive_bytes": git_bytes,
                "table_storage_vs_git": round(storage["total"] / git_bytes, 2) if storage else None,
                "referenced_data_vs_git": round(storage["data_bytes"] / git_bytes, 2)
                if storage
                else None,
            }
        )
    )


def hot_write_cost(hot_slug: str) -> tuple[list[float], list[float]]:
    """A plain write (an app below the limit) and a write in the hot app at its limit (it
    prunes), each to one of many artifacts: their ms."""
    from versions import services
    from versions.models import App

    below = [App.objects.create(slug=f"hot-below-{k}", name="below") for k in range(2)]
    hot = App.objects.get(slug=hot_slug)

    def write_hot(i: int) -> None:
        n = (i * 11) % HOT_ARTIFACTS
        services.write_artifact(hot, "pltf_page", f"p{n:03d}", hot_page_text(n, 10_000 + i),
                                requested_by="b", tool="b")  # fmt: skip

    def write_below(i: int) -> None:
        n = (i * 11) % HOT_ARTIFACTS
        services.write_artifact(below[i % 2], "pltf_page", f"p{n:03d}",
                                hot_page_text(n, 10_000 + i), requested_by="b", tool="b")  # fmt: skip

    return tuple(interleaved_times([write_below, write_hot], n=WRITE_RUNS, rounds=WRITE_ROUNDS))  # type: ignore[return-value]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--apps", type=int, default=2000)
    parser.add_argument(
        "--hot",
        action="store_true",
        help="the hot shape: hot_page_growth, hot_prune_vs_write, "
        "restore_growth, table_storage_vs_git",
    )
    parser.add_argument(
        "--storage-only",
        action="store_true",
        help="with --hot: build the hot app's history and print table_storage_vs_git only "
        "(no bulk apps, no timings)",
    )
    args = parser.parse_args()
    vendor = setup_django()
    if args.hot:
        from django.test.utils import setup_test_environment as _setup

        _setup()
        from django.conf import settings as _settings

        _settings.ALLOWED_HOSTS = ["*"]
        main_hot(args)
        return
    from django.contrib.auth import get_user_model
    from django.test import Client
    from django.test.utils import setup_test_environment

    setup_test_environment()
    from django.conf import settings

    settings.ALLOWED_HOSTS = ["*"]
    user = get_user_model().objects.create_superuser("bench", "b@b.b", "pw")
    client = Client()
    client.force_login(user)

    storage = measure_storage()
    print(
        f"database: {vendor}; storage: {storage['storage_bytes']} bytes for "
        f"{storage['versions']} versions ({storage['deltas']} deltas), git gc: "
        f"{storage['git_bytes']} bytes; read at a chain's end {storage['read_delta_ms']} ms, "
        f"a full copy {storage['read_full_ms']} ms"
    )

    urls = build_measured_app("measured")
    # The small database holds a page and a bit of other apps, so the apps list compares a
    # full page with a full page: what the page costs, not how many cards fill it.
    bulk_fill(SMALL_APPS)
    from django.db import connections

    small_db = connections["default"]
    big_db = clone_database()
    use(big_db)
    seconds = bulk_fill(args.apps - SMALL_APPS, first=SMALL_APPS)
    print(f"bulk: {args.apps} apps × {BULK_POINTS} points in {seconds:.0f} s")
    small, big = time_pages_interleaved(client, urls, small_db, big_db)
    print(f"small database ({SMALL_APPS} other apps):", {k: round(v, 2) for k, v in small.items()})
    print("big database:", {k: round(v, 2) for k, v in big.items()})
    growth = {k: big[k] / small[k] for k in urls}
    use(big_db)
    below, limit = write_cost("write-below", "write-limit")
    below_ms, limit_ms = statistics.median(below), statistics.median(limit)
    ratio, spread = ratio_and_spread(below, limit)
    # The means count every write, the one in VERSIONS_SWEEP_BATCH that settles the app's
    # debt included (the medians hardly see it).
    mean_ratio = round(statistics.fmean(limit) / statistics.fmean(below), 2)
    print(
        f"big database: a write below the limit {below_ms:.2f} ms, at the limit "
        f"{limit_ms:.2f} ms ({ratio}; quartiles {spread}; means {mean_ratio})"
    )
    use(small_db)
    small_below, small_limit = write_cost("write-below", "write-limit")
    small_ratio, small_spread = ratio_and_spread(small_below, small_limit)
    print(
        f"small database: a write below the limit {statistics.median(small_below):.2f} ms, "
        f"at the limit {statistics.median(small_limit):.2f} ms ({small_ratio}; quartiles "
        f"{small_spread})"
    )
    print(
        json.dumps(
            {
                "bench": "scale",
                "db": vendor,
                "apps": args.apps,
                "points_per_app": BULK_POINTS,
                "bulk_seconds": round(seconds, 1),
                **storage,
                "pages_small_ms": {k: round(v, 2) for k, v in small.items()},
                "pages_big_ms": {k: round(v, 2) for k, v in big.items()},
                "page_growth_by_page": {k: round(v, 2) for k, v in growth.items()},
                "page_growth": round(max(growth.values()), 2),
                "write_below_ms": round(below_ms, 3),
                "write_at_limit_ms": round(limit_ms, 3),
                "prune_vs_write": ratio,
                "prune_vs_write_spread": spread,
                "prune_vs_write_mean": mean_ratio,
                "prune_vs_write_small": small_ratio,
            }
        )
    )


if __name__ == "__main__":
    main()
