"""Concurrent restores and writes on PostgreSQL (docs/architecture.md#restore): they queue on the
artifact rows.

Each test forces the interleaving it is about: one side pauses while it holds its row locks,
and the other side starts meanwhile.
"""

from __future__ import annotations

import threading
import time

import pytest
from django.db import connection, connections
from fault_points import capture_engine as capture
from fault_points import restore_engine as engine

from versions.errors import PreflightFailed
from versions.messages import NOOP_MESSAGE
from versions.models import PAGE, STYLESHEET, App, Artifact, ChangeSet, RestorePoint
from versions.services import (
    restore_change_set,
    write_artifact,
)

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

HOLD = 0.5  # seconds one side keeps its locks


def run_in_thread(func, results, key):
    def target():
        try:
            results[key] = func()
        except Exception as exc:  # the test inspects it
            results[key] = exc
        finally:
            connections.close_all()

    thread = threading.Thread(target=target)
    thread.start()
    return thread


def setup_turn() -> tuple[App, str]:
    app = App.objects.create(slug="race", name="Race")
    for run, version in (("setup", "v1"), ("turn", "v2")):
        for collection, name in ((PAGE, "index"), (STYLESHEET, "App"), (PAGE, "about")):
            receipt = write_artifact(
                app,
                collection,
                name,
                f"{name} {version}\n",
                requested_by="a",
                tool="t",
                run_id=run,
            )
    return app, receipt.change_set_id  # type: ignore[return-value]


def source(app, name):
    return Artifact.objects.get(app=app, name=name).source


def test_two_restore_alls_of_one_set_at_once_write_once_and_the_other_says_noop(monkeypatch):
    app, set_id = setup_turn()
    points_before = RestorePoint.objects.count()
    inside = threading.Event()
    real_insert = engine._insert_counter_points

    def slow_insert(points):
        inside.set()  # this restore holds every row lock of the set now
        time.sleep(HOLD)
        return real_insert(points)

    monkeypatch.setattr(engine, "_insert_counter_points", slow_insert)
    results: dict = {}
    first = run_in_thread(lambda: restore_change_set(set_id, by="alice"), results, "first")
    assert inside.wait(10)
    second = run_in_thread(lambda: restore_change_set(set_id, by="bob"), results, "second")
    first.join(20)
    second.join(20)

    assert results["first"].kind == "restore", results["first"]
    assert results["second"].kind == "noop", results["second"]
    assert results["second"].message == NOOP_MESSAGE
    assert RestorePoint.objects.count() == points_before + 3
    assert RestorePoint.objects.filter(kind=RestorePoint.COUNTER).count() == 3
    assert ChangeSet.objects.filter(kind=ChangeSet.RESTORE).count() == 1
    assert source(app, "index") == "index v1\n"


def test_many_simultaneous_restore_alls_leave_exactly_one_restore_set():
    app, set_id = setup_turn()
    barrier = threading.Barrier(6)
    results: dict = {}

    def go():
        barrier.wait()
        return restore_change_set(set_id, by="clicker")

    threads = [run_in_thread(go, results, i) for i in range(6)]
    for thread in threads:
        thread.join(30)

    kinds = sorted(r.kind if hasattr(r, "kind") else repr(r) for r in results.values())
    assert kinds == ["noop"] * 5 + ["restore"]
    assert RestorePoint.objects.filter(kind=RestorePoint.COUNTER).count() == 3
    assert all(source(app, n) == f"{n} v1\n" for n in ("index", "App", "about"))


def reviewed_now(app) -> dict[str, str]:
    return {f"{a.collection}/{a.name}": a.sha256 for a in Artifact.objects.filter(app=app)}


def test_a_restore_that_starts_during_an_agent_write_refuses_on_drift(monkeypatch):
    app, set_id = setup_turn()
    reviewed = reviewed_now(app)
    inside = threading.Event()
    real_apply = capture.apply_source

    def slow_apply(*args, **kwargs):
        real_apply(*args, **kwargs)
        inside.set()  # the agent's write holds the row lock, not yet committed
        time.sleep(HOLD)

    monkeypatch.setattr(capture, "apply_source", slow_apply)
    results: dict = {}
    agent = run_in_thread(
        lambda: write_artifact(app, PAGE, "index", "agent v3\n", requested_by="agent", tool="t"),
        results,
        "agent",
    )
    assert inside.wait(10)
    person = run_in_thread(
        lambda: restore_change_set(set_id, by="person", expected=reviewed), results, "person"
    )
    agent.join(20)
    person.join(20)

    assert not isinstance(results["agent"], Exception), results["agent"]
    assert isinstance(results["person"], PreflightFailed), results["person"]
    assert [f.name for f in results["person"].receipt.findings] == ["index"]
    assert source(app, "index") == "agent v3\n"
    assert source(app, "App") == "App v2\n"  # nothing of the refused restore was written


def test_an_agent_write_that_starts_during_a_restore_lands_after_it(monkeypatch):
    app, set_id = setup_turn()
    reviewed = reviewed_now(app)
    inside = threading.Event()
    real_insert = engine._insert_counter_points

    def slow_insert(points):
        inside.set()
        time.sleep(HOLD)
        return real_insert(points)

    monkeypatch.setattr(engine, "_insert_counter_points", slow_insert)
    results: dict = {}
    person = run_in_thread(
        lambda: restore_change_set(set_id, by="person", expected=reviewed), results, "person"
    )
    assert inside.wait(10)
    agent = run_in_thread(
        lambda: write_artifact(app, PAGE, "index", "agent v3\n", requested_by="agent", tool="t"),
        results,
        "agent",
    )
    person.join(20)
    agent.join(20)

    assert results["person"].kind == "restore", results["person"]
    receipt = results["agent"]
    assert not isinstance(receipt, Exception), repr(receipt)
    # The agent's write queued behind the restore and replaced the restored bytes, behind
    # its own restore point: nothing was silently lost on either side.
    assert source(app, "index") == "agent v3\n"
    point = RestorePoint.objects.get(id=receipt.restore_point_id)
    assert point.previous_source == "index v1\n"
    assert connection.vendor == "postgresql"
