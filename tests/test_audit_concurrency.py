"""Concurrent appends on PostgreSQL: the chain's head is locked, so no two events chain onto
the same prev_hash, and the chain stays whole."""

from __future__ import annotations

import time
from io import StringIO

import pytest
from django.core.management import call_command
from django.db import transaction
from thread_helpers import failures, run_in_threads

from versions import services
from versions.models import App, Artifact, AuditEvent, RestorePoint

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def test_twelve_writers_appending_at_once_make_one_unbroken_chain():
    app = App.objects.create(slug="race", name="Race")

    def append(i: int) -> int:
        for n in range(4):
            with transaction.atomic():
                services.record("set_named", actor=None, app=app, targets=[f"w{i}-{n}"])
                time.sleep(0.005)  # the action's own work, while the head is held
        return i

    results = run_in_threads(12, append)

    assert failures(results) == []
    events = list(AuditEvent.objects.order_by("seq"))
    assert [e.seq for e in events] == list(range(1, 49))
    assert len({e.prev_hash for e in events}) == 48
    out = StringIO()
    call_command("verify_audit", stdout=out)
    assert out.getvalue().strip() == "48 events, chain intact"


WRITERS, WRITES, PEOPLE, ROUNDS = 16, 5, 4, 3


def test_sixteen_writers_while_people_name_and_restore_lose_nothing_and_keep_the_chain():
    app = App.objects.create(slug="busy", name="Busy")
    # Each person's own page, with two turns to name and restore.
    turns = {}
    for p in range(PEOPLE):
        for n in range(2):
            receipt = services.write_artifact(
                app, "pltf_page", f"person-{p}", f"p{p} v{n}\n", tool="t", run_id=f"p{p}-{n}"
            )
        turns[p] = receipt.change_set_id
    before = AuditEvent.objects.count()

    def act(i: int) -> int:
        if i < WRITERS:
            for n in range(WRITES):
                services.write_artifact(
                    "busy", "pltf_page", f"writer-{i}", f"w{i} v{n}\n", tool="t", run_id=f"w{i}-{n}"
                )
            return WRITES
        p = i - WRITERS
        for r in range(ROUNDS):
            services.name_change_set(turns[p], f"Turn of {p}, look {r}", by=f"person-{p}")
            # Restore all of the turn, then of that restore (puts the turn back): both recorded.
            undone = services.restore_change_set(turns[p], by=f"person-{p}")
            assert undone.set_id is not None
            services.restore_change_set(undone.set_id, by=f"person-{p}")
        return ROUNDS * 3

    results = run_in_threads(WRITERS + PEOPLE, act)

    assert failures(results) == []
    for i in range(WRITERS):
        artifact = Artifact.objects.get(app=app, name=f"writer-{i}")
        assert artifact.source == f"w{i} v{WRITES - 1}\n"
        assert RestorePoint.objects.filter(artifact=artifact).count() == WRITES
    for p in range(PEOPLE):
        assert Artifact.objects.get(app=app, name=f"person-{p}").source == f"p{p} v1\n"
    actions = list(AuditEvent.objects.filter(seq__gt=0).order_by("seq").values_list("action"))
    assert len(actions) - before == PEOPLE * ROUNDS * 3
    assert {a for (a,) in actions[before:]} == {"set_named", "restored"}
    out = StringIO()
    call_command("verify_audit", stdout=out)
    assert out.getvalue().strip() == f"{before + PEOPLE * ROUNDS * 3} events, chain intact"
