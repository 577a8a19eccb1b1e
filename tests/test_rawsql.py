"""The raw SQL path (versions.rawsql): query-count tests see the statements production runs.

When queries are logged (assertNumQueries, CaptureQueriesContext, DEBUG) the capture's
statements still run on the driver's own cursor — not through Django's cursor, as they did
before — and log themselves, so a query-count test counts the path production takes.
"""

from __future__ import annotations

import re

import pytest
from django.db import connection
from django.db.backends import utils
from django.test.utils import CaptureQueriesContext

from versions import services
from versions.models import App

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def django_cursor_calls(monkeypatch) -> list[str]:
    """Every statement that goes through Django's cursor wrapper."""
    calls: list[str] = []
    for wrapper in (utils.CursorWrapper, utils.CursorDebugWrapper):
        real = wrapper.execute

        def spy(self, sql, params=None, _real=real):
            calls.append(str(sql))
            return _real(self, sql, params)

        monkeypatch.setattr(wrapper, "execute", spy)
    return calls


def test_a_logged_write_runs_on_the_raw_path_and_is_counted(django_cursor_calls):
    app = App.objects.create(slug="quotes", name="Quotes")
    services.write_artifact(app, "pltf_page", "index", "v1\n", requested_by="a", tool="t")
    django_cursor_calls.clear()
    with CaptureQueriesContext(connection) as captured:
        services.write_artifact(app, "pltf_page", "index", "v2\n", requested_by="a", tool="t")
    logged = [q["sql"] for q in captured.captured_queries]
    writes = [sql for sql in logged if sql.startswith(("INSERT", "UPDATE", "WITH"))]
    # The blob, the change set, its event (inserted only when a webhook or an email takes it,
    # docs/architecture.md#notifications; on PostgreSQL ``WITH made AS (INSERT …) INSERT …``,
    # which enqueues its delivery with it), the point and the artifact: each logged once...
    assert [re.search(r"(?:INSERT INTO|UPDATE) (\S+)", w)[1] for w in writes] == [
        '"versions_blob"',
        '"versions_changeset"',
        '"versions_webhookevent"',
        '"versions_restorepoint"',
        '"versions_artifact"',
    ]
    # ...and none of them went through Django's cursor (only its own BEGIN, on SQLite).
    assert not [sql for sql in django_cursor_calls if sql.startswith(("INSERT", "UPDATE"))]
    assert all(not sql.startswith("SELECT") for sql in django_cursor_calls)


def test_the_logged_statements_carry_their_values_but_not_source_bytes():
    app = App.objects.create(slug="quotes", name="Quotes")
    with CaptureQueriesContext(connection) as captured:
        services.write_artifact(app, "pltf_page", "index", "secret\n", requested_by="a", tool="t")
    blob = next(
        q["sql"]
        for q in captured.captured_queries
        if q["sql"].startswith('INSERT INTO "versions_blob"')
    )
    assert "bytes>'" in blob and "secret" not in blob and "%s" not in blob


def _follow(statements, on_error):
    """Run ``statements`` as the transaction that follows a committed one (PostgreSQL)."""
    from django.db import transaction

    from versions import rawsql

    with transaction.atomic(), rawsql.batch(begin=True, commit=True) as block:
        assert block.can_follow
        rawsql.execute("SELECT 1", [])
        block.follow(statements, on_error=on_error)


@pytest.mark.postgres
@pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's pipeline")
def test_the_transaction_that_follows_a_commit_is_one_transaction_to_its_end():
    """Its statements share one transaction: a transaction-level lock taken by the first is
    still held by the last, and released once it ended; a failure undoes all of them."""
    import psycopg

    with connection.cursor() as cursor:
        cursor.execute("CREATE TABLE IF NOT EXISTS versions_test_followed (n int)")
    errors: list[Exception] = []
    held = "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid()"
    try:
        _follow(
            [
                ("SELECT pg_advisory_xact_lock(%s, %s)", [7, 8]),
                (f"INSERT INTO versions_test_followed (n) {held}", []),
            ],
            errors.append,
        )
        _follow(
            [
                ("INSERT INTO versions_test_followed (n) VALUES (%s)", [99]),
                ("SELECT 1 / 0", []),
            ],
            errors.append,
        )
        with connection.cursor() as cursor:
            cursor.execute("SELECT n FROM versions_test_followed ORDER BY n")
            assert cursor.fetchall() == [(1,)]  # the lock was held; the failed one left nothing
            cursor.execute(held)
            assert cursor.fetchone() == (0,)
        assert len(errors) == 1 and isinstance(errors[0], psycopg.errors.DivisionByZero)
        assert connection.connection.pgconn.transaction_status == (
            psycopg.pq.TransactionStatus.IDLE
        )
    finally:
        with connection.cursor() as cursor:
            cursor.execute("DROP TABLE IF EXISTS versions_test_followed")


@pytest.fixture
def django_cursor_many(monkeypatch) -> list[str]:
    """Every statement that goes through Django's cursor wrapper as an ``executemany``."""
    calls: list[str] = []
    for wrapper in (utils.CursorWrapper, utils.CursorDebugWrapper):
        real = wrapper.executemany

        def spy(self, sql, param_list, _real=real):
            calls.append(str(sql))
            return _real(self, sql, param_list)

        monkeypatch.setattr(wrapper, "executemany", spy)
    return calls


def test_a_logged_restore_runs_on_the_raw_path_and_is_counted(
    django_cursor_calls, django_cursor_many
):
    app = App.objects.create(slug="quotes", name="Quotes")
    for name in ("index", "about"):
        services.write_artifact(app, "pltf_page", name, "v1\n", requested_by="a", tool="t")
    for name in ("index", "about"):
        receipt = services.write_artifact(
            app, "pltf_page", name, "v2\n", requested_by="a", tool="t", run_id="turn"
        )
    # An action the audit trail keeps first: the chain's head exists before the restore.
    services.name_change_set(receipt.change_set_id, "Agent turn", by="rvaid")
    django_cursor_calls.clear()
    with CaptureQueriesContext(connection) as captured:
        restored = services.restore_change_set(receipt.change_set_id, by="rvaid")
    assert restored.kind == "restore" and len(restored.items) == 2
    logged = [q["sql"] for q in captured.captured_queries]
    writes = [
        written[1]
        for sql in logged
        if re.match(r"(?:\d+ times: )?(?:INSERT|UPDATE|WITH)", sql)
        and (written := re.search(r"(?:INSERT INTO|UPDATE) (\S+)", sql))
    ]
    # The restore set, its two counter-points and two re-points (one prepared statement run
    # twice on SQLite, one statement on PostgreSQL), the set it acted on closing, the audit
    # event, the chain's head and the event for webhooks (stored only when one takes it; on
    # PostgreSQL ``WITH made AS (INSERT …)``): each logged...
    assert writes == [
        '"versions_changeset"',
        '"versions_restorepoint"',
        '"versions_artifact"',
        '"versions_changeset"',
        '"versions_auditevent"',
        '"versions_auditchainhead"',
        '"versions_webhookevent"',
    ]
    if connection.vendor == "sqlite":
        assert [sql[:8] for sql in logged if " times: " in sql] == ["2 times:", "2 times:"]
    # ...and none of them went through Django's cursor.
    through_django = django_cursor_calls + django_cursor_many
    assert not [sql for sql in through_django if sql.startswith(("INSERT", "UPDATE"))]
    assert all(not sql.startswith("SELECT") for sql in django_cursor_calls)


def test_execute_many_runs_a_statement_for_every_row_and_logs_it_once():
    from versions import rawsql

    apps = [App.objects.create(slug=f"app-{i}", name=f"App {i}") for i in range(3)]
    with CaptureQueriesContext(connection) as captured:
        rawsql.execute_many(
            'UPDATE "versions_app" SET name = %s WHERE id = %s',
            [(f"Renamed {app.pk}", app.pk) for app in apps],
        )
    assert sorted(App.objects.values_list("name", flat=True)) == [
        f"Renamed {app.pk}" for app in apps
    ]
    assert [q["sql"] for q in captured.captured_queries] == [
        '3 times: UPDATE "versions_app" SET name = %s WHERE id = %s'
    ]


@pytest.mark.postgres
@pytest.mark.skipif(connection.vendor != "postgresql", reason="psycopg's placeholder conversion")
def test_a_restore_of_many_artifacts_converts_no_statement_on_every_run(monkeypatch):
    """psycopg converts a ``%s`` statement to ``$1`` form on every run unless it is under 4 KB;
    a Restore all of 100 artifacts sends its counter-points and re-points as one statement
    each, longer than that. Converted once by rawsql, a second restore converts nothing."""
    import psycopg._queries

    app = App.objects.create(slug="quotes", name="Quotes")
    for turn in ("before", "turn"):
        for i in range(100):
            receipt = services.write_artifact(
                app, "pltf_stylesheet", f"sheet-{i}", f"/* {turn} */ .r{i} {{}}\n",
                requested_by="a", tool="t", run_id=turn,
            )  # fmt: skip
    services.name_change_set(receipt.change_set_id, "Agent turn", by="rvaid")
    first = services.restore_change_set(receipt.change_set_id, by="rvaid")
    services.restore_change_set(first.set_id, by="rvaid")  # back to the turn's state

    converted: list[int] = []
    real = psycopg._queries._split_query

    def counting(query, *args, **kwargs):
        converted.append(len(query))
        return real(query, *args, **kwargs)

    monkeypatch.setattr(psycopg._queries, "_split_query", counting)
    again = services.restore_change_set(receipt.change_set_id, by="rvaid")
    assert again.kind == "restore" and len(again.items) == 100
    assert converted == []
