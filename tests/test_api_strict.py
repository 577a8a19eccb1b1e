"""Strict inputs (docs/api.md#strict-inputs): an API body or a write's query that names a field
the operation does not take is refused in words, naming the known field it resembles, and
nothing is written."""

from __future__ import annotations

import hashlib

import pytest
from api_helpers import ApiClient, make_token, make_user

from versions import services
from versions.errors import UnknownField
from versions.models import Artifact, ChangeSet, RestorePoint
from versions.strict import refuse_unknown, suggestion, unknown_field_error

pytestmark = pytest.mark.django_db

ART = "/apps/quotes/artifacts"


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


@pytest.fixture
def api(app) -> ApiClient:
    make_user("rvaid")
    return ApiClient(make_token("rvaid", "quotes"))


@pytest.fixture
def page(app):
    services.write_artifact(
        app, "pltf_page", "index", "<h1>v1</h1>\n", requested_by="setup", tool="fixtures"
    )
    return Artifact.objects.get(app=app, name="index")


def test_camel_case_names_its_snake_case_field():
    assert suggestion("expectedSha256", ["source", "expected_sha256"]) == "expected_sha256"
    error = unknown_field_error("expectedSha256", ["source", "expected_sha256"])
    assert error.message == "unknown field `expectedSha256`; did you mean `expected_sha256`?"
    assert (error.field, error.suggestion) == ("expectedSha256", "expected_sha256")


def test_a_typo_is_matched_by_difflib():
    assert suggestion("dryrun", ["dry_run", "expected"]) == "dry_run"
    assert suggestion("expcted", ["dry_run", "expected"]) == "expected"


def test_nothing_close_offers_no_suggestion_but_lists_the_known_fields():
    error = unknown_field_error("zzz", ["dry_run", "expected"])
    assert error.suggestion is None
    assert "did you mean" not in error.message
    assert error.message == "unknown field `zzz`; the known fields are `dry_run`, `expected`."


def test_known_fields_pass():
    refuse_unknown(["source"], ["source", "message"])
    with pytest.raises(UnknownField):
        refuse_unknown(["source", "sauce"], ["source", "message"])


def test_misspelt_precondition_on_a_write_is_refused_and_writes_nothing(api, page):
    points = RestorePoint.objects.count()
    stale = sha("something else")
    r = api.put(f"{ART}/pltf_page/index", {"source": "<h1>v2</h1>\n", "expectedSha256": stale})
    assert r.status_code == 422
    assert r["Content-Type"] == "application/problem+json"
    body = r.json()
    assert body["error"] == "unknown_field"
    assert body["message"] == "unknown field `expectedSha256`; did you mean `expected_sha256`?"
    assert body["field"] == "expectedSha256"
    assert body["suggestion"] == "expected_sha256"
    page.refresh_from_db()
    assert page.sha256 == sha("<h1>v1</h1>\n")
    assert RestorePoint.objects.count() == points


def test_misspelt_precondition_on_a_delete_query_is_refused(api, page):
    r = api.delete(f"{ART}/pltf_page/index", expectedSha256=sha("stale"))
    assert r.status_code == 422
    assert r.json()["message"] == (
        "unknown field `expectedSha256`; did you mean `expected_sha256`?"
    )
    page.refresh_from_db()
    assert not page.deleted


@pytest.mark.parametrize(
    ("path", "body", "field", "close"),
    [
        ("/change-sets/{set}/restore", {"dryRun": True}, "dryRun", "dry_run"),
        ("/change-sets/{set}/revert", {"expectd": {}}, "expectd", "expected"),
        ("/apps/quotes/restore-to-release", {"dry-run": True}, "dry-run", "dry_run"),
        ("/apps/quotes/deployments", {"reff": "draft"}, "reff", "ref"),
        ("/apps/quotes/production/rollback", {"too": None}, "too", "to"),
    ],
)
def test_every_post_body_refuses_unknown_fields(api, page, path, body, field, close):
    change_set = ChangeSet.objects.first()
    sets = ChangeSet.objects.count()
    r = api.post(path.format(set=change_set.id), body)
    assert r.status_code == 422, r.content
    answer = r.json()
    assert (answer["field"], answer["suggestion"]) == (field, close)
    assert answer["message"] == f"unknown field `{field}`; did you mean `{close}`?"
    assert ChangeSet.objects.count() == sets


def test_restore_point_body_refuses_unknown_fields(api, page):
    point = RestorePoint.objects.first()
    r = api.post(f"/restore-points/{point.id}/restore", {"expected_sha": ""})
    assert r.status_code == 422
    assert r.json()["suggestion"] == "expected_sha256"


def test_patch_body_refuses_unknown_fields(api, page):
    change_set = ChangeSet.objects.first()
    r = api.client.patch(
        f"/api/v1/change-sets/{change_set.id}",
        '{"message": "x", "mesage": "y"}',
        content_type="application/json",
        headers={"Authorization": f"Bearer {api.token}"},
    )
    assert r.status_code == 422
    assert r.json()["message"] == "unknown field `mesage`; did you mean `message`?"
    change_set.refresh_from_db()
    assert change_set.message != "x"
