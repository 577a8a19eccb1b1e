"""Keyset cursors on the API's lists (docs/api.md#cursors): `limit` and `cursor`, `next_cursor` in
the body and `Link: <…>; rel="next"`; writes between two pages never show an item twice or skip
one; change sets filter by run, turn, writer and time."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest
from api_helpers import ApiClient, make_token, make_user

from versions import services
from versions.models import ChangeSet

pytestmark = pytest.mark.django_db


@pytest.fixture
def api(app) -> ApiClient:
    make_user("rvaid")
    return ApiClient(make_token("rvaid", "quotes"))


def _write(app, n: int, run: str, turn: str = "") -> None:
    services.write_artifact(
        app,
        "pltf_page",
        "index",
        f"v{n}\n",
        requested_by="a",
        tool="t",
        run_id=run,
        turn_id=turn or None,
    )


def _next_link(response) -> str | None:
    link = response.get("Link")
    if not link:
        return None
    match = re.fullmatch(r'<(.+)>; rel="next"', link)
    assert match, link
    return match.group(1)


def test_walking_change_sets_by_cursor_sees_each_once_despite_writes_between_pages(api, app):
    for n in range(7):
        _write(app, n, f"run-{n}")
    before = set(ChangeSet.objects.values_list("id", flat=True))
    seen: list[str] = []
    first = api.get("/apps/quotes/change-sets", limit=3)
    assert first.status_code == 200
    body = first.json()
    assert body["page"] is None and body["per_page"] == 3 and body["next_cursor"]
    seen += [item["id"] for item in body["items"]]
    link = _next_link(first)
    written = 100
    while link:
        _write(app, written, f"run-{written}")  # a new set between every two pages
        written += 1
        response = api.client.get(link, headers={"Authorization": f"Bearer {api.token}"})
        assert response.status_code == 200
        page = response.json()
        seen += [item["id"] for item in page["items"]]
        link = _next_link(response)
        assert (link is None) == (page["next_cursor"] is None)
    assert len(seen) == len(set(seen)) == len(before)
    assert set(seen) == before


def test_page_numbers_still_work_and_offer_a_cursor(api, app):
    for n in range(3):
        _write(app, n, f"run-{n}")
    body = api.get("/apps/quotes/change-sets", per_page=2).json()
    assert body["page"] == 1 and body["next_page"] == 2 and body["next_cursor"]
    rest = api.get("/apps/quotes/change-sets", cursor=body["next_cursor"], limit=2).json()
    assert len(rest["items"]) == 1 and rest["next_cursor"] is None


def test_history_walks_by_cursor(api, app):
    for n in range(5):
        _write(app, n, f"run-{n}")
    path = "/apps/quotes/artifacts/pltf_page/index/history"
    first = api.get(path, limit=2)
    ids = [p["id"] for p in first.json()["items"]]
    link = _next_link(first)
    while link:
        response = api.client.get(link, headers={"Authorization": f"Bearer {api.token}"})
        ids += [p["id"] for p in response.json()["items"]]
        link = _next_link(response)
    assert len(ids) == len(set(ids)) == 5


@pytest.mark.parametrize("cursor", ["bm9wZQ", "W10", "WyJ4IiwieSJd"])
def test_a_cursor_this_api_did_not_give_is_refused_in_words(api, app, cursor):
    _write(app, 1, "r")
    response = api.get("/apps/quotes/change-sets", cursor=cursor)
    assert response.status_code == 400
    assert response.json()["field"] == "cursor"
    assert "is not one this API gave" in response.json()["message"]


def test_a_cursor_of_the_wrong_form_is_422(api, app):
    assert api.get("/apps/quotes/change-sets", cursor="not a cursor!").status_code == 422


def test_change_sets_filter_by_run_turn_writer_and_time(api, app):
    _write(app, 1, "run-a")
    _write(app, 2, "run-b", turn="turn-1")
    services.write_artifact(
        app,
        "pltf_page",
        "other",
        "x\n",
        requested_by="a",
        tool="t",
        run_id="run-c",
        actor=services.Actor.command("robot"),
    )

    def ids(**query):
        return [
            item["run_id"] for item in api.get("/apps/quotes/change-sets", **query).json()["items"]
        ]

    assert ids(run_id="run-a") == ["run-a"]
    assert ids(turn_id="turn-1") == ["run-b"]
    assert ids(written_by="command:robot") == ["run-c"]
    assert ids(run_id="nope") == []
    assert len(ids(since=(datetime.now(UTC) - timedelta(hours=1)).isoformat())) == 3
    assert ids(since=(datetime.now(UTC) + timedelta(hours=1)).isoformat()) == []
    counted = api.get("/apps/quotes/change-sets", run_id="run-a").json()
    assert counted["total"] == 1


@pytest.mark.parametrize(
    "since",
    ["0346-07-07T22:54:08.82-19:36", "2026-12-03T10:00:00+23:59", "0001-01-01T00:00:00+01:00"],
)
def test_a_since_with_any_offset_is_answered_in_words_never_a_server_error(api, since):
    response = api.get("/apps/quotes/change-sets", since=since)
    assert response.status_code in (200, 422), response.content
