"""Every answer under /apps/<slug>/ carries the sandbox (docs/architecture.md#live-app-safety):
Django's own 404s and the redirect that adds the slash too, not only the live views' answers; the
panel stays unsandboxed."""

from __future__ import annotations

import pytest

from versions.models import PAGE
from versions.services import (
    write_artifact,
)

CSP = "sandbox allow-scripts allow-forms"


@pytest.fixture
def live(app):
    write_artifact(app, PAGE, "index", "<h1>Quotes</h1>\n", requested_by="a", tool="t")
    return app


@pytest.mark.parametrize(
    "url",
    [
        "/apps/quotes/other",
        "/apps/quotes/p/",
        "/apps/quotes/assets/x.txt",
        "/apps/quotes/p/index/",
        "/apps/quotes/p/a/b",
        "/apps/nobody/other",
    ],
)
def test_djangos_own_404s_under_an_app_carry_the_sandbox(client, live, url):
    response = client.get(url)
    assert response.status_code == 404
    assert response["Content-Security-Policy"] == CSP
    assert response["X-Content-Type-Options"] == "nosniff"


def test_the_redirect_that_adds_the_slash_carries_the_sandbox(client, live):
    response = client.get("/apps/quotes")
    assert response.status_code == 301
    assert response["Location"] == "/apps/quotes/"
    assert response["Content-Security-Policy"] == CSP


def test_the_panel_under_apps_is_still_not_sandboxed(client, live, django_user_model):
    user = django_user_model.objects.create_superuser("ana", password="pw-long-enough-1")
    client.force_login(user)
    response = client.get("/apps/quotes/versions/")
    assert response.status_code == 200
    assert "sandbox" not in response.get("Content-Security-Policy", "")
    missing = client.get("/apps/quotes/versions/change-sets/nope/")
    assert missing.status_code == 404
    assert "sandbox" not in missing.get("Content-Security-Policy", "")
