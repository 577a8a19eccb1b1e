"""The panel's reviewing pieces through Django's test client (SPEC §16): 404s in words even with
DEBUG on, local times, search and filters, compare."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client

from versions import services
from versions.models import App

pytestmark = pytest.mark.django_db


@pytest.fixture
def client_in(app: App) -> Client:
    user = User.objects.create_superuser("rvaid", "rvaid@example.com", "pw-123456")
    client = Client()
    client.force_login(user)
    return client


@pytest.mark.parametrize("debug", [True, False])
@pytest.mark.parametrize(
    "path, words",
    [
        ("/apps/quotes/versions/change-sets/cs_nope/", "There is no change set “cs_nope”"),
        ("/apps/quotes/versions/points/rp_nope/", "There is no restore point “rp_nope”"),
        ("/apps/nope/versions/", "There is no app “nope”"),
        ("/apps/quotes/versions/restore-sets/cs_nope/", "There is no restore set “cs_nope”"),
    ],
)
def test_panel_404s_are_in_words_even_with_debug_on(client_in, settings, debug, path, words):
    settings.DEBUG = debug
    response = client_in.get(path)
    assert response.status_code == 404
    html = response.content.decode()
    assert words in html
    assert "Back to the apps" in html
    assert "URLconf" not in html and "technical" not in html.lower()


def test_an_htmx_404_says_what_was_not_found_in_its_header(client_in, settings):
    settings.DEBUG = True
    response = client_in.get("/apps/quotes/versions/change-sets/cs_nope/", HTTP_HX_REQUEST="true")
    assert response.status_code == 404
    assert "cs_nope" in response["X-Versions-Error"]


def test_times_carry_utc_for_the_viewers_local_time(client_in, app):
    services.write_artifact(
        app, "pltf_page", "index", "<h1>Hi</h1>\n", requested_by="a", tool="t", run_id="r"
    )
    html = client_in.get("/apps/quotes/versions/").content.decode()
    assert 'data-utc="' in html and 'class="abs" data-local' in html
