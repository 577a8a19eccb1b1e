"""The API's HTTP details (docs/api.md#http-details): Location on every 201 and on a promotion, a
DELETE of a missing artifact is 404 whatever If-Match says, and an app that requires
preconditions answers 428 to a write that sends none (docs/api.md#require-preconditions)."""

from __future__ import annotations

import hashlib

import pytest
from api_helpers import ApiClient, make_token, make_user
from django.contrib.auth.models import Permission, User
from django.test import Client

from versions import messages, services
from versions.errors import NotFound
from versions.models import App, Artifact, AuditEvent, RestorePoint
from versions.terms import APP_SETTINGS_CHANGED

pytestmark = pytest.mark.django_db

ART = "/apps/quotes/artifacts"


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


@pytest.fixture
def api(app) -> ApiClient:
    make_user("rvaid")
    return ApiClient(make_token("rvaid", "quotes"))


@pytest.fixture
def page(app) -> Artifact:
    services.write_artifact(app, "pltf_page", "index", "<h1>v1</h1>\n", requested_by="s", tool="t")
    return Artifact.objects.get(app=app, name="index")


# --- Location -----------------------------------------------------------------------------


def test_a_create_answers_201_with_the_artifacts_location(api):
    created = api.put(f"{ART}/pltf_page/new page", {"source": "<p>new</p>\n"})
    assert created.status_code == 201
    assert created["Location"] == "/api/v1/apps/quotes/artifacts/pltf_page/new%20page"
    read = api.client.get(created["Location"], headers={"Authorization": f"Bearer {api.token}"})
    assert read.status_code == 200 and read.json()["source"] == "<p>new</p>\n"


def test_an_update_answers_200_without_location(api, page):
    updated = api.put(f"{ART}/pltf_page/index", {"source": "<h1>v2</h1>\n"})
    assert updated.status_code == 200
    assert "Location" not in updated


def test_a_promotion_and_a_rollback_say_where_the_deployments_are(app, page):
    user = make_user("shipper")
    user.user_permissions.add(Permission.objects.get(codename="promote_deployment"))
    token, _row = services.create_agent_token("shipper", ["quotes"], can_promote=True)
    api = ApiClient(token)
    dry = api.post("/apps/quotes/deployments", {"dry_run": True})
    assert dry.status_code == 200 and "Location" not in dry
    first = api.post("/apps/quotes/deployments", {})
    assert first.status_code == 200
    assert first["Location"] == "/api/v1/apps/quotes/deployments"
    listed = api.client.get(first["Location"], headers={"Authorization": f"Bearer {token}"})
    assert listed.json()["production"] == first.json()["deploymentId"]
    services.write_artifact(app, "pltf_page", "index", "<h1>v2</h1>\n", requested_by="s", tool="t")
    api.post("/apps/quotes/deployments", {})
    back = api.post("/apps/quotes/production/rollback", {})
    assert back.status_code == 200 and back["Location"] == "/api/v1/apps/quotes/deployments"


# --- DELETE of a missing artifact ----------------------------------------------------------


@pytest.mark.parametrize("if_match", [None, '"' + "0" * 64 + '"', "*", 'W/"abc"'])
def test_delete_of_a_missing_artifact_is_404_whatever_if_match(api, app, if_match):
    headers = {"If-Match": if_match} if if_match else None
    response = api.delete(f"{ART}/pltf_page/ghost", headers=headers)
    assert response.status_code == 404
    assert response["Content-Type"] == "application/problem+json"
    assert response.json()["message"] == messages.ARTIFACT_NOT_FOUND.format(
        collection="pltf_page", name="ghost", app="quotes"
    )


def test_delete_of_a_deleted_artifact_is_404_whatever_if_match(api, page):
    assert api.delete(f"{ART}/pltf_page/index").status_code == 200
    again = api.delete(f"{ART}/pltf_page/index", headers={"If-Match": f'"{page.sha256}"'})
    assert again.status_code == 404


def test_delete_with_a_stale_if_match_on_an_existing_artifact_is_still_412(api, page):
    response = api.delete(f"{ART}/pltf_page/index", headers={"If-Match": '"' + "0" * 64 + '"'})
    assert response.status_code == 412
    page.refresh_from_db()
    assert not page.deleted


# --- require_preconditions ------------------------------------------------------------------


@pytest.fixture
def strict_app(app) -> App:
    services.change_app(app, require_preconditions=True)
    return app


def test_a_write_without_a_precondition_is_428_and_writes_nothing(api, strict_app, page):
    points = RestorePoint.objects.count()
    response = api.put(f"{ART}/pltf_page/index", {"source": "<h1>v2</h1>\n"})
    assert response.status_code == 428
    assert response["Content-Type"] == "application/problem+json"
    body = response.json()
    assert body["error"] == "precondition_required"
    assert body["message"] == messages.PRECONDITION_REQUIRED.format(slug="quotes")
    assert "If-Match" in body["message"] and "expected_sha256" in body["message"]
    assert api.delete(f"{ART}/pltf_page/index").status_code == 428
    assert RestorePoint.objects.count() == points
    page.refresh_from_db()
    assert page.sha256 == sha("<h1>v1</h1>\n") and not page.deleted


def test_each_precondition_is_enough(api, strict_app, page):
    current = page.sha256
    by_body = api.put(f"{ART}/pltf_page/index", {"source": "2\n", "expected_sha256": current})
    assert by_body.status_code == 200
    by_header = api.put(
        f"{ART}/pltf_page/index", {"source": "3\n"}, headers={"If-Match": f'"{sha("2" + chr(10))}"'}
    )
    assert by_header.status_code == 200
    created = api.put(f"{ART}/pltf_page/fresh", {"source": "x\n"}, headers={"If-None-Match": "*"})
    assert created.status_code == 201
    new = api.put(f"{ART}/pltf_page/fresher", {"source": "y\n", "expected_sha256": ""})
    assert new.status_code == 201
    gone = api.delete(f"{ART}/pltf_page/fresh", expected_sha256=sha("x\n"))
    assert gone.status_code == 200


def test_an_app_that_does_not_require_preconditions_takes_plain_writes(api, page):
    assert api.put(f"{ART}/pltf_page/index", {"source": "plain\n"}).status_code == 200


def test_the_setting_is_recorded_when_it_changes_and_needs_the_owner(app):
    services.change_app(app, require_preconditions=True)
    services.change_app(app, require_preconditions=True)  # unchanged: not recorded again
    events = AuditEvent.objects.filter(action=APP_SETTINGS_CHANGED)
    assert [e.details for e in events] == [{"require_preconditions": True}]
    viewer = services.actor_for_user(make_user("viewer"))
    with pytest.raises(NotFound):  # a user with no role: the app does not exist for them
        services.change_app(app, require_preconditions=False, actor=viewer)
    app.refresh_from_db()
    assert app.require_preconditions


def test_the_admin_edits_the_setting(app):
    client = Client()
    client.force_login(User.objects.create_superuser("boss", password=None))
    response = client.post(
        f"/admin/versions/app/{app.pk}/change/",
        {"name": "Quote approvals", "require_preconditions": "on"},
        follow=True,
    )
    assert response.status_code == 200
    app.refresh_from_db()
    assert app.require_preconditions
    client.post(f"/admin/versions/app/{app.pk}/change/", {"name": "Quote approvals"}, follow=True)
    app.refresh_from_db()
    assert not app.require_preconditions
