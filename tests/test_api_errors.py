"""Every answer under /api/v1/ is the API's JSON error when no route takes the request."""

from __future__ import annotations

import pytest
from api_helpers import ApiClient, make_token, make_user
from django.test import Client

pytestmark = pytest.mark.django_db


@pytest.fixture
def api(app) -> ApiClient:
    make_user("rvaid")
    return ApiClient(make_token("rvaid", "quotes"))


@pytest.mark.parametrize(
    "path", ["/nowhere", "/apps/quotes/artifact", "/apps/quotes/artifacts/pltf_page/a/b/c"]
)
def test_an_unknown_endpoint_answers_json_404_naming_it(api, path):
    response = api.get(path)
    assert response.status_code == 404
    assert response["Content-Type"].startswith("application/problem+json")
    body = response.json()
    assert body["error"] == "not_found"
    assert f"GET /api/v1{path}" in body["message"]
    assert "openapi.json" in body["message"]


def test_an_unknown_endpoint_answers_json_without_a_token_or_csrf_token_too():
    client = ApiClient(None)
    client.client = Client(enforce_csrf_checks=True)
    response = client.post("/apps/quotes/nothing-here", {})
    assert response.status_code == 404
    assert response.json()["error"] == "not_found"
    assert client.post("/", {}).json()["error"] == "not_found"


def test_a_method_a_route_does_not_take_answers_json_405_with_allow(api):
    response = api.post("/apps/quotes/artifacts", {})
    assert response.status_code == 405
    assert response["Content-Type"].startswith("application/problem+json")
    assert "GET" in response["Allow"]
    body = response.json()
    assert body["error"] == "method_not_allowed"
    assert "POST" in body["message"] and "GET" in body["message"]


def test_the_panel_keeps_django_pages_for_unknown_urls(client):
    response = client.get("/no-such-page/")
    assert response.status_code == 404
    assert not response["Content-Type"].startswith("application/json")
    page = response.content.decode()  # the panel's own page, not Django's bare "Not Found"
    assert "<h1>Not found</h1>" in page and "/no-such-page/" in page
    assert 'class="topbar"' in page and "Back to the apps" in page


def test_a_server_error_is_a_page_in_words_and_its_traceback_is_logged(rf):
    from django.views.defaults import server_error

    page = server_error(rf.get("/")).content.decode()
    assert "Something went wrong on the server" in page and 'href="/"' in page

    import logging

    handlers = logging.getLogger("django.request").handlers
    assert any(
        any(type(f).__name__ == "RequireDebugFalse" for f in h.filters) and h.level == logging.ERROR
        for h in handlers
    ), "with DEBUG off, request errors must reach the server's stderr"


def test_the_api_root_says_where_the_endpoints_are_described():
    response = ApiClient(None).get("/")
    assert response.status_code == 200
    body = response.json()
    assert body["openapi"] == "/api/v1/openapi.json"
    assert ApiClient(None).client.get(body["openapi"]).status_code == 200


def test_the_docs_page_it_names_is_served_from_our_own_static_files(db):
    docs = ApiClient(None).get("/").json()["docs"]
    response = ApiClient(None).client.get(docs)
    assert response.status_code == 200
    page = response.content.decode()
    assert "/static/ninja/swagger-ui-bundle.js" in page
    assert "/api/v1/openapi.json" in page
    assert "cdn" not in page.lower() and "https://" not in page


def test_an_unknown_endpoint_with_a_newline_in_its_path_answers_json(api):
    response = api.get("/nowhere%0Aat-all")
    assert response.status_code == 404
    assert response.json()["error"] == "not_found"


def test_answers_are_utf8_text_a_person_can_read(api):
    response = api.get("/apps/quotes/artifacts/pltf_page/nowhere")
    assert response.status_code == 404
    assert "“nowhere”".encode() in response.content  # not "\u201cnowhere\u201d"
    assert "“nowhere”" in response.json()["message"]


def test_a_lone_surrogate_from_a_client_is_refused_in_json_not_a_500(app):
    from versions import services

    make_user("rvaid2", can_restore=True)
    client = ApiClient(make_token("rvaid2", "quotes"))
    turn = services.write_artifact(app, "pltf_page", "p", "x\n", requested_by="a", tool="t")
    response = client.post(
        f"/change-sets/{turn.change_set_id}/restore", '{"expected": {"bad\\ud800key": "a"}}'
    )
    assert response.status_code == 422
    assert response.json()["error"] == "validation_error"
    # And should such text ever reach an answer, the answer keeps its escape (valid UTF-8).
    from versions.api import api as ninja_api

    body = ninja_api.renderer.render(None, {"m": "a\ud800“"}, response_status=200)
    assert body == b'{"m": "a\\ud800\\u201c"}'
