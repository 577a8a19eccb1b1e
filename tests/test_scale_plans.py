"""Every query of the panel's pages is bounded by the app (docs/architecture.md#scale), read off
PostgreSQL's own plans: with sequential scans priced out, a plan that still reads a whole table of
the engine's (every app's blobs, artifacts, points or sets) has no index that narrows it to the
app's rows.

The big database of ``tests/perf/bench_scale.py`` shows what such a plan costs; this is the
small version of that property, for every page the benchmark times and a few more.
"""

from __future__ import annotations

import hashlib
import json
import re

import pytest
from django.contrib.auth.models import User
from django.db import connection, transaction
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from versions import services
from versions.models import App, Blob
from versions.views.diffs import clear_cache

pytestmark = [pytest.mark.django_db]

# The engine's tables that grow with every app. (The apps list reads versions_app: it lists
# every app, a page at a time.)
GROWING = {
    "versions_blob",
    "versions_artifact",
    "versions_restorepoint",
    "versions_changeset",
    "versions_releasemark",
    "versions_deployment",
    "versions_deploymententry",
}


def whole_table_reads(sql: str) -> list[str]:
    """The growing tables the plan of ``sql`` reads whole, with sequential scans priced out."""
    # SET LOCAL lasts to the end of a transaction, and outside one (a test that runs at the
    # top level) does nothing: the EXPLAIN runs in a transaction of its own.
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute("EXPLAIN (FORMAT JSON) " + sql)
        plan = cursor.fetchone()[0]
        cursor.execute("SET LOCAL enable_seqscan = on")
    return _whole_reads(plan)


def generic_whole_table_reads(sql: str, types: list[str], values: list) -> list[str]:
    """As :func:`whole_table_reads`, for the generic plan of ``sql`` (parameters ``$1``…, of
    the given ``types``) run with ``values``: the plan a prepared statement runs whatever its
    parameters, as the pruner's transaction asks for (``plan_cache_mode =
    force_generic_plan``). Planned afresh here, with sequential scans priced out."""
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute("SET LOCAL plan_cache_mode = force_generic_plan")
        cursor.execute(f"PREPARE versions_plan_check ({', '.join(types)}) AS {sql}")
        args = ", ".join(["%s"] * len(values))
        cursor.execute(f"EXPLAIN (FORMAT JSON) EXECUTE versions_plan_check({args})", values)
        plan = cursor.fetchone()[0]
        cursor.execute("DEALLOCATE versions_plan_check")
    return _whole_reads(plan)


def _whole_reads(plan: object) -> list[str]:
    plan = json.loads(plan) if isinstance(plan, str) else plan
    assert isinstance(plan, list)
    found: list[str] = []

    def walk(node: dict) -> None:
        table = node.get("Relation Name", "")
        if table in GROWING:
            kind = node["Node Type"]
            narrowed = "Index Cond" in node or kind == "Bitmap Heap Scan"
            if kind == "Seq Scan" or (kind.startswith("Index") and not narrowed):
                found.append(f"{kind} on {table}")
        for child in node.get("Plans", []):
            walk(child)

    walk(plan[0]["Plan"])
    return found


def _app(slug: str) -> tuple[App, list[str]]:
    app = App.objects.create(slug=slug, name=slug)
    sets = []
    for i in range(6):
        for name in ("index", "about"):
            receipt = services.write_artifact(
                app,
                "pltf_page",
                name,
                f"<p>{slug} {name} {i}</p>\n" * 30,
                requested_by="agent",
                tool="t",
                run_id=f"run-{i}",
            )
        sets.append(receipt.change_set_id)
    return app, sets


@pytest.mark.postgres
def test_no_panel_page_reads_a_whole_table_of_every_apps_rows():
    client = Client()
    client.force_login(User.objects.create_superuser("boss", "b@example.com", "pw-123456"))
    _app("other")
    app, sets = _app("shop")
    services.mark_release(sets[1], by="person")
    services.restore_change_set(sets[-1], by="person")
    base = f"/apps/{app.slug}/versions/"
    urls = [
        base,
        f"{base}?q=index",
        f"{base}points/",
        f"{base}change-sets/{sets[-1]}/",
        f"{base}since-release/",
        reverse("versions:compare", args=[app.slug, f"{sets[0]}...{sets[-1]}"]),
    ]
    offenders = []
    for url in urls:
        clear_cache()
        with CaptureQueriesContext(connection) as captured:
            response = client.get(url)
        assert response.status_code == 200, (url, response.content[:300])
        for query in captured.captured_queries:
            sql = query["sql"]
            if not sql.lstrip().upper().startswith(("SELECT", "WITH")):
                continue
            offenders += [f"{url}: {read} in {sql[:300]}" for read in whole_table_reads(sql)]
    assert not offenders, "\n".join(offenders)


@pytest.mark.postgres
def test_the_check_finds_a_whole_table_read():
    # The helper itself: a query that no index narrows is found.
    assert whole_table_reads("SELECT COUNT(*) FROM versions_restorepoint WHERE tool = 'x'") == [
        "Seq Scan on versions_restorepoint"
    ]
    assert whole_table_reads("SELECT id FROM versions_restorepoint WHERE app_id = 1") == []
    # And in a generic plan.
    sql = "SELECT COUNT(*) FROM versions_restorepoint WHERE tool = $1"
    assert generic_whole_table_reads(sql, ["text"], ["x"]) == ["Seq Scan on versions_restorepoint"]
    sql = "SELECT id FROM versions_restorepoint WHERE app_id = $1"
    assert generic_whole_table_reads(sql, ["bigint"], [1]) == []


def test_a_write_that_prunes_reads_no_whole_table_on_sqlite(settings):
    """SQLite's planner, given statistics where most blobs are full copies, scanned every
    app's blobs in the sweep's "does a delta still need it?" check (the index on ``base`` held
    every full copy under NULL); the statements of a write that prunes all search an index."""
    if connection.vendor != "sqlite":
        pytest.skip("SQLite's own plans (PostgreSQL's are checked above)")
    settings.VERSIONS_POINTS_PER_APP = 3
    # Other apps' blobs, full copies, as a shared database holds thousands of (the planner's
    # statistics must see a big table for its choices to be the big database's).
    Blob.objects.bulk_create(
        Blob(
            sha256=hashlib.sha256(b"%d" % i).hexdigest(), data=b"%05d" % i * 40, size=200, chars=200
        )
        for i in range(5000)
    )
    app = App.objects.create(slug="shop", name="Shop")
    text = "".join(f".rule-{i} {{ color: #{i:06x}; }}\n" for i in range(300))
    for i in range(6):  # deltas against the first full copy
        services.write_artifact(
            app, "pltf_stylesheet", "App", text + f"/* {i} */\n", requested_by="x", tool="t"
        )
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    with CaptureQueriesContext(connection) as captured:
        services.write_artifact(
            app, "pltf_stylesheet", "App", text + "/* last */\n", requested_by="x", tool="t"
        )
    assert any(q["sql"].startswith("DELETE FROM") for q in captured.captured_queries)
    scans = []
    with connection.cursor() as cursor:
        for query in captured.captured_queries:
            sql = query["sql"]
            if not sql.lstrip().upper().startswith(("SELECT", "WITH", "DELETE", "UPDATE")):
                continue
            # The engine's tables, by name or by the alias a statement gives them.
            names = GROWING | set(re.findall(r'"?versions_\w+"? AS (\w+)', sql))
            cursor.execute("EXPLAIN QUERY PLAN " + sql)
            plan = cursor.fetchall()
            scans += [
                f"{row[3]} in {sql[:200]}"
                for row in plan
                if row[3].startswith("SCAN ") and row[3].split()[1] in names
            ]
    assert not scans, "\n".join(scans)


# --- hot apps, with the statistics of a shared database -----------------------------------------

OTHER_APPS = 200
OTHER_SETS = 30  # per other app, of OTHER_POINTS / OTHER_SETS points each
OTHER_POINTS = 60
OTHER_ARTIFACTS = 12


def _fill_other_apps(
    apps_n: int = OTHER_APPS,
    sets_n: int = OTHER_SETS,
    points_n: int = OTHER_POINTS,
    artifacts_n: int = OTHER_ARTIFACTS,
) -> None:
    """Other apps' history with bulk inserts: artifacts, sets, points, a blob each; the hot app
    built afterwards through the services is then a few percent of every table's rows."""
    from datetime import UTC, datetime, timedelta

    from versions.models import Artifact, ChangeSet, RestorePoint

    now = datetime.now(UTC) - timedelta(days=3)
    apps = App.objects.bulk_create(
        [App(slug=f"other-{i}", name=f"Other {i}") for i in range(apps_n)]
    )
    blobs, artifacts, sets, points = [], [], [], []
    for a, app in enumerate(apps):
        text = f"<p>other {a}</p>\n" * 20
        sha = hashlib.sha256(text.encode()).hexdigest()
        blobs.append(Blob(sha256=sha, data=text.encode(), size=len(text), chars=len(text)))
        for n in range(artifacts_n):
            artifacts.append(
                Artifact(
                    app=app, collection="pltf_page", name=f"page-{n}", blob_id=sha, sha256=sha,
                    size=len(text), updated_on=now,
                )
            )  # fmt: skip
        for s in range(sets_n):
            sets.append(
                ChangeSet(id=f"cs_o{a}_{s}", app=app, kind="change", created_on=now, run_id=f"r{s}")
            )
    Blob.objects.bulk_create(blobs)
    Artifact.objects.bulk_create(artifacts)
    ChangeSet.objects.bulk_create(sets)
    arts = {(x.app_id, x.name): x.pk for x in Artifact.objects.filter(app__in=apps)}
    per_set = points_n // sets_n
    versions = []  # each point's own earlier version, as a busy app's history holds
    for a, app in enumerate(apps):
        sha = blobs[a].sha256
        for p in range(points_n):
            text = f"<p>other {a} version {p}</p>\n" * 20
            earlier = hashlib.sha256(text.encode()).hexdigest()
            versions.append(
                Blob(sha256=earlier, data=text.encode(), size=len(text), chars=len(text))
            )
            points.append(
                RestorePoint(
                    id=f"rp_o{a}_{p}", app=app, artifact_id=arts[(app.pk, f"page-{p % artifacts_n}")],
                    kind="capture", previous_blob_id=earlier, previous_sha256=earlier,
                    previous_existed=True, source_stored=True, new_sha256=sha,
                    requested_by="bulk", tool="bulk", created_on=now + timedelta(seconds=p),
                    change_set_id=f"cs_o{a}_{p // per_set}", lines_added=1, lines_removed=1,
                )
            )  # fmt: skip
    Blob.objects.bulk_create(versions, batch_size=2000)
    RestorePoint.objects.bulk_create(points, batch_size=2000)


def _hot_app(slug: str) -> tuple[App, list[str]]:
    """An app written by turns of many writes over many artifacts, its release in the middle."""
    app = App.objects.create(slug=slug, name=slug)
    sets = []
    for turn in range(30):
        for n in range(12):
            receipt = services.write_artifact(
                app,
                "pltf_page",
                f"page-{(turn * 5 + n) % 48}",
                f"<p>{slug} turn {turn} write {n}</p>\n" * 12,
                requested_by="agent",
                tool=f"tool-{n % 3}",
                run_id=f"turn-{turn}",
            )
        sets.append(receipt.change_set_id)
    services.mark_release(sets[12], by="person")
    services.restore_change_set(sets[-1], by="person")
    return app, sets


def _plan_nodes(sql: str, *, seqscan: bool) -> list[str]:
    """What the plan of ``sql`` reads of every app's rows: a Seq Scan of a growing table, or
    an index scan not narrowed by a condition (the planner's own choice when ``seqscan``: a
    table that holds a few pages, which the fill leaves small, is read whole by any planner)."""
    with transaction.atomic(), connection.cursor() as cursor:
        if not seqscan:
            cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute("EXPLAIN (FORMAT JSON) " + sql)
        plan = cursor.fetchone()[0]
        cursor.execute(
            "SELECT relname FROM pg_class WHERE relname LIKE 'versions%%' AND relpages < 8"
        )
        small = {row[0] for row in cursor.fetchall()} if seqscan else set()
    return [read for read in _whole_reads(plan) if read.rsplit(" ", 1)[-1] not in small]


@pytest.mark.postgres
@pytest.mark.parametrize("statistics", ["seqscan priced out", "realistic statistics"])
def test_a_hot_apps_panel_reads_only_its_rows(settings, statistics):
    """A hot app (hundreds of writes in turns of a dozen, over 48 artifacts) among other apps
    that hold most of every table's rows: each query of each panel page reads only the hot
    app's rows, whether sequential scans are priced out or the planner goes by the statistics
    of the tables as they are (ANALYZEd: the hot app is a few percent of them)."""
    settings.VERSIONS_POINTS_PER_APP = 1000
    _fill_other_apps()
    app, sets = _hot_app("hot")
    User.objects.create_superuser("boss", "b@example.com", "pw-123456")
    User.objects.create_user("member", password="pw-123456")
    # A member of the hot app and of 30 others: the apps list of someone who sees many apps.
    for slug in ["hot", *(f"other-{i}" for i in range(30))]:
        services.add_member(slug, role="viewer", username="member", by="boss")
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    base = f"/apps/{app.slug}/versions/"
    urls = [
        base,
        f"{base}?page=2",
        f"{base}?q=page-1",
        f"{base}points/",
        f"{base}points/?page=3",
        f"{base}change-sets/{sets[-2]}/",
        f"{base}since-release/",
        "/",
    ]
    offenders = []
    for who in ("boss", "member"):
        client = Client()
        client.force_login(User.objects.get(username=who))
        for url in urls:
            clear_cache()
            with CaptureQueriesContext(connection) as captured:
                response = client.get(url)
            assert response.status_code == 200, (url, response.content[:300])
            for query in captured.captured_queries:
                sql = query["sql"]
                if not sql.lstrip().upper().startswith(("SELECT", "WITH")):
                    continue
                reads = _plan_nodes(sql, seqscan=statistics == "realistic statistics")
                offenders += [f"{who} {url}: {read} in {sql[:400]}" for read in reads]
                # The apps a member sees travel as a subquery, not as a list of every id.
                if re.search(r"IN \((\d+, ){20,}", sql):
                    offenders.append(f"{who} {url}: a literal list of ids in {sql[:200]}")
    assert not offenders, "\n".join(sorted(set(offenders)))


def _artifact_rows_read() -> int:
    """Rows of the artifact table this transaction has read so far (PostgreSQL's own count)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT COALESCE(seq_tup_read, 0) + COALESCE(idx_tup_fetch, 0) "
            "FROM pg_stat_xact_user_tables WHERE relname = 'versions_artifact'"
        )
        row = cursor.fetchone()
    return int(row[0]) if row else 0


@pytest.mark.postgres
def test_a_write_at_the_limit_reads_only_the_artifacts_it_prunes(settings):
    """A write that prunes in an app of 150 artifacts reads a few artifact rows (its own, and
    those of the points it prunes), never every artifact of the app: the pruner's lock step
    once walked all of them (in the generic plan its transaction runs)."""
    settings.VERSIONS_POINTS_PER_APP = 40
    settings.VERSIONS_SWEEP_BATCH = 4
    # The statistics of a shared database: an app has a few artifacts and a hundred points.
    _fill_other_apps(apps_n=300, sets_n=20, points_n=100, artifacts_n=4)
    app = App.objects.create(slug="wide", name="Wide")

    def write(n: int, text: str) -> None:
        services.write_artifact(
            app, "pltf_page", f"page-{n}", text, requested_by="agent", tool="t", run_id=text
        )

    for n in range(150):
        write(n, f"first {n}")
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    for i in range(12):  # at the limit: every write prunes, one in four settles
        write(i % 150, f"second {i}")
    reads = []
    for i in range(12, 24):
        before = _artifact_rows_read()
        write(i % 150, f"second {i}")
        reads.append(_artifact_rows_read() - before)
    assert max(reads) <= 12, reads
