"""A NUL character in an address answers in words, never a 500 (PostgreSQL refuses NUL in
text, so before this guard an id or a search with one reached the database and failed)."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client

from versions import services
from versions.models import App

pytestmark = pytest.mark.django_db


@pytest.fixture
def signed_in() -> Client:
    client = Client(raise_request_exception=False)
    client.force_login(User.objects.create_superuser("boss", "b@example.com", "pw-123456"))
    return client


@pytest.fixture
def token_header() -> dict[str, str]:
    App.objects.create(slug="shop", name="Shop")
    User.objects.create_user("agent-owner", password="pw-123456", is_superuser=True)
    token, _ = services.create_agent_token("agent-owner", ["shop"])
    return {"HTTP_AUTHORIZATION": f"Bearer {token}"}


@pytest.mark.parametrize(
    "url",
    [
        "/apps/sh%00op/versions/",
        "/apps/shop/versions/change-sets/cs_%00x/",
        "/apps/shop/versions/points/rp_%00x/",
        "/apps/shop/versions/compare/cs_%00...draft/",
    ],
)
def test_a_nul_in_a_panel_path_is_not_found_in_words(signed_in, url):
    App.objects.get_or_create(slug="shop", defaults={"name": "Shop"})
    response = signed_in.get(url)
    assert response.status_code == 404
    assert b"Not found" in response.content and b"Traceback" not in response.content


def test_a_nul_in_a_panel_search_is_refused_in_words(signed_in):
    App.objects.create(slug="shop", name="Shop")
    response = signed_in.get("/apps/shop/versions/?q=a%00b")
    assert response.status_code == 400
    assert b"NUL character" in response.content
    assert b"Back to the apps" in response.content


@pytest.mark.parametrize(
    ("url", "status"),
    [
        ("/api/v1/apps/sh%00op/artifacts", 404),
        ("/api/v1/change-sets/cs_%00/", 404),
        ("/api/v1/apps/shop/artifacts/pltf_page/a%00b", 404),
        ("/api/v1/apps/shop/artifacts?collection=%00", 400),
    ],
)
def test_a_nul_in_an_api_address_answers_problem_details(client, token_header, url, status):
    response = client.get(url, **token_header)
    assert response.status_code == status
    assert response["Content-Type"] == "application/problem+json"
    body = response.json()
    assert body["status"] == status and "NUL" in body["detail"]
    assert body["error"] == ("not_found" if status == 404 else "invalid_input")
