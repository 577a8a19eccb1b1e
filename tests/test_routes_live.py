"""API routes of the live app (docs/architecture.md#live-app): route specs served as data, route
tables per process reloaded when the app's route generation moves, restores through the route-save
path."""

from __future__ import annotations

import json

import pytest
from django.test import override_settings

from versions import live
from versions.errors import InvalidInput
from versions.models import API_ROUTE, SERVER_SCRIPT, Artifact
from versions.services import (
    delete_artifact,
    restore_change_set,
    restore_point,
    write_artifact,
)

CSP = "sandbox allow-scripts allow-forms"


@pytest.fixture
def save(app, django_capture_on_commit_callbacks):
    """Write a route spec, running the after-commit generation bump as a commit would."""

    def save(name, spec, **kwargs):
        with django_capture_on_commit_callbacks(execute=True):
            source = spec if isinstance(spec, str) else json.dumps(spec)
            return write_artifact(
                app, API_ROUTE, name, source, requested_by="a", tool="t", **kwargs
            )

    return save


def test_a_route_spec_is_served_with_params_substituted_in_every_body_string(client, save):
    save(
        "quote",
        {
            "method": "GET",
            "path": "/quotes/{id}",
            "status": 201,
            "headers": {"X-Quote": "yes"},
            "body": {"id": "{id}", "items": [{"ref": "Q-{id}", "n": 3}], "keep": "{other}"},
        },
    )

    response = client.get("/apps/quotes/api/quotes/42")

    assert response.status_code == 201
    assert response["Content-Type"] == "application/json"
    assert response["X-Quote"] == "yes"
    assert response["Content-Security-Policy"] == CSP
    assert response.json() == {"id": "42", "items": [{"ref": "Q-42", "n": 3}], "keep": "{other}"}


def test_a_text_body_with_a_text_content_type_is_sent_as_is(client, save):
    save(
        "hello",
        {
            "method": "GET",
            "path": "/hello/{name}",
            "headers": {"Content-Type": "text/plain; charset=utf-8"},
            "body": "Hello, {name}!",
        },
    )
    response = client.get("/apps/quotes/api/hello/Ana")
    assert response.content == b"Hello, Ana!"
    assert response["Content-Type"] == "text/plain; charset=utf-8"


def test_literal_segments_win_over_parameters(client, save):
    save("by-id", {"method": "GET", "path": "/quotes/{id}", "body": "id {id}"})
    save("new", {"method": "GET", "path": "/quotes/new", "body": "the form"})
    assert client.get("/apps/quotes/api/quotes/new").json() == "the form"
    assert client.get("/apps/quotes/api/quotes/7").json() == "id 7"


def test_methods_are_matched_and_others_answer_405(client, save):
    save("create", {"method": "POST", "path": "/quotes", "status": 201, "body": {"ok": True}})
    assert client.post("/apps/quotes/api/quotes").status_code == 201
    response = client.get("/apps/quotes/api/quotes")
    assert response.status_code == 405
    assert response["Allow"] == "POST"
    assert response["Content-Security-Policy"] == CSP


def test_the_apps_own_sandboxed_page_may_read_its_routes(client, save):
    """The sandbox makes the page's origin opaque ("null"): its fetch() of its own API is a
    cross-origin read, allowed to any origin and never with credentials."""
    save("list", {"method": "GET", "path": "/quotes", "body": []})
    save("create", {"method": "POST", "path": "/quotes", "status": 201, "body": {"ok": True}})
    read = client.get("/apps/quotes/api/quotes", HTTP_ORIGIN="null")
    assert read.status_code == 200 and read["Access-Control-Allow-Origin"] == "*"
    assert "Access-Control-Allow-Credentials" not in read
    # A JSON POST from the page is preflighted: OPTIONS answers what the path takes.
    preflight = client.options(
        "/apps/quotes/api/quotes",
        HTTP_ORIGIN="null",
        HTTP_ACCESS_CONTROL_REQUEST_METHOD="POST",
        HTTP_ACCESS_CONTROL_REQUEST_HEADERS="content-type",
    )
    assert preflight.status_code == 204
    assert preflight["Access-Control-Allow-Methods"] == "GET, OPTIONS, POST"
    assert preflight["Access-Control-Allow-Headers"] == "content-type"
    assert preflight["Access-Control-Allow-Origin"] == "*"
    assert preflight["Content-Security-Policy"] == CSP
    assert client.options("/apps/quotes/api/nowhere").status_code == 404
    with override_settings(VERSIONS_LIVE_CORS=False):  # for a private network: off
        closed = client.get("/apps/quotes/api/quotes", HTTP_ORIGIN="null")
        assert closed.status_code == 200 and "Access-Control-Allow-Origin" not in closed


@pytest.mark.parametrize(
    "name",
    [
        "Content-Security-Policy",
        "Set-Cookie",
        "set-cookie",
        "Clear-Site-Data",
        "Refresh",
        "Access-Control-Allow-Origin",
        "Strict-Transport-Security",
        "WWW-Authenticate",
        "Content-Length",
        "X-Frame-Options",
        "Set-Cookie: csrftoken=AAAA; Path=/; X-a",  # not a header name: a smuggled one
        "X Quote",
    ],
)
def test_a_route_spec_may_not_set_a_header_that_acts_on_the_panels_origin(save, name):
    """The live app shares the panel's origin: cookies, Clear-Site-Data, CSP, CORS, HSTS or an
    auth prompt set by agent-written data would act on the panel. Refused when saved, in words."""
    spec = {"method": "GET", "path": "/evil", "headers": {name: "x"}, "body": "<b>x</b>"}
    with pytest.raises(InvalidInput) as refused:
        save("evil", spec)
    assert refused.value.message.startswith(f"A route spec may not set the header “{name}”")
    assert not Artifact.objects.filter(name="evil").exists()


@pytest.mark.parametrize(
    "location",
    [
        "https://evil.example/phish",
        "//evil.example",
        "/\\evil.example",
        "/\t/evil.example",
        "javascript:x",
    ],
)
def test_a_route_may_redirect_only_within_the_site(client, save, location):
    spec = {"method": "GET", "path": "/go", "status": 302, "headers": {"Location": location}}
    with pytest.raises(InvalidInput) as refused:
        save("go", spec)
    assert "must be a path on this site" in refused.value.message
    save("made", {"method": "POST", "path": "/q", "status": 201, "headers": {"Location": "/q/7"}})
    made = client.post("/apps/quotes/api/q")
    assert made.status_code == 201 and made["Location"] == "/q/7"


def test_allowed_and_custom_headers_are_served_and_the_sandbox_stays(client, save):
    headers = {"X-Quote": "1", "Cache-Control": "no-store", "ETag": '"v1"', "Vary": "Accept"}
    save("ok", {"method": "GET", "path": "/ok", "headers": headers, "body": {"ok": True}})
    response = client.get("/apps/quotes/api/ok")
    assert response.status_code == 200
    assert {k: response[k] for k in headers} == headers
    assert response["Content-Security-Policy"] == CSP
    assert "Set-Cookie" not in response and not response.cookies


def test_a_body_nested_too_deeply_is_refused_and_nothing_is_served_as_a_traceback(client, save):
    deep = "[" * 40 + "]" * 40
    spec = '{"method": "GET", "path": "/deep", "body": ' + deep + "}"
    with pytest.raises(InvalidInput) as refused:
        save("deep", spec)
    assert refused.value.message == "The route body is nested more than 32 levels deep."
    save("fine", {"method": "GET", "path": "/fine", "body": json.loads("[" * 30 + "]" * 30)})
    assert client.get("/apps/quotes/api/fine").status_code == 200


def test_a_deleted_route_and_server_scripts_are_not_served(
    client, app, save, django_capture_on_commit_callbacks
):
    save("gone", {"method": "GET", "path": "/gone", "body": 1})
    assert client.get("/apps/quotes/api/gone").status_code == 200
    with django_capture_on_commit_callbacks(execute=True):
        delete_artifact(app, API_ROUTE, "gone", requested_by="a", tool="t")
    write_artifact(
        app, SERVER_SCRIPT, "gone", '{"method": "GET", "path": "/gone"}', requested_by="a", tool="t"
    )
    assert client.get("/apps/quotes/api/gone").status_code == 404


def test_the_route_table_is_cached_until_the_generation_moves(client, app, save):
    save("a", {"method": "GET", "path": "/a", "body": "A1"})
    assert client.get("/apps/quotes/api/a").json() == "A1"
    loads = live.loads["count"]
    for _ in range(3):
        client.get("/apps/quotes/api/a")
    assert live.loads["count"] == loads

    save("a", {"method": "GET", "path": "/a", "body": "A2"})

    assert client.get("/apps/quotes/api/a").json() == "A2"
    assert live.loads["count"] == loads + 1


def test_a_cached_request_costs_one_query(client, save, django_assert_num_queries):
    save("a", {"method": "GET", "path": "/a", "body": "A1"})
    client.get("/apps/quotes/api/a")
    with django_assert_num_queries(1):
        client.get("/apps/quotes/api/a")


def test_a_write_that_is_not_committed_does_not_bump_the_generation(app):
    generation = app.route_generation
    write_artifact(
        app, API_ROUTE, "a", json.dumps({"method": "GET", "path": "/a"}), requested_by="a", tool="t"
    )
    # Inside the test transaction nothing committed, so the bump has not run.
    app.refresh_from_db()
    assert app.route_generation == generation


def test_restore_all_of_a_route_change_is_served_at_the_next_request(
    client, app, save, django_capture_on_commit_callbacks
):
    save("quote", {"method": "GET", "path": "/quote", "body": "v1"}, run_id="setup")
    set_id = save("quote", {"method": "GET", "path": "/quote", "body": "v2"}, run_id="turn")
    set_id = set_id.change_set_id
    assert client.get("/apps/quotes/api/quote").json() == "v2"

    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        receipt = restore_change_set(set_id, by="p")

    assert callbacks, "the restore scheduled the generation bump after commit"
    assert client.get("/apps/quotes/api/quote").json() == "v1"
    with django_capture_on_commit_callbacks(execute=True):
        restore_change_set(receipt.set_id, by="p")
    assert client.get("/apps/quotes/api/quote").json() == "v2"


def test_a_route_moved_to_another_path_is_restored_to_its_old_path(
    client, app, save, django_capture_on_commit_callbacks
):
    point = save("quote", {"method": "GET", "path": "/old", "body": "x"}).restore_point_id
    save("quote", {"method": "GET", "path": "/new", "body": "x"})
    assert client.get("/apps/quotes/api/old").status_code == 404
    moved = Artifact.objects.get(app=app, name="quote")
    assert moved.route_key == "GET /new"

    later = save("quote", {"method": "GET", "path": "/new", "body": "y"}).restore_point_id
    with django_capture_on_commit_callbacks(execute=True):
        restore_point(later, by="p")

    assert client.get("/apps/quotes/api/new").json() == "x"
    assert point  # the first point recreated nothing: the route existed before it


def test_writing_an_ambiguous_route_is_refused_by_the_route_save_path(save):
    save("one", {"method": "GET", "path": "/q/{id}", "body": 1})
    with pytest.raises(InvalidInput):
        save("two", {"method": "GET", "path": "/q/{other}", "body": 2})
