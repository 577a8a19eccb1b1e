"""A plan's statements on PostgreSQL travel together where no reply is awaited: its outcome
(audit event, webhook event) and, for a move of production, its event and the pointer go with
the COMMIT, and a move's lock with the BEGIN — one round trip, not one each — and a failure
among them still leaves everything as it was.

These run outside the test's own transaction (``transaction=True``), so the plan's
transaction is the connection's outermost one, as it is in a request.
"""

from __future__ import annotations

import pytest
from django.db import DatabaseError, connection
from pg_helpers import assert_connection_clean, committed, committed_source, round_trips

from versions import services
from versions.models import PAGE, App

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def write(app: App, name: str, source: str, run_id: str):
    return services.write_artifact(
        app, PAGE, name, source, requested_by="agent", tool="test", run_id=run_id
    )


@pytest.fixture
def promoted() -> tuple[App, str, str]:
    """An app promoted twice: (app, the first deployment, the second)."""
    app = App.objects.create(slug="top", name="Top level")
    for name in ("index", "about"):
        write(app, name, f"{name} v1\n", "first")
    first = services.promote(app, by="test").deployment_id
    for name in ("index", "about"):
        write(app, name, f"{name} v2\n", "second")
    second = services.promote(app, by="test").deployment_id
    return app, first, second


def production(app: App) -> str:
    return committed("SELECT production_id FROM versions_app WHERE id = %s", [app.pk])[0]


def audit_count() -> int:
    return committed("SELECT count(*) FROM versions_auditevent", [])[0]


def fail_audit_appends() -> None:
    """A real database error at the audit event's insert: the tail's first write."""
    with connection.cursor() as cursor:
        cursor.execute(
            "CREATE OR REPLACE FUNCTION inject_fault() RETURNS trigger AS $$ "
            "BEGIN RAISE EXCEPTION 'injected fault'; END $$ LANGUAGE plpgsql"
        )
        cursor.execute(
            "CREATE TRIGGER inject_fault BEFORE INSERT ON versions_auditevent "
            "FOR EACH ROW EXECUTE FUNCTION inject_fault()"
        )


def heal_audit_appends() -> None:
    with connection.cursor() as cursor:
        cursor.execute("DROP TRIGGER inject_fault ON versions_auditevent")


def test_a_rollback_takes_four_round_trips_and_commits(promoted):
    app, first, second = promoted
    # Statements are prepared from their second run on a connection: run it twice first.
    services.rollback_production(app, by="test")
    services.rollback_production(app, by="test", to=second)
    events = audit_count()

    rolled = []
    trips = round_trips(lambda: rolled.append(services.rollback_production(app, by="test")))

    # BEGIN with the app's lock; the move it undoes; its event, the pointer and the audit
    # trail's head; the audit event, the webhook event and COMMIT (eleven before).
    assert trips == 4
    assert rolled[0].deployment_id == first
    assert production(app) == first
    assert audit_count() == events + 1
    assert_connection_clean()
    assert services.rollback_production(app, by="test", to=second).deployment_id == second
    assert production(app) == second


def test_a_restore_sends_its_outcome_with_its_commit(promoted):
    app, _first, _second = promoted
    turn = write(app, "index", "index v3\n", "third").change_set_id
    services.restore_change_set(turn, by="test")  # prepared from the second run
    again = write(app, "index", "index v4\n", "fourth").change_set_id
    events = audit_count()

    restored = []
    trips = round_trips(lambda: restored.append(services.restore_change_set(again, by="test")))

    # The audit trail's head is read with the foreign-key checks; the audit event, the
    # chain's head, the webhook event and COMMIT go in one round trip (sixteen in all before).
    assert trips == 12
    assert restored[0].kind == "restore"
    assert audit_count() == events + 1
    assert committed_source("index", app) == "index v2\n"  # as before the fourth turn
    assert_connection_clean()


def test_a_failure_in_a_rollbacks_last_statements_leaves_production_where_it_was(promoted):
    app, first, second = promoted
    events = audit_count()
    fail_audit_appends()
    try:
        with pytest.raises(DatabaseError, match="injected fault"):
            services.rollback_production(app, by="test")
        assert production(app) == second  # the pointer, sent before it, went back with it
        assert audit_count() == events
        assert_connection_clean()
    finally:
        heal_audit_appends()
    app.refresh_from_db()
    assert app.production_id == second
    # The connection is fine for the next one.
    assert services.rollback_production(app, by="test").deployment_id == first
    assert production(app) == first


def test_a_failure_in_a_restores_last_statements_writes_nothing(promoted):
    app, _first, _second = promoted
    turn = write(app, "index", "index v3\n", "third").change_set_id
    events = audit_count()
    fail_audit_appends()
    try:
        with pytest.raises(DatabaseError, match="injected fault"):
            services.restore_change_set(turn, by="test")
        assert committed_source("index", app) == "index v3\n"
        assert audit_count() == events
        assert_connection_clean()
    finally:
        heal_audit_appends()
    assert services.restore_change_set(turn, by="test").kind == "restore"
