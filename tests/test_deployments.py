"""Production (docs/architecture.md#environments): promote a reviewed state, instant rollback, the
receipts, pre-flight."""

from __future__ import annotations

import json

import pytest
from django.contrib.auth.models import Permission
from django.core.management import call_command
from django.test import override_settings

from versions import selectors
from versions.errors import Conflict, InvalidInput, NotFound, PreflightFailed
from versions.models import (
    API_ROUTE,
    PAGE,
    STYLESHEET,
    AgentToken,
    App,
    Artifact,
    AuditEvent,
    Blob,
    Deployment,
    DeploymentEntry,
    DeploymentEvent,
)
from versions.services import (
    delete_artifact,
    name_point,
    promote,
    promotion,
    restore_change_set,
    rollback_production,
    write_artifact,
)

NOOP = {"kind": "noop", "message": "Production already serves this state — nothing was promoted."}


def write(app, collection, name, source, run_id=None):
    return write_artifact(app, collection, name, source, requested_by="a", tool="t", run_id=run_id)


def route(path, body, method="GET"):
    return json.dumps({"method": method, "path": path, "body": body})


def sha(app, collection, name):
    return Artifact.objects.get(app=app, collection=collection, name=name).sha256


@pytest.fixture
def site(app):
    write(app, PAGE, "index", "<h1>v1</h1>\n", run_id="setup")
    write(app, STYLESHEET, "App", "body { color: red; }\n", run_id="setup")
    write(app, API_ROUTE, "list", route("/quotes", ["a"]), run_id="setup")
    return app


def production(app):
    return App.objects.get(pk=app.pk).production_id


def test_an_app_has_no_production_until_it_promotes(site):
    assert production(site) is None
    assert Deployment.objects.count() == 0


def test_the_first_promotion_stores_a_deployment_and_points_production_at_it(site):
    blobs = Blob.objects.count()
    receipt = promote(site, by="rvaid", note="first release")
    data = receipt.as_dict()
    assert list(data) == [
        "deploymentId",
        "kind",
        "ref",
        "previousDeployment",
        "changed",
        "unchanged",
        "created_by",
        "created_on",
        "note",
        "checks",  # the checks it passed (docs/api.md#safe-promotion)
    ]
    assert data["kind"] == "promotion"
    assert data["ref"] == "draft"
    assert data["previousDeployment"] is None
    assert data["deploymentId"].startswith("dp_")
    assert data["created_by"] == "rvaid"
    assert data["note"] == "first release"
    assert data["created_on"].endswith("Z")
    assert data["unchanged"] == 0
    assert sorted((c["collection"], c["name"], c["from"], c["to"]) for c in data["changed"]) == [
        (API_ROUTE, "list", None, sha(site, API_ROUTE, "list")),
        (PAGE, "index", None, sha(site, PAGE, "index")),
        (STYLESHEET, "App", None, sha(site, STYLESHEET, "App")),
    ]
    assert production(site) == data["deploymentId"]
    # Entries reference the blobs the artifacts hold: no source bytes were copied.
    assert Blob.objects.count() == blobs
    entries = DeploymentEntry.objects.filter(deployment_id=data["deploymentId"])
    assert {(e.artifact_id, e.blob_id) for e in entries} == {
        (a.pk, a.blob_id) for a in Artifact.objects.filter(app=site)
    }
    deployment = Deployment.objects.get()
    assert (deployment.created_by, deployment.note, deployment.ref) == (
        "rvaid",
        "first release",
        "draft",
    )
    [event] = _history(site)
    assert (event.kind, event.from_deployment_id, event.to_deployment_id, event.by) == (
        "promotion",
        None,
        deployment.id,
        "rvaid",
    )


def test_promoting_the_state_production_serves_is_a_noop(site):
    promote(site, by="rvaid")
    receipt = promote(site, by="rvaid")
    assert receipt.as_dict() == NOOP
    assert Deployment.objects.count() == 1
    assert DeploymentEvent.objects.count() == 1


def test_agent_writes_change_the_draft_and_never_the_deployment(site):
    first = promote(site, by="rvaid").deployment_id
    held = dict(
        DeploymentEntry.objects.filter(deployment_id=first).values_list("artifact_id", "blob_id")
    )
    write(site, PAGE, "index", "<h1>v2</h1>\n")
    delete_artifact(site, STYLESHEET, "App", requested_by="a", tool="t")
    assert production(site) == first
    assert (
        dict(
            DeploymentEntry.objects.filter(deployment_id=first).values_list(
                "artifact_id", "blob_id"
            )
        )
        == held
    )


def test_a_second_promotion_lists_only_what_changed_since_production(site):
    first = promote(site, by="rvaid").deployment_id
    old_index, old_css = sha(site, PAGE, "index"), sha(site, STYLESHEET, "App")
    write(site, PAGE, "index", "<h1>v2</h1>\n")
    delete_artifact(site, STYLESHEET, "App", requested_by="a", tool="t")
    write(site, PAGE, "about", "<p>about</p>\n")
    receipt = promote(site, by="lee", note="v2").as_dict()
    assert receipt["previousDeployment"] == first
    assert receipt["unchanged"] == 1  # the route
    assert sorted((c["name"], c["from"], c["to"]) for c in receipt["changed"]) == [
        ("App", old_css, None),
        ("about", None, sha(site, PAGE, "about")),
        ("index", old_index, sha(site, PAGE, "index")),
    ]
    assert production(site) == receipt["deploymentId"]
    assert Deployment.objects.get(pk=receipt["deploymentId"]).size == 3


def test_a_dry_run_lists_the_changes_and_stores_nothing(site):
    receipt = promote(site, by="rvaid", dry_run=True).as_dict()
    assert receipt["kind"] == "dry_run"
    assert len(receipt["changed"]) == 3
    assert receipt["findings"] == []
    assert Deployment.objects.count() == 0
    assert production(site) is None


def test_a_promotion_moves_the_route_generation_with_the_pointer(site):
    before = App.objects.get(pk=site.pk).route_generation
    promote(site, by="rvaid")
    assert App.objects.get(pk=site.pk).route_generation == before + 1


# ---------------------------------------------------------------------------------------------
# Instant rollback
# ---------------------------------------------------------------------------------------------


def test_rollback_points_production_at_the_deployment_before_and_touches_no_artifact(site):
    first = promote(site, by="rvaid").deployment_id
    old_index = sha(site, PAGE, "index")
    write(site, PAGE, "index", "<h1>v2</h1>\n")
    second = promote(site, by="rvaid").deployment_id
    artifacts = list(Artifact.objects.filter(app=site).values())
    receipt = rollback_production(site, by="lee", note="v2 broke checkout").as_dict()
    assert receipt == {
        "deploymentId": first,
        "kind": "rollback",
        "ref": first,
        "previousDeployment": second,
        "changed": [
            {"name": "index", "collection": PAGE, "from": sha(site, PAGE, "index"), "to": old_index}
        ],
        "unchanged": 2,
        "created_by": "lee",
        "created_on": receipt["created_on"],
        "note": "v2 broke checkout",
    }
    assert production(site) == first
    assert list(Artifact.objects.filter(app=site).values()) == artifacts
    event = _history(site)[0]
    assert (event.kind, event.from_deployment_id, event.to_deployment_id, event.note) == (
        "rollback",
        second,
        first,
        "v2 broke checkout",
    )


def test_rolling_forward_to_the_deployment_a_rollback_replaced_undoes_it(site):
    promote(site, by="rvaid")
    write(site, PAGE, "index", "<h1>v2</h1>\n")
    second = promote(site, by="rvaid").deployment_id
    rollback_production(site, by="lee")
    receipt = rollback_production(site, by="lee", to=second).as_dict()
    assert receipt["deploymentId"] == second
    assert [c["to"] for c in receipt["changed"]] == [sha(site, PAGE, "index")]
    assert production(site) == second


def test_rolling_back_to_a_deployment_production_never_moved_from_compares_entries(site):
    first = promote(site, by="rvaid").deployment_id
    write(site, PAGE, "index", "<h1>v2</h1>\n")
    promote(site, by="rvaid")
    old_css = sha(site, STYLESHEET, "App")
    write(site, STYLESHEET, "App", "body { color: blue; }\n")
    promote(site, by="rvaid")
    receipt = rollback_production(site, by="lee", to=first).as_dict()
    assert sorted((c["name"], c["to"]) for c in receipt["changed"]) == [
        ("App", old_css),
        ("index", DeploymentEntry.objects.get(deployment_id=first, artifact__name="index").blob_id),
    ]
    assert receipt["unchanged"] == 1


def test_rollback_without_production_is_refused_in_words(site):
    with pytest.raises(Conflict) as exc:
        rollback_production(site, by="lee")
    assert exc.value.message == (
        "App “quotes” has no production deployment to roll back: /apps/quotes/ serves its "
        "draft. Promote a state to production first."
    )
    assert DeploymentEvent.objects.count() == 0


def test_rollback_with_no_earlier_deployment_is_refused_in_words_and_changes_nothing(site):
    first = promote(site, by="rvaid").deployment_id
    with pytest.raises(Conflict) as exc:
        rollback_production(site, by="lee")
    assert exc.value.message == (
        f"Production of app “quotes” serves {first}, its first deployment: there is no "
        "earlier deployment to roll back to."
    )
    assert production(site) == first
    assert DeploymentEvent.objects.count() == 1


def test_rollback_to_an_unknown_or_another_apps_deployment_is_not_found(site):
    promote(site, by="rvaid")
    other = App.objects.create(slug="other", name="Other")
    write(other, PAGE, "index", "x")
    theirs = promote(other, by="rvaid").deployment_id
    for to in (theirs, "dp_zzzzzzzz_00000000", "nonsense", 42):
        with pytest.raises(NotFound) as exc:
            rollback_production(site, by="lee", to=to)
        assert "App “quotes” has no deployment" in exc.value.message
    assert DeploymentEvent.objects.filter(app=site).count() == 1


def test_rollback_to_the_deployment_production_serves_is_a_noop(site):
    first = promote(site, by="rvaid").deployment_id
    assert rollback_production(site, by="lee", to=first).as_dict() == NOOP


# ---------------------------------------------------------------------------------------------
# Pre-flight: any finding, nothing changes
# ---------------------------------------------------------------------------------------------


def assert_nothing_promoted(app, production_before):
    assert production(app) == production_before
    assert Deployment.objects.filter(app=app).count() == (1 if production_before else 0)


@override_settings(VERSIONS_MAX_STORED_BYTES=100)
def test_promoting_a_state_with_an_unstored_source_is_refused(app):
    write(app, PAGE, "index", "x" * 500, run_id="one")
    point = write(app, PAGE, "index", "small", run_id="two").restore_point_id
    with pytest.raises(PreflightFailed) as exc:
        promote(app, by="rvaid", ref=point)
    [finding] = exc.value.receipt.findings
    assert finding.name == "index"
    assert finding.reason.startswith("Missing: not stored. Its source in this state was 500 bytes")
    assert exc.value.message.startswith(
        "Nothing was promoted: the pre-flight check found 1 problem."
    )
    assert exc.value.answer()["kind"] == "preflight_failed"
    assert_nothing_promoted(app, None)
    assert AuditEvent.objects.filter(app=app, action="promotion_refused").count() == 1


@override_settings(VERSIONS_POINTS_PER_APP=2)
def test_promoting_a_state_with_a_pruned_source_is_refused(app):
    write(app, PAGE, "index", "v1")
    kept = write(app, PAGE, "about", "a1").restore_point_id
    name_point(kept, "kept", by="rvaid")  # pinned: never pruned
    for i in range(4):  # index's point right after the kept one is pruned
        write(app, PAGE, "index", f"v{i + 2}")
    with pytest.raises(PreflightFailed) as exc:
        promote(app, by="rvaid", ref=kept)
    [finding] = exc.value.receipt.findings
    assert finding.name == "index"
    assert finding.reason.startswith("Missing: pruned.")
    assert_nothing_promoted(app, None)


def test_two_routes_with_one_method_and_path_in_the_promoted_state_are_refused(site):
    first = promote(site, by="rvaid").deployment_id
    # A state saved before the route-save path refused ambiguity: the draft holds two routes
    # answering GET /quotes (made here behind the path's back).
    write(site, API_ROUTE, "other", route("/elsewhere", ["b"]))
    twin = write(site, API_ROUTE, "twin", route("/elsewhere-too", ["c"])).sha256
    Artifact.objects.filter(app=site, name="twin").update(blob_id=sha(site, API_ROUTE, "list"))
    Artifact.objects.filter(app=site, name="twin").update(sha256=sha(site, API_ROUTE, "list"))
    assert twin
    with pytest.raises(PreflightFailed) as exc:
        promote(site, by="rvaid")
    [finding] = exc.value.receipt.findings
    assert finding.name == "twin"
    assert finding.reason == (
        "It and “list” would both answer GET /quotes in production: two routes with the same "
        "method and path would be ambiguous."
    )
    assert_nothing_promoted(site, first)


def test_an_invalid_route_spec_in_the_promoted_state_is_refused(site):
    write(site, PAGE, "notes", "not a route")
    notes = Artifact.objects.get(app=site, name="notes")
    Artifact.objects.filter(app=site, name="list").update(
        blob_id=notes.blob_id, sha256=notes.sha256
    )
    with pytest.raises(PreflightFailed) as exc:
        promote(site, by="rvaid")
    [finding] = exc.value.receipt.findings
    assert finding.name == "list"
    assert finding.reason.startswith(
        "Its route spec is not valid: The route spec is not valid JSON"
    )
    assert_nothing_promoted(site, None)


def test_a_draft_changed_since_it_was_reviewed_is_not_promoted(site):
    reviewed = {f"{a.collection}/{a.name}": a.sha256 for a in Artifact.objects.filter(app=site)}
    old = reviewed["pltf_page/index"]
    write(site, PAGE, "index", "<h1>an agent's later edit</h1>\n")
    with pytest.raises(PreflightFailed) as exc:
        promote(site, by="rvaid", expected=reviewed)
    [finding] = exc.value.receipt.findings
    assert finding.name == "index"
    assert finding.reason == (
        f"It changed since you reviewed it: you reviewed {old[:12]}, it is now "
        f"{sha(site, PAGE, 'index')[:12]}. Review the promotion again."
    )
    assert_nothing_promoted(site, None)
    reviewed["pltf_page/index"] = sha(site, PAGE, "index")
    assert promote(site, by="rvaid", expected=reviewed).kind == "promotion"


def test_every_finding_is_listed(site):
    promote(site, by="rvaid")
    notes = write(site, PAGE, "notes", "not a route")
    Artifact.objects.filter(app=site, name="list").update(blob_id=notes.sha256, sha256=notes.sha256)
    reviewed = {"pltf_page/index": "0" * 64, "pltf_page/notes": notes.sha256}
    with pytest.raises(PreflightFailed) as exc:
        promote(site, by="rvaid", expected=reviewed)
    reasons = sorted((f.name, f.reason.split(":")[0]) for f in exc.value.receipt.findings)
    assert reasons == [
        ("index", "It changed since you reviewed it"),
        ("list", "It changed after you reviewed the promotion"),
        ("list", "Its route spec is not valid"),
    ]


def test_bad_input_is_refused_in_words(site):
    with pytest.raises(InvalidInput):
        promote(site, by="rvaid", note="x" * 501)
    with pytest.raises(InvalidInput):
        promote(site, by="rvaid", expected=["not", "a", "mapping"])
    with pytest.raises(NotFound):
        promote(site, by="rvaid", ref="../draft")
    with pytest.raises(NotFound):
        promote("no-such-app", by="rvaid")
    assert Deployment.objects.count() == 0


# ---------------------------------------------------------------------------------------------
# Promoting other states
# ---------------------------------------------------------------------------------------------


def test_promoting_a_change_set_ships_the_state_right_after_it(site):
    v1 = sha(site, PAGE, "index")
    turn = write(site, PAGE, "index", "<h1>v2</h1>\n", run_id="turn").change_set_id
    v2 = sha(site, PAGE, "index")
    write(site, PAGE, "index", "<h1>v3, not reviewed</h1>\n", run_id="later")
    receipt = promote(site, by="rvaid", ref=turn)
    held = DeploymentEntry.objects.get(deployment_id=receipt.deployment_id, artifact__name="index")
    assert held.blob_id == v2 != v1
    assert Deployment.objects.get(pk=receipt.deployment_id).source_set == turn


def test_promoting_a_restore_point_ships_the_state_just_before_it(site):
    v1 = sha(site, PAGE, "index")
    point = write(site, PAGE, "index", "<h1>v2</h1>\n", run_id="turn").restore_point_id
    receipt = promote(site, by="rvaid", ref=point)
    held = DeploymentEntry.objects.get(deployment_id=receipt.deployment_id, artifact__name="index")
    assert held.blob_id == v1


def test_a_restore_acts_on_the_draft_and_leaves_production_alone(site):
    first = promote(site, by="rvaid").deployment_id
    turn = write(site, PAGE, "index", "<h1>v2</h1>\n", run_id="turn").change_set_id
    restore_change_set(turn, by="rvaid")
    assert production(site) == first


# ---------------------------------------------------------------------------------------------
# Blobs a deployment references are never swept
# ---------------------------------------------------------------------------------------------


@override_settings(VERSIONS_POINTS_PER_APP=1)
def test_a_blob_only_a_deployment_references_is_never_swept(
    app, django_capture_on_commit_callbacks
):
    write(app, PAGE, "index", "<h1>shipped</h1>\n")
    shipped = sha(app, PAGE, "index")
    promote(app, by="rvaid")
    with django_capture_on_commit_callbacks(execute=True):
        for i in range(3):  # the point that held the shipped source is pruned
            write(app, PAGE, "index", f"<h1>draft {i}</h1>\n")
    assert not Artifact.objects.filter(blob_id=shipped).exists()
    assert Blob.objects.filter(sha256=shipped).exists()


@override_settings(VERSIONS_POINTS_PER_APP=1, VERSIONS_SWEEP_BATCH=1)
def test_the_sweep_still_removes_blobs_no_deployment_references(
    app, django_capture_on_commit_callbacks
):
    write(app, PAGE, "index", "<h1>one</h1>\n")
    promote(app, by="rvaid")
    write(app, PAGE, "index", "<h1>two, never promoted</h1>\n")
    two = sha(app, PAGE, "index")
    with django_capture_on_commit_callbacks(execute=True):
        for i in range(3):
            write(app, PAGE, "index", f"<h1>draft {i}</h1>\n")
    assert not Blob.objects.filter(sha256=two).exists()


# ---------------------------------------------------------------------------------------------
# Permissions and tokens
# ---------------------------------------------------------------------------------------------


def test_the_promote_permission_exists(db):
    assert Permission.objects.filter(
        codename="promote_deployment", content_type__app_label="versions"
    ).exists()


def test_tokens_cannot_promote_unless_made_with_can_promote(site, django_user_model, capsys):
    django_user_model.objects.create_user("agent")
    call_command("create_agent_token", "agent", "--app", "quotes")
    call_command("create_agent_token", "agent", "--app", "quotes", "--can-promote")
    plain, promoting = AgentToken.objects.order_by("created_on", "pk")
    assert (plain.can_promote, promoting.can_promote) == (False, True)
    assert "It can promote to production." in capsys.readouterr().out


def test_rolling_back_again_goes_further_back_never_forth(site):
    first = promote(site, by="rvaid").deployment_id
    write(site, PAGE, "index", "<h1>v2</h1>\n")
    second = promote(site, by="rvaid").deployment_id
    write(site, PAGE, "index", "<h1>v3</h1>\n")
    promote(site, by="rvaid")
    assert rollback_production(site, by="lee").deployment_id == second
    assert rollback_production(site, by="lee").deployment_id == first
    with pytest.raises(Conflict):
        rollback_production(site, by="lee")


def test_rollback_after_a_promotion_from_a_rolled_back_production_returns_to_it(site):
    first = promote(site, by="rvaid").deployment_id
    write(site, PAGE, "index", "<h1>v2</h1>\n")
    promote(site, by="rvaid")
    rollback_production(site, by="lee")
    write(site, PAGE, "index", "<h1>v3</h1>\n")
    promote(site, by="rvaid")
    receipt = rollback_production(site, by="lee")
    assert receipt.deployment_id == first
    assert [c.name for c in receipt.changed] == ["index"]


def test_every_move_in_the_history_keeps_its_receipt(site):
    receipts = [promote(site, by="rvaid", note="one").as_dict()]
    write(site, PAGE, "index", "<h1>v2</h1>\n")
    receipts.append(promote(site, by="rvaid", note="two").as_dict())
    receipts.append(rollback_production(site, by="lee", note="back").as_dict())
    receipts.append(rollback_production(site, by="lee", to=receipts[1]["deploymentId"]).as_dict())
    receipts.append(rollback_production(site, by="lee", to=receipts[0]["deploymentId"]).as_dict())
    history = [promotion.event_receipt(event) for event in reversed(_history(site))]
    assert history == receipts
    # Each rollback lists the one change, the right way round.
    index_shas = [c["to"] for c in receipts[1]["changed"]]
    assert [c["to"] for c in receipts[2]["changed"]] == [c["from"] for c in receipts[1]["changed"]]
    assert [c["to"] for c in receipts[3]["changed"]] == index_shas
    assert receipts[4]["changed"] == receipts[2]["changed"]


def test_a_change_that_was_not_among_what_was_reviewed_is_not_promoted(site):
    first = promote(site, by="rvaid").deployment_id
    write(site, PAGE, "index", "<h1>v2</h1>\n")
    reviewed = {"pltf_page/index": sha(site, PAGE, "index")}  # what the dialog showed
    write(site, PAGE, "sneaky", "<p>added after the review</p>\n")
    with pytest.raises(PreflightFailed) as exc:
        promote(site, by="rvaid", expected=reviewed)
    [finding] = exc.value.receipt.findings
    assert (finding.name, finding.reason) == (
        "sneaky",
        "It changed after you reviewed the promotion: it was not among what you reviewed. "
        "Review the promotion again.",
    )
    assert_nothing_promoted(site, first)


def test_a_restore_of_an_app_with_production_says_it_changed_the_draft_only(site):
    assert not selectors.production_notice(site)
    first = promote(site, by="rvaid").deployment_id
    held = selectors.production_notice(site)
    assert not held.ships and str(held) == (
        f"Production still serves {first}, just what the draft holds now: there is nothing to "
        "promote."
    )
    write(site, PAGE, "index", "<h1>v2</h1>\n")
    ahead = selectors.production_notice(site)
    assert ahead.ships and str(ahead) == f"Production still serves {first}; promote to ship this."


def _history(app):
    """Every promotion and rollback of the app's production, newest first."""
    return list(DeploymentEvent.objects.filter(app=app).order_by("-on", "-id"))
