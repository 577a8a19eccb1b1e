"""Two Restore to release at once on PostgreSQL: one writes, the other says noop
(docs/architecture.md#restore, docs/architecture.md#release-review)."""

from __future__ import annotations

import threading
import time

import pytest
from django.db import connections
from fault_points import restore_engine as engine

from versions.messages import NOOP_MESSAGE
from versions.models import PAGE, App, Artifact, ChangeSet, RestorePoint
from versions.services import (
    mark_release,
    restore_to_release,
    write_artifact,
)

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

HOLD = 0.5  # seconds the first restore keeps its row locks


def _thread(func, results, key) -> threading.Thread:
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


def test_two_restores_to_release_at_once_write_once(monkeypatch):
    app = App.objects.create(slug="race-release", name="Race")
    for run, version in (("release", "v1"), ("after", "v2")):
        for name in ("index", "about", "help"):
            receipt = write_artifact(
                app, PAGE, name, f"{name} {version}\n", requested_by="a", tool="t", run_id=run
            )
        if run == "release":
            mark_release(receipt.change_set_id, by="rvaid")
    points = RestorePoint.objects.count()
    inside = threading.Event()
    real_insert = engine._insert_counter_points

    def slow_insert(rows):
        inside.set()  # the first restore holds every row lock now
        time.sleep(HOLD)
        return real_insert(rows)

    monkeypatch.setattr(engine, "_insert_counter_points", slow_insert)
    results: dict = {}
    first = _thread(lambda: restore_to_release(app, by="alice"), results, "first")
    assert inside.wait(10)
    second = _thread(lambda: restore_to_release(app, by="bob"), results, "second")
    first.join(20)
    second.join(20)

    assert results["first"].kind == "restore", results["first"]
    assert results["second"].kind == "noop", results["second"]
    assert results["second"].message == NOOP_MESSAGE
    assert RestorePoint.objects.count() == points + 3
    assert ChangeSet.objects.filter(app=app, kind=ChangeSet.RESTORE).count() == 1
    for name in ("index", "about", "help"):
        assert Artifact.objects.get(app=app, name=name).source == f"{name} v1\n"
