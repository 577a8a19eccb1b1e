"""POST /api/v1/apps/{slug}/restore-to-release (docs/architecture.md#release-review): receipt, dry
run, noop, errors."""

from __future__ import annotations

import pytest
from api_helpers import ApiClient, make_token, make_user

from versions import services
from versions.messages import (
    NOOP_MESSAGE,
)
from versions.models import App, Artifact, ChangeSet, RestorePoint
from versions.selectors import NO_RELEASE

pytestmark = pytest.mark.django_db

URL = "/apps/quotes/restore-to-release"


def _write(app: App, name: str, source: str, run: str) -> str:
    receipt = services.write_artifact(
        app, "pltf_page", name, source, requested_by="agent", tool="t", run_id=run
    )
    return receipt.change_set_id


@pytest.fixture
def released(app: App) -> str:
    release = _write(app, "index", "v1\n", "r")
    services.mark_release(release, by="rvaid")
    _write(app, "index", "v2\n", "t1")
    _write(app, "new", "fresh\n", "t1")
    return release


def test_restore_to_release_over_the_api(app, released):
    make_user("rvaid", can_restore=True)
    client = ApiClient(make_token("rvaid", "quotes"))

    dry = client.post(URL, {"dry_run": True})
    assert dry.status_code == 200
    assert dry.json()["kind"] == "dry_run" and dry.json()["scope"] == "since_release"
    assert not ChangeSet.objects.filter(kind=ChangeSet.RESTORE).exists()

    response = client.post(URL, {})
    assert response.status_code == 200
    data = response.json()
    assert data["kind"] == "restore"
    assert data["restoredFromSet"] == released and data["scope"] == "since_release"
    assert {i["name"] for i in data["items"]} == {"index", "new"}
    assert Artifact.objects.get(app=app, name="index").source == "v1\n"
    assert Artifact.objects.get(app=app, name="new").deleted
    receipt = client.get(f"/restore-sets/{data['setId']}/receipt").json()
    assert receipt["scope"] == "since_release"

    again = client.post(URL, {}).json()
    assert again["kind"] == "noop" and again["message"] == NOOP_MESSAGE


def test_refused_preflight_is_409_with_the_receipt(app, released):
    make_user("rvaid", can_restore=True)
    client = ApiClient(make_token("rvaid", "quotes"))
    points = RestorePoint.objects.count()
    response = client.post(URL, {"expected": {"pltf_page/index": "0" * 64}})
    assert response.status_code == 409
    body = response.json()
    assert body["error"] == "preflight_failed"
    assert body["kind"] == "preflight_failed" and body["written"] == 0
    assert body["findings"][0]["name"] == "index"
    assert RestorePoint.objects.count() == points


def test_errors_are_json_with_words(app, released):
    make_user("viewer")
    viewer = ApiClient(make_token("viewer", "quotes"))
    denied = viewer.post(URL, {})
    assert denied.status_code == 403 and denied.json()["error"] == "forbidden"
    assert ApiClient(None).post(URL, {}).status_code == 401
    make_user("rvaid", can_restore=True)
    App.objects.create(slug="other", name="Other")
    client = ApiClient(make_token("rvaid", "quotes"))
    # Another app answers what a missing one does (docs/api.md#existence).
    assert client.post("/apps/other/restore-to-release", {}).status_code == 404
    assert client.post("/apps/nope/restore-to-release", {}).status_code == 404
    assert client.post(URL, {"dry_run": "maybe"}).status_code == 422
    services.unmark_release(app, by="rvaid")
    none = client.post(URL, {})
    assert none.status_code == 409
    # Problem details (docs/api.md#errors) keep error and message as extension members.
    assert (
        none.json().items()
        >= {"error": "conflict", "message": NO_RELEASE.format(slug="quotes")}.items()
    )
