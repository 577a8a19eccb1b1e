"""Remote MCP (docs/operations.md#remote-mcp): the `mcp` SDK's own Streamable HTTP client talks to
`/mcp/` on a live gunicorn (the project's gunicorn.conf.py, two workers, so a session's requests
land on either), authenticated by the API's bearer token, and does an agent's whole job: read,
an edit with a stale hash refused, write, describe, diff, compare, revert, restore a point and
roll production back with a promoting token. Every tool's structured result validates against
the outputSchema it lists (the API's schemas); tools answer another app's ids exactly as missing
ones; a missing resource is error -32002."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import anyio
import httpx2
import jsonschema
import pytest
from mcp import ClientSession, MCPError
from mcp.client.streamable_http import streamable_http_client
from mcp.types import Implementation

ROOT = Path(__file__).resolve().parent.parent
SLUG = "quote-approvals"
CLIENT = "remote-test-client"
pytestmark = pytest.mark.slow

# The demo app, a restorer who may promote, a viewer, and another app with a set, a point, a
# restore set, a deployment and a comment the tokens must not tell from missing ones.
SETUP = """
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from versions import services
from versions.management.commands.load_demo import load_demo
from versions.models import App, ChangeSet
load_demo()
users = get_user_model().objects
boss = users.create_superuser("rvaid", email="", password=None)
users.create_user("viewer", password=None)
other = App.objects.create(slug="other", name="Other")
first = services.write_artifact(other, "pltf_page", "index", "v1\\n", requested_by="a", tool="t")
services.write_artifact(other, "pltf_page", "index", "v2\\n", requested_by="a", tool="t")
services.promote(other)
services.run_restore("set", first.change_set_id)
comment = services.add_comment(first.change_set_id, collection="pltf_page", name="index",
    side="after", line=1, body="Why?", actor=services.actor_for_user(boss))
restore_set = ChangeSet.objects.get(app=other, kind=ChangeSet.RESTORE)
deployment = App.objects.get(slug="other").production_id
demo = ChangeSet.objects.filter(app__slug="quote-approvals").order_by("-created_on").first()
services.mark_release(demo.id)
mine = services.add_comment(demo.id, collection="pltf_page", name="index",
    side="after", line=1, body="Why this?", actor=services.actor_for_user(boss))
print(first.change_set_id, first.restore_point_id, restore_set.id, deployment, comment.id,
    demo.id, mine.id)
"""


def manage(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
        check=True,
    )


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Any:
    folder = tmp_path_factory.mktemp("mcp-http")
    # A database file of its own (on a PostgreSQL run too): the live server migrates it and
    # loads the demo, independent of pytest-django's test database.
    env = {
        **os.environ,
        "DATABASE_URL": f"sqlite:///{folder / 'db.sqlite3'}",
        "DJANGO_SETTINGS_MODULE": "versions_site.settings",
        "DJANGO_DEBUG": "1",
    }
    manage(env, "migrate", "--noinput")
    other = manage(env, "shell", "-c", SETUP).stdout.splitlines()[-1].split()
    tokens = {
        "restorer": manage(env, "create_agent_token", "rvaid", "--app", SLUG).stdout,
        "promoter": manage(
            env, "create_agent_token", "rvaid", "--app", SLUG, "--can-promote"
        ).stdout,
        "viewer": manage(env, "create_agent_token", "viewer", "--app", SLUG).stdout,
    }
    port = _free_port()
    log = open(folder / "server.log", "w")  # noqa: SIM115 - the server writes it while it runs
    proc = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "-c", "gunicorn.conf.py"]
        + ["--bind", f"127.0.0.1:{port}", "--workers", "2"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=log,
    )
    for _ in range(200):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            break
        except OSError:
            time.sleep(0.1)
    yield {
        "url": f"http://127.0.0.1:{port}/mcp/",
        "tokens": {k: v.splitlines()[-1] for k, v in tokens.items()},
        "other": dict(zip(["set", "point", "restore_set", "deployment", "comment"], other)),
        "demo": dict(zip(["set", "comment"], other[5:])),
        "env": env,
        "log": folder / "server.log",
    }
    proc.terminate()
    proc.wait(10)
    log.close()


def run(site: Any, token: str | None, script: Any) -> Any:
    """Run ``script(session, tools)`` in one remote MCP session, in a thread of its own."""

    async def main() -> Any:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        async with (
            httpx2.AsyncClient(headers=headers, timeout=60) as http,
            streamable_http_client(site["url"], http_client=http) as (read, write),
            ClientSession(
                read, write, client_info=Implementation(name=CLIENT, version="1.0")
            ) as session,
        ):
            await session.initialize()
            tools = {t.name: t for t in (await session.list_tools()).tools}
            return await script(session, tools)

    outcome: dict[str, Any] = {}

    def in_thread() -> None:
        try:
            outcome["value"] = anyio.run(main)
        except BaseException as exc:  # noqa: BLE001 - re-raised below with the server's log
            outcome["error"] = exc

    thread = threading.Thread(target=in_thread)
    thread.start()
    thread.join(300)
    if "error" in outcome:
        print(Path(site["log"]).read_text()[-5000:])
        raise outcome["error"]
    return outcome["value"]


async def call(
    session: ClientSession, tools: dict, tool: str, **arguments: Any
) -> tuple[bool, dict]:
    """Call a tool; a result that is not an error must validate against its outputSchema."""
    result = await session.call_tool(tool, arguments)
    data = dict(result.structured_content or {})
    if not result.is_error:
        jsonschema.validate(data, tools[tool].output_schema)
    return bool(result.is_error), data


def test_a_remote_session_does_the_whole_agent_job(site):
    async def job(session: ClientSession, tools: dict) -> dict[str, Any]:
        seen: dict[str, Any] = {}
        _e, me = await call(session, tools, "whoami")
        seen["me"] = me
        _e, page = await call(session, tools, "read_artifact", collection="pltf_page", name="index")
        sha = page["sha256"]
        stale, refused = await call(
            session,
            tools,
            "edit_artifact",
            collection="pltf_page",
            name="index",
            old_text="</h1>",
            new_text="!</h1>",
            expected_sha256="0" * 64,
        )
        seen["stale"] = (stale, refused)
        err, first = await call(
            session,
            tools,
            "edit_artifact",
            collection="pltf_page",
            name="index",
            old_text="</h1>",
            new_text="!</h1>",
            expected_sha256=sha,
        )
        assert not err, first
        err, second = await call(
            session,
            tools,
            "write_artifact",
            collection="pltf_stylesheet",
            name="theme",
            source="body { color: teal; }\n",
        )
        assert not err, second
        seen["writes"] = (first, second)
        set_id = first["changeSetId"]
        _e, seen["described"] = await call(
            session, tools, "describe_change_set", set_id=set_id, message="Shout the title."
        )
        _e, seen["diff"] = await call(session, tools, "diff_change_set", set_id=set_id)
        _e, seen["compare"] = await call(
            session, tools, "compare", base=first["restorePointId"], head="draft", diff=True
        )
        _e, seen["sets"] = await call(session, tools, "list_change_sets", run_id=None, limit=5)
        _e, seen["revert"] = await call(session, tools, "revert_change_set", set_id=set_id)
        _e, again = await call(
            session,
            tools,
            "write_artifact",
            collection="pltf_page",
            name="index",
            source="<h1>Again</h1>\n",
            run_id="turn-2",
        )
        _e, seen["restore_point"] = await call(
            session, tools, "restore_point", point_id=again["restorePointId"]
        )
        _e, after = await call(
            session, tools, "read_artifact", collection="pltf_page", name="index"
        )
        seen["after_restore"] = after
        return seen

    seen = run(site, site["tokens"]["restorer"], job)
    assert seen["me"]["app"] == SLUG and seen["me"]["user"] == "rvaid"
    assert "restore" in seen["me"]["apps"][0]["may"]
    stale, refused = seen["stale"]
    assert stale and refused["error"] == "stale_write" and refused["current_sha256"]
    first, second = seen["writes"]
    # One session, one change set, written by this client.
    assert first["changeSetId"] == second["changeSetId"]
    assert seen["described"]["message"] == "Shout the title."
    added = [line for line in seen["diff"]["diff"].splitlines() if line.startswith("+")]
    assert any("!</h1>" in line for line in added)
    assert {f["name"] for f in seen["compare"]["files"]} == {"index", "theme"}
    assert "+body { color: teal; }" in seen["compare"]["diff"]
    newest = seen["sets"]["items"][0]
    assert newest["id"] == first["changeSetId"] and newest["tools"] == [f"mcp:{CLIENT}"]
    assert newest["message"] == "Shout the title."
    assert seen["revert"]["kind"] == "revert"
    assert seen["restore_point"]["kind"] == "restore"
    assert "Again" not in seen["after_restore"]["source"]
    assert "!</h1>" not in seen["after_restore"]["source"]


def test_a_promoting_token_promotes_and_rolls_production_back_remotely(site):
    async def job(session: ClientSession, tools: dict) -> Any:
        assert {"promote", "rollback_production"} <= set(tools)
        _e, one = await call(session, tools, "promote", note="first")
        await call(
            session,
            tools,
            "write_artifact",
            collection="pltf_page",
            name="index",
            source="<h1>Two</h1>\n",
        )
        _e, two = await call(session, tools, "promote", note="second")
        _e, back = await call(session, tools, "rollback_production", note="too loud")
        _e, now = await call(
            session, tools, "read_artifact", collection="pltf_page", name="index", at="production"
        )
        _e, deployments = await call(session, tools, "list_deployments")
        return one, two, back, now, deployments

    one, two, back, now, deployments = run(site, site["tokens"]["promoter"], job)
    assert one["kind"] == "promotion" and two["kind"] == "promotion"
    assert back["kind"] == "rollback" and back["deploymentId"] == one["deploymentId"]
    assert "Two" not in now["source"]
    assert deployments["production"] == one["deploymentId"]
    assert deployments["history"][0]["kind"] == "rollback"


def test_a_token_that_may_not_promote_sees_no_rollback_and_may_not_restore(site):
    async def job(session: ClientSession, tools: dict) -> Any:
        _e, history = await call(
            session, tools, "artifact_history", collection="pltf_page", name="index"
        )
        refused = await call(session, tools, "restore_point", point_id=history["items"][0]["id"])
        return set(tools), refused

    names, (is_error, refused) = run(site, site["tokens"]["viewer"], job)
    assert "rollback_production" not in names and "promote" not in names
    assert is_error and refused["error"] == "forbidden"


def test_every_tool_has_an_output_schema_from_the_api_and_checks_it(site):
    async def job(session: ClientSession, tools: dict) -> Any:
        return {name: tool.output_schema for name, tool in tools.items()}

    schemas = run(site, site["tokens"]["promoter"], job)
    for name, schema in schemas.items():
        assert schema["type"] == "object", name
        assert schema != {"type": "object", "additionalProperties": True}, name
        assert schema.get("properties") or schema.get("anyOf"), name
    assert "changeSetId" in schemas["write_artifact"]["properties"]
    assert "next_cursor" in schemas["list_artifacts"]["properties"]
    assert "from" in schemas["compare"]["$defs"]["CompareFileOut"]["properties"]


def test_every_tool_answers_what_its_output_schema_says(site):
    """Each tool listed, called once with arguments it succeeds with; ``call`` validates each
    structured result against the tool's outputSchema (the SDK's client does too)."""
    demo = site["demo"]

    async def job(session: ClientSession, tools: dict) -> set[str]:
        called: set[str] = set()

        async def ok(tool: str, **arguments: Any) -> dict:
            is_error, data = await call(session, tools, tool, **arguments)
            assert not is_error, (tool, data)
            called.add(tool)
            return data

        page = {"collection": "pltf_page", "name": "index"}
        await ok("whoami")
        await ok("list_artifacts", include_deleted=True)
        read = await ok("read_artifact", **page)
        await ok("read_artifact", **page, at="release")
        await ok("artifact_history", **page)
        await ok("artifact_history", **page, limit=1)
        written = await ok(
            "write_artifact", collection="pltf_page", name="scratch", source="a\n", run_id="all"
        )
        await ok(
            "edit_artifact",
            collection="pltf_page",
            name="scratch",
            old_text="a",
            new_text="b",
            run_id="all",
        )
        await ok("delete_artifact", collection="pltf_page", name="scratch", run_id="all")
        set_id = written["changeSetId"]
        await ok("list_change_sets", limit=2)
        await ok("list_change_sets", set_id=set_id)
        await ok("describe_change_set", set_id=set_id, message="Scratch.")
        await ok("diff_change_set", set_id=set_id, view="now")
        await ok("compare", base="release", head="draft", diff=True)
        await ok("list_reviews", set_id=demo["set"])
        await ok("list_reviews", set_id=demo["set"], limit=1)
        await ok("reply_to_comment", comment_id=demo["comment"], body="Because.")
        await ok("restore_change_set", set_id=set_id, dry_run=True)
        await ok("revert_change_set", set_id=set_id, dry_run=True)
        await ok("restore_point", point_id=written["restorePointId"], dry_run=True)
        await ok("restore_to_release", dry_run=True, expected={"pltf_page/index": read["sha256"]})
        await ok("promote", dry_run=True)
        await ok("promote", note="for the rollback")
        await ok("promote", ref=set_id, note="again")
        await ok("rollback_production")
        await ok("list_deployments")
        await ok("list_deployments", limit=1)
        await ok("production_history", limit=2)
        await ok("rollout", to=20, note="canary")
        await ok("rollout", action="abort")
        soon = (datetime.now(UTC) + timedelta(days=1)).isoformat()
        await ok("schedule_promotion", at=soon, note="tomorrow")
        await ok("freeze_production", reason="Release week.")
        await ok("freeze_production", reason="", unfreeze=True)
        return called ^ set(tools)

    assert run(site, site["tokens"]["promoter"], job) == set()


# Each tool that names something of an app, with another app's value and a missing one.
def _probes(other: dict[str, str]) -> list[tuple[str, dict, dict]]:
    missing_set, missing_point = "cs_rp_zzzzzz_00000000", "rp_zzzzzz_00000000"
    return [
        ("list_change_sets", {"set_id": other["set"]}, {"set_id": missing_set}),
        (
            "describe_change_set",
            {"set_id": other["set"], "message": "m"},
            {"set_id": missing_set, "message": "m"},
        ),
        ("diff_change_set", {"set_id": other["set"]}, {"set_id": missing_set}),
        ("restore_change_set", {"set_id": other["set"]}, {"set_id": missing_set}),
        ("revert_change_set", {"set_id": other["set"]}, {"set_id": missing_set}),
        ("restore_change_set", {"set_id": other["restore_set"]}, {"set_id": "rs_zzzzzz_00000000"}),
        ("list_reviews", {"set_id": other["set"]}, {"set_id": missing_set}),
        ("restore_point", {"point_id": other["point"]}, {"point_id": missing_point}),
        (
            "restore_point",
            {"point_id": other["point"], "expected_sha256": ""},
            {"point_id": missing_point, "expected_sha256": ""},
        ),
        (
            "reply_to_comment",
            {"comment_id": other["comment"], "body": "b"},
            {"comment_id": "cm_zzzzzz_00000000", "body": "b"},
        ),
        ("compare", {"base": other["set"]}, {"base": missing_set}),
        (
            "compare",
            {"base": "draft", "head": other["point"]},
            {"base": "draft", "head": missing_point},
        ),
        ("compare", {"base": other["deployment"]}, {"base": "dp_zzzzzz_00000000"}),
        (
            "read_artifact",
            {"collection": "pltf_page", "name": "index", "at": other["set"]},
            {"collection": "pltf_page", "name": "index", "at": missing_set},
        ),
        (
            "read_artifact",
            {"collection": "pltf_page", "name": "index", "at": other["deployment"]},
            {"collection": "pltf_page", "name": "index", "at": "dp_zzzzzz_00000000"},
        ),
        ("promote", {"ref": other["set"], "dry_run": True}, {"ref": missing_set, "dry_run": True}),
        (
            "promote",
            {"ref": other["deployment"], "dry_run": True},
            {"ref": "dp_zzzzzz_00000000", "dry_run": True},
        ),
        ("rollback_production", {"to": other["deployment"]}, {"to": "dp_zzzzzz_00000000"}),
    ]


def _blind(data: dict, values: dict) -> str:
    text = repr(sorted(data.items()))
    for value in sorted(values.values(), key=lambda v: -len(str(v))):
        if isinstance(value, str) and len(value) > 8:
            text = text.replace(value, "<id>")
    return text


def test_tools_answer_another_apps_ids_exactly_as_missing_ones(site):
    probes = _probes(site["other"])

    async def job(session: ClientSession, tools: dict) -> list[str]:
        differences = []
        for tool, elsewhere, nowhere in probes:
            there = await call(session, tools, tool, **elsewhere)
            missing = await call(session, tools, tool, **nowhere)
            if (there[0], _blind(there[1], elsewhere)) != (missing[0], _blind(missing[1], nowhere)):
                differences.append(f"{tool}: {there} ≠ {missing}")
            elif not there[0] or there[1].get("error") != "not_found":
                differences.append(f"{tool}: {there} is not a not_found error")
        # The walk can tell: this app's own set answers, where a missing one does not.
        mine = await call(session, tools, "list_change_sets", set_id=site["demo"]["set"])
        if mine[0]:
            differences.append(f"this app's own set was refused: {mine}")
        # The resource of another app's slug and of a missing slug: both -32002, same words.
        errors = []
        for slug in ("other", "nope"):
            try:
                await session.read_resource(f"versions://{slug}/pltf_page/index")
            except MCPError as exc:
                errors.append((exc.error.code, exc.error.message.replace(slug, "<slug>")))
        if len(errors) != 2 or errors[0] != errors[1] or errors[0][0] != -32002:
            differences.append(f"resources: {errors}")
        return differences

    walked_tools = {tool for tool, _e, _n in probes}
    assert len(walked_tools) >= 12
    assert run(site, site["tokens"]["promoter"], job) == []


def test_a_missing_resource_is_error_32002_with_the_servers_words(site):
    async def job(session: ClientSession, tools: dict) -> Any:
        found = await session.read_resource(f"versions://{SLUG}/pltf_page/index")
        with pytest.raises(MCPError) as missing:
            await session.read_resource(f"versions://{SLUG}/pltf_page/nowhere")
        return found, missing.value.error

    found, error = run(site, site["tokens"]["restorer"], job)
    assert found.contents[0].text
    assert error.code == -32002
    assert "“nowhere”" in error.message


def test_without_a_token_or_with_a_bad_one_the_endpoint_answers_401_in_words(site):
    for headers in ({}, {"Authorization": "Bearer vt_not-a-token"}):
        response = httpx2.post(site["url"], json={}, headers=headers)
        assert response.status_code == 401
        assert response.headers["WWW-Authenticate"] == "Bearer"
        assert response.headers["Content-Type"] == "application/problem+json"
        assert "token" in response.json()["message"]


def test_a_get_is_405_and_a_forged_session_is_404(site):
    auth = {"Authorization": f"Bearer {site['tokens']['restorer']}"}
    get = httpx2.get(site["url"], headers={**auth, "Accept": "text/event-stream"})
    assert get.status_code == 405 and get.headers["Allow"] == "POST, DELETE"
    forged = httpx2.post(
        site["url"],
        json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
        headers={
            **auth,
            "Mcp-Session-Id": "made-up",
            "Accept": "application/json, text/event-stream",
        },
    )
    assert forged.status_code == 404
    assert "start a new one" in forged.json()["message"]
