"""Route specs cannot reach the proxy (docs/architecture.md#live-app-safety): headers a proxy acts
on, header values that are not visible ASCII, more than 50 headers or 8 KB of them, 1xx statuses and
dot segments are refused when saved, and a stored spec that breaks the rules is not served."""

from __future__ import annotations

import hashlib
import json

import pytest
from django.db.models import F

from versions.errors import InvalidSpec
from versions.models import API_ROUTE, App, Artifact, Blob
from versions.services import (
    write_artifact,
)

CSP = "sandbox allow-scripts allow-forms"


@pytest.fixture
def save(app, django_capture_on_commit_callbacks):
    def save(name, spec):
        with django_capture_on_commit_callbacks(execute=True):
            source = spec if isinstance(spec, str) else json.dumps(spec)
            return write_artifact(app, API_ROUTE, name, source, requested_by="a", tool="t")

    return save


def refused(save, spec) -> str:
    with pytest.raises(InvalidSpec) as caught:
        save("evil", spec)
    assert not Artifact.objects.filter(name="evil").exists()
    return caught.value.message


@pytest.mark.parametrize(
    "name",
    [
        "X-Sendfile",
        "x-sendfile",
        "X-Sendfile-Type",
        "X-Accel-Redirect",
        "X-Accel-Buffering",
        "X-Accel-Expires",
        "X-Accel-Limit-Rate",
        "X-LiteSpeed-Location",
        "X-LiteSpeed-Cache-Control",
        "X-Lighttpd-Send-File",
        "X-Reproxy-URL",
        "X-Envoy-Immediate-Health-Check-Fail",
        "X-Middleware-Rewrite",
        "X-Forwarded-Host",
        "X-Real-IP",
    ],
)
def test_a_header_a_proxy_acts_on_is_refused_when_saved(save, name):
    spec = {"method": "GET", "path": "/leak", "headers": {name: "/etc/passwd"}, "body": ""}
    message = refused(save, spec)
    assert message.startswith(f"A route spec may not set the header “{name}”: a proxy")


@pytest.mark.parametrize(
    ("value", "char", "pos"),
    [
        ("a\u000bb", "U+000B", 2),
        ("\u007f", "U+007F", 1),
        ("ok\u0001", "U+0001", 3),
        ("tab\there", "U+0009", 4),
        ("café", "U+00E9", 4),
    ],
)
def test_a_header_value_must_be_visible_ascii_and_spaces(save, value, char, pos):
    spec = {"method": "GET", "path": "/odd", "headers": {"X-Odd": value}, "body": 1}
    message = refused(save, spec)
    assert message == (
        "The value of the route header “X-Odd” may hold only visible ASCII characters and "
        f"spaces (found {char} at {pos})."
    )


def test_headers_of_more_than_8_kb_in_all_are_refused(client, save):
    spec = {"method": "GET", "path": "/big", "headers": {"X-A": "a" * 5000, "X-B": "b" * 5000}}
    message = refused(save, spec)
    assert message == (
        "The route headers are 10,006 bytes in all; a route may send at most 8,192 bytes of "
        "headers."
    )
    fits = {"X-A": "a" * 4000, "X-B": "b" * 4000, "Cache-Control": "no-store, max-age=0"}
    save("fits", {"method": "GET", "path": "/fits", "headers": fits, "body": 1})
    response = client.get("/apps/quotes/api/fits")
    assert response.status_code == 200 and response["X-A"] == "a" * 4000


def test_more_than_50_headers_are_refused_in_words(client, save):
    many = {f"X-H{n}": "1" for n in range(500)}
    message = refused(save, {"method": "GET", "path": "/many", "headers": many, "body": 1})
    assert message == "The route sets 500 headers; a route may set at most 50."
    fifty = {f"X-H{n}": "1" for n in range(50)}
    save("fifty", {"method": "GET", "path": "/fifty", "headers": fifty, "body": 1})
    response = client.get("/apps/quotes/api/fifty")
    assert response.status_code == 200 and response["X-H49"] == "1"


@pytest.mark.parametrize("status", [100, 101, 103, 199, 600])
def test_only_statuses_200_to_599_are_accepted(save, status):
    message = refused(save, {"method": "GET", "path": "/s", "status": status})
    assert message == f"The route status must be a whole number from 200 to 599 (got {status})."


def test_statuses_at_both_ends_are_served(client, save):
    save("ok", {"method": "GET", "path": "/ok", "status": 200, "body": 1})
    save("down", {"method": "GET", "path": "/down", "status": 599, "body": 1})
    assert client.get("/apps/quotes/api/ok").status_code == 200
    assert client.get("/apps/quotes/api/down").status_code == 599


@pytest.mark.parametrize("path", ["/a/../b", "/..", "/a/./b", "/.", "/quotes/{id}/.."])
def test_a_route_path_with_dot_segments_is_refused(save, path):
    message = refused(save, {"method": "GET", "path": path, "body": 1})
    assert message.startswith("The route path may not hold a “.” or “..” segment")


def test_dots_inside_a_segment_are_still_a_path(client, save):
    save("file", {"method": "GET", "path": "/files/report.v2..json", "body": "r"})
    assert client.get("/apps/quotes/api/files/report.v2..json").json() == "r"


@pytest.mark.parametrize(
    "spec",
    [
        {"method": "GET", "path": "/served", "headers": {"X-Accel-Redirect": "/internal/"}},
        {"method": "GET", "path": "/served", "headers": {"X-Odd": "a\u000bb"}},
        {"method": "GET", "path": "/served", "status": 101},
        {"method": "GET", "path": "/served", "headers": {"X-A": "a" * 9000}},
    ],
)
def test_a_stored_spec_that_breaks_the_rules_is_not_served(client, app, save, spec):
    save("served", {"method": "GET", "path": "/served", "body": "fine"})
    assert client.get("/apps/quotes/api/served").json() == "fine"
    # Stored before the rules tightened: written to the database behind the save path's back.
    bad = json.dumps(spec).encode()
    sha = hashlib.sha256(bad).hexdigest()
    Blob.objects.create(sha256=sha, data=bad, size=len(bad), chars=len(bad))
    Artifact.objects.filter(app=app, name="served").update(blob_id=sha, sha256=sha)
    App.objects.filter(pk=app.pk).update(route_generation=F("route_generation") + 1)

    response = client.get("/apps/quotes/api/served")

    assert response.status_code == 404
    assert response["Content-Security-Policy"] == CSP
    assert "X-Accel-Redirect" not in response and "X-Odd" not in response
