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
