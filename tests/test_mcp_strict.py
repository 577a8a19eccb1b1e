"""Strict MCP arguments (docs/api.md#strict-inputs): a real MCP session, through the SDK's stdio
client, finds a tool argument it does not take refused in the API's words, and nothing written."""

from __future__ import annotations

import hashlib
from typing import Any

from mcp import ClientSession
from test_mcp_session import call, run_session, site  # noqa: F401  (the module's fixture)


def test_a_misspelt_precondition_is_a_tool_error_and_writes_nothing(site):  # noqa: F811
    async def script(session: ClientSession) -> dict[str, Any]:
        out: dict[str, Any] = {}
        _, out["before"] = await call(
            session, "read_artifact", collection="pltf_page", name="index"
        )
        out["misspelt"] = await call(
            session,
            "write_artifact",
            collection="pltf_page",
            name="index",
            source="written without its check",
            expectedSha256=hashlib.sha256(b"stale").hexdigest(),
        )
        out["far"] = await call(session, "list_artifacts", zzz=1)
        _, out["after"] = await call(session, "read_artifact", collection="pltf_page", name="index")
        return out

    out = run_session(site, site["token"], script)

    error, data = out["misspelt"]
    assert error
    assert data["error"] == "unknown_field"
    assert data["message"] == "unknown field `expectedSha256`; did you mean `expected_sha256`?"
    assert (data["field"], data["suggestion"]) == ("expectedSha256", "expected_sha256")
    assert out["after"]["sha256"] == out["before"]["sha256"]

    error, data = out["far"]
    assert error
    assert data["suggestion"] is None
    assert data["message"] == "unknown field `zzz`; the known fields are `include_deleted`."
