"""Fault injection: a database error at any write of a restore leaves everything as before.

The faults are real database errors, raised by a trigger on the k-th artifact row the restore
updates (or on the counter-point insert), so they hit wherever the engine does its writes.
"""

from __future__ import annotations

import json

import pytest
from django.db import DatabaseError, connection

from versions.models import API_ROUTE, PAGE, STYLESHEET, Artifact, ChangeSet, RestorePoint
from versions.services import (
    restore_change_set,
    write_artifact,
)

NAMES = [
    (PAGE, "index"),
    (STYLESHEET, "App"),
    (API_ROUTE, "quotes"),
    (PAGE, "about"),
    (API_ROUTE, "offers"),
]


def source(collection, name, version):
    if collection == API_ROUTE:
        return json.dumps({"method": "GET", "path": f"/{name}/{version}", "body": version})
    return f"{name} {version}\n" * 3


@pytest.fixture
def turn(app):
    for collection, name in NAMES:
        write_artifact(
            app,
            collection,
            name,
            source(collection, name, "v1"),
            requested_by="a",
            tool="t",
            run_id="setup",
        )
    set_id = None
    for collection, name in NAMES:
        r = write_artifact(
            app,
            collection,
            name,
            source(collection, name, "v2"),
            requested_by="a",
            tool="t",
            run_id="turn",
        )
        set_id = set_id or r.change_set_id
    return app, set_id


def snapshot(app):
    return (
        list(
            Artifact.objects.filter(app=app)
            .order_by("pk")
            .values_list(
                "name", "blob_id", "sha256", "deleted", "route_key", "updated_on", "updated_by"
            )
        ),
        sorted(RestorePoint.objects.values_list("id", flat=True)),
        sorted(ChangeSet.objects.values_list("id", flat=True)),
        App_generation(app),
    )


def App_generation(app):
    app.refresh_from_db()
    return app.route_generation


def install_fault(*, table: str, event: str, condition: str) -> None:
    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            cursor.execute(
                f"CREATE TRIGGER inject_fault BEFORE {event} ON {table} "
                f"WHEN {condition} BEGIN SELECT RAISE(ABORT, 'injected fault'); END"
            )
        else:
            cursor.execute(
                "CREATE OR REPLACE FUNCTION inject_fault() RETURNS trigger AS $$ "
                "BEGIN RAISE EXCEPTION 'injected fault'; END $$ LANGUAGE plpgsql"
            )
            cursor.execute(
                f"CREATE TRIGGER inject_fault BEFORE {event} ON {table} FOR EACH ROW "
                f"WHEN ({condition}) EXECUTE FUNCTION inject_fault()"
            )


def remove_fault(table: str) -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            "DROP TRIGGER inject_fault" + ("" if connection.vendor == "sqlite" else f" ON {table}")
        )


@pytest.mark.parametrize("k", range(1, len(NAMES) + 1))
def test_a_database_error_at_write_k_leaves_every_artifact_and_point_as_before(turn, k):
    app, set_id = turn
    # The engine writes in primary-key order; the k-th row it updates fails.
    order = list(Artifact.objects.filter(app=app).order_by("pk").values_list("name", flat=True))
    before = snapshot(app)
    table = Artifact._meta.db_table
    install_fault(table=table, event="UPDATE", condition=f"NEW.name = '{order[k - 1]}'")
    try:
        with pytest.raises(DatabaseError):
            restore_change_set(set_id, by="rvaid")
    finally:
        remove_fault(table)

    assert snapshot(app) == before
    # And with the fault gone, the same restore goes through.
    receipt = restore_change_set(set_id, by="rvaid")
    assert len(receipt.items) == len(NAMES)


def test_a_database_error_at_the_counter_point_insert_writes_nothing(turn):
    app, set_id = turn
    before = snapshot(app)
    table = RestorePoint._meta.db_table
    install_fault(table=table, event="INSERT", condition="NEW.kind = 'counter'")
    try:
        with pytest.raises(DatabaseError):
            restore_change_set(set_id, by="rvaid")
    finally:
        remove_fault(table)

    assert snapshot(app) == before


def test_a_database_error_storing_the_restore_set_writes_nothing(turn):
    app, set_id = turn
    before = snapshot(app)
    table = ChangeSet._meta.db_table
    install_fault(table=table, event="INSERT", condition="NEW.kind = 'restore'")
    try:
        with pytest.raises(DatabaseError):
            restore_change_set(set_id, by="rvaid")
    finally:
        remove_fault(table)

    assert snapshot(app) == before


@pytest.mark.parametrize("k", range(1, len(NAMES) + 1))
def test_an_error_in_the_kth_route_save_or_artifact_write_call_writes_nothing(turn, k, monkeypatch):
    """The same, injected at the Python call the engine makes per written artifact."""
    from fault_points import restore_engine as engine

    app, set_id = turn
    before = snapshot(app)
    calls = {"n": 0}
    real_save, real_many = engine.routes.save_route, engine.repoint_many

    def counting_save(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == k:
            raise DatabaseError("injected fault")
        return real_save(*args, **kwargs)

    def counting_many(rows, **kwargs):
        for i in range(len(rows)):
            calls["n"] += 1
            if calls["n"] == k:
                real_many(rows[:i], **kwargs)
                raise DatabaseError("injected fault")
        return real_many(rows, **kwargs)

    monkeypatch.setattr(engine.routes, "save_route", counting_save)
    monkeypatch.setattr(engine, "repoint_many", counting_many)

    with pytest.raises(DatabaseError):
        restore_change_set(set_id, by="rvaid")

    assert snapshot(app) == before
