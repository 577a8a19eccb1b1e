"""The MCP tools' lists page by keyset (docs/api.md#cursors): `artifact_history`, `list_reviews`,
`list_deployments` and `production_history` take `limit` and `cursor` and answer `next_cursor`;
writes between two calls never show an item twice or skip one; a cursor the server did not give
is a tool error in words. Driven by the `mcp` SDK's own client, in process: the server's strict
arguments apply, and the client checks every answer against the tool's outputSchema."""

from __future__ import annotations

import threading
from collections.abc import Callable
from itertools import count
from typing import Any

import anyio
import pytest
from api_helpers import make_token, make_user
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from mcp import Client

from versions import services
from versions.mcp import build_server

pytestmark = pytest.mark.django_db(transaction=True)
PAGE = "pltf_page"


def tool(token: str, which: str, /, **arguments: Any) -> tuple[bool, dict[str, Any]]:
    """One call of tool ``which`` in an MCP session of app ``quotes``: (is_error, its data)."""
    out: dict[str, Any] = {}
    server = build_server("quotes", token)  # it asks the database which tools to list

    async def main() -> None:
        async with Client(server) as client:
            result = await client.call_tool(which, arguments)
        out["answer"] = (bool(result.is_error), dict(result.structured_content or {}))

    def run() -> None:
        try:
            anyio.run(main)
        except BaseException as exc:  # re-raised in the test's thread
            out["failed"] = exc

    # A thread of its own: the browser tests keep an event loop running in the main thread.
    worker = threading.Thread(target=run)
    worker.start()
    worker.join()
    if "failed" in out:
        raise out["failed"]
    return out["answer"]


def walk(
    token: str, which: str, limit: int, between: Callable[[], None], /, **arguments: Any
) -> list[dict[str, Any]]:
    """Every page of a keyset walk of tool ``which``; ``between`` runs between two calls."""
    error, page = tool(token, which, limit=limit, **arguments)
    assert not error, page
    assert page["next_cursor"]
    pages = [page]
    while page["next_cursor"]:
        assert len(pages) < 20, "the walk does not end"
        between()
        error, page = tool(token, which, limit=limit, cursor=page["next_cursor"], **arguments)
        assert not error, page
        pages.append(page)
    return pages


def write(app, source: str) -> None:
    services.write_artifact(app, PAGE, "index", source, requested_by="a", tool="t")


@pytest.fixture
def token(app) -> str:
    make_user("rvaid")
    return make_token("rvaid", "quotes")


@pytest.fixture
def promoter(app) -> str:
    user = make_user("shipper")
    user.user_permissions.add(
        Permission.objects.get(codename="promote_deployment", content_type__app_label="versions")
    )
    token, _row = services.create_agent_token("shipper", ["quotes"], can_promote=True)
    return token


def test_artifact_history_walks_by_cursor_and_writes_between_calls_never_repeat_a_point(app, token):
    for n in range(5):
        write(app, f"v{n}\n")
    _error, whole = tool(token, "artifact_history", collection=PAGE, name="index")
    before = [p["id"] for p in whole["items"]]
    written = count(10)
    pages = walk(
        token, "artifact_history", 2, lambda: write(app, f"v{next(written)}\n"),
        collection=PAGE, name="index",
    )  # fmt: skip
    assert [p["id"] for page in pages for p in page["items"]] == before and len(before) == 5
    assert [len(page["items"]) for page in pages] == [2, 2, 1]
    assert pages[-1]["next_cursor"] is None


def test_artifact_history_still_takes_its_deprecated_page_numbers(app, token):
    for n in range(3):
        write(app, f"v{n}\n")
    error, second = tool(
        token, "artifact_history", collection=PAGE, name="index", page=2, per_page=2
    )
    assert not error and second["page"] == 2 and len(second["items"]) == 1
    error, first = tool(token, "artifact_history", collection=PAGE, name="index", per_page=2)
    assert first["next_page"] == 2 and first["next_cursor"]
    error, rest = tool(
        token, "artifact_history", collection=PAGE, name="index", cursor=first["next_cursor"]
    )
    assert [p["id"] for p in rest["items"]] == [p["id"] for p in second["items"]]


def test_list_reviews_walks_reviews_and_threads_by_one_cursor_despite_new_ones(app, token):
    first = services.write_artifact(
        app, PAGE, "index", "a\nb\nc\nd\ne\nf\n", requested_by="a", tool="t"
    )
    set_id = first.change_set_id
    ana = services.actor_for_user(
        get_user_model().objects.create_superuser("ana", password="x" * 20)
    )

    def talk(n: int) -> None:
        services.submit_review(set_id, verdict="comment", body=f"R{n}", actor=ana)
        services.add_comment(
            set_id, collection=PAGE, name="index", side="after", line=n, body=f"T{n}", actor=ana
        )

    for n in range(1, 4):
        talk(n)
    _error, whole = tool(token, "list_reviews", set_id=set_id)
    assert whole["next_cursor"] is None and len(whole["reviews"]) == len(whole["threads"]) == 3
    said = count(4)
    pages = walk(token, "list_reviews", 2, lambda: talk(next(said)), set_id=set_id)
    assert [r["id"] for page in pages for r in page["reviews"]] == [
        r["id"] for r in reversed(whole["reviews"])
    ]
    assert [t["id"] for page in pages for t in page["threads"]] == [
        t["id"] for t in reversed(whole["threads"])
    ]
    assert all(page["status"] == whole["status"] for page in pages)


def test_production_history_and_deployments_walk_by_cursor_despite_promotions(app, promoter):
    for n in range(5):
        write(app, f"v{n}\n")
        assert not tool(promoter, "promote")[0]
    _error, overview = tool(promoter, "list_deployments")
    assert overview["next_cursor"] is None and overview["history_next_cursor"] is None
    made = count(10)

    def promote_again() -> None:
        write(app, f"v{next(made)}\n")
        services.promote(app)

    history = walk(promoter, "production_history", 2, promote_again)
    events = [e for page in history for e in page["items"]]
    assert events == overview["history"] and len(events) == 5
    deployments = walk(promoter, "list_deployments", 2, promote_again)
    seen = [d["id"] for page in deployments for d in page["deployments"]]
    _error, now = tool(promoter, "list_deployments")
    assert len(seen) == len(set(seen)) == 5 + 2  # the two made during the history's walk
    assert seen == [d["id"] for d in now["deployments"]][-7:]


@pytest.mark.parametrize(
    ("which", "arguments"),
    [
        ("artifact_history", {"collection": PAGE, "name": "index"}),
        ("list_reviews", {}),
        ("list_deployments", {}),
        ("production_history", {}),
    ],
)
def test_a_cursor_the_server_did_not_give_is_a_tool_error_in_words(app, token, which, arguments):
    first = services.write_artifact(app, PAGE, "index", "v1\n", requested_by="a", tool="t")
    if which == "list_reviews":
        arguments = {"set_id": first.change_set_id}
    error, data = tool(token, which, cursor="bm90LWEtY3Vyc29y", **arguments)
    assert error and data["error"] == "invalid_input" and data["field"] == "cursor"
    assert "is not one this API gave" in data["message"]
    error, data = tool(token, which, limit=0, **arguments)
    assert error  # a limit from 1 to 200, as the API's
