"""History reads (docs/api.md#history) through the API: turn messages, who really wrote, history
reads, HTTP as the RFCs say, problem details."""

from __future__ import annotations

import hashlib

import pytest
from api_helpers import ApiClient, make_token, make_user

from versions import selectors, services
from versions.models import ChangeSet, RestorePoint

ART = "/apps/quotes/artifacts"


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


@pytest.fixture
def api(app):
    make_user("limited")
    return ApiClient(make_token("limited", "quotes"))


# --- written_by --------------------------------------------------------------------------


def test_a_put_through_a_token_of_a_records_written_by_a_beside_the_claimed_requester(api):
    response = api.put(f"{ART}/pltf_page/index", {"source": "x", "requested_by": "B"})
    assert response.status_code == 201
    point = RestorePoint.objects.get(pk=response.json()["restorePointId"])
    assert point.requested_by == "B"
    assert point.written_by.startswith("token:") and point.written_by.endswith("… of limited")


def test_a_command_write_records_the_command_and_a_restore_records_its_actor(app):
    receipt = services.write_artifact(app, "pltf_page", "index", "a", requested_by="ci", tool="t")
    assert RestorePoint.objects.get(pk=receipt.restore_point_id).written_by == "command:ci"
    restored = services.restore_change_set(receipt.change_set_id, by="rvaid")
    counter = RestorePoint.objects.get(change_set_id=restored.set_id)
    assert counter.kind == "counter" and counter.written_by == "command:rvaid"


# --- turn messages -----------------------------------------------------------------------


def test_a_set_keeps_the_first_message_its_writes_give(api):
    first = api.put(f"{ART}/pltf_page/a", {"source": "1", "run_id": "r"}).json()
    api.put(f"{ART}/pltf_page/b", {"source": "2", "run_id": "r", "message": "Fix the header"})
    api.put(f"{ART}/pltf_page/c", {"source": "3", "run_id": "r", "message": "later"})
    assert ChangeSet.objects.get(pk=first["changeSetId"]).message == "Fix the header"
    listed = api.get("/apps/quotes/change-sets").json()["items"][0]
    assert listed["message"] == "Fix the header"


def test_a_message_is_stored_with_a_new_set(api):
    body = api.put(f"{ART}/pltf_page/a", {"source": "1", "message": "Why: the ask"}).json()
    assert ChangeSet.objects.get(pk=body["changeSetId"]).message == "Why: the ask"


@pytest.mark.parametrize(
    "message, words",
    [("x" * 2001, "at most 2,000"), ("bell \x07", "U+0007"), ("cr \r", "U+000D")],
)
def test_a_bad_message_is_refused_in_words_and_nothing_is_written(api, message, words):
    response = api.put(f"{ART}/pltf_page/a", {"source": "1", "message": message})
    assert response.status_code == 400
    assert response.json()["field"] == "message" and words in response.json()["message"]
    assert not RestorePoint.objects.exists()


def test_an_agent_updates_its_sets_message_with_patch(api):
    body = api.put(f"{ART}/pltf_page/a", {"source": "1"}).json()
    response = api.client.patch(
        f"/api/v1/change-sets/{body['changeSetId']}",
        '{"message": "Renamed the button\\n\\tand its label"}',
        content_type="application/json",
        headers={"Authorization": f"Bearer {api.token}"},
    )
    assert response.status_code == 200
    assert response.json()["message"] == "Renamed the button\n\tand its label"
    assert ChangeSet.objects.get(pk=body["changeSetId"]).message.startswith("Renamed")


def test_patch_of_a_set_of_another_app_is_refused(api, app):
    from versions.models import App

    App.objects.create(slug="other", name="Other")
    receipt = services.write_artifact("other", "pltf_page", "a", "1", requested_by="x", tool="t")
    response = api.client.patch(
        f"/api/v1/change-sets/{receipt.change_set_id}",
        '{"message": "mine"}',
        content_type="application/json",
        headers={"Authorization": f"Bearer {api.token}"},
    )
    assert response.status_code == 404  # another app's set does not exist for this token
    assert ChangeSet.objects.get(pk=receipt.change_set_id).message == ""


# --- HTTP preconditions ------------------------------------------------------------------


def test_if_none_match_star_creates_only(api):
    headers = {"If-None-Match": "*"}
    assert api.put(f"{ART}/pltf_page/new", {"source": "1"}, headers).status_code == 201
    again = api.put(f"{ART}/pltf_page/new", {"source": "2"}, headers)
    assert again.status_code == 412 and again.json()["error"] == "precondition_failed"
    assert api.get(f"{ART}/pltf_page/new").json()["source"] == "1"


def test_a_weak_if_match_never_matches_a_write(api):
    api.put(f"{ART}/pltf_page/a", {"source": "1"})
    weak = api.put(f"{ART}/pltf_page/a", {"source": "2"}, {"If-Match": f'W/"{sha("1")}"'})
    assert weak.status_code == 412 and "weak" in weak.json()["message"]
    strong = api.put(f"{ART}/pltf_page/a", {"source": "2"}, {"If-Match": f'"{sha("1")}"'})
    assert strong.status_code == 200


def test_get_answers_304_to_a_matching_if_none_match_and_head_works(api):
    api.put(f"{ART}/pltf_page/a", {"source": "1"})
    etag = api.get(f"{ART}/pltf_page/a")["ETag"]
    assert api.get(f"{ART}/pltf_page/a", {"If-None-Match": etag}).status_code == 304
    assert api.get(f"{ART}/pltf_page/a", {"If-None-Match": '"other"'}).status_code == 200
    head = api.client.head(
        f"/api/v1{ART}/pltf_page/a", headers={"Authorization": f"Bearer {api.token}"}
    )
    assert head.status_code == 200 and head["ETag"] == etag and head.content == b""


def test_expected_sha256_is_compared_case_insensitively(api):
    api.put(f"{ART}/pltf_page/a", {"source": "1"})
    upper = api.put(f"{ART}/pltf_page/a", {"source": "2", "expected_sha256": sha("1").upper()})
    assert upper.status_code == 200


def test_errors_are_problem_details_keeping_error_and_message(api):
    response = api.get(f"{ART}/pltf_page/missing")
    assert response.status_code == 404
    assert response["Content-Type"].startswith("application/problem+json")
    body = response.json()
    assert body["type"] == "about:blank" and body["title"] == "Not Found"
    assert body["status"] == 404 and body["detail"] == body["message"]
    assert body["error"] == "not_found"


def test_a_422_says_where_without_body_body(api):
    response = api.put(f"{ART}/pltf_page/a", {"source": 5})
    assert response.status_code == 422
    assert "body.body" not in response.content.decode()


def test_the_openapi_document_states_patterns_enums_limits_and_headers(client):
    doc = client.get("/api/v1/openapi.json").json()
    text = str(doc)
    assert "If-None-Match" in text and "If-Match" in text and "ETag" in text
    write = doc["components"]["schemas"]["WriteIn"]["properties"]
    assert "pattern" in str(write["expected_sha256"]) and "2000" in str(write["message"])
    assert "maxLength" in str(write["requested_by"])


# --- history reads -----------------------------------------------------------------------


@pytest.fixture
def history(app):
    first = services.write_artifact(app, "pltf_page", "index", "one\n", requested_by="a", tool="t")
    second = services.write_artifact(
        app, "pltf_page", "index", "two\n", requested_by="b", tool="t", message="second turn"
    )
    return first, second


def test_an_artifacts_history_is_newest_first_and_paginated(api, history):
    first, second = history
    body = api.get(f"{ART}/pltf_page/index/history", per_page=1).json()
    assert body["total"] == 2 and body["next_page"] == 2
    assert body["items"][0]["id"] == second.restore_point_id
    assert body["items"][0]["message"] == "second turn"
    assert body["items"][0]["written_by"] == "command:b"


def test_source_at_a_ref(api, history):
    first, second = history
    at = lambda ref: api.get(f"{ART}/pltf_page/index", at=ref)  # noqa: E731
    assert at(first.change_set_id).json()["source"] == "one\n"
    assert at(second.restore_point_id).json()["source"] == "one\n"
    assert at("draft").json()["source"] == "two\n"
    before_first = at(first.restore_point_id)
    assert before_first.status_code == 404 and "did not exist" in before_first.json()["message"]
    production = at("production")  # the app has not promoted anything yet
    assert production.status_code == 404
    assert production.json()["message"] == selectors.REF_NO_PRODUCTION.format(slug="quotes")
    unknown = at("rp_zzzz_zzzzzzzz")
    assert unknown.status_code == 404 and "no restore point" in unknown.json()["message"]
    assert at("yesterday").status_code == 400


def test_source_at_production_and_at_a_deployment_once_promoted(api, app, history):
    services.write_artifact(app, "pltf_page", "about", "about\n", requested_by="a", tool="t")
    shipped = services.promote(app, by="rvaid")
    services.write_artifact(app, "pltf_page", "index", "three\n", requested_by="c", tool="t")
    services.delete_artifact(app, "pltf_page", "about", requested_by="c", tool="t")
    services.write_artifact(app, "pltf_page", "new", "new\n", requested_by="c", tool="t")
    at = lambda name, ref: api.get(f"{ART}/pltf_page/{name}", at=ref)  # noqa: E731
    for ref in ("production", shipped.deployment_id):
        served = at("index", ref)
        assert served.status_code == 200, served.json()
        assert served.json()["source"] == "two\n" and served.json()["at"] == ref
        two = sha("two\n")
        assert served.json()["sha256"] == two and served["ETag"] == f'"{two}"'
        assert at("about", ref).json()["source"] == "about\n"  # deleted from the draft since
        absent = at("new", ref)  # written to the draft after the promotion
        assert absent.status_code == 404 and "did not exist" in absent.json()["message"]
    assert at("index", "draft").json()["source"] == "three\n"
    unknown = at("index", "dp_zzzz_zzzzzzzz")
    assert unknown.status_code == 404
    assert unknown.json()["message"] == selectors.REF_DEPLOYMENT_NOT_FOUND.format(
        ref="dp_zzzz_zzzzzzzz", slug="quotes"
    )


def test_every_ref_a_preview_accepts_is_accepted_by_at(api, app, history):
    first, second = history
    shipped = services.promote(app, by="rvaid")
    for ref in (
        "draft",
        "production",
        shipped.deployment_id,
        first.change_set_id,
        second.restore_point_id,
    ):
        services.resolve_state(app, ref)  # a preview accepts it
        assert api.get(f"{ART}/pltf_page/index", at=ref).status_code == 200, ref


def test_source_at_a_pruned_state_says_so(api, app, settings):
    settings.VERSIONS_POINTS_PER_APP = 2
    first = services.write_artifact(app, "pltf_page", "index", "1", requested_by="a", tool="t")
    services.name_change_set(first.change_set_id, "kept", by="a")  # pinned: never pruned
    for text in ("2", "3", "4", "5"):
        services.write_artifact(app, "pltf_page", "index", text, requested_by="a", tool="t")
    # Right after the first set, the artifact's next point (the write of "2") was pruned.
    gone = api.get(f"{ART}/pltf_page/index", at=first.change_set_id)
    assert gone.status_code == 404 and "pruned by retention" in gone.json()["message"]


def test_a_restore_point_with_its_previous_source(api, history):
    first, second = history
    body = api.get(f"/restore-points/{second.restore_point_id}").json()
    assert body["previous_source"] == "one\n" and body["written_by"] == "command:b"


def test_a_sets_diff_is_unified_text(api, history):
    first, second = history
    response = api.get(f"/change-sets/{second.change_set_id}/diff")
    assert response.status_code == 200 and response["Content-Type"].startswith("text/x-diff")
    assert response.content.decode() == (
        "--- a/pltf_page/index\n+++ b/pltf_page/index\n@@ -1 +1 @@\n-one\n+two\n"
    )


def test_the_unified_diff_matches_difflib():
    import difflib

    old = "".join(f"line {i}\n" for i in range(200))
    new = old.replace("line 50\n", "changed\n").replace("line 150\n", "") + "tail"
    ours = selectors.unified_diff(old, new, "a", "b")
    theirs = "".join(
        difflib.unified_diff(old.splitlines(True), new.splitlines(True), "a", "b")
    ).replace("tail", "tail\n\\ No newline at end of file\n")
    assert ours == theirs


def test_the_panel_shows_the_message_escaped_under_the_set_id(app, admin_client):
    services.write_artifact(
        app, "pltf_page", "index", "x", requested_by="a", tool="t", message="<b>Fix</b> it"
    )
    page = admin_client.get("/apps/quotes/versions/").content.decode()
    assert "&lt;b&gt;Fix&lt;/b&gt; it" in page and "<b>Fix</b>" not in page
