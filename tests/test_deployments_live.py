"""Serving production (docs/architecture.md#environments): /apps/<slug>/ serves the production
deployment byte for byte while agents keep writing the draft; without one it serves the draft as in
round 1."""

from __future__ import annotations

import json

import pytest

from versions import live
from versions.models import API_ROUTE, PAGE, STYLESHEET, Artifact, DeploymentEvent
from versions.services import (
    delete_artifact,
    promote,
    rollback_production,
    write_artifact,
)

CSP = "sandbox allow-scripts allow-forms"


def write(app, collection, name, source):
    return write_artifact(app, collection, name, source, requested_by="agent", tool="t")


def route(path, body):
    return json.dumps({"method": "GET", "path": path, "body": body})


@pytest.fixture
def shipped(app):
    write(app, PAGE, "index", "<h1>shipped</h1>\n")
    write(app, PAGE, "about", "<p>about, shipped</p>\n")
    write(app, STYLESHEET, "App", "body { color: green; }\n")
    write(app, API_ROUTE, "quote", route("/quotes/{id}", {"id": "{id}", "v": "shipped"}))
    promote(app, by="rvaid")
    return app


def agent_turn(app):
    write(app, PAGE, "index", "<h1>draft</h1>\n")
    delete_artifact(app, PAGE, "about", requested_by="agent", tool="t")
    write(app, PAGE, "new", "<p>only in the draft</p>\n")
    write(app, STYLESHEET, "App", "body { color: red; }\n")
    write(app, API_ROUTE, "quote", route("/quotes/{id}", {"id": "{id}", "v": "draft"}))


def test_an_app_without_production_serves_its_draft(client, app):
    write(app, PAGE, "index", "<h1>draft</h1>\n")
    response = client.get("/apps/quotes/")
    assert response.content == b"<h1>draft</h1>\n"
    assert response["Content-Security-Policy"] == CSP


def test_once_promoted_the_live_app_serves_production_while_agents_write_the_draft(client, shipped):
    client.get("/apps/quotes/api/quotes/7")  # the route table is loaded before the turn
    agent_turn(shipped)
    assert client.get("/apps/quotes/").content == b"<h1>shipped</h1>\n"
    assert client.get("/apps/quotes/p/about").content == b"<p>about, shipped</p>\n"
    assert client.get("/apps/quotes/p/new").status_code == 404
    css = client.get("/apps/quotes/assets/App.css")
    assert css.content == b"body { color: green; }\n"
    assert css["Content-Security-Policy"] == CSP
    api = client.get("/apps/quotes/api/quotes/7")
    assert api.status_code == 200
    assert api.json() == {"id": "7", "v": "shipped"}
    assert api["Content-Security-Policy"] == CSP


def test_production_assets_have_the_deployed_etag_and_answer_304(client, shipped):
    deployed = Artifact.objects.get(app=shipped, name="App").sha256
    agent_turn(shipped)
    response = client.get("/apps/quotes/assets/App.css")
    assert response["ETag"] == f'"{deployed}"'
    again = client.get("/apps/quotes/assets/App.css", HTTP_IF_NONE_MATCH=f'"{deployed}"')
    assert again.status_code == 304
    assert again["Content-Security-Policy"] == CSP


def test_promoting_the_draft_ships_it_to_the_live_app(client, shipped):
    client.get("/apps/quotes/api/quotes/7")
    agent_turn(shipped)
    promote(shipped, by="rvaid")
    assert client.get("/apps/quotes/").content == b"<h1>draft</h1>\n"
    assert client.get("/apps/quotes/p/about").status_code == 404
    assert client.get("/apps/quotes/p/new").status_code == 200
    assert client.get("/apps/quotes/api/quotes/7").json() == {"id": "7", "v": "draft"}


def test_a_rollback_reaches_the_live_app_at_the_next_request(client, shipped):
    agent_turn(shipped)
    promote(shipped, by="rvaid")
    assert client.get("/apps/quotes/api/quotes/7").json()["v"] == "draft"
    loads = live.loads["count"]
    rollback_production(shipped, by="rvaid")
    assert client.get("/apps/quotes/").content == b"<h1>shipped</h1>\n"
    assert client.get("/apps/quotes/api/quotes/7").json()["v"] == "shipped"
    assert live.loads["count"] == loads + 1
    # And the table is not reloaded again while nothing moves.
    client.get("/apps/quotes/api/quotes/8")
    assert live.loads["count"] == loads + 1


def test_a_draft_route_write_does_not_change_the_served_route(client, shipped):
    assert client.get("/apps/quotes/api/quotes/1").json()["v"] == "shipped"
    write(shipped, API_ROUTE, "extra", route("/extra", {"draft": True}))
    assert client.get("/apps/quotes/api/extra").status_code == 404
    assert client.get("/apps/quotes/api/quotes/1").json()["v"] == "shipped"


def test_the_demo_serves_production_from_before_the_agents_turn(client, db):
    from versions.management.commands.load_demo import DEMO_SLUG, load_demo
    from versions.services import preview_url

    app = load_demo()
    [event] = DeploymentEvent.objects.filter(app=app)
    assert event.kind == "promotion"
    live_page = client.get(f"/apps/{DEMO_SLUG}/").content.decode()
    assert "Quotes waiting for approval." in live_page
    assert "approve-all" not in live_page
    draft = client.get(preview_url(app, "draft")).content.decode()
    assert "approve-all" in draft
