"""Pre-flight of Restore all (docs/architecture.md#restore-all, step 2): every check, every finding,
nothing written."""

from __future__ import annotations

import hashlib
import json

import pytest
from django.db import connection, transaction

from versions.errors import PreflightFailed
from versions.models import (
    API_ROUTE,
    PAGE,
    STYLESHEET,
    Artifact,
    AuditEvent,
    Blob,
    ChangeSet,
    RestorePoint,
)
from versions.services import (
    restore_change_set,
    write_artifact,
)


def write(app, collection, name, source, run_id=None):
    return write_artifact(
        app, collection, name, source, requested_by="agent", tool="t", run_id=run_id
    )


def state(app):
    """Everything a restore could change: artifacts, points, sets."""
    return (
        list(
            Artifact.objects.filter(app=app)
            .order_by("pk")
            .values_list("name", "blob_id", "sha256", "deleted", "route_key", "updated_on")
        ),
        RestorePoint.objects.count(),
        ChangeSet.objects.count(),
    )


def refused(set_id, **kwargs) -> dict:
    with pytest.raises(PreflightFailed) as caught:
        restore_change_set(set_id, by="rvaid", **kwargs)
    data = caught.value.receipt.as_dict()
    assert data["kind"] == "preflight_failed"
    assert data["restoredFromSet"] == set_id
    assert data["written"] == 0
    for finding in data["findings"]:
        assert set(finding) == {"name", "collection", "pointId", "reason"}
        assert finding["reason"]
    return data


def route(path, body="ok", method="GET"):
    return json.dumps({"method": method, "path": path, "status": 200, "body": body})


def test_source_not_stored_is_a_finding_and_nothing_is_written(app, settings):
    settings.VERSIONS_MAX_STORED_BYTES = 100
    write(app, STYLESHEET, "App", "x" * 200, run_id="setup")
    write(app, PAGE, "index", "v1\n", run_id="setup")
    set_id = write(app, STYLESHEET, "App", "y\n", run_id="turn").change_set_id
    write(app, PAGE, "index", "v2\n", run_id="turn")
    before = state(app)

    data = refused(set_id)

    assert [(f["name"], f["collection"]) for f in data["findings"]] == [("App", STYLESHEET)]
    reason = data["findings"][0]["reason"]
    assert "200 bytes" in reason and "not kept" in reason
    assert state(app) == before


def test_a_pruned_point_is_a_finding_and_nothing_is_written(app, settings):
    settings.VERSIONS_POINTS_PER_APP = 4
    write(app, PAGE, "a", "a1\n", run_id="setup")
    write(app, PAGE, "b", "b1\n", run_id="setup")
    set_id = write(app, PAGE, "a", "a2\n", run_id="turn").change_set_id
    write(app, PAGE, "b", "b2\n", run_id="turn")
    for i in range(3):
        write(app, PAGE, "c", f"c{i}\n")
    pruned = ChangeSet.objects.get(id=set_id).pruned
    assert [p["artifactId"] for p in pruned] == [Artifact.objects.get(name="a").pk]
    before = state(app)

    data = refused(set_id)

    assert [f["name"] for f in data["findings"]] == ["a"]
    assert data["findings"][0]["pointId"] == pruned[0]["pointId"]
    assert "pruned" in data["findings"][0]["reason"]
    assert state(app) == before


def test_an_artifact_that_is_gone_is_a_finding_and_nothing_is_written(app, monkeypatch):
    write(app, PAGE, "index", "v1\n", run_id="setup")
    write(app, PAGE, "about", "v1\n", run_id="setup")
    set_id = write(app, PAGE, "index", "v2\n", run_id="turn").change_set_id
    write(app, PAGE, "about", "v2\n", run_id="turn")
    # The product never deletes an artifact row; simulate an operator removing one by hand
    # (foreign keys are checked at commit, so the row is put back before the test ends; the
    # audit trail's early check of deferred keys would see the hole this makes, which no real
    # transaction can leave, so it is skipped here).
    monkeypatch.setattr("versions.models._check_deferred_constraints", lambda: None)
    gone = Artifact.objects.get(name="about")
    table = Artifact._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(f"DELETE FROM {table} WHERE id = %s", [gone.pk])
    before = state(app)

    data = refused(set_id)

    assert data["findings"] == [
        {
            "name": "",
            "collection": "",
            "pointId": RestorePoint.objects.get(change_set_id=set_id, artifact_id=gone.pk).id,
            "reason": "The artifact no longer exists in this app, so there is nothing to restore onto.",
        }
    ]
    assert state(app) == before
    gone.save(force_insert=True)


def test_an_ambiguous_route_is_a_finding_and_nothing_is_written(app):
    write(app, API_ROUTE, "quotes", route("/quotes"), run_id="setup")
    write(app, PAGE, "index", "v1\n", run_id="setup")
    set_id = write(app, API_ROUTE, "quotes", route("/offers"), run_id="turn").change_set_id
    write(app, PAGE, "index", "v2\n", run_id="turn")
    write(app, API_ROUTE, "quotes-v2", route("/quotes", body="new"))
    before = state(app)

    data = refused(set_id)

    assert [f["name"] for f in data["findings"]] == ["quotes"]
    reason = data["findings"][0]["reason"]
    assert "GET /quotes" in reason and "quotes-v2" in reason
    assert state(app) == before


def test_a_route_spec_the_route_save_path_refuses_is_a_finding(app):
    write(app, API_ROUTE, "legacy", route("/legacy"), run_id="setup")
    write(app, PAGE, "index", "v1\n", run_id="setup")
    set_id = write(app, API_ROUTE, "legacy", route("/legacy", body=2), run_id="turn").change_set_id
    write(app, PAGE, "index", "v2\n", run_id="turn")
    # A spec stored before the route rules tightened (the save path no longer accepts it).
    bad = '{"method": "TRACE", "path": "/legacy"}'
    sha = hashlib.sha256(bad.encode()).hexdigest()
    Blob.objects.create(sha256=sha, data=bad.encode(), size=len(bad), chars=len(bad))
    RestorePoint.objects.filter(change_set_id=set_id, artifact__name="legacy").update(
        previous_blob_id=sha, previous_sha256=sha
    )
    before = state(app)

    data = refused(set_id)

    assert [f["name"] for f in data["findings"]] == ["legacy"]
    assert "route method must be one of" in data["findings"][0]["reason"]
    assert state(app) == before


def test_drift_from_what_the_person_reviewed_is_a_finding(app):
    write(app, PAGE, "index", "v1\n", run_id="setup")
    write(app, STYLESHEET, "App", "a1\n", run_id="setup")
    set_id = write(app, PAGE, "index", "v2\n", run_id="turn").change_set_id
    write(app, STYLESHEET, "App", "a2\n", run_id="turn")
    reviewed = {f"{a.collection}/{a.name}": a.sha256 for a in Artifact.objects.filter(app=app)}
    write(app, PAGE, "index", "v3 from the agent, after the review\n")
    before = state(app)

    data = refused(set_id, expected=reviewed)

    assert [f["name"] for f in data["findings"]] == ["index"]
    assert "changed since you reviewed it" in data["findings"][0]["reason"]
    assert state(app) == before


def test_every_finding_is_listed_not_just_the_first(app, settings):
    settings.VERSIONS_MAX_STORED_BYTES = 100
    write(app, STYLESHEET, "big", "x" * 200, run_id="setup")
    write(app, API_ROUTE, "r", route("/r"), run_id="setup")
    write(app, PAGE, "index", "v1\n", run_id="setup")
    write(app, PAGE, "fine", "f1\n", run_id="setup")
    set_id = write(app, STYLESHEET, "big", "y\n", run_id="turn").change_set_id
    write(app, API_ROUTE, "r", route("/r2"), run_id="turn")
    write(app, PAGE, "index", "v2\n", run_id="turn")
    write(app, PAGE, "fine", "f2\n", run_id="turn")
    write(app, API_ROUTE, "other", route("/r"))
    reviewed = {"pltf_page/index": "0" * 64}
    before = state(app)

    data = refused(set_id, expected=reviewed)

    assert sorted(f["name"] for f in data["findings"]) == ["big", "index", "r"]
    assert state(app) == before


def test_a_refused_preflight_is_kept_in_the_apps_audit_log(app):
    write(app, PAGE, "index", "v1\n", run_id="setup")
    set_id = write(app, PAGE, "index", "v2\n", run_id="turn").change_set_id

    data = refused(set_id, expected={"pltf_page/index": "0" * 64})

    event = AuditEvent.objects.get(app=app, action="preflight_failed")
    assert event.actor_name == "rvaid"
    assert event.targets == [set_id]
    assert event.details == data


@pytest.mark.django_db(transaction=True)
def test_the_audit_event_survives_the_rolled_back_restore_transaction():
    from versions.models import App

    app = App.objects.create(slug="audit", name="Audit")
    write(app, PAGE, "index", "v1\n", run_id="setup")
    set_id = write(app, PAGE, "index", "v2\n", run_id="turn").change_set_id

    refused(set_id, expected={"pltf_page/index": "0" * 64})

    # Committed: visible from a fresh transaction.
    with transaction.atomic():
        assert AuditEvent.objects.filter(app=app, action="preflight_failed").count() == 1
    assert ChangeSet.objects.filter(kind=ChangeSet.RESTORE).count() == 0


def test_a_skipped_artifact_is_not_a_finding_even_when_its_point_is_unusable(app, settings):
    """Already matching needs no write, so nothing about its point can stop the restore."""
    settings.VERSIONS_MAX_STORED_BYTES = 100
    big = "x" * 200
    write(app, STYLESHEET, "big", big, run_id="setup")
    write(app, PAGE, "index", "v1\n", run_id="setup")
    set_id = write(app, STYLESHEET, "big", "y\n", run_id="turn").change_set_id
    write(app, PAGE, "index", "v2\n", run_id="turn")
    write(app, STYLESHEET, "big", big)

    receipt = restore_change_set(set_id, by="p")

    assert [s.name for s in receipt.skipped] == ["big"]
    assert [i.name for i in receipt.items] == ["index"]
