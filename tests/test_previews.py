"""Previews (docs/architecture.md#environments): any state of an app at /apps/<slug>/at/<ref>/,
sandboxed; production for anyone, every other state only for people who may view versions or holders
of a signed link."""

from __future__ import annotations

import json
import time

import pytest
from django.contrib.auth.models import Permission
from django.test import override_settings

from versions.errors import NotFound
from versions.messages import (
    PREVIEW_LINK_INVALID,
    PREVIEW_NOT_ALLOWED,
)
from versions.models import API_ROUTE, PAGE, STYLESHEET, App, Artifact
from versions.services import (
    add_member,
    name_point,
    preview_url,
    promote,
    resolve_state,
    write_artifact,
)

CSP = "sandbox allow-scripts allow-forms"
# The live door answers a refused preview's words as a plain-text 404.
NOT_ALLOWED = f"Not found. {PREVIEW_NOT_ALLOWED}"
LINK_INVALID = f"Not found. {PREVIEW_LINK_INVALID}"


def write(app, collection, name, source, run_id=None):
    return write_artifact(app, collection, name, source, requested_by="a", tool="t", run_id=run_id)


def route(v):
    return json.dumps({"method": "GET", "path": "/quotes/{id}", "body": {"id": "{id}", "v": v}})


@pytest.fixture
def history(app):
    """v1 everywhere (set one), promoted; then a turn to v2 (set two); then v3 in the draft."""
    first = write(app, PAGE, "index", "<h1>v1</h1>\n", run_id="one").change_set_id
    write(app, STYLESHEET, "App", "/* v1 */\n", run_id="one")
    write(app, API_ROUTE, "quote", route("v1"), run_id="one")
    deployment = promote(app, by="rvaid").deployment_id
    turn = write(app, PAGE, "index", "<h1>v2</h1>\n", run_id="two")
    write(app, STYLESHEET, "App", "/* v2 */\n", run_id="two")
    write(app, API_ROUTE, "quote", route("v2"), run_id="two")
    write(app, PAGE, "index", "<h1>v3</h1>\n", run_id="three")
    return {
        "app": app,
        "first": first,
        "deployment": deployment,
        "turn": turn.change_set_id,
        "point": turn.restore_point_id,
    }


@pytest.fixture
def viewer(client, django_user_model):
    user = django_user_model.objects.create_user("viewer")
    user.user_permissions.add(Permission.objects.get(codename="view_changeset"))
    client.force_login(user)
    return client


def page(client, url):
    response = client.get(url)
    assert response["Content-Security-Policy"] == CSP
    return response.status_code, response.content.decode()


# ---------------------------------------------------------------------------------------------
# The ref resolver
# ---------------------------------------------------------------------------------------------


def shas(state):
    return {e.key: e.sha256 for e in state.entries}


def test_each_ref_names_its_state(history):
    app = history["app"]
    draft_index = Artifact.objects.get(app=app, name="index").blob_id  # v3
    assert resolve_state(app, "draft").get(PAGE, "index").sha256 == draft_index
    production = resolve_state(app, "production")
    assert production.deployment_id == history["deployment"]
    assert shas(production) == shas(resolve_state(app, history["deployment"]))
    assert shas(resolve_state(app, history["first"])) == shas(production)
    after_turn = resolve_state(app, history["turn"])
    before_point = resolve_state(app, history["point"])
    assert after_turn.get(PAGE, "index").sha256 != before_point.get(PAGE, "index").sha256
    assert before_point.get(PAGE, "index").sha256 == production.get(PAGE, "index").sha256


@pytest.mark.parametrize(
    "ref", ["", "DRAFT", "dp_", "cs_nonsense", "rp_x_y", "../x", "a" * 300, None]
)
def test_malformed_refs_are_not_found_in_words(app, ref):
    with pytest.raises(NotFound) as exc:
        resolve_state(app, ref)
    assert "does not name a state of an app" in exc.value.message


def test_refs_of_another_app_are_not_found(history):
    other = App.objects.create(slug="other", name="Other")
    for ref in (history["turn"], history["point"], history["deployment"]):
        with pytest.raises(NotFound) as exc:
            resolve_state(other, ref)
        assert exc.value.message.startswith("App “other” has no ")


def test_production_of_an_app_that_never_promoted_is_not_found_in_words(app):
    with pytest.raises(NotFound) as exc:
        resolve_state(app, "production")
    assert exc.value.message == (
        "App “quotes” has no production deployment yet: /apps/quotes/ serves its draft. "
        "Promote a state to production first."
    )


# ---------------------------------------------------------------------------------------------
# Who may see a preview
# ---------------------------------------------------------------------------------------------


def test_anyone_may_preview_production(client, history):
    assert page(client, "/apps/quotes/at/production/") == (200, "<h1>v1</h1>\n")


@pytest.mark.parametrize("ref", ["draft", "deployment", "turn", "point"])
def test_an_anonymous_preview_of_any_other_state_is_a_404_in_words(client, history, ref):
    ref = history.get(ref, ref)
    status, body = page(client, f"/apps/quotes/at/{ref}/")
    assert status == 404
    assert body == NOT_ALLOWED


def test_a_signed_in_person_without_the_view_permission_gets_a_404(
    client, history, django_user_model
):
    client.force_login(django_user_model.objects.create_user("stranger"))
    assert page(client, "/apps/quotes/at/draft/") == (404, NOT_ALLOWED)


def test_a_role_on_the_app_opens_its_previews_and_a_role_elsewhere_does_not(
    client, history, django_user_model
):
    # Who may open a preview is the services' decision: a role on this app is enough (no
    # global permission), a role on another app is not.
    other = App.objects.create(slug="other", name="Other")
    member = django_user_model.objects.create_user("member")
    outsider = django_user_model.objects.create_user("outsider")
    add_member(history["app"], role="viewer", username=member.username, by="setup")
    add_member(other, role="owner", username=outsider.username, by="setup")
    client.force_login(outsider)
    assert page(client, "/apps/quotes/at/draft/") == (404, NOT_ALLOWED)
    assert client.get("/apps/quotes/at/draft/api/quotes/9").status_code == 404
    client.force_login(member)
    assert page(client, "/apps/quotes/at/draft/") == (200, "<h1>v3</h1>\n")
    assert client.get("/apps/quotes/at/draft/api/quotes/9").json()["v"] == "v2"


def test_a_person_who_may_view_versions_previews_every_state(viewer, history):
    assert page(viewer, "/apps/quotes/at/draft/") == (200, "<h1>v3</h1>\n")
    assert page(viewer, f"/apps/quotes/at/{history['deployment']}/") == (200, "<h1>v1</h1>\n")
    assert page(viewer, f"/apps/quotes/at/{history['turn']}/") == (200, "<h1>v2</h1>\n")
    assert page(viewer, f"/apps/quotes/at/{history['point']}/") == (200, "<h1>v1</h1>\n")
    assert page(viewer, f"/apps/quotes/at/{history['turn']}/assets/App.css") == (200, "/* v2 */\n")
    response = viewer.get(f"/apps/quotes/at/{history['turn']}/api/quotes/9")
    assert response.json() == {"id": "9", "v": "v2"}
    assert response["Content-Security-Policy"] == CSP
    assert viewer.get("/apps/quotes/at/draft/api/quotes/9").json()["v"] == "v2"
    assert viewer.get(f"/apps/quotes/at/{history['deployment']}/api/quotes/9").json()["v"] == "v1"


def test_preview_assets_carry_a_strong_etag_and_answer_304(viewer, history):
    response = viewer.get(f"/apps/quotes/at/{history['turn']}/assets/App.css")
    again = viewer.get(
        f"/apps/quotes/at/{history['turn']}/assets/App.css", HTTP_IF_NONE_MATCH=response["ETag"]
    )
    assert again.status_code == 304


def test_unknown_refs_and_refs_of_another_app_are_a_404_in_words(viewer, history):
    other = App.objects.create(slug="other", name="Other")
    write(other, PAGE, "index", "theirs")
    status, body = page(viewer, f"/apps/other/at/{history['turn']}/")
    assert status == 404
    assert "App “other” has no change set" in body
    status, body = page(viewer, "/apps/quotes/at/nonsense/")
    assert status == 404
    assert "does not name a state of an app" in body
    assert page(viewer, "/apps/nope/at/draft/")[0] == 404


# ---------------------------------------------------------------------------------------------
# Signed preview links
# ---------------------------------------------------------------------------------------------


def test_a_signed_link_opens_the_preview_its_assets_and_its_routes_without_a_session(
    client, history
):
    url = preview_url(history["app"], history["turn"])
    assert url.startswith(f"/apps/quotes/at/{history['turn']}/s/")
    assert url.endswith("/")
    assert page(client, url) == (200, "<h1>v2</h1>\n")
    assert page(client, url + "assets/App.css") == (200, "/* v2 */\n")
    assert client.get(url + "api/quotes/3").json() == {"id": "3", "v": "v2"}


def test_a_signed_link_opens_only_the_state_it_was_made_for(client, history):
    url = preview_url(history["app"], history["turn"])
    token = url.rstrip("/").rsplit("/", 1)[1]
    status, body = page(client, f"/apps/quotes/at/draft/s/{token}/")
    assert (status, body) == (404, LINK_INVALID)
    other = App.objects.create(slug="other", name="Other")
    write(other, PAGE, "index", "theirs")
    assert page(client, f"/apps/other/at/{history['turn']}/s/{token}/")[0] == 404


def test_a_tampered_signed_link_is_a_404(client, history):
    url = preview_url(history["app"], "draft")
    assert page(client, url[:-3] + "xx/") == (404, LINK_INVALID)
    assert page(client, "/apps/quotes/at/draft/s/garbage/")[0] == 404


def test_a_signed_link_expires(client, history, monkeypatch):
    url = preview_url(history["app"], "draft", hours=1)
    assert page(client, url)[0] == 200
    later = time.time() + 3601
    monkeypatch.setattr(time, "time", lambda: later)
    assert page(client, url) == (404, LINK_INVALID)


@override_settings(VERSIONS_PREVIEW_LINK_HOURS=2)
def test_signed_links_last_the_configured_hours_by_default(client, history, monkeypatch):
    url = preview_url(history["app"], "draft")
    start = time.time()
    monkeypatch.setattr(time, "time", lambda: start + 7000)
    assert page(client, url)[0] == 200
    monkeypatch.setattr(time, "time", lambda: start + 7300)
    assert page(client, url)[0] == 404


# ---------------------------------------------------------------------------------------------
# States that cannot be rebuilt whole
# ---------------------------------------------------------------------------------------------


def test_a_page_the_state_does_not_hold_is_a_404_that_says_so(viewer, app):
    """Found in use: the preview of the state before the set that created an app's pages
    framed a bare "Not found."."""
    point = write(app, PAGE, "index", "<h1>first</h1>\n").restore_point_id
    status, body = page(viewer, f"/apps/quotes/at/{point}/")
    assert status == 404
    assert body == "Not found: this state has no “index”: it did not exist then, or was deleted."
    assert page(viewer, f"/apps/quotes/at/{point}/assets/App.css")[0] == 404


@override_settings(VERSIONS_MAX_STORED_BYTES=100)
def test_a_state_with_a_missing_source_serves_what_it_can_and_404s_the_missing_artifact(
    viewer, app
):
    write(app, STYLESHEET, "App", "/*" + "x" * 200 + "*/\n")
    write(app, PAGE, "index", "<h1>then</h1>\n")
    point = write(app, STYLESHEET, "App", "/* small */\n").restore_point_id
    assert page(viewer, f"/apps/quotes/at/{point}/") == (200, "<h1>then</h1>\n")
    status, body = page(viewer, f"/apps/quotes/at/{point}/assets/App.css")
    assert status == 404
    assert body.startswith("Not found: “App” is missing from this state. Missing: not stored.")


@override_settings(VERSIONS_POINTS_PER_APP=2)
def test_a_pruned_source_is_named_missing_in_the_preview(viewer, app):
    write(app, PAGE, "index", "v1")
    kept = write(app, PAGE, "about", "a1").restore_point_id
    name_point(kept, "kept", by="rvaid")
    for i in range(4):
        write(app, PAGE, "index", f"v{i + 2}")
    status, body = page(viewer, f"/apps/quotes/at/{kept}/")
    assert status == 404
    assert "Missing: pruned." in body
