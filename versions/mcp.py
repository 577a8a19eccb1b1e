"""The MCP server (docs/api.md#mcp): an app's artifacts as MCP tools, every write captured.

``python manage.py mcp_server --app <slug> --token <token>`` speaks MCP over stdio. Each tool is
a thin adapter over the services, so a write from any MCP client (Claude Code, Codex, Cursor…)
records a restore point with ``tool = "mcp:<client name>"`` (the ``clientInfo.name`` the client
sent at ``initialize``) and can be restored like the agent's own.

Grouping: over stdio one server process serves one MCP session, so the process draws one
``run_id`` at start and every write of the session joins one change set, unless the client
passes its own ``run_id`` to a tool — or its ``turn_id``: a client that says where its turns
begin and end (one stdio session can last a whole working day) gets one change set per turn,
grouped by the turn rule of docs/architecture.md#change-sets rather than the session.

The token is checked on every call, so revoking it or deactivating its user stops the session.
"""

from __future__ import annotations

import contextvars
import copy
import functools
import hashlib
import json
import logging
import unicodedata
from collections.abc import Callable
from http import HTTPStatus
from importlib.metadata import PackageNotFoundError, version
from typing import Annotated, Any, Literal

import anyio
from asgiref.sync import async_to_sync
from django.core import signing
from django.core.exceptions import RequestDataTooBig
from django.db import close_old_connections, connections
from django.http import HttpRequest, HttpResponse
from django.views.decorators.csrf import csrf_exempt
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.shared.exceptions import MCPError
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import BaseModel, Field, TypeAdapter

import versions.api.schemas as shapes
from versions import ids, selectors, services
from versions.errors import InvalidInput, NotFound, PreflightFailed, StaleWrite, VersionsError
from versions.request_meta import request_meta
from versions.strict import first_unknown
from versions.terms import (
    MANAGE,
    POINT,
    PROMOTE,
    RELEASE,
    REVERT,
    SET,
    VIEW,
    WRITE,
)

logger = logging.getLogger("versions.mcp")

TOOL_PREFIX = "mcp:"
UNKNOWN_CLIENT = "unknown-client"
BAD_TEXT = "Ids, hashes and names must not contain NUL characters or unpaired surrogates."

INSTRUCTIONS = (
    "Versions: read and write the artifacts of one app. Every write is captured as a restore "
    "point first, and the writes of this session form one change set that a person can "
    "restore. Read an artifact before changing it and pass its sha256 as expected_sha256: "
    "a stale write is refused and tells you the current hash."
)

Collection = Annotated[
    str,
    Field(
        description=(
            "pltf_page, pltf_frontend_module, pltf_stylesheet, pltf_api_route or pltf_server_script"
        )
    ),
]
Name = Annotated[str, Field(description="The artifact name, e.g. “index” (no “/”).")]
Expected = Annotated[
    str | None,
    Field(
        description=(
            "The sha256 you last read; the write is refused if the artifact changed since. "
            '"" means the artifact must not exist yet.'
        )
    ),
]
RunId = Annotated[
    str | None,
    Field(description="Group writes into one change set; defaults to one per MCP session."),
]
Message = Annotated[
    str | None,
    Field(
        description=(
            "What you were asked or did, like a commit message (at most 2,000 characters): "
            "the change set keeps the first message its writes give."
        )
    ),
]
Addresses = Annotated[
    list[str] | None,
    Field(
        description=(
            "The comment threads (cm_…, from list_reviews) this write answers: they then read "
            "“addressed in rp_…” for the person, who resolves them. Ids that are not comments "
            "of this app are refused and nothing is written."
        )
    ),
]
# A missing resource (docs/api.md#mcp): MCP's "resource not found" error code.
RESOURCE_NOT_FOUND = -32002
INVALID_PARAMS = -32602
NO_SUCH_APP = "There is no app “{slug}”."
TITLES = {
    "list_artifacts": "List artifacts",
    "read_artifact": "Read an artifact (now or at a ref)",
    "write_artifact": "Write an artifact",
    "edit_artifact": "Edit part of an artifact",
    "delete_artifact": "Delete an artifact",
    "list_change_sets": "List change sets",
    "describe_change_set": "Describe a change set",
    "artifact_history": "An artifact's history",
    "diff_change_set": "A change set's diff",
    "restore_change_set": "Restore all of a change set",
    "revert_change_set": "Revert this set",
    "list_deployments": "Production and its deployments",
    "production_history": "The history of production",
    "promote": "Promote to production",
    "rollback_production": "Roll production back",
    "restore_point": "Restore one artifact to before a point",
    "restore_to_release": "Restore to release",
    "compare": "Compare two refs",
    "whoami": "Who am I",
    "list_reviews": "A change set's reviews and comments",
    "reply_to_comment": "Reply to a comment",
    "rollout": "Gradual rollout",
    "schedule_promotion": "Schedule a promotion",
    "freeze_production": "Freeze or unfreeze production",
}
RESOURCE_TEMPLATE = "versions://{slug}/{collection}/{name}"


def package_version() -> str:
    """The installed package's version, for ``serverInfo.version``."""
    try:
        return version("versions")
    except PackageNotFoundError:
        return "0"


TurnId = Annotated[
    str | None,
    Field(
        description=(
            "Your turn id, if any: the writes of one turn (each within the turn gap, 10 minutes "
            "by default, of the one before) "
            "become one change set, instead of one set for the whole MCP session."
        )
    ),
]


REF_WORDS = (
    "A ref: draft (now), production, release, dp_… (a deployment), cs_…/rs_… (right after that "
    "set) or rp_… (just before that point)."
)
SetId = Annotated[str, Field(description="The change set: cs_… (or rs_… to undo a restore).")]
# Every list's keyset page (docs/api.md#cursors): the same two arguments everywhere.
Limit = Annotated[
    int | None,
    Field(
        ge=1,
        le=200,
        description="A keyset page of this many items; the answer's next_cursor continues it.",
    ),
]
Cursor = Annotated[
    str | None, Field(description="The next_cursor of the answer before, unchanged.")
]
DryRun = Annotated[bool, Field(description="Only say what would be written.")]
Reviewed = Annotated[
    dict[str, str] | None,
    Field(description='"collection/name" → the sha256 you reviewed as now.'),
]


def _result(data: dict[str, Any], *, error: bool = False) -> CallToolResult:
    return CallToolResult(
        content=[TextContent(type="text", text=json.dumps(data, ensure_ascii=False, indent=1))],
        structured_content=data,
        is_error=error,
    )


def _error_data(exc: VersionsError) -> dict[str, Any]:
    """A service error as the tool's error result: its code and words, and the keys of
    docs/api.md#receipts and docs/api.md#errors that go with it (a refused pre-flight's receipt, the
    current hash of a stale write)."""
    if isinstance(exc, PreflightFailed):
        return exc.answer()
    data: dict[str, Any] = {"error": exc.code, "message": exc.message}
    if isinstance(exc, StaleWrite):
        data["current_sha256"] = exc.current_sha256
    if isinstance(exc, InvalidInput):
        data["field"] = exc.field
    return data


def _refuse_unstorable(values: tuple[object, ...]) -> None:
    for value in values:
        items = list(value.items()) if isinstance(value, dict) else [value]
        for item in items:
            for text in item if isinstance(item, tuple) else (item,):
                if isinstance(text, str) and (
                    "\x00" in text or any("\ud800" <= ch <= "\udfff" for ch in text)
                ):
                    raise InvalidInput(BAD_TEXT)


def client_tool_name(ctx: Context | None, given: str | None = None) -> str:
    """``mcp:<client name>`` from the client's ``initialize`` clientInfo (or ``given``: the name
    a remote session sent when it began), made safe to store."""
    name = given or ""
    try:
        params = ctx.session.client_params if ctx is not None and given is None else None
        if params is not None and params.client_info is not None:
            name = params.client_info.name or ""
    except (ValueError, AttributeError):
        name = ""
    # Control characters go; whitespace runs become one hyphen ("Claude Code" → "Claude-Code").
    printable = "".join(ch for ch in name if unicodedata.category(ch)[0] != "C" or ch.isspace())
    cleaned = "-".join(printable.split())
    return TOOL_PREFIX + (cleaned[:150] or UNKNOWN_CLIENT)


def _may(authorise: Callable[..., tuple[services.Actor, Any]], action: str) -> bool:
    """Whether the session's token may do ``action`` on its app, as the services say: a tool
    it may never use is not listed."""
    try:
        actor, app = authorise()
    except VersionsError:
        return False
    return actor.may(action, app)


def new_run_id() -> str:
    """A session's own run id: its writes form one change set."""
    return f"mcp-{ids.base36(ids.now_ms())}-{ids.random_suffix()}"


def output_schema(*shapes_: type[BaseModel]) -> dict[str, Any]:
    """A tool's ``outputSchema``: the JSON schema of the API's shape(s) of its answer (one of
    them, when a tool answers one of several)."""
    if len(shapes_) == 1:
        return shapes_[0].model_json_schema(by_alias=True)
    union = TypeAdapter(shapes_[0] | shapes_[1]).json_schema(by_alias=True)  # type: ignore[operator,arg-type]
    return {"type": "object", **union}


@functools.cache
def output_schemas() -> dict[str, dict[str, Any]]:
    """Every tool's ``outputSchema``, from the API's schemas (docs/api.md#mcp-tools)."""
    receipt = output_schema(shapes.RestoreReceiptOut)
    write = output_schema(shapes.WriteReceiptOut)
    moved = output_schema(shapes.PromotionReceiptOut)
    return {
        "list_artifacts": output_schema(shapes.ArtifactList),
        "read_artifact": output_schema(shapes.ArtifactOut, shapes.ArtifactAtOut),
        "write_artifact": write,
        "edit_artifact": write,
        "delete_artifact": write,
        "list_change_sets": output_schema(shapes.ChangeSetPage, shapes.ChangeSetDetail),
        "describe_change_set": output_schema(shapes.DescribedOut),
        "artifact_history": output_schema(shapes.ArtifactHistory),
        "diff_change_set": output_schema(shapes.DiffOut),
        "restore_change_set": receipt,
        "revert_change_set": receipt,
        "restore_point": receipt,
        "restore_to_release": receipt,
        "list_deployments": output_schema(shapes.DeploymentPage),
        "production_history": output_schema(shapes.ProductionHistoryPage),
        "list_reviews": output_schema(shapes.SetReviewsOut),
        "reply_to_comment": output_schema(shapes.ReplyOut),
        "promote": moved,
        "rollback_production": moved,
        "rollout": moved,
        "schedule_promotion": moved,
        "freeze_production": output_schema(shapes.FreezeOut),
        "compare": output_schema(shapes.CompareDiffOut),
        "whoami": output_schema(shapes.MeOut),
    }


def build_server(
    app_slug: str,
    token: str,
    *,
    run_id: str | None = None,
    client_name: str | None = None,
    remote: bool = False,
) -> MCPServer:
    """The MCP server for app ``app_slug``, acting with ``token``; both are checked on each call.

    ``run_id`` and ``client_name``: the session's, when it outlives this server (a remote
    session is served request by request, docs/operations.md#remote-mcp); ``remote``: served
    over HTTP, where each request says where the client acts from (for the audit trail)."""
    session_run_id = run_id or new_run_id()

    def session_run(run_id: str | None, turn_id: str | None) -> str | None:
        """The run a write joins: the client's, else the session's unless it names its turn."""
        return run_id if run_id or turn_id else session_run_id

    def authorise(action: str = VIEW) -> tuple[services.Actor, Any]:
        """The token's actor (checked on every call: revoking it stops the session) and the
        app, as the services let it reach it."""
        actor = services.authenticate_token(token)
        if remote:
            actor.meta = REMOTE_META.get() or {}
        return actor, services.app_for(app_slug, actor=actor, action=action)

    def call(func: Callable[[], dict[str, Any]], *texts: object) -> CallToolResult:
        """Run one tool body in this worker thread's own database connection.

        ``texts`` are the call's ids and hashes: no database stores NUL or lone surrogates.
        """
        close_old_connections()
        try:
            _refuse_unstorable(texts)
            return _result(func())
        except VersionsError as exc:
            return _result(_error_data(exc), error=True)
        finally:
            done()

    def done() -> None:
        """Over HTTP the SDK's worker threads outlive the request: close their connections."""
        if remote:
            connections.close_all()
        else:
            close_old_connections()

    server = MCPServer(
        name="versions", title="Versions", instructions=INSTRUCTIONS, version=package_version()
    )
    # Hints true to what each tool does (docs/api.md#mcp): reads are read-only; writes, deletes,
    # restores and reverts change the app (each behind a restore point, but they do change it);
    # no tool reaches outside this app.
    read_only = ToolAnnotations(read_only_hint=True, open_world_hint=False)
    changes_app = ToolAnnotations(destructive_hint=True, open_world_hint=False)

    @server.tool(annotations=read_only)
    def list_artifacts(include_deleted: bool = False) -> CallToolResult:
        """List the app's artifacts: collection, name, sha256, size, updated_on, updated_by."""

        def body() -> dict[str, Any]:
            _actor, app = authorise()
            return {
                "app": app.slug,
                "artifacts": selectors.list_artifacts(app, include_deleted=include_deleted),
            }

        return call(body)

    @server.tool(annotations=read_only)
    def read_artifact(
        collection: Collection,
        name: Name,
        at: Annotated[
            str | None,
            Field(
                description=(
                    "Read it at a ref: draft (now), production (what production serves), "
                    "release, dp_… (a deployment), cs_…/rs_… (right after that set), rp_… "
                    "(just before that point)."
                )
            ),
        ] = None,
    ) -> CallToolResult:
        """Read one artifact: its source and its sha256 (pass it as expected_sha256 to write),
        now or at a ref."""

        def body() -> dict[str, Any]:
            _actor, app = authorise()
            services.validate_collection(collection)
            services.validate_name(name)
            if at is not None:
                return selectors.artifact_at(app, collection, name, selectors.named_ref(app, at))
            return selectors.read_artifact(app, collection, name)

        return call(body, collection, name, at)

    @server.resource(
        RESOURCE_TEMPLATE,
        name="artifact",
        title="An artifact's source",
        description="The current source of an artifact of this app.",
        mime_type="text/plain",
    )
    def artifact_resource(slug: str, collection: str, name: str) -> str:
        uri = RESOURCE_TEMPLATE.format(slug=slug, collection=collection, name=name)
        close_old_connections()
        try:
            _refuse_unstorable((slug, collection, name))
            _actor, app = authorise()
            if slug != app.slug:
                # Another app's slug and a missing one answer alike (docs/api.md#existence).
                raise NotFound(NO_SUCH_APP.format(slug=slug))
            services.validate_collection(collection)
            services.validate_name(name)
            return str(selectors.read_artifact(app, collection, name)["source"])
        except NotFound as exc:
            raise MCPError(RESOURCE_NOT_FOUND, exc.message, {"uri": uri}) from None
        except VersionsError as exc:
            raise MCPError(INVALID_PARAMS, exc.message, {"uri": uri, "error": exc.code}) from None
        finally:
            done()

    @server.tool(
        annotations=ToolAnnotations(
            destructive_hint=True, idempotent_hint=True, open_world_hint=False
        )
    )
    def write_artifact(
        collection: Collection,
        name: Name,
        source: Annotated[str, Field(description="The whole new source text.")],
        ctx: Context,
        expected_sha256: Expected = None,
        run_id: RunId = None,
        turn_id: TurnId = None,
        message: Message = None,
        addresses: Addresses = None,
    ) -> CallToolResult:
        """Write an artifact's whole source. Its previous state is captured as a restore point
        first. Refused, with the current sha256, if expected_sha256 is stale."""
        tool = client_tool_name(ctx, client_name)

        def body() -> dict[str, Any]:
            actor, app = authorise(WRITE)
            receipt = services.write_artifact(
                app,
                collection,
                name,
                source,
                actor=actor,
                tool=tool,
                run_id=session_run(run_id, turn_id),
                turn_id=turn_id,
                expected_sha256=expected_sha256,
                message=message,
                addresses=addresses,
            )
            return receipt.as_dict()

        return call(body, collection, name, expected_sha256, run_id, turn_id)

    @server.tool(annotations=changes_app)
    def edit_artifact(
        collection: Collection,
        name: Name,
        old_text: Annotated[
            str, Field(description="The exact text to replace; it must occur exactly once.")
        ],
        new_text: Annotated[str, Field(description="What replaces it.")],
        ctx: Context,
        expected_sha256: Expected = None,
        run_id: RunId = None,
        turn_id: TurnId = None,
        message: Message = None,
        addresses: Addresses = None,
    ) -> CallToolResult:
        """Replace one exact, unique piece of an artifact's source (old_text → new_text),
        captured like any write. Refused in words when old_text is missing or not unique."""
        tool = client_tool_name(ctx, client_name)

        def body() -> dict[str, Any]:
            actor, app = authorise(WRITE)
            receipt = services.edit_artifact(
                app,
                collection,
                name,
                old_text,
                new_text,
                actor=actor,
                tool=tool,
                run_id=session_run(run_id, turn_id),
                turn_id=turn_id,
                expected_sha256=expected_sha256,
                message=message,
                addresses=addresses,
            )
            return receipt.as_dict()

        return call(body, collection, name, expected_sha256, run_id, turn_id)

    @server.tool(annotations=changes_app)
    def delete_artifact(
        collection: Collection,
        name: Name,
        ctx: Context,
        expected_sha256: Expected = None,
        run_id: RunId = None,
        turn_id: TurnId = None,
        message: Message = None,
        addresses: Addresses = None,
    ) -> CallToolResult:
        """Delete an artifact: it becomes a tombstone behind a restore point (restorable)."""
        tool = client_tool_name(ctx, client_name)

        def body() -> dict[str, Any]:
            actor, app = authorise(WRITE)
            receipt = services.delete_artifact(
                app,
                collection,
                name,
                actor=actor,
                tool=tool,
                run_id=session_run(run_id, turn_id),
                turn_id=turn_id,
                expected_sha256=expected_sha256,
                message=message,
                addresses=addresses,
            )
            return receipt.as_dict()

        return call(body, collection, name, expected_sha256, run_id, turn_id)

    @server.tool(annotations=ToolAnnotations(idempotent_hint=True, open_world_hint=False))
    def describe_change_set(
        set_id: Annotated[str, Field(description="The change set: cs_… (or rs_…).")],
        message: Annotated[
            str, Field(description="What the turn was asked or did (at most 2,000 characters).")
        ],
    ) -> CallToolResult:
        """Set a change set's message: what the turn was asked or did, shown to the person who
        reviews it."""

        def body() -> dict[str, Any]:
            actor, app = authorise(WRITE)
            return services.describe_change_set(set_id, message, actor=actor, app=app).as_dict()

        return call(body, set_id)

    @server.tool(annotations=read_only)
    def artifact_history(
        collection: Collection,
        name: Name,
        limit: Limit = None,
        cursor: Cursor = None,
        page: Annotated[
            int,
            Field(
                ge=1,
                description="Deprecated: page numbers shift when the artifact is written "
                "between two calls; page with limit and cursor.",
            ),
        ] = 1,
        per_page: Annotated[
            int, Field(ge=1, le=200, description="Deprecated, with page: use limit.")
        ] = 20,
    ) -> CallToolResult:
        """An artifact's restore points, newest first: who asked, who really wrote, the tool,
        hashes, line counts, and the change set with its message. Page by limit and cursor
        (keyset: writes between pages never repeat or skip a point)."""

        def body() -> dict[str, Any]:
            _actor, app = authorise()
            services.validate_collection(collection)
            services.validate_name(name)
            return selectors.artifact_history(
                app, collection, name, page=page, per_page=per_page, cursor=cursor, limit=limit
            )

        return call(body, collection, name, cursor)

    @server.tool(annotations=read_only)
    def diff_change_set(
        set_id: Annotated[str, Field(description="The change set: cs_… or rs_….")],
        view: Annotated[
            Literal["set", "now"],
            Field(description="set: what the set did; now: from before it to now."),
        ] = "set",
    ) -> CallToolResult:
        """A change set's diff as unified diff text (check what a turn did before asking a
        person to keep it)."""

        def body() -> dict[str, Any]:
            _actor, app = authorise()
            change_set = selectors.change_set_row(app, set_id)
            return {
                "set_id": change_set.id,
                "view": view,
                "diff": selectors.set_diff(change_set, view),
            }

        return call(body, set_id)

    @server.tool(annotations=read_only)
    def list_change_sets(
        page: Annotated[int, Field(ge=1, description="Page number, from 1.")] = 1,
        per_page: Annotated[int, Field(ge=1, le=200)] = 20,
        set_id: Annotated[
            str | None, Field(description="Give an id to get that one set with its points.")
        ] = None,
        limit: Limit = None,
        cursor: Cursor = None,
        run_id: Annotated[str | None, Field(description="Only this run's sets.")] = None,
        turn_id: Annotated[str | None, Field(description="Only this turn's sets.")] = None,
        written_by: Annotated[
            str | None, Field(description="Only sets with a point this principal wrote.")
        ] = None,
    ) -> CallToolResult:
        """The app's change sets, newest first (one per agent turn or MCP session), or one set
        with its restore points when set_id is given. Filter by run, turn or writer; page by
        limit and cursor (keyset: writes between pages never repeat or skip a set)."""

        def body() -> dict[str, Any]:
            actor, app = authorise()
            if set_id:
                return selectors.change_set_detail(selectors.change_set_row(app, set_id))
            return selectors.list_change_sets(
                app,
                page=page,
                per_page=per_page,
                cursor=cursor,
                limit=limit,
                run_id=run_id,
                turn_id=turn_id,
                written_by=written_by,
            )

        return call(body, set_id, cursor, run_id, turn_id, written_by)

    def restore_tool(kind: str, set_id: str, dry_run: bool, expected: Any) -> CallToolResult:
        """One restore flow for every restore tool (docs/architecture.md#restore-flow)."""

        def body() -> dict[str, Any]:
            actor, app = authorise()
            receipt = services.run_restore(
                kind, set_id, actor=actor, app=app, dry_run=dry_run, expected=expected
            )
            return receipt.as_dict()

        return call(body, set_id, expected)

    @server.tool(annotations=changes_app)
    def restore_change_set(
        set_id: SetId, dry_run: DryRun = False, expected: Reviewed = None
    ) -> CallToolResult:
        """Restore all: put every artifact of the set back to its state before the set, behind
        counter-points (so the restore can be undone). Returns the receipt."""
        return restore_tool(SET, set_id, dry_run, expected)

    @server.tool(annotations=changes_app)
    def revert_change_set(
        set_id: SetId, dry_run: DryRun = False, expected: Reviewed = None
    ) -> CallToolResult:
        """Revert this set: take back only what the set itself did, keeping the changes later
        sets made to the same artifacts (a three-way merge, like git revert). Overlapping
        later changes are a conflict: nothing is written. Returns the receipt (kind revert)."""
        return restore_tool(REVERT, set_id, dry_run, expected)

    @server.tool(annotations=changes_app)
    def restore_point(
        point_id: Annotated[str, Field(description="The restore point: rp_….")],
        dry_run: DryRun = False,
        expected_sha256: Annotated[
            str | None,
            Field(description='The artifact\'s sha256 you reviewed as now ("" for absent).'),
        ] = None,
    ) -> CallToolResult:
        """Restore one artifact to its state just before this point's write, behind a
        counter-point (so it can be undone). Returns the receipt."""

        def body() -> dict[str, Any]:
            actor, app = authorise()
            expected = None
            if expected_sha256 is not None:
                point = services.point_for(point_id, actor=actor)
                expected = {(point.artifact.collection, point.artifact.name): expected_sha256}
            receipt = services.run_restore(
                POINT, point_id, actor=actor, app=app, dry_run=dry_run, expected=expected
            )
            return receipt.as_dict()

        return call(body, point_id, expected_sha256)

    @server.tool(annotations=changes_app)
    def restore_to_release(dry_run: DryRun = False, expected: Reviewed = None) -> CallToolResult:
        """Restore to release: every artifact changed since the release set back to its state
        right after it, behind counter-points. Returns the receipt."""

        def body() -> dict[str, Any]:
            actor, app = authorise()
            receipt = services.run_restore(
                RELEASE, None, actor=actor, app=app, dry_run=dry_run, expected=expected
            )
            return receipt.as_dict()

        return call(body, expected)

    @server.tool(annotations=read_only)
    def compare(
        base: Annotated[str, Field(description=REF_WORDS)],
        head: Annotated[str, Field(description=REF_WORDS)] = "draft",
        diff: Annotated[bool, Field(description="Also the unified diff text.")] = False,
    ) -> CallToolResult:
        """What differs from one state of the app to another: per artifact its change, both
        hashes and the lines added and removed (and, with diff, the unified diff text)."""

        def body() -> dict[str, Any]:
            _actor, app = authorise()
            answer = selectors.comparison(app, base, head)
            if diff:
                answer["diff"] = selectors.comparison_diff(app, base, head)
            return answer

        return call(body, base, head)

    @server.tool(annotations=read_only)
    def whoami() -> CallToolResult:
        """Who this session acts as: the token's user, its apps and what it may do there, when
        it expires and was last used, and the app this session serves."""

        def body() -> dict[str, Any]:
            actor, app = authorise()
            return selectors.whoami(actor, app)

        return call(body)

    @server.tool(annotations=read_only)
    def list_deployments(limit: Limit = None, cursor: Cursor = None) -> CallToolResult:
        """The app's production deployment, its deployments (newest first: all, or a keyset
        page by limit and cursor) and the newest 50 events of the history of production
        (production_history reads the rest from history_next_cursor)."""

        def body() -> dict[str, Any]:
            _actor, app = authorise()
            return selectors.deployment_page(app, cursor=cursor, limit=limit)

        return call(body, cursor)

    @server.tool(annotations=read_only)
    def production_history(limit: Limit = None, cursor: Cursor = None) -> CallToolResult:
        """The history of production, newest first: every promotion, rollback and rollout
        step, who, when, note, from → to. Page by limit and cursor (keyset: promotions
        between pages never repeat or skip an event)."""

        def body() -> dict[str, Any]:
            _actor, app = authorise()
            return selectors.production_history(app, cursor=cursor, limit=limit)

        return call(body, cursor)

    @server.tool(annotations=read_only)
    def list_reviews(
        set_id: Annotated[str, Field(description="The change set: cs_… or rs_….")],
        limit: Limit = None,
        cursor: Cursor = None,
    ) -> CallToolResult:
        """What people said of a change set: its review state (Approved, Changes requested,
        Review required), each review (verdict, body, stale) and each line comment thread
        with its anchor (artifact, side, line) and replies. All of them, oldest first, or
        keyset pages by limit and cursor (reviews and threads together, newest first).
        Answer a thread with reply_to_comment."""

        def body() -> dict[str, Any]:
            _actor, app = authorise()
            change_set = selectors.change_set_row(app, set_id)
            return selectors.reviews_payload(change_set, cursor=cursor, limit=limit)

        return call(body, set_id, cursor)

    @server.tool(annotations=ToolAnnotations(open_world_hint=False))
    def reply_to_comment(
        comment_id: Annotated[str, Field(description="A comment of the thread: cm_….")],
        body: Annotated[str, Field(description="Markdown, at most 10,000 characters.")],
    ) -> CallToolResult:
        """Reply in a line comment's thread (shown as the agent's). Agents never review or
        resolve threads: a person does."""

        def run() -> dict[str, Any]:
            actor, app = authorise()
            comment = services.reply(comment_id, body=body, actor=actor, app=app)
            return selectors.comment_dict(comment) | {"thread": comment.thread_id}

        return call(run, comment_id, body)

    if _may(authorise, PROMOTE):
        # Only a token that may promote this app sees the tool at all: made --can-promote, and
        # its user holds the promote permission or role (the services decide).

        @server.tool(annotations=changes_app)
        def promote(
            ref: Annotated[
                str, Field(description="What to ship: draft (default), cs_…, rp_… or dp_….")
            ] = "draft",
            note: Annotated[str, Field(description="Why, for the history.", max_length=500)] = "",
            expected: Reviewed = None,
            dry_run: DryRun = False,
        ) -> CallToolResult:
            """Promote a state of the app (default the draft agents write) to production, after
            a full pre-flight: any finding and nothing changes. Returns the receipt."""

            def body() -> dict[str, Any]:
                actor, app = authorise()
                receipt = services.promote(
                    app, actor=actor, ref=ref, note=note, expected=expected, dry_run=dry_run
                )
                return receipt.as_dict()

            return call(body, ref, note, expected)

        @server.tool(annotations=changes_app)
        def rollback_production(
            to: Annotated[
                str | None,
                Field(
                    description="The deployment to serve again: dp_…, one production served "
                    "(list_deployments names them as rollback_targets; default the one before)."
                ),
            ] = None,
            note: Annotated[str, Field(description="Why, for the history.", max_length=500)] = "",
        ) -> CallToolResult:
            """Instant rollback: point production at an earlier deployment (default the one it
            served before). Nothing is copied; the history records who, when and why; a rollout
            running ends with it. Returns the receipt."""

            def body() -> dict[str, Any]:
                actor, app = authorise()
                return services.rollback_production(app, actor=actor, to=to, note=note).as_dict()

            return call(body, to, note)

    # --- safe promotion (docs/api.md#safe-promotion) ----------------------------------------
    if _may(authorise, PROMOTE):

        @server.tool(annotations=changes_app)
        def rollout(
            to: Annotated[
                int | None,
                Field(description="Percent of visitors (1-99): starts a rollout, or advances it."),
            ] = None,
            action: Annotated[
                str | None, Field(description="complete or abort the running rollout.")
            ] = None,
            ref: Annotated[
                str, Field(description="What a new rollout ships: draft (default), cs_…, dp_….")
            ] = "draft",
            note: Annotated[str, Field(description="Why, for the history.", max_length=500)] = "",
        ) -> CallToolResult:
            """A gradual rollout: ``to`` serves the state to that share of visitors (each pinned
            to one deployment), ``action`` complete makes it production, abort puts everyone
            back on production. Returns the receipt."""

            def body() -> dict[str, Any]:
                actor, app = authorise()
                receipt = services.promotion.rollout_action(
                    app, to=to, action=action, actor=actor, note=note, ref=ref
                )
                return receipt.as_dict()

            return call(body, ref, note, action)

        @server.tool(annotations=changes_app)
        def schedule_promotion(
            at: Annotated[str, Field(description="When: ISO 8601 with its offset, in the future.")],
            ref: Annotated[
                str, Field(description="What to ship: draft (default), cs_…, dp_….")
            ] = "draft",
            note: Annotated[str, Field(description="Why, for the history.", max_length=500)] = "",
        ) -> CallToolResult:
            """Promote the state, as it is now, at a future moment (through the same checks
            then). Returns kind scheduled with its scheduleId."""

            def body() -> dict[str, Any]:
                actor, app = authorise()
                return services.promote(app, actor=actor, ref=ref, note=note, at=at).as_dict()

            return call(body, at, ref, note)

    if _may(authorise, PROMOTE) and _may(authorise, MANAGE):

        @server.tool(annotations=changes_app)
        def freeze_production(
            reason: Annotated[str, Field(description="Why, at most 500 characters.")],
            unfreeze: Annotated[bool, Field(description="true: lift the freeze.")] = False,
        ) -> CallToolResult:
            """Freeze production (owners): nothing is promoted until it is unfrozen; rolling
            back stays allowed. ``unfreeze`` true lifts it."""

            def body() -> dict[str, Any]:
                actor, app = authorise()
                if unfreeze:
                    return services.promotion.unfreeze_production(app, actor=actor)
                return services.promotion.freeze_production(app, actor=actor, reason=reason)

            return call(body, reason)

    schemas = output_schemas()
    for tool in server._tool_manager._tools.values():
        tool.title = TITLES.get(tool.name, tool.title)
        tool.fn_metadata.output_schema = copy.deepcopy(schemas[tool.name])

    # Strict arguments (docs/api.md#strict-inputs), for every tool: a name a tool does not take
    # is a tool error in the API's words, never silently dropped (a misspelt expected_sha256
    # would write without its check).
    call_any_tool = server.call_tool

    async def call_tool_strictly(name: str, arguments: dict[str, Any], context: Any = None) -> Any:
        tool = server._tool_manager.get_tool(name)
        refusal = tool and first_unknown(arguments or {}, tool.parameters.get("properties", {}))
        if refusal:
            return _result(_error_data(refusal) | {"suggestion": refusal.suggestion}, error=True)
        return await call_any_tool(name, arguments, context)

    server.call_tool = call_tool_strictly  # type: ignore[method-assign]
    return server


# --- remote MCP: Streamable HTTP at /mcp/ (docs/operations.md#remote-mcp) ---------------------

SESSION_HEADER = "Mcp-Session-Id"
# Where the current remote request comes from (address, user agent), for the audit trail; the
# SDK runs tools in worker threads, which see the request's context.
REMOTE_META: contextvars.ContextVar[dict[str, str] | None] = contextvars.ContextVar(
    "remote_meta", default=None
)
# Built servers kept per session (building one registers every tool: tens of milliseconds).
REMOTE_SERVERS = 128
SESSION_SALT = "versions.mcp.session"
# A remote session lasts as long as a working day can, and a little more.
SESSION_MAX_AGE = 7 * 24 * 3600
REMOTE_NO_TOKEN = (
    "Remote MCP needs an agent token: send Authorization: Bearer <token> "
    "(python manage.py create_agent_token)."
)
REMOTE_TOKEN_REFUSED = (
    "This token is not valid (unknown, revoked or expired, or its user is inactive)."
)
REMOTE_WHICH_APP = (
    "This token reaches {count} apps: name the one this session serves, as /mcp/?app=<slug> "
    "({slugs})."
)
REMOTE_NO_APPS = "This token reaches no app: make one scoped to the app (create_agent_token --app)."
REMOTE_SESSION_UNKNOWN = (
    "There is no MCP session “{session}” for this token: start a new one (initialize)."
)
REMOTE_TOO_LARGE = "This MCP message is larger than the server accepts. Nothing was done."
REMOTE_METHODS = (
    "/mcp/ takes POST (MCP messages) and DELETE (end a session); it sends no SSE stream."
)


def _problem(status: int, code: str, message: str, **headers: str) -> HttpResponse:
    """An RFC 9457 problem, like every error of the agent API (docs/api.md#errors)."""
    body = {
        "type": "about:blank",
        "title": HTTPStatus(status).phrase,
        "status": status,
        "detail": message,
        "error": code,
        "message": message,
    }
    response = HttpResponse(
        json.dumps(body, ensure_ascii=False),
        status=status,
        content_type="application/problem+json",
    )
    for name, value in headers.items():
        response[name.replace("_", "-")] = value
    return response


def _bearer(request: HttpRequest) -> str | None:
    scheme, _, credentials = request.headers.get("Authorization", "").partition(" ")
    return credentials.strip() or None if scheme.lower() == "bearer" else None


def _fingerprint(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()[:16]


def _initialize_params(body: bytes) -> dict[str, Any] | None:
    """The params of an ``initialize`` request (None for any other message)."""
    try:
        message = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return None
    if isinstance(message, dict) and message.get("method") == "initialize":
        params = message.get("params")
        return params if isinstance(params, dict) else {}
    return None


def _session_of(header: str, token: str, slug: str) -> dict[str, str] | None:
    """The run id and client name a session id carries, if this server signed it for this
    token and app."""
    try:
        data = signing.loads(header, salt=SESSION_SALT, max_age=SESSION_MAX_AGE)
    except signing.BadSignature:
        return None
    if not isinstance(data, dict) or data.get("t") != _fingerprint(token) or data.get("a") != slug:
        return None
    return data


def _app_slug(request: HttpRequest, actor: services.Actor) -> str | HttpResponse:
    """The app the session serves: ``?app=``, or the token's only app."""
    asked = request.GET.get("app")
    if asked:
        return asked
    slugs = [a["slug"] for a in selectors.whoami(actor)["apps"]]
    if len(slugs) == 1:
        return slugs[0]
    if not slugs:
        return _problem(404, "not_found", REMOTE_NO_APPS)
    return _problem(
        400,
        "invalid_input",
        REMOTE_WHICH_APP.format(count=len(slugs), slugs=", ".join(slugs[:20])),
    )


@functools.lru_cache(maxsize=REMOTE_SERVERS)
def _remote_server(slug: str, token: str, run_id: str, client: str, may_promote: bool) -> MCPServer:
    """The server of one remote session (``may_promote``: whether its token may promote now,
    so a change of that lists or hides the promotion tools at the next request)."""
    return build_server(slug, token, run_id=run_id, client_name=client or None, remote=True)


async def _serve_one(server: MCPServer, scope: dict[str, Any], body: bytes) -> HttpResponse:
    """One MCP message over the SDK's Streamable HTTP transport, stateless, answered as JSON."""
    manager = StreamableHTTPSessionManager(
        app=server._lowlevel_server, json_response=True, stateless=True
    )
    answer: dict[str, Any] = {"status": 500, "headers": [], "body": []}
    delivered = False

    async def receive() -> dict[str, Any]:
        nonlocal delivered
        if not delivered:
            delivered = True
            return {"type": "http.request", "body": body, "more_body": False}
        await anyio.sleep_forever()
        return {"type": "http.disconnect"}  # never reached

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            answer["status"] = message["status"]
            answer["headers"] = message.get("headers", [])
        elif message["type"] == "http.response.body":
            answer["body"].append(message.get("body", b""))

    async with manager.run():
        await manager.handle_request(scope, receive, send)  # type: ignore[arg-type]
    response = HttpResponse(b"".join(answer["body"]), status=answer["status"])
    for name, value in answer["headers"]:
        key = name.decode("latin-1")
        if key.lower() not in ("content-length", "mcp-session-id"):
            response[key] = value.decode("latin-1")
    return response


def _scope(request: HttpRequest, body: bytes) -> dict[str, Any]:
    """The ASGI scope of this Django request, for the SDK's transport."""
    headers = [
        (key.lower().encode("latin-1"), value.encode("latin-1", "replace"))
        for key, value in request.headers.items()
        if key.lower() not in ("content-length", SESSION_HEADER.lower())
    ]
    headers.append((b"content-length", str(len(body)).encode()))
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": request.method,
        "scheme": request.scheme,
        "path": request.path,
        "raw_path": request.path.encode(),
        "root_path": "",
        "query_string": request.META.get("QUERY_STRING", "").encode("latin-1"),
        "headers": headers,
        "server": (request.get_host().split(":")[0], int(request.get_port() or 80)),
        "client": (request.META.get("REMOTE_ADDR", ""), 0),
    }


@csrf_exempt
def http_endpoint(request: HttpRequest) -> HttpResponse:
    """Remote MCP (docs/operations.md#remote-mcp): the same tools as ``mcp_server`` over MCP's
    Streamable HTTP transport, with the bearer token of the API (same scope and permissions).

    Every request is served on its own (any worker of any server may take it), so a session is
    a signed ``Mcp-Session-Id`` that carries its run id and client name: its writes form one
    change set and say which client wrote them, as over stdio."""
    token = _bearer(request)
    if token is None:
        return _problem(401, "unauthorized", REMOTE_NO_TOKEN, WWW_Authenticate="Bearer")
    meta = request_meta(request)
    row = services.verify_token(token, request_meta=meta)
    if row is None:
        return _problem(401, "unauthorized", REMOTE_TOKEN_REFUSED, WWW_Authenticate="Bearer")
    actor = services.actor_for_token(row)
    slug = _app_slug(request, actor)
    if isinstance(slug, HttpResponse):
        return slug
    try:
        app = services.app_for(slug, actor=actor)
    except VersionsError as exc:
        return _problem(404, "not_found", exc.message)
    if request.method == "DELETE":
        return HttpResponse(status=204)  # the server holds nothing of a session to drop
    if request.method != "POST":
        return _problem(405, "method_not_allowed", REMOTE_METHODS, Allow="POST, DELETE")
    try:
        body = request.body
    except RequestDataTooBig:
        return _problem(413, "too_large", REMOTE_TOO_LARGE)
    header = request.headers.get(SESSION_HEADER)
    started = _initialize_params(body)
    if header:
        session = _session_of(header, token, slug)
        if session is None:
            return _problem(404, "not_found", REMOTE_SESSION_UNKNOWN.format(session=header[:80]))
    elif started is not None:
        client = started.get("clientInfo")
        name = client.get("name") if isinstance(client, dict) else None
        session = {
            "r": new_run_id(),
            "c": name[:150] if isinstance(name, str) else "",
            "t": _fingerprint(token),
            "a": slug,
        }
    else:
        session = {"r": new_run_id(), "c": ""}  # a client without a session: one request's own
    server = _remote_server(slug, token, session["r"], session["c"], actor.may(PROMOTE, app))
    REMOTE_META.set(meta)
    response = async_to_sync(_serve_one)(server, _scope(request, body), body)
    if started is not None and not header and response.status_code == 200:
        response[SESSION_HEADER] = signing.dumps(session, salt=SESSION_SALT, compress=True)
    return response
