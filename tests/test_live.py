"""The live app (docs/architecture.md#live-app): pages, assets, content types, ETags, the CSP
sandbox, 404s."""

from __future__ import annotations

import pytest

from versions.models import FRONTEND_MODULE, PAGE, SERVER_SCRIPT, STYLESHEET, Artifact
from versions.services import (
    delete_artifact,
    restore_change_set,
    write_artifact,
)

CSP = "sandbox allow-scripts allow-forms"


def write(app, collection, name, source, run_id=None):
    return write_artifact(app, collection, name, source, requested_by="a", tool="t", run_id=run_id)


def sha(app, collection, name):
    return Artifact.objects.get(app=app, collection=collection, name=name).sha256


@pytest.fixture
def live(app):
    write(app, PAGE, "index", "<h1>Quotes</h1>\n")
    write(app, PAGE, "about", "<p>About é</p>\n")
    write(app, STYLESHEET, "App", "body { color: red; }\n")
    write(app, FRONTEND_MODULE, "app.min", "console.log('hi');\n")
    write(app, SERVER_SCRIPT, "approve", "def run(): pass\n")
    return app


def test_the_index_page_is_served_at_the_app_root(client, live):
    response = client.get("/apps/quotes/")
    assert response.status_code == 200
    assert response.content == b"<h1>Quotes</h1>\n"
    assert response["Content-Type"] == "text/html; charset=utf-8"
    assert response["ETag"] == f'"{sha(live, PAGE, "index")}"'
    assert response["Content-Security-Policy"] == CSP


def test_other_pages_are_served_under_p(client, live):
    response = client.get("/apps/quotes/p/about")
    assert response.status_code == 200
    assert response.content.decode() == "<p>About é</p>\n"
    assert response["Content-Security-Policy"] == CSP


@pytest.mark.parametrize(
    ("url", "collection", "name", "content_type"),
    [
        ("/apps/quotes/assets/App.css", STYLESHEET, "App", "text/css; charset=utf-8"),
        (
            "/apps/quotes/assets/app.min.js",
            FRONTEND_MODULE,
            "app.min",
            "text/javascript; charset=utf-8",
        ),
    ],
)
def test_assets_have_their_content_type_and_a_strong_etag(
    client, live, url, collection, name, content_type
):
    response = client.get(url)
    assert response.status_code == 200
    assert response["Content-Type"] == content_type
    assert response["ETag"] == f'"{sha(live, collection, name)}"'
    assert not response["ETag"].startswith("W/")
    assert response["Content-Security-Policy"] == CSP
    assert response.content == Artifact.objects.get(app=live, name=name).source.encode()


def test_if_none_match_answers_304_without_the_body(client, live):
    etag = client.get("/apps/quotes/assets/App.css")["ETag"]

    response = client.get("/apps/quotes/assets/App.css", HTTP_IF_NONE_MATCH=etag)

    assert response.status_code == 304
    assert response.content == b""
    assert response["ETag"] == etag
    assert response["Content-Security-Policy"] == CSP
    assert client.get("/apps/quotes/", HTTP_IF_NONE_MATCH=f'"x", W/{etag}').status_code == 200
    assert client.get("/apps/quotes/", HTTP_IF_NONE_MATCH='"other"').status_code == 200


def test_a_restore_changes_the_etag_and_the_served_bytes(client, live):
    old = client.get("/apps/quotes/assets/App.css")
    set_id = write(live, STYLESHEET, "App", "body { color: blue; }\n").change_set_id
    assert (
        client.get("/apps/quotes/assets/App.css", HTTP_IF_NONE_MATCH=old["ETag"]).status_code == 200
    )

    restore_change_set(set_id, by="p")

    again = client.get("/apps/quotes/assets/App.css", HTTP_IF_NONE_MATCH=old["ETag"])
    assert again.status_code == 304
    assert client.get("/apps/quotes/assets/App.css").content == old.content


@pytest.mark.parametrize(
    "url",
    [
        "/apps/quotes/p/nope",
        "/apps/quotes/assets/nope.css",
        "/apps/quotes/assets/App.js",  # a stylesheet is not a module
        "/apps/nope/",
        "/apps/quotes/p/approve",  # server scripts are never served
        "/apps/quotes/assets/approve.js",
        "/apps/quotes/api/nothing",
    ],
)
def test_unknown_things_are_404_with_the_sandbox_header(client, live, url):
    response = client.get(url)
    assert response.status_code == 404
    assert response["Content-Security-Policy"] == CSP


def test_a_tombstone_is_404(client, live):
    delete_artifact(live, PAGE, "about", requested_by="a", tool="t")
    response = client.get("/apps/quotes/p/about")
    assert response.status_code == 404
    assert response["Content-Security-Policy"] == CSP


def test_pages_answer_only_get_and_head(client, live):
    assert client.head("/apps/quotes/").status_code == 200
    for url in ("/apps/quotes/", "/apps/quotes/p/about", "/apps/quotes/assets/App.css"):
        response = client.post(url)
        assert response.status_code == 405
        assert response["Content-Security-Policy"] == CSP  # every answer under /apps/ sandboxed


def test_the_panel_is_not_sandboxed(client, live):
    response = client.get("/apps/quotes/versions/")
    assert "sandbox" not in response.get("Content-Security-Policy", "")


def test_a_page_is_served_in_two_queries_at_most(client, live, django_assert_max_num_queries):
    with django_assert_max_num_queries(2):
        client.get("/apps/quotes/p/about")
    etag = client.get("/apps/quotes/p/about")["ETag"]
    with django_assert_max_num_queries(1):
        assert client.get("/apps/quotes/p/about", HTTP_IF_NONE_MATCH=etag).status_code == 304
