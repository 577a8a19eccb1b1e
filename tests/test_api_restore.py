"""The agent API's restore endpoints: Restore all, restore a point, receipts, permissions."""

from __future__ import annotations

import pytest
from api_helpers import ApiClient, make_token, make_user

from versions import services
from versions.models import App, Artifact, AuditEvent, ChangeSet, RestorePoint

pytestmark = pytest.mark.django_db

ART = "/apps/quotes/artifacts"
NOOP = "Every artifact already matched the state before this set — nothing was written."


@pytest.fixture
def restorer(app) -> ApiClient:
    make_user("rvaid", can_restore=True)
    return ApiClient(make_token("rvaid", "quotes"))


@pytest.fixture
def turn(app) -> str:
    """The demo situation: a page and a stylesheet, then one agent turn that changed both."""
    services.write_artifact(
        app, "pltf_page", "index", "<h1>before</h1>\n", requested_by="s", tool="t"
    )
    services.write_artifact(
        app, "pltf_stylesheet", "App", "body{color:red}\n", requested_by="s", tool="t"
    )
    first = services.write_artifact(
        app, "pltf_page", "index", "<h1>after</h1>\n", requested_by="a", tool="t", run_id="turn"
    )
    services.write_artifact(
        app,
        "pltf_stylesheet",
        "App",
        "body{color:blue}\n",
        requested_by="a",
        tool="t",
        run_id="turn",
    )
    return first.change_set_id


def sources(app: App) -> dict[str, str]:
    return {a.name: a.source for a in Artifact.objects.filter(app=app).select_related("blob")}


def test_restore_all_writes_the_state_before_the_set_and_answers_the_receipt(restorer, app, turn):
    response = restorer.post(f"/change-sets/{turn}/restore", {})
    assert response.status_code == 200
    receipt = response.json()
    assert list(receipt) == [
        "setId",
        "kind",
        "restoredFromSet",
        "items",
        "skipped",
        "created_by",
        "created_on",
    ]
    assert receipt["kind"] == "restore"
    assert receipt["restoredFromSet"] == turn
    assert receipt["created_by"] == "rvaid"
    assert {i["name"] for i in receipt["items"]} == {"index", "App"}
    assert sources(app) == {"index": "<h1>before</h1>\n", "App": "body{color:red}\n"}
    stored = restorer.get(f"/restore-sets/{receipt['setId']}/receipt")
    assert stored.status_code == 200
    assert stored.json() == receipt
    again = restorer.post(f"/change-sets/{turn}/restore", {})
    assert again.status_code == 200
    assert again.json()["kind"] == "noop"
    assert again.json()["message"] == NOOP


def test_restore_all_dry_run_writes_nothing(restorer, app, turn):
    response = restorer.post(f"/change-sets/{turn}/restore", {"dry_run": True})
    assert response.status_code == 200
    assert response.json()["kind"] == "dry_run"
    assert sources(app)["index"] == "<h1>after</h1>\n"
    assert not ChangeSet.objects.filter(kind="restore").exists()


def test_restore_all_refused_when_reviewed_hash_drifted_answers_409_with_findings(
    restorer, app, turn
):
    response = restorer.post(
        f"/change-sets/{turn}/restore", {"expected": {"pltf_page/index": "0" * 64}}
    )
    assert response.status_code == 409
    body = response.json()
    # The refused pre-flight of docs/api.md#receipts, at the top level, with the error's keys
    # (docs/api.md#errors).
    assert body["error"] == "preflight_failed" and body["message"]
    assert body["kind"] == "preflight_failed"
    assert body["restoredFromSet"] == turn and body["written"] == 0
    assert body["findings"][0]["name"] == "index"
    assert sources(app)["index"] == "<h1>after</h1>\n"
    assert AuditEvent.objects.filter(action="preflight_failed").exists()


def test_restore_all_with_a_malformed_expected_key_answers_400(restorer, app, turn):
    response = restorer.post(f"/change-sets/{turn}/restore", {"expected": {"no-slash": "x"}})
    assert response.status_code == 400
    assert sources(app)["index"] == "<h1>after</h1>\n"


def test_restore_body_of_the_wrong_shape_answers_422(restorer, turn):
    assert restorer.post(f"/change-sets/{turn}/restore", {"dry_run": "perhaps"}).status_code == 422
    assert restorer.post(f"/change-sets/{turn}/restore", {"expected": ["x"]}).status_code == 422


@pytest.mark.parametrize("content_type", ["application/octet-stream", "application/json"])
def test_restore_endpoints_take_a_request_with_no_body(restorer, app, turn, content_type):
    """Every field of their bodies is optional (docs/api.md#restore): no body is a plain restore."""
    point = RestorePoint.objects.get(change_set_id=turn, artifact__name="index")

    def post_nothing(path: str):
        return restorer.client.generic(
            "POST",
            f"/api/v1{path}",
            b"",
            content_type=content_type,
            headers={"Authorization": f"Bearer {restorer.token}"},
        )

    one = post_nothing(f"/restore-points/{point.id}/restore")
    assert one.status_code == 200, one.content
    assert [i["name"] for i in one.json()["items"]] == ["index"]
    assert sources(app)["index"] == "<h1>before</h1>\n"
    all_ = post_nothing(f"/change-sets/{turn}/restore")
    assert all_.status_code == 200, all_.content
    assert [i["name"] for i in all_.json()["items"]] == ["App"]  # index already matched
    assert sources(app) == {"index": "<h1>before</h1>\n", "App": "body{color:red}\n"}


def test_a_body_that_is_not_json_is_still_refused_in_words(restorer, turn):
    response = restorer.post(f"/change-sets/{turn}/restore", "dry_run please")
    assert response.status_code == 400
    assert response.json()["error"] == "bad_request"
    assert "send a JSON object" in response.json()["message"]


def test_restore_one_point(restorer, app, turn):
    point = RestorePoint.objects.get(change_set_id=turn, artifact__name="index")
    response = restorer.post(f"/restore-points/{point.id}/restore", {})
    assert response.status_code == 200
    assert response.json()["kind"] == "restore"
    assert [i["name"] for i in response.json()["items"]] == ["index"]
    assert sources(app) == {"index": "<h1>before</h1>\n", "App": "body{color:blue}\n"}
    counter = RestorePoint.objects.get(id=response.json()["items"][0]["counterPointId"])
    assert counter.kind == "counter"
    assert counter.previous_source == "<h1>after</h1>\n"


def test_restore_point_with_a_stale_reviewed_hash_answers_409(restorer, app, turn):
    point = RestorePoint.objects.get(change_set_id=turn, artifact__name="index")
    response = restorer.post(f"/restore-points/{point.id}/restore", {"expected_sha256": "f" * 64})
    assert response.status_code == 409
    assert response.json()["error"] == "preflight_failed"
    assert sources(app)["index"] == "<h1>after</h1>\n"


def test_undo_a_restore_through_the_api(restorer, app, turn):
    restored = restorer.post(f"/change-sets/{turn}/restore", {}).json()
    undo = restorer.post(f"/change-sets/{restored['setId']}/restore", {})
    assert undo.status_code == 200
    assert sources(app) == {"index": "<h1>after</h1>\n", "App": "body{color:blue}\n"}


def test_user_without_restore_permission_answers_403_and_nothing_is_written(app, turn):
    make_user("viewer")
    api = ApiClient(make_token("viewer", "quotes"))
    response = api.post(f"/change-sets/{turn}/restore", {})
    assert response.status_code == 403
    assert response.json()["error"] == "forbidden"
    point = RestorePoint.objects.filter(change_set_id=turn).first()
    assert api.post(f"/restore-points/{point.id}/restore", {}).status_code == 403
    assert sources(app)["index"] == "<h1>after</h1>\n"
    # Writes need the token's scope only.
    assert api.put(f"{ART}/pltf_page/index", {"source": "mine"}).status_code == 200


def test_superuser_token_can_restore(app, turn):
    from django.contrib.auth import get_user_model

    get_user_model().objects.create_superuser("root", password=None)
    api = ApiClient(make_token("root", "quotes"))
    assert api.post(f"/change-sets/{turn}/restore", {}).status_code == 200


def test_restore_of_another_apps_set_answers_404(app, turn):
    App.objects.create(slug="other", name="Other")
    make_user("rvaid", can_restore=True)
    api = ApiClient(make_token("rvaid", "other"))
    assert api.post(f"/change-sets/{turn}/restore", {}).status_code == 404
    point = RestorePoint.objects.filter(change_set_id=turn).first()
    assert api.post(f"/restore-points/{point.id}/restore", {}).status_code == 404
    assert sources(app)["index"] == "<h1>after</h1>\n"


def test_restore_unknown_set_point_or_receipt_answers_404(restorer, turn):
    assert restorer.post("/change-sets/cs_rp_zzzz_aaaaaaaa/restore", {}).status_code == 404
    assert restorer.post("/restore-points/rp_zzzz_aaaaaaaa/restore", {}).status_code == 404
    assert restorer.get("/restore-sets/rs_zzzz_aaaaaaaa/receipt").status_code == 404
    # A change set is not a restore set: it has no receipt.
    assert restorer.get(f"/restore-sets/{turn}/receipt").status_code == 404


def test_restore_without_a_token_answers_401(app, turn):
    assert ApiClient(None).post(f"/change-sets/{turn}/restore", {}).status_code == 401
