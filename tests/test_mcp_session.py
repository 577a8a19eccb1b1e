"""A real MCP session: the `mcp` SDK's own stdio client drives `manage.py mcp_server`.

The server runs as a subprocess, so it needs a database it can see: each module run migrates
its own SQLite file (independent of pytest-django's test database) and loads the demo app,
a user and a token through the project's own management commands.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.types import Implementation

ROOT = Path(__file__).resolve().parent.parent
SLUG = "quote-approvals"
CLIENT = "versions-test-client"
TOOLS = {
    "list_artifacts",
    "read_artifact",
    "write_artifact",
    "delete_artifact",
    "list_change_sets",
    "restore_change_set",
    "revert_change_set",
    "edit_artifact",
    "describe_change_set",
    "artifact_history",
    "diff_change_set",
    "list_deployments",
    "production_history",
    "list_reviews",
    "reply_to_comment",
    "restore_point",
    "restore_to_release",
    "compare",
    "whoami",
}


# One subprocess for the whole setup: the demo app (through the capture service), a superuser
# who may restore and a viewer who may not.
SETUP = """
from django.contrib.auth import get_user_model
from versions.management.commands.load_demo import load_demo
load_demo()
users = get_user_model().objects
users.create_superuser("rvaid", email="", password=None)
users.create_user("viewer", password=None)
"""


def manage(env: dict[str, str], *args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=check,
    )


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> dict[str, Any]:
    """A migrated SQLite file with the demo app, a restorer and a viewer, and their tokens."""
    folder = tmp_path_factory.mktemp("mcp")
    db_file = folder / "mcp.sqlite3"
    env = {
        **os.environ,
        "DATABASE_URL": f"sqlite:///{db_file}",
        "DJANGO_SETTINGS_MODULE": "versions_site.settings",
    }
    manage(env, "migrate", "--noinput")
    manage(env, "shell", "-c", SETUP)
    token = manage(env, "create_agent_token", "rvaid", "--app", SLUG).stdout.splitlines()[-1]
    viewer = manage(env, "create_agent_token", "viewer", "--app", SLUG).stdout.splitlines()[-1]
    return {"env": env, "db": db_file, "token": token, "viewer": viewer}


def params(site: dict[str, Any], token: str) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable,
        args=["manage.py", "mcp_server", "--app", SLUG, "--token", token],
        env=site["env"],
        cwd=str(ROOT),
    )


async def call(session: ClientSession, tool: str, **arguments: Any) -> tuple[bool, dict]:
    result = await session.call_tool(tool, arguments)
    return bool(result.is_error), dict(result.structured_content or {})


def run_session(site: dict[str, Any], token: str, script: Any) -> Any:
    """Run ``script`` in one MCP session; on failure, print what the server logged."""
    log = Path(site["db"]).with_suffix(".server.log")

    async def main() -> Any:
        with open(log, "w") as errlog:
            async with (
                stdio_client(params(site, token), errlog=errlog) as (read, write),
                ClientSession(
                    read, write, client_info=Implementation(name=CLIENT, version="1.0")
                ) as session,
            ):
                await session.initialize()
                return await script(session)

    # A thread of its own: the browser tests' sync Playwright keeps an event loop running in
    # the main thread for the whole session, and anyio refuses to start a second one there.
    outcome: dict[str, Any] = {}

    def in_thread() -> None:
        try:
            outcome["value"] = anyio.run(main)
        except BaseException as exc:  # re-raised in the test's thread
            outcome["error"] = exc

    thread = threading.Thread(target=in_thread)
    thread.start()
    thread.join()
    if "error" in outcome:
        if log.exists():
            print("MCP server stderr:\n" + log.read_text(errors="replace"))
        raise outcome["error"]
    return outcome["value"]


def points(site: dict[str, Any], set_id: str) -> list[tuple[str, str, str]]:
    with sqlite3.connect(site["db"]) as db:
        return db.execute(
            "SELECT p.tool, p.requested_by, a.name FROM versions_restorepoint p "
            "JOIN versions_artifact a ON a.id = p.artifact_id "
            "WHERE p.change_set_id = ? ORDER BY p.created_on",
            (set_id,),
        ).fetchall()


def test_mcp_session_lists_reads_writes_refuses_stale_and_restores(site):
    async def script(session: ClientSession) -> dict[str, Any]:
        tools = (await session.list_tools()).tools
        out: dict[str, Any] = {"tools": {t.name: t.input_schema for t in tools}}
        _, listing = await call(session, "list_artifacts")
        out["listing"] = listing
        _, index = await call(session, "read_artifact", collection="pltf_page", name="index")
        _, css = await call(session, "read_artifact", collection="pltf_stylesheet", name="App")
        out["before"] = (index, css)
        out["write1"] = await call(
            session,
            "write_artifact",
            collection="pltf_page",
            name="index",
            source="<h1>Written over MCP</h1>\n",
            expected_sha256=index["sha256"],
        )
        out["write2"] = await call(
            session,
            "write_artifact",
            collection="pltf_stylesheet",
            name="App",
            source="body { color: teal; }\n",
            expected_sha256=css["sha256"],
        )
        out["stale"] = await call(
            session,
            "write_artifact",
            collection="pltf_page",
            name="index",
            source="lost update",
            expected_sha256=index["sha256"],
        )
        set_id = out["write1"][1]["changeSetId"]
        out["detail"] = await call(session, "list_change_sets", set_id=set_id)
        out["sets"] = await call(session, "list_change_sets")
        out["restore"] = await call(session, "restore_change_set", set_id=set_id)
        out["after"] = (
            (await call(session, "read_artifact", collection="pltf_page", name="index"))[1],
            (await call(session, "read_artifact", collection="pltf_stylesheet", name="App"))[1],
        )
        out["again"] = await call(session, "restore_change_set", set_id=set_id)
        return out

    out = run_session(site, site["token"], script)

    # Tools with input schemas.
    assert set(out["tools"]) == TOOLS
    write_schema = out["tools"]["write_artifact"]
    assert {"collection", "name", "source", "expected_sha256", "run_id"} <= set(
        write_schema["properties"]
    )
    assert set(write_schema["required"]) == {"collection", "name", "source"}
    assert "ctx" not in write_schema["properties"]
    assert "set_id" in out["tools"]["restore_change_set"]["required"]

    # Reads.
    names = {(a["collection"], a["name"]) for a in out["listing"]["artifacts"]}
    assert ("pltf_page", "index") in names and ("pltf_stylesheet", "App") in names
    index, css = out["before"]
    assert hashlib.sha256(index["source"].encode()).hexdigest() == index["sha256"]

    # Writes: captured, one change set for the session.
    failed, receipt1 = out["write1"]
    assert not failed
    assert receipt1["previousSha256"] == index["sha256"]
    failed, receipt2 = out["write2"]
    assert not failed
    assert receipt2["changeSetId"] == receipt1["changeSetId"]
    assert points(site, receipt1["changeSetId"]) == [
        (f"mcp:{CLIENT}", "rvaid", "index"),
        (f"mcp:{CLIENT}", "rvaid", "App"),
    ]
    detail = out["detail"][1]
    assert [p["tool"] for p in detail["restore_points"]] == [f"mcp:{CLIENT}"] * 2
    assert out["sets"][1]["items"][0]["id"] == receipt1["changeSetId"]

    # Stale write refused with the current hash; nothing written.
    failed, stale = out["stale"]
    assert failed
    assert stale["error"] == "stale_write"
    assert stale["current_sha256"] == receipt1["sha256"]
    assert len(points(site, receipt1["changeSetId"])) == 2

    # Restore all answers the receipt, and the bytes are back exactly.
    failed, receipt = out["restore"]
    assert not failed
    assert receipt["kind"] == "restore"
    assert receipt["restoredFromSet"] == receipt1["changeSetId"]
    assert {i["name"] for i in receipt["items"]} == {"index", "App"}
    after_index, after_css = out["after"]
    assert after_index["source"].encode() == index["source"].encode()
    assert after_css["source"].encode() == css["source"].encode()
    assert (after_index["sha256"], after_css["sha256"]) == (index["sha256"], css["sha256"])
    failed, again = out["again"]
    assert not failed and again["kind"] == "noop"


def test_each_session_is_its_own_change_set_unless_the_client_passes_run_id(site):
    async def script(session: ClientSession) -> list[dict]:
        receipts = []
        for n, run_id in enumerate([None, None, "client-run-9", "client-run-9"]):
            args: dict[str, Any] = {
                "collection": "pltf_page",
                "name": f"session-page-{n}",
                "source": f"page {n}\n",
            }
            if run_id:
                args["run_id"] = run_id
            receipts.append((await call(session, "write_artifact", **args))[1])
        return receipts

    first = run_session(site, site["token"], script)
    second = run_session(site, site["token"], script)
    assert first[0]["changeSetId"] == first[1]["changeSetId"]
    assert second[0]["changeSetId"] == second[1]["changeSetId"]
    assert first[0]["changeSetId"] != second[0]["changeSetId"]
    assert first[2]["changeSetId"] == first[3]["changeSetId"] != first[0]["changeSetId"]


def test_a_client_that_names_its_turns_gets_a_change_set_per_turn(site):
    async def script(session: ClientSession) -> list[dict]:
        receipts = []
        for n, turn_id in enumerate(["turn-1", "turn-1", "turn-2"]):
            args = {"collection": "pltf_page", "name": f"turn-page-{n}", "source": f"{n}\n"}
            receipts.append((await call(session, "write_artifact", turn_id=turn_id, **args))[1])
        return receipts

    first = run_session(site, site["token"], script)
    assert first[0]["changeSetId"] == first[1]["changeSetId"] != first[2]["changeSetId"]


def test_delete_is_a_restorable_tombstone(site):
    async def script(session: ClientSession) -> dict[str, Any]:
        out: dict[str, Any] = {}
        await call(session, "write_artifact", collection="pltf_page", name="doomed", source="x\n")
        out["delete"] = await call(
            session, "delete_artifact", collection="pltf_page", name="doomed"
        )
        out["read"] = await call(session, "read_artifact", collection="pltf_page", name="doomed")
        point_set = out["delete"][1]["changeSetId"]
        out["detail"] = (await call(session, "list_change_sets", set_id=point_set))[1]
        return out

    out = run_session(site, site["token"], script)
    failed, receipt = out["delete"]
    assert not failed and receipt["sha256"] == ""
    failed, read = out["read"]
    assert failed and read["error"] == "not_found"
    assert out["detail"]["restore_points"][-1]["new_sha256"] == ""


def test_user_without_restore_permission_cannot_restore_over_mcp(site):
    async def script(session: ClientSession) -> Any:
        _, sets = await call(session, "list_change_sets")
        set_id = sets["items"][0]["id"]
        return await call(session, "restore_change_set", set_id=set_id)

    failed, body = run_session(site, site["viewer"], script)
    assert failed
    assert body["error"] == "forbidden"


def test_bad_input_is_a_tool_error_not_a_crash(site):
    async def script(session: ClientSession) -> list[Any]:
        return [
            await call(session, "write_artifact", collection="pltf_nope", name="x", source="y"),
            await call(session, "write_artifact", collection="pltf_page", name="a/b", source="y"),
            await call(session, "read_artifact", collection="pltf_page", name="never-written"),
            await call(session, "restore_change_set", set_id="cs_rp_nope_00000000"),
            await call(session, "read_artifact", collection="pltf_nope", name="index"),
            await call(
                session,
                "write_artifact",
                collection="pltf_page",
                name="nul-run",
                source="y",
                run_id="run\x00id",
            ),
            await call(session, "restore_change_set", set_id="cs_\x00"),
            await call(session, "list_artifacts"),
        ]

    results = run_session(site, site["token"], script)
    assert [r[1].get("error") for r in results[:-1]] == [
        "invalid_input",
        "invalid_input",
        "not_found",
        "not_found",
        "invalid_input",
        "invalid_input",
        "invalid_input",
    ]
    assert all(r[0] for r in results[:-1])
    assert results[-1][0] is False  # the session still works
    names = {a["name"] for a in results[-1][1]["artifacts"]}
    assert "nul-run" not in names


def test_the_server_logs_each_line_once_on_stderr(site):
    """The banner (and every other log line of Versions) is written once: the project's own
    log handler and the stderr handler of the stdio server both printed it."""

    async def script(session: ClientSession) -> tuple[bool, dict]:
        return await call(session, "whoami")

    assert run_session(site, site["token"], script)[0] is False
    log = Path(site["db"]).with_suffix(".server.log").read_text(encoding="utf-8")
    assert log.count(f"Versions MCP server for app “{SLUG}” as rvaid, on stdio.") == 1, log


def test_server_refuses_a_bad_token_without_writing_to_stdout(site):
    result = manage(site["env"], "mcp_server", "--app", SLUG, "--token", "vt_wrong", check=False)
    assert result.returncode != 0
    assert result.stdout == ""
    assert "token is not valid" in result.stderr


def test_revert_over_mcp_takes_back_one_turn_and_keeps_the_later_one(site):
    async def script(session: ClientSession) -> dict[str, Any]:
        out: dict[str, Any] = {}
        base = "".join(f"line {i}\n" for i in range(1, 9))
        await call(
            session, "write_artifact", collection="pltf_page", name="doc", source=base, run_id="r0"
        )
        first = base.replace("line 2\n", "line two\n")
        _, turn = await call(
            session, "write_artifact", collection="pltf_page", name="doc", source=first, run_id="r1"
        )
        later = first.replace("line 7\n", "line seven\n")
        await call(
            session, "write_artifact", collection="pltf_page", name="doc", source=later, run_id="r2"
        )
        out["dry"] = await call(
            session, "revert_change_set", set_id=turn["changeSetId"], dry_run=True
        )
        out["revert"] = await call(session, "revert_change_set", set_id=turn["changeSetId"])
        out["read"] = await call(session, "read_artifact", collection="pltf_page", name="doc")
        tools = {t.name: t for t in (await session.list_tools()).tools}
        out["hints"] = {
            name: (
                t.annotations.destructive_hint,
                t.annotations.read_only_hint,
                t.annotations.open_world_hint,
            )
            for name, t in tools.items()
        }
        return out

    out = run_session(site, site["token"], script)
    assert out["dry"][1]["kind"] == "dry_run"
    failed, receipt = out["revert"]
    assert not failed and receipt["kind"] == "revert" and receipt["revertedSet"]
    assert "line 2\n" in out["read"][1]["source"] and "line seven\n" in out["read"][1]["source"]
    hints = out["hints"]
    for name in ("write_artifact", "delete_artifact", "restore_change_set", "revert_change_set"):
        assert hints[name][0] is True and hints[name][2] is False, name
    for name in ("list_artifacts", "read_artifact", "list_change_sets"):
        assert hints[name][1] is True and hints[name][2] is False, name


def test_after_a_revert_over_mcp_the_sessions_next_write_starts_a_new_set(site):
    async def script(session: ClientSession) -> dict[str, Any]:
        out: dict[str, Any] = {}
        page = {"collection": "pltf_page"}
        _, out["turn"] = await call(
            session, "write_artifact", **page, name="closing-a", source="turn\n"
        )
        set_id = out["turn"]["changeSetId"]
        out["revert"] = await call(session, "revert_change_set", set_id=set_id)
        # The same session (the same run) writes again, after the revert.
        _, out["next"] = await call(
            session, "write_artifact", **page, name="closing-b", source="next\n"
        )
        _, out["after"] = await call(
            session, "write_artifact", **page, name="closing-c", source="after\n"
        )
        _, out["detail"] = await call(session, "list_change_sets", set_id=set_id)
        # Restore all of the reverted set again takes back nothing the session wrote since.
        out["again"] = await call(session, "restore_change_set", set_id=set_id)
        _, out["read"] = await call(session, "read_artifact", **page, name="closing-b")
        return out

    out = run_session(site, site["token"], script)
    failed, receipt = out["revert"]
    assert not failed and receipt["kind"] == "revert"
    turn = out["turn"]["changeSetId"]
    assert out["next"]["changeSetId"] != turn
    assert out["after"]["changeSetId"] == out["next"]["changeSetId"]  # the new set goes on
    assert points(site, turn) == [("mcp:versions-test-client", "rvaid", "closing-a")]
    assert out["detail"]["revertedBy"] == receipt["setId"] and out["detail"]["restoredBy"] is None
    assert out["read"]["source"] == "next\n"


def test_mcp_reads_history_edits_describes_and_offers_resources(site):
    async def script(session: ClientSession) -> dict[str, Any]:
        out: dict[str, Any] = {}
        tools = (await session.list_tools()).tools
        out["tools"] = {t.name: t for t in tools}
        _, page = await call(session, "read_artifact", collection="pltf_page", name="index")
        out["edit"] = await call(
            session,
            "edit_artifact",
            collection="pltf_page",
            name="index",
            old_text=page["source"][:10],
            new_text="EDITED",
            expected_sha256=page["sha256"],
            message="Edited the start of the page",
        )
        out["missing"] = await call(
            session,
            "edit_artifact",
            collection="pltf_page",
            name="index",
            old_text="no such text anywhere",
            new_text="x",
        )
        set_id = out["edit"][1]["changeSetId"]
        out["describe"] = await call(
            session, "describe_change_set", set_id=set_id, message="Turn: edit the page"
        )
        out["history"] = await call(
            session, "artifact_history", collection="pltf_page", name="index"
        )
        out["then"] = await call(
            session,
            "read_artifact",
            collection="pltf_page",
            name="index",
            at=out["edit"][1]["restorePointId"],
        )
        out["diff"] = await call(session, "diff_change_set", set_id=set_id)
        out["wrong_type"] = await call(
            session, "artifact_history", collection="pltf_page", name="index", page="many"
        )
        templates = await session.list_resource_templates()
        out["templates"] = [t.uri_template for t in templates.resource_templates]
        read = await session.read_resource(f"versions://{SLUG}/pltf_page/index")
        out["resource"] = read.contents[0].text
        out["page"] = page
        return out

    out = run_session(site, site["token"], script)
    for tool in out["tools"].values():
        assert tool.title and tool.output_schema is not None
    assert out["tools"]["edit_artifact"].annotations.destructive_hint is True
    assert out["tools"]["artifact_history"].annotations.read_only_hint is True
    error, receipt = out["edit"]
    assert not error and receipt["linesAdded"] >= 1
    error, refused = out["missing"]
    assert error and "does not occur" in refused["message"]
    assert out["describe"][1]["message"] == "Turn: edit the page"
    items = out["history"][1]["items"]
    assert items[0]["id"] == receipt["restorePointId"]
    assert (
        items[0]["written_by"].startswith("token:") and items[0]["message"] == "Turn: edit the page"
    )
    assert out["then"][1]["source"] == out["page"]["source"]
    assert "+EDITED" in out["diff"][1]["diff"]
    assert out["wrong_type"][0] is True
    assert "versions://{slug}/{collection}/{name}" in out["templates"]
    assert out["resource"].startswith("EDITED")


def test_server_info_version_is_the_package_version(site):
    from importlib.metadata import version

    params_ = params(site, site["token"])

    async def main() -> Any:
        async with (
            stdio_client(params_) as (read, write),
            ClientSession(read, write) as session,
        ):
            result = await session.initialize()
            return result.server_info.version

    # In a thread of its own, like run_session: the browser tests' sync Playwright keeps an
    # event loop running in the main thread.
    outcome: dict[str, Any] = {}
    thread = threading.Thread(target=lambda: outcome.update(value=anyio.run(main)))
    thread.start()
    thread.join()
    assert outcome["value"] == version("versions")


def test_a_missing_database_is_one_line_and_leaves_no_file(tmp_path):
    db_file = tmp_path / "nothing.sqlite3"
    env = {
        **os.environ,
        "DATABASE_URL": f"sqlite:///{db_file}",
        "DJANGO_SETTINGS_MODULE": "versions_site.settings",
    }
    done = manage(env, "mcp_server", "--app", SLUG, "--token", "vt_x", check=False)
    assert done.returncode == 1
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert done.stdout == ""
    assert not db_file.exists()


def test_only_a_promoting_token_sees_and_uses_the_promote_tool(site):
    promoter = manage(
        site["env"], "create_agent_token", "rvaid", "--app", SLUG, "--can-promote"
    ).stdout.splitlines()[-1]

    async def script(session: ClientSession) -> dict[str, Any]:
        tools = {t.name for t in (await session.list_tools()).tools}
        before = await call(session, "list_deployments")
        dry = await call(session, "promote", dry_run=True)
        done = await call(session, "promote", note="from an MCP client")
        after = await call(session, "list_deployments")
        return {"tools": tools, "before": before, "dry": dry, "done": done, "after": after}

    out = run_session(site, promoter, script)
    assert "promote" in out["tools"]
    assert out["dry"][1]["kind"] in ("dry_run", "noop")
    failed, receipt = out["done"]
    assert not failed and receipt["kind"] in ("promotion", "noop")
    assert out["after"][1]["production"]

    async def plain(session: ClientSession) -> set[str]:
        return {t.name for t in (await session.list_tools()).tools}

    assert "promote" not in run_session(site, site["token"], plain)


def test_a_promoting_token_whose_user_may_not_promote_does_not_see_the_promote_tool(site):
    # The token was made --can-promote, but its user holds neither the promote permission nor
    # a role: the services say it may not promote, so tools/list does not offer the tool.
    token = manage(
        site["env"], "create_agent_token", "viewer", "--app", SLUG, "--can-promote"
    ).stdout.splitlines()[-1]

    async def script(session: ClientSession) -> dict[str, Any]:
        tools = {t.name for t in (await session.list_tools()).tools}
        return {"tools": tools, "promote": await call(session, "promote", dry_run=True)}

    out = run_session(site, token, script)
    assert out["tools"] >= TOOLS
    assert "promote" not in out["tools"]
    failed, _body = out["promote"]
    assert failed
