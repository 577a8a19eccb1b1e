"""The doors of reviews (docs/api.md#reviews): agents read a set's reviews and threads with
their anchors over the API and MCP, and reply to comments — marked as the agent's — but never
review; a comment of another app does not exist for them."""

from __future__ import annotations

from typing import Any

import pytest
from api_helpers import ApiClient, make_token
from django.contrib.auth.models import User

from versions import messages, services
from versions.mcp import build_server
from versions.models import PAGE, App, Comment


def person(app: App, name: str, role: str) -> services.Actor:
    User.objects.create_user(name, password=None)
    services.add_member(app, role=role, username=name, by="setup")
    return services.actor_for_user(User.objects.get(username=name))


@pytest.fixture
def reviewed(app) -> dict[str, Any]:
    services.write_artifact(app, PAGE, "index", "a\nb\n", requested_by="x", tool="t", run_id="0")
    set_id = services.write_artifact(
        app, PAGE, "index", "a\nB\n", requested_by="ada", tool="t", run_id="1"
    ).change_set_id
    rita = person(app, "rita", "reviewer")
    services.submit_review(set_id, verdict="request_changes", body="Use **lower** case", actor=rita)
    comment = services.add_comment(
        set_id, collection=PAGE, name="index", side="after", line=2, body="Why B?", actor=rita
    )
    person(app, "agent-owner", "owner")
    return {"set": set_id, "comment": comment.id, "token": make_token("agent-owner", app.slug)}


def test_an_agent_reads_reviews_and_threads_with_anchors(reviewed):
    answer = ApiClient(reviewed["token"]).get(f"/change-sets/{reviewed['set']}/reviews")
    assert answer.status_code == 200
    data = answer.json()
    assert data["status"] == "Changes requested"
    [review] = data["reviews"]
    assert (review["author"], review["verdict"], review["stale"]) == (
        "rita",
        "request_changes",
        False,
    )
    [thread] = data["threads"]
    assert thread["id"] == reviewed["comment"] and thread["outdated"] is False
    assert thread["anchor"]["line"] == 2 and thread["anchor"]["text"] == "B"


def test_an_agent_replies_over_the_api_marked_as_the_agents(reviewed):
    client = ApiClient(reviewed["token"])
    answer = client.post(f"/comments/{reviewed['comment']}/replies", {"body": "Fixed in rp_…"})
    assert answer.status_code == 201, answer.content
    reply = Comment.objects.get(pk=answer.json()["id"])
    assert reply.by_agent and reply.thread_id == reviewed["comment"]
    assert answer.json()["byAgent"] is True and answer.json()["thread"] == reviewed["comment"]


def test_a_reply_over_the_limit_or_to_an_unknown_comment_is_refused_in_words(reviewed):
    client = ApiClient(reviewed["token"])
    too_long = client.post(f"/comments/{reviewed['comment']}/replies", {"body": "x" * 10_001})
    assert too_long.status_code == 400
    assert "10000" in str(too_long.json()) or "10,000" in str(too_long.json())
    missing = client.post("/comments/cm_zzzz_00000000/replies", {"body": "hi"})
    assert missing.status_code == 404
    assert missing.json()["detail"] == messages.COMMENT_NOT_FOUND.format(id="cm_zzzz_00000000")


def test_reviews_of_a_set_outside_the_tokens_apps_are_not_found(reviewed, app):
    other = App.objects.create(slug="other", name="Other")
    person(other, "stranger", "owner")
    token = make_token("stranger", other.slug)
    answer = ApiClient(token).get(f"/change-sets/{reviewed['set']}/reviews")
    assert answer.status_code in (403, 404)
    assert Comment.objects.count() == 1


def tool(slug: str, token: str, name: str, **arguments: Any) -> tuple[bool, dict[str, Any]]:
    server = build_server(slug, token)
    result = server._tool_manager._tools[name].fn(**arguments)
    return bool(result.is_error), dict(result.structured_content or {})


@pytest.mark.django_db(transaction=True)
def test_mcp_list_reviews_and_reply_to_comment(reviewed, app):
    error, data = tool(app.slug, reviewed["token"], "list_reviews", set_id=reviewed["set"])
    assert not error and data["threads"][0]["comments"][0]["body"] == "Why B?"
    error, reply = tool(
        app.slug, reviewed["token"], "reply_to_comment",
        comment_id=reviewed["comment"], body="Lowered it.",
    )  # fmt: skip
    assert not error and reply["byAgent"] is True
    error, data = tool(app.slug, reviewed["token"], "list_reviews", set_id=reviewed["set"])
    assert [c["body"] for c in data["threads"][0]["comments"]] == ["Why B?", "Lowered it."]
