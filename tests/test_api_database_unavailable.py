"""The agent API answers JSON 503 in words, never Django's HTML 500, when the database
connection drops mid-request (docs/api.md#errors)."""

from __future__ import annotations

import pytest
from api_helpers import ApiClient, make_token, make_user
from django.db import InterfaceError, OperationalError, connection

from versions.models import PAGE
from versions.services import (
    write_artifact,
)


@pytest.fixture
def api(app) -> ApiClient:
    make_user("owner")
    write_artifact(app, PAGE, "index", "<p>v1</p>\n", requested_by="a", tool="t")
    return ApiClient(make_token("owner", "quotes"))


def dropping_after(queries: int, error: type[Exception]):
    """A query wrapper: the first ``queries`` queries run, then the connection is gone."""
    seen = {"n": 0}

    def wrapper(execute, sql, params, many, context):
        seen["n"] += 1
        if seen["n"] > queries:
            raise error("server closed the connection unexpectedly")
        return execute(sql, params, many, context)

    return wrapper


@pytest.mark.parametrize("error", [OperationalError, InterfaceError])
@pytest.mark.parametrize("after", [0, 1, 2])
def test_a_dropped_connection_mid_request_answers_json_503(api, error, after):
    with connection.execute_wrapper(dropping_after(after, error)):
        response = api.get("/apps/quotes/artifacts/pltf_page/index")

    assert response.status_code == 503
    # Problem details like every other error of the API (docs/api.md#errors).
    assert response["Content-Type"] == "application/problem+json"
    body = response.json()
    assert body["status"] == 503 and body["title"] == "Service Unavailable"
    assert body["detail"] == body["message"]
    assert body["error"] == "unavailable"
    assert body["message"].startswith("The database could not be reached")


def test_a_write_whose_connection_drops_answers_json_503(api):
    with connection.execute_wrapper(dropping_after(2, OperationalError)):
        response = api.put("/apps/quotes/artifacts/pltf_page/index", {"source": "<p>v2</p>\n"})
    assert response.status_code == 503
    assert response.json()["error"] == "unavailable"


def test_the_panel_keeps_djangos_own_handling(client, app, django_user_model):
    client.force_login(django_user_model.objects.create_user("ana"))
    dropped = connection.execute_wrapper(dropping_after(0, OperationalError))
    with dropped, pytest.raises(OperationalError):
        client.get("/")
