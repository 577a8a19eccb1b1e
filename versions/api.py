"""The agent API (SPEC §7): JSON over HTTP under ``/api/v1/``, a thin adapter over the services.

Every write goes through :func:`versions.services.write_artifact` / ``delete_artifact``, so an
API write is captured as a restore point like any other. Authentication is a bearer token
scoped to apps (``create_agent_token``); the token's user's permissions apply on top.

Errors are always JSON ``{"error": "<code>", "message": "<words>"}``:
400 bad input · 401 no or bad token · 403 app outside the token's scope (also for set and point
ids of such apps) or missing permission · 404 unknown · 409 stale write or refused pre-flight ·
412 ``If-Match`` mismatch · 413 too large · 422 a body or parameter of the wrong shape, or a
route spec that does not parse.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from typing import Any

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.db.models import Count, Exists, OuterRef, Sum
from django.http import Http404, HttpRequest, HttpResponse
from django.views.decorators.csrf import csrf_exempt
from ninja import Field, NinjaAPI, Query, Schema
from ninja.errors import AuthenticationError, HttpError, ValidationError
from ninja.renderers import JSONRenderer
from ninja.security import HttpBearer
from pydantic import field_validator

from versions import conf, services
from versions.errors import (
    Conflict,
    Forbidden,
    InvalidInput,
    InvalidSpec,
    NotFound,
    PreflightFailed,
    StaleWrite,
    TooLarge,
    Unauthenticated,
    VersionsError,
)
from versions.models import AgentToken, App, Artifact, ChangeSet, RestorePoint
from versions.services.tokens import token_app_slugs, token_can_restore, verify_token
from versions.services.validation import validate_collection, validate_name

DEFAULT_TOOL = "api"
PER_PAGE_DEFAULT = 50
PER_PAGE_MAX = 200

UNAUTHORIZED = "Send a valid agent token: “Authorization: Bearer <token>”."
OUT_OF_SCOPE = "This token is not allowed to act on app “{slug}”."
NO_RESTORE_PERMISSION = "User “{user}” does not have the permission to restore."
APP_NOT_FOUND = "There is no app “{slug}”."
ARTIFACT_NOT_FOUND = "There is no {collection} “{name}” in app “{slug}”."
ARTIFACT_DELETED = "The {collection} “{name}” of app “{slug}” was deleted (it is a tombstone)."
SET_NOT_FOUND = "There is no change set “{id}”."
POINT_NOT_FOUND = "There is no restore point “{id}”."
RECEIPT_NOT_FOUND = "There is no restore set “{id}” with a receipt."
IF_MATCH_FAILED = (
    "If-Match {given} does not match the current ETag {current}. Nothing was written; "
    "read it again and retry."
)
BODY_TOO_LARGE = (
    "The request body is larger than this server accepts ({limit:,} bytes). Nothing was written."
)
BAD_TEXT = "{field} must not contain NUL characters or unpaired surrogates."

_SLUG = re.compile(r"^[a-z0-9-]{1,50}$")
_SET_ID = re.compile(r"^(cs_rp|rs)_[0-9a-z]{1,14}_[0-9a-z]{1,16}$")
_POINT_ID = re.compile(r"^rp_[0-9a-z]{1,14}_[0-9a-z]{1,16}$")


class ApiError(Exception):
    """An answer other than success, with its status, code and extra JSON keys."""

    def __init__(self, status: int, code: str, message: str, **extra: Any) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.extra = extra


# --- authentication ---------------------------------------------------------------------


class _Utf8Json(JSONRenderer):
    """JSON as UTF-8 text ("“index”", not "\\u201cindex\\u201d"): the messages are for people.
    Text that is not UTF-8 (a lone surrogate a client sent as "\\ud800") keeps its escapes."""

    def render(self, request: HttpRequest, data: Any, *, response_status: int) -> bytes:
        text = json.dumps(data, cls=self.encoder_class, ensure_ascii=False)
        try:
            return text.encode()
        except UnicodeEncodeError:
            return json.dumps(data, cls=self.encoder_class).encode()


class AgentTokenAuth(HttpBearer):
    """``Authorization: Bearer <token>``: a live token of an active user."""

    def authenticate(self, request: HttpRequest, token: str) -> AgentToken | None:
        return verify_token(token)


api = NinjaAPI(
    title="Versions agent API",
    version="1",
    description=(
        "Read and write an app's artifacts through the capture path (every write becomes a "
        "restore point), list change sets, and restore them with a receipt. Authenticate with "
        "`Authorization: Bearer <token>` (python manage.py create_agent_token)."
    ),
    auth=AgentTokenAuth(),
    renderer=_Utf8Json(),
    urls_namespace="versions_api",
    # /api/v1/docs: Swagger UI from our own static files ("ninja" is an installed app), never
    # from a CDN; like the schema it describes, readable without a token.
    docs_url="/docs",
)


def _token(request: HttpRequest) -> AgentToken:
    return request.auth  # type: ignore[attr-defined,no-any-return]


def _scoped_app(request: HttpRequest, slug: str) -> App:
    """The app ``slug`` if it exists (404) and the token may act on it (403), in one query."""
    app = None
    if _SLUG.match(slug):
        scope = AgentToken.apps.through.objects.filter(
            agenttoken_id=_token(request).pk, app_id=OuterRef("pk")
        )
        app = App.objects.filter(slug=slug).annotate(in_scope=Exists(scope)).first()
    if app is None:
        raise ApiError(404, "not_found", APP_NOT_FOUND.format(slug=slug))
    if not app.in_scope:  # type: ignore[attr-defined]
        raise ApiError(403, "forbidden", OUT_OF_SCOPE.format(slug=slug))
    return app


def _check_scope(request: HttpRequest, slug: str) -> None:
    if slug not in token_app_slugs(_token(request)):
        raise ApiError(403, "forbidden", OUT_OF_SCOPE.format(slug=slug))


def _check_restore_permission(request: HttpRequest) -> None:
    token = _token(request)
    if not token_can_restore(token):
        raise ApiError(
            403, "forbidden", NO_RESTORE_PERMISSION.format(user=token.user.get_username())
        )


# --- errors -------------------------------------------------------------------------------


def _error(
    request: HttpRequest, status: int, code: str, message: str, **extra: Any
) -> HttpResponse:
    return api.create_response(request, {"error": code, "message": message, **extra}, status=status)


def _on_api_error(request: HttpRequest, exc: ApiError) -> HttpResponse:
    return _error(request, exc.status, exc.code, exc.message, **exc.extra)


# The one error → status table of the API (errors carry no HTTP status; SPEC §12). The first
# class an error is an instance of gives its status, so subclasses come before their bases.
ERROR_STATUS: tuple[tuple[type[VersionsError], int], ...] = (
    (PreflightFailed, 409),
    (StaleWrite, 409),
    (NotFound, 404),
    (Forbidden, 403),
    (Unauthenticated, 401),
    (TooLarge, 413),
    (Conflict, 409),
    (InvalidSpec, 422),
    (InvalidInput, 400),
    (VersionsError, 400),
)


def status_of(exc: VersionsError) -> int:
    """The HTTP status of a service error, from the table above."""
    return next(status for cls, status in ERROR_STATUS if isinstance(exc, cls))


def _on_versions_error(request: HttpRequest, exc: VersionsError) -> HttpResponse:
    status = status_of(exc)
    if isinstance(exc, PreflightFailed):
        return api.create_response(request, exc.answer(), status=status)
    if isinstance(exc, StaleWrite):
        return _error(request, status, exc.code, exc.message, current_sha256=exc.current_sha256)
    extra = {"field": exc.field} if isinstance(exc, InvalidInput) and exc.field else {}
    return _error(request, status, exc.code, exc.message, **extra)


def _on_validation_error(request: HttpRequest, exc: ValidationError) -> HttpResponse:
    details = [
        {
            "loc": [str(part) for part in err.get("loc", ())],
            "msg": str(err.get("msg", "")),
        }
        for err in exc.errors
    ]
    first = details[0] if details else {"loc": [], "msg": "invalid"}
    loc = first["loc"]
    if loc[:1] == ["body"] and len(loc) > 2:  # ["body", <the view's argument>, field, …]
        loc = ["body", *loc[2:]]
    where = ".".join(loc) or "request"
    return _error(
        request,
        422,
        "validation_error",
        f"{where}: {first['msg']}",
        details=details,
    )


def _on_auth_error(request: HttpRequest, exc: AuthenticationError) -> HttpResponse:
    response = _error(request, 401, "unauthorized", UNAUTHORIZED)
    response["WWW-Authenticate"] = 'Bearer realm="versions"'
    return response


def _on_http_error(request: HttpRequest, exc: HttpError) -> HttpResponse:
    if exc.status_code == 400:
        return _error(request, 400, "bad_request", f"{exc.message}: send a JSON object.")
    return _error(request, exc.status_code, "error", exc.message)


def _on_too_big(request: HttpRequest, exc: RequestDataTooBig) -> HttpResponse:
    limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE or conf.max_write_bytes()
    return _error(request, 413, "too_large", BODY_TOO_LARGE.format(limit=limit))


def _on_404(request: HttpRequest, exc: Http404) -> HttpResponse:
    return _error(request, 404, "not_found", "Not found.")


api.add_exception_handler(ApiError, _on_api_error)  # type: ignore[arg-type]
api.add_exception_handler(VersionsError, _on_versions_error)  # type: ignore[arg-type]
api.add_exception_handler(ValidationError, _on_validation_error)  # type: ignore[arg-type]
api.add_exception_handler(AuthenticationError, _on_auth_error)  # type: ignore[arg-type]
api.add_exception_handler(HttpError, _on_http_error)  # type: ignore[arg-type]
api.add_exception_handler(RequestDataTooBig, _on_too_big)  # type: ignore[arg-type]
api.add_exception_handler(Http404, _on_404)  # type: ignore[arg-type]


# --- schemas --------------------------------------------------------------------------------


def _clean_text(value: str | None, field: str) -> str | None:
    """Refuse NUL and lone surrogates in ids and names: no database stores them as text."""
    if value is None:
        return None
    if "\x00" in value or any("\ud800" <= ch <= "\udfff" for ch in value):
        raise ValueError(BAD_TEXT.format(field=field))
    return value


class ErrorOut(Schema):
    error: str = Field(description="A short machine-readable code, e.g. stale_write.")
    message: str = Field(description="What went wrong, in words.")
    current_sha256: str | None = Field(None, description="On stale_write: the current hash.")
    field: str | None = None
    receipt: dict[str, Any] | None = Field(None, description="On preflight_failed.")
    details: list[dict[str, Any]] | None = None


class ArtifactRef(Schema):
    app: str
    collection: str
    name: str


class WriteReceiptOut(Schema):
    """The receipt of a write (SPEC §3)."""

    artifact: ArtifactRef
    previousSha256: str
    sha256: str
    restorePointId: str | None
    changeSetId: str | None
    linesAdded: int
    linesRemoved: int
    unchanged: bool


class ArtifactSummary(Schema):
    collection: str
    name: str
    sha256: str
    size: int
    deleted: bool
    updated_on: str
    updated_by: str


class ArtifactList(Schema):
    app: str
    artifacts: list[ArtifactSummary]


class ArtifactOut(ArtifactSummary):
    app: str
    source: str


class WriteIn(Schema):
    """The body of a write. ``expected_sha256`` "" means "it must not exist yet"."""

    source: str
    expected_sha256: str | None = None
    requested_by: str | None = None
    tool: str | None = None
    run_id: str | None = None
    turn_id: str | None = None

    @field_validator("expected_sha256", "requested_by", "tool", "run_id", "turn_id")
    @classmethod
    def _no_nul(cls, value: str | None, info: Any) -> str | None:
        return _clean_text(value, info.field_name)


class DeleteQuery(Schema):
    expected_sha256: str | None = None
    requested_by: str | None = None
    tool: str | None = None
    run_id: str | None = None
    turn_id: str | None = None

    @field_validator("expected_sha256", "requested_by", "tool", "run_id", "turn_id")
    @classmethod
    def _no_nul(cls, value: str | None, info: Any) -> str | None:
        return _clean_text(value, info.field_name)


class ChangeSetSummary(Schema):
    id: str
    kind: str
    name: str
    created_on: str
    created_by: str
    requested_by: list[str]
    tools: list[str]
    artifacts: int
    points: int
    lines_added: int
    lines_removed: int
    is_release: bool
    restored_from: str | None
    run_id: str
    turn_id: str


class ChangeSetPage(Schema):
    app: str
    page: int
    per_page: int
    total: int
    next_page: int | None
    items: list[ChangeSetSummary]


class PointOut(Schema):
    id: str
    kind: str
    artifact: ArtifactRef
    previous_sha256: str
    previous_existed: bool
    previous_size: int
    source_stored: bool
    new_sha256: str
    requested_by: str
    tool: str
    created_on: str
    lines_added: int
    lines_removed: int
    run_id: str
    turn_id: str
    name: str


class ChangeSetDetail(ChangeSetSummary):
    app: str
    restore_points: list[PointOut]
    pruned: list[dict[str, Any]]
    receipt: dict[str, Any] | None


class RestoreSetIn(Schema):
    dry_run: bool = False
    expected: dict[str, str] | None = Field(
        None, description='"collection/name" → the sha256 you reviewed as "now".'
    )

    @field_validator("expected")
    @classmethod
    def _no_nul(cls, value: dict[str, str] | None) -> dict[str, str] | None:
        for key, sha in (value or {}).items():
            _clean_text(key, "expected")
            _clean_text(sha, "expected")
        return value


class RestorePointIn(Schema):
    dry_run: bool = False
    expected_sha256: str | None = Field(
        None, description='The artifact\'s sha256 you reviewed as "now".'
    )

    @field_validator("expected_sha256")
    @classmethod
    def _no_nul(cls, value: str | None) -> str | None:
        return _clean_text(value, "expected_sha256")


class RestoreReceiptOut(Schema):
    """A restore receipt (SPEC §4): kind restore, noop or dry_run."""

    kind: str
    restoredFromSet: str
    setId: str | None = None
    items: list[dict[str, Any]] | None = None
    skipped: list[dict[str, Any]] | None = None
    findings: list[dict[str, Any]] | None = None
    written: int | None = None
    message: str | None = None
    created_by: str | None = None
    created_on: str | None = None
    scope: str | None = None


class PageQuery(Schema):
    page: int = Field(1, ge=1, le=1_000_000)
    per_page: int = Field(PER_PAGE_DEFAULT, ge=1, le=PER_PAGE_MAX)


ERRORS: dict[int, type[Schema]] = dict.fromkeys((400, 401, 403, 404, 409, 412, 413, 422), ErrorOut)


# --- reading (shared with the MCP server) -----------------------------------------------------


def _iso_utc(moment: datetime | None) -> str:
    if moment is None:
        return ""
    utc = moment.astimezone(UTC)
    return utc.strftime("%Y-%m-%dT%H:%M:%S.") + f"{utc.microsecond // 1000:03d}Z"


def artifact_summary(artifact: Artifact) -> dict[str, Any]:
    return {
        "collection": artifact.collection,
        "name": artifact.name,
        "sha256": artifact.sha256,
        "size": artifact.size,
        "deleted": artifact.deleted,
        "updated_on": _iso_utc(artifact.updated_on),
        "updated_by": artifact.updated_by,
    }


def list_artifacts(app: App, *, include_deleted: bool = False) -> list[dict[str, Any]]:
    """The app's artifacts (without sources), by collection and name."""
    rows = Artifact.objects.filter(app=app).order_by("collection", "name")
    if not include_deleted:
        rows = rows.filter(deleted=False)
    return [artifact_summary(a) for a in rows]


def read_artifact(app: App, collection: str, name: str) -> dict[str, Any]:
    """One live artifact with its source; NotFound for an unknown or deleted one."""
    validate_collection(collection)
    validate_name(name)
    artifact = (
        Artifact.objects.select_related("blob__base")
        .filter(app=app, collection=collection, name=name)
        .first()
    )
    if artifact is None:
        raise NotFound(ARTIFACT_NOT_FOUND.format(collection=collection, name=name, slug=app.slug))
    if artifact.deleted:
        raise NotFound(ARTIFACT_DELETED.format(collection=collection, name=name, slug=app.slug))
    return {"app": app.slug, **artifact_summary(artifact), "source": artifact.source}


def _summaries(sets: list[ChangeSet]) -> list[dict[str, Any]]:
    """Summaries of ``sets`` in two queries whatever their number."""
    ids = [cs.id for cs in sets]
    stats = {
        row["change_set_id"]: row
        for row in RestorePoint.objects.filter(change_set_id__in=ids)
        .values("change_set_id")
        .annotate(
            n_points=Count("id"),
            n_artifacts=Count("artifact_id", distinct=True),
            added=Sum("lines_added"),
            removed=Sum("lines_removed"),
        )
    }
    who: dict[str, tuple[dict[str, None], dict[str, None]]] = {i: ({}, {}) for i in ids}
    for set_id, requested_by, tool in (
        RestorePoint.objects.filter(change_set_id__in=ids)
        .order_by("created_on", "id")
        .values_list("change_set_id", "requested_by", "tool")
    ):
        if requested_by:
            who[set_id][0][requested_by] = None
        if tool:
            who[set_id][1][tool] = None
    out = []
    for cs in sets:
        row: Any = stats.get(cs.id) or {}
        out.append(
            {
                "id": cs.id,
                "kind": cs.kind,
                "name": cs.name,
                "created_on": _iso_utc(cs.created_on),
                "created_by": cs.created_by,
                "requested_by": list(who[cs.id][0]),
                "tools": list(who[cs.id][1]),
                "artifacts": row.get("n_artifacts", 0),
                "points": row.get("n_points", 0),
                "lines_added": row.get("added") or 0,
                "lines_removed": row.get("removed") or 0,
                "is_release": cs.app.release_set_id == cs.id,
                "restored_from": cs.restored_from_id,
                "run_id": cs.run_id,
                "turn_id": cs.turn_id,
            }
        )
    return out


def list_change_sets(
    app: App, *, page: int = 1, per_page: int = PER_PAGE_DEFAULT
) -> dict[str, Any]:
    """One page of the app's change sets, newest first."""
    rows = ChangeSet.objects.filter(app=app).select_related("app").order_by("-created_on", "-id")
    total = rows.count()
    start = (page - 1) * per_page
    sets = list(rows[start : start + per_page])
    return {
        "app": app.slug,
        "page": page,
        "per_page": per_page,
        "total": total,
        "next_page": page + 1 if start + per_page < total else None,
        "items": _summaries(sets),
    }


def point_out(point: RestorePoint) -> dict[str, Any]:
    return {
        "id": point.id,
        "kind": point.kind,
        "artifact": {
            "app": point.app.slug,
            "collection": point.artifact.collection,
            "name": point.artifact.name,
        },
        "previous_sha256": point.previous_sha256,
        "previous_existed": point.previous_existed,
        "previous_size": point.previous_size,
        "source_stored": point.source_stored,
        "new_sha256": point.new_sha256,
        "requested_by": point.requested_by,
        "tool": point.tool,
        "created_on": _iso_utc(point.created_on),
        "lines_added": point.lines_added,
        "lines_removed": point.lines_removed,
        "run_id": point.run_id,
        "turn_id": point.turn_id,
        "name": point.name,
    }


def change_set_detail(change_set: ChangeSet) -> dict[str, Any]:
    """A change set with its restore points, oldest first."""
    points = (
        RestorePoint.objects.filter(change_set=change_set)
        .select_related("artifact", "app")
        .order_by("created_on", "id")
    )
    return {
        **_summaries([change_set])[0],
        "app": change_set.app.slug,
        "restore_points": [point_out(p) for p in points],
        "pruned": list(change_set.pruned or []),
        "receipt": change_set.receipt,
    }


def _scoped_set(request: HttpRequest, set_id: str) -> ChangeSet:
    cs = (
        ChangeSet.objects.select_related("app").filter(id=set_id).first()
        if _SET_ID.match(set_id)
        else None
    )
    if cs is None:
        raise ApiError(404, "not_found", SET_NOT_FOUND.format(id=set_id))
    _check_scope(request, cs.app.slug)
    return cs


def _scoped_point(request: HttpRequest, point_id: str) -> RestorePoint:
    point = (
        RestorePoint.objects.select_related("app").filter(id=point_id).first()
        if _POINT_ID.match(point_id)
        else None
    )
    if point is None:
        raise ApiError(404, "not_found", POINT_NOT_FOUND.format(id=point_id))
    _check_scope(request, point.app.slug)
    return point


# --- artifacts ----------------------------------------------------------------------------


@api.get(
    "/apps/{slug}/artifacts",
    response={200: ArtifactList, **ERRORS},
    summary="List an app's artifacts",
    tags=["artifacts"],
)
def get_artifacts(request: HttpRequest, slug: str, include_deleted: bool = False) -> Any:
    app = _scoped_app(request, slug)
    return {"app": app.slug, "artifacts": list_artifacts(app, include_deleted=include_deleted)}


def _validate_target(collection: str, name: str) -> None:
    """Refuse an unknown collection or a bad name (400) before touching the database."""
    validate_collection(collection)
    validate_name(name)


@api.get(
    "/apps/{slug}/artifacts/{collection}/{name}",
    response={200: ArtifactOut, **ERRORS},
    summary="Read an artifact (ETag: its sha256)",
    tags=["artifacts"],
)
def get_artifact(
    request: HttpRequest, response: HttpResponse, slug: str, collection: str, name: str
) -> Any:
    app = _scoped_app(request, slug)
    data = read_artifact(app, collection, name)
    response["ETag"] = f'"{data["sha256"]}"'
    return data


def _parse_if_match(header: str) -> list[str]:
    """The entity tags of an If-Match header; ``["*"]`` for any."""
    tags = []
    for part in header.split(","):
        tag = part.strip()
        if tag.startswith("W/"):
            tag = tag[2:]
        tags.append(tag.strip('"'))
    return [t for t in tags if t]


def _expected_from_if_match(
    request: HttpRequest, app: App, collection: str, name: str
) -> tuple[str | None, bool]:
    """The hash an ``If-Match`` header pins, and whether one was given; 412 when it cannot match."""
    header = request.headers.get("If-Match")
    if header is None:
        return None, False
    current = (
        Artifact.objects.filter(app=app, collection=collection, name=name, deleted=False)
        .values_list("sha256", flat=True)
        .first()
    )
    tags = _parse_if_match(header)
    if current is not None and ("*" in tags or current in tags):
        return current, True
    raise ApiError(
        412,
        "precondition_failed",
        IF_MATCH_FAILED.format(
            given=header[:100], current=f'"{current}"' if current else "(none: it does not exist)"
        ),
        current_sha256=current or "",
    )


@api.put(
    "/apps/{slug}/artifacts/{collection}/{name}",
    response={200: WriteReceiptOut, 201: WriteReceiptOut, **ERRORS},
    summary="Write an artifact (captured as a restore point first)",
    tags=["artifacts"],
)
def put_artifact(
    request: HttpRequest,
    response: HttpResponse,
    slug: str,
    collection: str,
    name: str,
    body: WriteIn,
) -> Any:
    app = _scoped_app(request, slug)
    _validate_target(collection, name)
    pinned, if_match = _expected_from_if_match(request, app, collection, name)
    expected = body.expected_sha256 if body.expected_sha256 is not None else pinned
    try:
        receipt = services.write_artifact(
            app,
            collection,
            name,
            body.source,
            requested_by=body.requested_by or _token(request).user.get_username(),
            tool=body.tool or DEFAULT_TOOL,
            run_id=body.run_id,
            turn_id=body.turn_id,
            expected_sha256=expected,
        )
    except StaleWrite as exc:
        if if_match and body.expected_sha256 is None:
            raise ApiError(
                412, "precondition_failed", exc.message, current_sha256=exc.current_sha256
            )
        raise
    response["ETag"] = f'"{receipt.sha256}"'
    created = not receipt.unchanged and receipt.previous_sha256 == ""
    return (201 if created else 200), receipt.as_dict()


@api.delete(
    "/apps/{slug}/artifacts/{collection}/{name}",
    response={200: WriteReceiptOut, **ERRORS},
    summary="Delete an artifact (it becomes a tombstone behind a restore point)",
    tags=["artifacts"],
)
def delete_artifact(
    request: HttpRequest,
    slug: str,
    collection: str,
    name: str,
    params: Query[DeleteQuery],
) -> Any:
    app = _scoped_app(request, slug)
    _validate_target(collection, name)
    pinned, if_match = _expected_from_if_match(request, app, collection, name)
    expected = params.expected_sha256 if params.expected_sha256 is not None else pinned
    try:
        receipt = services.delete_artifact(
            app,
            collection,
            name,
            requested_by=params.requested_by or _token(request).user.get_username(),
            tool=params.tool or DEFAULT_TOOL,
            run_id=params.run_id,
            turn_id=params.turn_id,
            expected_sha256=expected,
        )
    except StaleWrite as exc:
        if if_match and params.expected_sha256 is None:
            raise ApiError(
                412, "precondition_failed", exc.message, current_sha256=exc.current_sha256
            )
        raise
    return 200, receipt.as_dict()


# --- change sets --------------------------------------------------------------------------


@api.get(
    "/apps/{slug}/change-sets",
    response={200: ChangeSetPage, **ERRORS},
    summary="List an app's change sets, newest first",
    tags=["change sets"],
)
def get_change_sets(request: HttpRequest, slug: str, params: Query[PageQuery]) -> Any:
    app = _scoped_app(request, slug)
    return list_change_sets(app, page=params.page, per_page=params.per_page)


@api.get(
    "/change-sets/{set_id}",
    response={200: ChangeSetDetail, **ERRORS},
    summary="A change set with its restore points",
    tags=["change sets"],
)
def get_change_set(request: HttpRequest, set_id: str) -> Any:
    return change_set_detail(_scoped_set(request, set_id))


# --- restore ------------------------------------------------------------------------------

# Every field of a restore body is optional, so a request with no body is a plain restore.
_NO_BODY_SET = RestoreSetIn(expected=None)
_NO_BODY_POINT = RestorePointIn(expected_sha256=None)


def _receipt_response(request: HttpRequest, receipt: dict[str, Any]) -> HttpResponse:
    """A receipt exactly as the engine wrote it (SPEC §4 keys, in their order)."""
    return api.create_response(request, receipt, status=200)


@api.post(
    "/change-sets/{set_id}/restore",
    response={200: RestoreReceiptOut, **ERRORS},
    summary="Restore all: the set's artifacts back to their state before it (or a dry run)",
    tags=["restore"],
)
def post_restore_change_set(
    request: HttpRequest, set_id: str, body: RestoreSetIn = _NO_BODY_SET
) -> Any:
    change_set = _scoped_set(request, set_id)
    _check_restore_permission(request)
    receipt = services.restore_change_set(
        change_set.id,
        by=_token(request).user.get_username(),
        dry_run=body.dry_run,
        expected=body.expected,
    )
    return _receipt_response(request, receipt.as_dict())


@api.post(
    "/restore-points/{point_id}/restore",
    response={200: RestoreReceiptOut, **ERRORS},
    summary="Restore one artifact to its state before this point",
    tags=["restore"],
)
def post_restore_point(
    request: HttpRequest, point_id: str, body: RestorePointIn = _NO_BODY_POINT
) -> Any:
    point = _scoped_point(request, point_id)
    _check_restore_permission(request)
    receipt = services.restore_point(
        point.id,
        by=_token(request).user.get_username(),
        expected_sha256=body.expected_sha256,
        dry_run=body.dry_run,
    )
    return _receipt_response(request, receipt.as_dict())


@api.get(
    "/restore-sets/{set_id}/receipt",
    response={200: RestoreReceiptOut, **ERRORS},
    summary="The receipt of a restore set",
    tags=["restore"],
)
def get_restore_receipt(request: HttpRequest, set_id: str) -> Any:
    change_set = _scoped_set(request, set_id)
    if change_set.kind != ChangeSet.RESTORE or not change_set.receipt:
        raise ApiError(404, "not_found", RECEIPT_NOT_FOUND.format(id=set_id))
    return _receipt_response(request, change_set.receipt)


@api.post(
    "/apps/{slug}/restore-to-release",
    response={200: RestoreReceiptOut, **ERRORS},
    summary="Restore to release: every artifact changed since the release back to its state then",
    tags=["restore"],
)
def post_restore_to_release(
    request: HttpRequest, slug: str, body: RestoreSetIn = _NO_BODY_SET
) -> Any:
    app = _scoped_app(request, slug)
    _check_restore_permission(request)
    receipt = services.restore_to_release(
        app,
        by=_token(request).user.get_username(),
        dry_run=body.dry_run,
        expected=body.expected,
    )
    return _receipt_response(request, receipt.as_dict())


__all__ = [
    "api",
    "artifact_summary",
    "change_set_detail",
    "list_artifacts",
    "list_change_sets",
    "point_out",
    "read_artifact",
]


# --- outside the routes ---------------------------------------------------------------------

NO_SUCH_ENDPOINT = (
    "There is no API endpoint “{method} {path}”. The endpoints are listed in "
    "/api/v1/openapi.json (and readable at /api/v1/docs)."
)
METHOD_NOT_ALLOWED = "“{path}” does not take {method}; it takes {allowed}."


@csrf_exempt  # it writes nothing; an API client has no CSRF token and must read JSON
def no_such_endpoint(request: HttpRequest, rest: str = "") -> HttpResponse:
    """A JSON 404 for any URL under /api/v1/ that no route matched (not Django's HTML page)."""
    message = NO_SUCH_ENDPOINT.format(method=request.method, path=request.path)
    return _error(request, 404, "not_found", message)


def json_method_not_allowed(get_response: Any) -> Any:
    """Middleware: a route asked with a method it does not take answers JSON 405 under
    /api/v1/ (django-ninja answers an empty text/html 405), with the Allow header kept."""

    def middleware(request: HttpRequest) -> HttpResponse:
        response = get_response(request)
        if response.status_code == 405 and request.path.startswith("/api/v1/"):
            allowed = response.get("Allow", "")
            replacement = _error(
                request,
                405,
                "method_not_allowed",
                METHOD_NOT_ALLOWED.format(
                    path=request.path, method=request.method, allowed=allowed or "no method"
                ),
            )
            if allowed:
                replacement["Allow"] = allowed
            return replacement
        return response

    return middleware


@csrf_exempt
def api_home(request: HttpRequest) -> HttpResponse:
    """``/api/v1/`` itself: where the endpoints are described (JSON, for agents and people)."""
    if request.method not in ("GET", "HEAD"):
        return no_such_endpoint(request)
    return api.create_response(
        request,
        {
            "name": "Versions agent API",
            "version": "v1",
            "openapi": "/api/v1/openapi.json",
            "docs": "/api/v1/docs",
            "authentication": "Authorization: Bearer <token> (manage.py create_agent_token)",
        },
        status=200,
    )
