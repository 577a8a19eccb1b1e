"""Promotions under concurrency on PostgreSQL (docs/architecture.md#environments): two promotions at
once serialise, and a promotion racing an agent's write (or a Restore all) ships it whole or not at
all."""

from __future__ import annotations

import pytest
from thread_helpers import failures, run_in_threads

from versions.models import PAGE, STYLESHEET, App, Deployment, DeploymentEntry, DeploymentEvent
from versions.services import (
    promote,
    restore_change_set,
    rollback_production,
    write_artifact,
)

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

NAMES = ("index", "about", "faq")


def write(app, name, source, run_id):
    collection = STYLESHEET if name == "App" else PAGE
    return write_artifact(app, collection, name, source, requested_by="a", tool="t", run_id=run_id)


def test_two_promotions_at_once_serialise_one_promotes_the_others_say_noop():
    app = App.objects.create(slug="race", name="Race")
    for name in NAMES:
        write(app, name, f"{name} v1\n", "setup")
    results = run_in_threads(4, lambda i: promote("race", by=f"person-{i}").as_dict())
    assert failures(results) == []
    kinds = sorted(r["kind"] for r in results)
    assert kinds == ["noop", "noop", "noop", "promotion"]
    assert Deployment.objects.count() == 1
    assert DeploymentEvent.objects.count() == 1


def test_promotions_and_rollbacks_at_once_keep_one_line_of_history():
    app = App.objects.create(slug="race", name="Race")
    write(app, "index", "v1\n", "one")
    promote(app, by="setup")
    write(app, "index", "v2\n", "two")
    promote(app, by="setup")

    def act(i):
        if i % 2:
            return rollback_production("race", by=f"p{i}").as_dict()
        write(App.objects.get(slug="race"), "index", f"v{i + 3}\n", f"t{i}")
        return promote("race", by=f"p{i}").as_dict()

    results = run_in_threads(4, act)
    assert [r for r in failures(results) if "no earlier deployment" not in str(r)] == []
    # Every event starts where the one before it ended: no two moved production at once.
    events = list(DeploymentEvent.objects.filter(app=app).order_by("on", "id"))
    for before, after in zip(events, events[1:], strict=False):
        assert after.from_deployment_id == before.to_deployment_id
    assert App.objects.get(pk=app.pk).production_id == events[-1].to_deployment_id


def test_a_promotion_racing_a_restore_all_ships_all_of_it_or_none():
    app = App.objects.create(slug="race", name="Race")
    for name in NAMES:
        write(app, name, f"{name} v1\n", "setup")
    ids = {a.name: a.pk for a in app.artifacts.all()}
    turn = None
    for name in NAMES:
        turn = write(app, name, f"{name} v2\n", "turn").change_set_id
    v1 = {name: _sha(f"{name} v1\n") for name in NAMES}
    v2 = {name: _sha(f"{name} v2\n") for name in NAMES}
    undo = turn
    for round_no in range(12):

        def act(i, undo=undo):
            if i == 0:
                return restore_change_set(undo, by="person")
            return promote("race", by="promoter", note=f"round {round_no}")

        restored, promoted = run_in_threads(2, act)
        assert failures([restored, promoted]) == []
        undo = restored.set_id
        if promoted.kind != "promotion":
            continue
        held = dict(
            DeploymentEntry.objects.filter(deployment_id=promoted.deployment_id).values_list(
                "artifact_id", "blob_id"
            )
        )
        shipped = {name: held[ids[name]] for name in NAMES}
        assert shipped in (v1, v2), f"round {round_no}: half a restore was promoted"


def _sha(text):
    import hashlib

    return hashlib.sha256(text.encode()).hexdigest()
