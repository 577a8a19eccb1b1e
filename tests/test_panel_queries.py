"""The panel's lists and the expanded set run as many SQL queries for 200 rows as for 10."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext, override_settings
from django.urls import reverse

from versions import services
from versions.models import App
from versions.views.diffs import clear_cache


def _sets(slug: str, n: int) -> App:
    """``n`` change sets of one write each, over a few artifacts, tools and people."""
    app = App.objects.create(slug=slug, name=slug)
    for i in range(n):
        services.write_artifact(
            app,
            "pltf_page",
            f"page-{i % 7}",
            f"<p>version {i}</p>\n",
            requested_by=f"person-{i % 3}",
            tool=f"tool-{i % 4}",
            run_id=f"run-{i}",
        )
    return app


def _wide_set(slug: str, n: int) -> tuple[App, str]:
    """One change set touching ``n`` artifacts (each already had a version)."""
    app = App.objects.create(slug=slug, name=slug)
    for i in range(n):
        services.write_artifact(
            app,
            "pltf_stylesheet",
            f"s{i}",
            f".a{i} {{ color: red; }}\n",
            requested_by="setup",
            tool="t",
            run_id="init",
        )
    set_id = ""
    for i in range(n):
        r = services.write_artifact(
            app,
            "pltf_stylesheet",
            f"s{i}",
            f".a{i} {{ color: blue; }}\n",
            requested_by="agent",
            tool=f"tool-{i % 3}",
            run_id="turn",
        )
        set_id = r.change_set_id
    return app, set_id


def _count(client: Client, url: str, **headers) -> int:
    clear_cache()  # count a first view: no diff remembered from an earlier request
    with CaptureQueriesContext(connection) as ctx:
        response = client.get(url, **headers)
    assert response.status_code == 200, response.content[:500]
    return len(ctx.captured_queries)


@pytest.fixture
def client_admin(db) -> Client:
    client = Client()
    client.force_login(User.objects.create_superuser("boss", "b@example.com", "pw-123456"))
    return client


@override_settings(VERSIONS_POINTS_PER_APP=1000)
@pytest.mark.parametrize("htmx", [False, True], ids=["page", "fragment"])
def test_change_set_list_queries_do_not_grow_with_sets(client_admin: Client, htmx: bool) -> None:
    small, big = _sets("small", 10), _sets("big", 200)
    headers = {"HTTP_HX_REQUEST": "true"} if htmx else {}
    n_small = _count(client_admin, reverse("versions:change_sets", args=[small.slug]), **headers)
    n_big = _count(client_admin, reverse("versions:change_sets", args=[big.slug]), **headers)
    assert n_small == n_big
    # Later pages too.
    assert (
        _count(
            client_admin, reverse("versions:change_sets", args=[big.slug]) + "?page=8", **headers
        )
        == n_big
    )


@override_settings(VERSIONS_POINTS_PER_APP=1000)
def test_restore_point_list_queries_do_not_grow_with_points(client_admin: Client) -> None:
    small, big = _sets("small", 10), _sets("big", 200)
    n_small = _count(client_admin, reverse("versions:restore_points", args=[small.slug]))
    n_big = _count(client_admin, reverse("versions:restore_points", args=[big.slug]))
    assert n_small == n_big
    filtered = (
        reverse("versions:restore_points", args=[big.slug])
        + "?tool=tool-1&who=person-2&collection=pltf_page"
    )
    assert _count(client_admin, filtered) == n_big


@override_settings(VERSIONS_POINTS_PER_APP=1000)
def test_expanded_set_queries_do_not_grow_with_artifacts(client_admin: Client) -> None:
    small, small_set = _wide_set("small", 10)
    big, big_set = _wide_set("big", 200)
    url = "versions:change_set"
    hx = {"HTTP_HX_REQUEST": "true"}
    n_small = _count(client_admin, reverse(url, args=[small.slug, small_set]), **hx)
    n_big = _count(client_admin, reverse(url, args=[big.slug, big_set]), **hx)
    assert n_small == n_big
    # The full page of the set, too.
    assert _count(client_admin, reverse(url, args=[small.slug, small_set])) == _count(
        client_admin, reverse(url, args=[big.slug, big_set])
    )
