"""The agent API (docs/api.md#routes): every endpoint, every status, every write captured."""

from __future__ import annotations

import hashlib
import json

import pytest
from api_helpers import ApiClient, make_token, make_user
from django.test import override_settings

from versions import services
from versions.models import App, Artifact, ChangeSet, RestorePoint

pytestmark = pytest.mark.django_db

ART = "/apps/quotes/artifacts"


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


@pytest.fixture
def owner(db):
    return make_user("rvaid")


@pytest.fixture
def api(app, owner) -> ApiClient:
    return ApiClient(make_token("rvaid", "quotes"))


@pytest.fixture
def page(app):
    services.write_artifact(
        app, "pltf_page", "index", "<h1>v1</h1>\n", requested_by="setup", tool="fixtures"
    )
    return Artifact.objects.get(app=app, name="index")


# --- 401 --------------------------------------------------------------------------------


def test_no_token_answers_401_json(app):
    response = ApiClient(None).get("/apps/quotes/artifacts")
    assert response.status_code == 401
    assert response.json()["error"] == "unauthorized"
    assert "Bearer" in response.json()["message"]
    assert response["WWW-Authenticate"].startswith("Bearer")


def test_wrong_token_answers_401(app, owner):
    make_token("rvaid", "quotes")
    assert ApiClient("vt_not-a-real-token").get("/apps/quotes/artifacts").status_code == 401


def test_revoked_token_answers_401(app, owner):
    from versions.models import AgentToken

    token = make_token("rvaid", "quotes")
    services.revoke_app_token(str(AgentToken.objects.get().pk))
    assert ApiClient(token).get("/apps/quotes/artifacts").status_code == 401


def test_token_of_an_inactive_user_answers_401(app, owner):
    token = make_token("rvaid", "quotes")
    owner.is_active = False
    owner.save()
    response = ApiClient(token).put(f"{ART}/pltf_page/index", {"source": "x"})
    assert response.status_code == 401
    assert not Artifact.objects.exists()


def test_token_is_stored_hashed(app, owner):
    from versions.models import AgentToken

    token = make_token("rvaid", "quotes")
    row = AgentToken.objects.get()
    assert row.key_hash == hashlib.sha256(token.encode()).hexdigest()
    assert token not in (row.key_hash, row.prefix)


def test_a_write_through_the_api_costs_two_queries_more_than_the_service(
    api, app, page, django_assert_max_num_queries
):
    # The token (with its user) and the app with the token's scope: one query each.
    api.put(f"{ART}/pltf_page/index", {"source": "warm\n"})  # last_used_on touched already
    with django_assert_max_num_queries(50) as direct:
        services.write_artifact(app, "pltf_page", "index", "direct\n", requested_by="a", tool="t")
    with django_assert_max_num_queries(50) as through_api:
        response = api.put(f"{ART}/pltf_page/index", {"source": "via the api\n"})
    assert response.status_code == 200
    assert len(through_api.captured_queries) == len(direct.captured_queries) + 2


# --- another app: as if it did not exist (docs/api.md#existence) ---------------------------


def test_token_of_another_app_answers_404_for_reads_and_writes(app, owner):
    App.objects.create(slug="other", name="Other")
    api = ApiClient(make_token("rvaid", "other"))
    assert api.get("/apps/quotes/artifacts").status_code == 404
    response = api.put(f"{ART}/pltf_page/index", {"source": "x"})
    assert response.status_code == 404
    assert response.json()["error"] == "not_found"
    assert response.json()["message"] == "There is no app “quotes”."
    assert not Artifact.objects.filter(app=app).exists()


def test_set_of_another_app_answers_404(app, owner, page):
    App.objects.create(slug="other", name="Other")
    api = ApiClient(make_token("rvaid", "other"))
    set_id = RestorePoint.objects.get().change_set_id
    assert api.get(f"/change-sets/{set_id}").status_code == 404


# --- artifacts: list and read ------------------------------------------------------------


def test_list_artifacts_without_and_with_tombstones(api, app, page):
    services.write_artifact(app, "pltf_stylesheet", "App", "a{}", requested_by="x", tool="t")
    services.delete_artifact(app, "pltf_stylesheet", "App", requested_by="x", tool="t")
    response = api.get("/apps/quotes/artifacts")
    assert response.status_code == 200
    body = response.json()
    assert body["app"] == "quotes"
    assert [(a["collection"], a["name"]) for a in body["artifacts"]] == [("pltf_page", "index")]
    item = body["artifacts"][0]
    assert item["sha256"] == sha("<h1>v1</h1>\n")
    assert item["size"] == len(b"<h1>v1</h1>\n")
    assert item["deleted"] is False
    assert item["updated_by"] == "setup"
    assert item["updated_on"].endswith("Z")
    everything = api.get("/apps/quotes/artifacts", include_deleted="true").json()["artifacts"]
    assert {(a["name"], a["deleted"]) for a in everything} == {("index", False), ("App", True)}


def test_read_artifact_sends_source_sha_and_etag(api, page):
    response = api.get(f"{ART}/pltf_page/index")
    assert response.status_code == 200
    assert response.json()["source"] == "<h1>v1</h1>\n"
    assert response.json()["sha256"] == sha("<h1>v1</h1>\n")
    assert response["ETag"] == '"' + sha("<h1>v1</h1>\n") + '"'


def test_read_unknown_app_artifact_or_tombstone_answers_404(api, app, page):
    assert api.get("/apps/nope/artifacts").status_code == 404
    response = api.get(f"{ART}/pltf_page/missing")
    assert response.status_code == 404
    assert response.json()["error"] == "not_found"
    services.delete_artifact(app, "pltf_page", "index", requested_by="x", tool="t")
    response = api.get(f"{ART}/pltf_page/index")
    assert response.status_code == 404
    assert "deleted" in response.json()["message"]


def test_read_unknown_collection_answers_400(api, app):
    response = api.get(f"{ART}/pltf_nonsense/index")
    assert response.status_code == 400
    assert response.json()["error"] == "invalid_input"


# --- artifacts: write --------------------------------------------------------------------


def test_create_answers_201_and_is_captured_with_tool_and_requester(api, app):
    response = api.put(f"{ART}/pltf_page/index", {"source": "<p>new</p>"})
    assert response.status_code == 201
    receipt = response.json()
    assert receipt["artifact"] == {"app": "quotes", "collection": "pltf_page", "name": "index"}
    assert receipt["previousSha256"] == ""
    assert receipt["sha256"] == sha("<p>new</p>")
    assert receipt["unchanged"] is False
    assert response["ETag"] == f'"{sha("<p>new</p>")}"'
    point = RestorePoint.objects.get(id=receipt["restorePointId"])
    assert point.tool == "api"
    assert point.requested_by == "rvaid"
    assert point.previous_existed is False
    assert point.change_set_id == receipt["changeSetId"]


def test_update_answers_200_and_records_previous_source(api, page):
    response = api.put(
        f"{ART}/pltf_page/index",
        {
            "source": "<h1>v2</h1>\n<p>more</p>\n",
            "expected_sha256": page.sha256,
            "requested_by": "alice",
            "tool": "my-agent:edit",
            "run_id": "run-42",
            "turn_id": "turn-1",
        },
    )
    assert response.status_code == 200
    receipt = response.json()
    assert receipt["previousSha256"] == page.sha256
    assert receipt["linesAdded"] >= 1
    point = RestorePoint.objects.get(id=receipt["restorePointId"])
    assert (point.tool, point.requested_by, point.run_id, point.turn_id) == (
        "my-agent:edit",
        "alice",
        "run-42",
        "turn-1",
    )
    assert point.previous_source == "<h1>v1</h1>\n"
    assert Artifact.objects.get(pk=page.pk).source == "<h1>v2</h1>\n<p>more</p>\n"


def test_writes_with_one_run_id_form_one_change_set(api, app):
    first = api.put(f"{ART}/pltf_page/index", {"source": "a", "run_id": "turn-7"}).json()
    second = api.put(f"{ART}/pltf_stylesheet/App", {"source": "b{}", "run_id": "turn-7"}).json()
    assert first["changeSetId"] == second["changeSetId"]
    assert ChangeSet.objects.get(id=first["changeSetId"]).points.count() == 2


def test_unchanged_write_answers_200_and_records_nothing(api, page):
    before = RestorePoint.objects.count()
    response = api.put(f"{ART}/pltf_page/index", {"source": "<h1>v1</h1>\n"})
    assert response.status_code == 200
    assert response.json()["unchanged"] is True
    assert response.json()["restorePointId"] is None
    assert RestorePoint.objects.count() == before


def test_stale_expected_sha256_answers_409_with_current_hash_and_writes_nothing(api, page):
    before = RestorePoint.objects.count()
    response = api.put(
        f"{ART}/pltf_page/index", {"source": "mine", "expected_sha256": sha("something else")}
    )
    assert response.status_code == 409
    body = response.json()
    assert body["error"] == "stale_write"
    assert body["current_sha256"] == page.sha256
    assert body["message"]
    assert Artifact.objects.get(pk=page.pk).source == "<h1>v1</h1>\n"
    assert RestorePoint.objects.count() == before


def test_empty_expected_hash_means_must_not_exist(api, page):
    response = api.put(f"{ART}/pltf_page/index", {"source": "x", "expected_sha256": ""})
    assert response.status_code == 409
    assert response.json()["current_sha256"] == page.sha256
    created = api.put(f"{ART}/pltf_page/fresh", {"source": "x", "expected_sha256": ""})
    assert created.status_code == 201


def test_if_match_that_does_not_match_answers_412(api, page):
    response = api.put(
        f"{ART}/pltf_page/index", {"source": "x"}, headers={"If-Match": f'"{sha("old")}"'}
    )
    assert response.status_code == 412
    assert response.json()["error"] == "precondition_failed"
    assert response.json()["current_sha256"] == page.sha256
    assert Artifact.objects.get(pk=page.pk).source == "<h1>v1</h1>\n"


def test_if_match_on_a_missing_artifact_answers_412(api, app):
    response = api.put(f"{ART}/pltf_page/ghost", {"source": "x"}, headers={"If-Match": "*"})
    assert response.status_code == 412
    assert not Artifact.objects.filter(name="ghost", deleted=False).exists()


def test_if_match_with_the_current_etag_writes(api, page):
    etag = api.get(f"{ART}/pltf_page/index")["ETag"]
    response = api.put(f"{ART}/pltf_page/index", {"source": "next"}, headers={"If-Match": etag})
    assert response.status_code == 200
    assert response.json()["previousSha256"] == page.sha256


def test_source_over_10_mib_answers_413_json(api, app):
    big = "a" * (10 * 1024 * 1024 + 1)
    response = api.put(f"{ART}/pltf_page/index", {"source": big})
    assert response.status_code == 413
    assert response["Content-Type"].startswith("application/problem+json")
    assert response.json()["error"] == "too_large"
    assert not Artifact.objects.filter(deleted=False).exists()


def test_body_over_the_upload_limit_answers_413_json_not_a_400_page(api, app):
    with override_settings(DATA_UPLOAD_MAX_MEMORY_SIZE=1000):
        response = api.put(f"{ART}/pltf_page/index", {"source": "b" * 5000})
    assert response.status_code == 413
    assert response.json()["error"] == "too_large"
    assert not Artifact.objects.exists()


def test_default_upload_limit_takes_a_full_10_mib_source(api, app):
    source = "\n".join(["x" * 1023] * (10 * 1024))  # exactly 10 MiB - 1 byte
    response = api.put(f"{ART}/pltf_page/big", {"source": source})
    assert response.status_code == 201


@pytest.mark.parametrize(
    ("collection", "name", "body"),
    [
        ("pltf_page", "index", {"source": "nul \x00 inside"}),
        ("pltf_nonsense", "index", {"source": "x"}),
        ("pltf_page", "bad%01name", {"source": "x"}),
        ("pltf_page", "x" * 201, {"source": "x"}),
        ("pltf_page", "index", {"source": "x", "requested_by": "y" * 201}),
    ],
)
def test_bad_input_answers_400_and_writes_nothing(api, app, collection, name, body):
    response = api.put(f"{ART}/{collection}/{name}", body)
    assert response.status_code == 400, response.content
    assert response.json()["error"] == "invalid_input"
    assert response.json()["message"]
    assert not Artifact.objects.filter(deleted=False).exists()


def test_malformed_json_answers_400_json(api, app):
    response = api.put(f"{ART}/pltf_page/index", '{"source": "unterminated')
    assert response.status_code == 400
    assert response.json()["error"] == "bad_request"


@pytest.mark.parametrize(
    "body",
    [
        {"source": 12},
        {"run_id": "x"},
        ["source"],
        "just a string",
        {"source": "x", "run_id": "bad\x00id"},
        {"source": "x", "tool": "\ud800"},
    ],
)
def test_body_of_the_wrong_shape_answers_422(api, app, body):
    response = api.put(f"{ART}/pltf_page/index", json.dumps(body))
    assert response.status_code == 422, response.content
    assert response.json()["error"] == "validation_error"
    assert not Artifact.objects.exists()


def test_a_missing_field_is_named_where_it_belongs(api, app):
    response = api.put(f"{ART}/pltf_page/index", {"run_id": "x"})
    assert response.status_code == 422
    assert response.json()["message"] == "body.source: Field required"


def test_route_spec_that_does_not_parse_answers_422(api, app):
    response = api.put(f"{ART}/pltf_api_route/list", {"source": "{not json"})
    assert response.status_code == 422
    assert response.json()["field"] == "source"


def test_ambiguous_route_answers_409(api, app):
    spec = json.dumps({"method": "GET", "path": "/quotes", "status": 200, "body": []})
    assert api.put(f"{ART}/pltf_api_route/one", {"source": spec}).status_code == 201
    response = api.put(f"{ART}/pltf_api_route/two", {"source": spec})
    assert response.status_code == 409
    assert response.json()["error"] == "conflict"


# --- artifacts: delete -------------------------------------------------------------------


def test_delete_answers_a_tombstone_receipt_and_is_captured(api, app, page):
    response = api.delete(f"{ART}/pltf_page/index", tool="cleanup-bot", run_id="r1")
    assert response.status_code == 200
    receipt = response.json()
    assert receipt["sha256"] == ""
    assert receipt["previousSha256"] == page.sha256
    artifact = Artifact.objects.get(pk=page.pk)
    assert artifact.deleted is True
    point = RestorePoint.objects.get(id=receipt["restorePointId"])
    assert (point.tool, point.requested_by, point.new_sha256) == ("cleanup-bot", "rvaid", "")
    assert point.previous_source == "<h1>v1</h1>\n"


def test_delete_with_stale_hash_answers_409_and_if_match_412(api, page):
    response = api.delete(f"{ART}/pltf_page/index", expected_sha256=sha("other"))
    assert response.status_code == 409
    assert response.json()["current_sha256"] == page.sha256
    response = api.delete(f"{ART}/pltf_page/index", headers={"If-Match": '"abc"'})
    assert response.status_code == 412
    assert Artifact.objects.get(pk=page.pk).deleted is False


def test_delete_unknown_answers_404(api, app):
    assert api.delete(f"{ART}/pltf_page/none").status_code == 404


# --- change sets -------------------------------------------------------------------------


def test_change_sets_newest_first_and_paginated(api, app):
    for n in range(5):
        api.put(f"{ART}/pltf_page/p{n}", {"source": f"v{n}", "run_id": f"run-{n}"})
    first = api.get("/apps/quotes/change-sets", per_page=2).json()
    assert first["total"] == 5
    assert first["next_page"] == 2
    assert [s["run_id"] for s in first["items"]] == ["run-4", "run-3"]
    third = api.get("/apps/quotes/change-sets", per_page=2, page=3).json()
    assert [s["run_id"] for s in third["items"]] == ["run-0"]
    assert third["next_page"] is None
    item = first["items"][0]
    assert item["tools"] == ["api"]
    assert item["requested_by"] == ["rvaid"]
    assert (item["artifacts"], item["points"], item["kind"]) == (1, 1, "change")


def test_change_sets_bad_page_answers_422(api, app):
    assert api.get("/apps/quotes/change-sets", page=0).status_code == 422
    assert api.get("/apps/quotes/change-sets", per_page="lots").status_code == 422


def test_change_set_detail_lists_its_points(api, app, page):
    receipt = api.put(
        f"{ART}/pltf_page/index", {"source": "<h1>v2</h1>\n", "run_id": "agent-turn"}
    ).json()
    api.put(f"{ART}/pltf_stylesheet/App", {"source": "body{}", "run_id": "agent-turn"})
    response = api.get(f"/change-sets/{receipt['changeSetId']}")
    assert response.status_code == 200
    detail = response.json()
    assert detail["id"] == receipt["changeSetId"]
    assert detail["app"] == "quotes"
    assert [p["artifact"]["name"] for p in detail["restore_points"]] == ["index", "App"]
    assert detail["restore_points"][0]["id"] == receipt["restorePointId"]
    assert detail["restore_points"][0]["tool"] == "api"
    assert detail["artifacts"] == 2


def test_change_set_unknown_answers_404(api, app):
    assert api.get("/change-sets/cs_rp_zzzzzzzz_00000000").status_code == 404
    assert api.get("/change-sets/not-an-id").status_code == 404


# --- schema -------------------------------------------------------------------------------


def test_openapi_schema_is_served_without_a_token(db):
    response = ApiClient(None).get("/openapi.json")
    assert response.status_code == 200
    paths = response.json()["paths"]
    assert "/api/v1/apps/{slug}/artifacts/{collection}/{name}" in paths
    assert "/api/v1/change-sets/{set_id}" in paths


# --- query counts ------------------------------------------------------------------------


def _queries_for(api, path: str, **query) -> int:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    api.get(path, **query)  # the token's first use of the minute writes last_used_on once
    with CaptureQueriesContext(connection) as captured:
        assert api.get(path, **query).status_code == 200
    return len(captured.captured_queries)


def test_listing_change_sets_takes_the_same_queries_for_5_or_40_sets(api, app):
    for n in range(5):
        services.write_artifact(app, "pltf_page", f"p{n}", "x", requested_by="a", tool="t")
    few = _queries_for(api, "/apps/quotes/change-sets", per_page=50)
    for n in range(5, 40):
        services.write_artifact(app, "pltf_page", f"p{n}", "x", requested_by="a", tool="t")
    many = _queries_for(api, "/apps/quotes/change-sets", per_page=50)
    assert many == few
    assert few <= 8


def test_listing_artifacts_takes_the_same_queries_for_2_or_30_artifacts(api, app):
    for n in range(2):
        services.write_artifact(app, "pltf_page", f"p{n}", "x", requested_by="a", tool="t")
    few = _queries_for(api, "/apps/quotes/artifacts")
    for n in range(2, 30):
        services.write_artifact(app, "pltf_page", f"p{n}", "x", requested_by="a", tool="t")
    many = _queries_for(api, "/apps/quotes/artifacts")
    assert many == few
