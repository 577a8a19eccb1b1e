"""The agent API (docs/api.md#routes): JSON over HTTP under ``/api/v1/``, a thin adapter over the
services.

Each request's bearer token becomes an :class:`~versions.services.Actor`; every endpoint makes
one call into :mod:`versions.services` (which checks access) or reads through
:mod:`versions.selectors` an app the services let it reach, and the error table of
:mod:`versions.api.errors` turns service errors into statuses:
400 bad input · 401 no or bad token · 403 missing permission on an app the token reaches ·
404 unknown, or outside the token's apps (docs/api.md#existence) · 409 stale write or refused
pre-flight · 412 ``If-Match`` mismatch · 413 too large · 422 a body or parameter of the wrong
shape, an unknown field (docs/api.md#strict-inputs), or a route spec that does not parse ·
428 a write without a precondition where the app requires one.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from django.http import HttpRequest, HttpResponse
from django.urls import reverse
from django.views.decorators.csrf import csrf_exempt
from ninja import NinjaAPI, Query
from ninja.renderers import JSONRenderer
from ninja.security import HttpBearer

from versions import selectors, services
from versions.api.errors import ApiError, install, problem, problem_body
from versions.api.schemas import (
    ERRORS,
    WRITER_SET_ID_PATTERN,
    ArtifactAtOut,
    ArtifactHistory,
    ArtifactList,
    ArtifactOut,
    ArtifactsQuery,
    AtQuery,
    ChangeSetDetail,
    ChangeSetPage,
    CompareOut,
    DeleteQuery,
    DeploymentPage,
    DescribedOut,
    DescribeIn,
    FreezeIn,
    FreezeOut,
    HistoryQuery,
    KeysetQuery,
    MeOut,
    PageQuery,
    PointDetail,
    ProductionHistoryPage,
    PromoteIn,
    PromotionReceiptOut,
    ReplyIn,
    ReplyOut,
    RestorePointIn,
    RestoreReceiptOut,
    RestoreSetIn,
    ReviewPage,
    ReviewsQuery,
    RollbackIn,
    RolloutIn,
    ScheduleIn,
    SetReviewsOut,
    WriteIn,
    WriteReceiptOut,
    known_fields,
    path_parameter_rules,
)
from versions.errors import NotFound, PreconditionFailed, PreconditionRequired, StaleWrite
from versions.messages import ARTIFACT_NOT_FOUND, PRECONDITION_REQUIRED
from versions.models import ChangeSet
from versions.request_meta import request_meta
from versions.strict import refuse_unknown
from versions.terms import (
    POINT,
    RELEASE,
    REVERT,
    SET,
    WRITE,
)

DEFAULT_TOOL = "api"

RECEIPT_NOT_FOUND = "There is no restore set “{id}” with a receipt."
IF_MATCH_FAILED = (
    "If-Match {given} does not match the current ETag {current}. Nothing was written; "
    "read it again and retry."
)
IF_MATCH_WEAK = (
    " A weak tag (W/…) never matches a write's precondition: send the strong ETag you read."
)
IF_NONE_MATCH_EXISTS = (
    "If-None-Match {given}: the {collection} “{name}” exists (ETag {current}), and this PUT "
    "only creates. Nothing was written."
)
DIFF_MEDIA_TYPE = "text/x-diff; charset=utf-8"
# What each error status means, in the OpenAPI document (every answer is a problem+json).
ERROR_MEANINGS = {
    "400": "A value breaks a rule the services check (collection, name, source, lengths, "
    "control characters, an expected key or hash): error invalid_input, with field, in words. "
    "A NUL in source is one (capture names its position).",
    "401": "No valid agent token (Authorization: Bearer <token>).",
    "403": "The token reaches this app but lacks the permission (named in words).",
    "404": "No such app, artifact, set, point, deployment or ref (an id of the wrong form "
    "names nothing); an app outside the token's scope, and its ids, answer the same.",
    "409": "A stale write (current_sha256), a refused pre-flight (its findings) or a conflict.",
    "412": "An If-Match or If-None-Match precondition does not hold (current_sha256).",
    "413": "The body or the source is larger than the server accepts.",
    "422": "The request is not of the documented shape: a wrong JSON type, a missing field, or "
    "a NUL or unpaired surrogate in an id, hash, ref, note or expected key "
    "(error validation_error, with details); a field the operation does not take (error "
    "unknown_field, with field and suggestion); also a route spec that does not parse.",
    "428": "The app requires preconditions and this write sent none: send If-Match, "
    "If-None-Match or expected_sha256.",
}


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
    """``Authorization: Bearer <token>``: a live token of an active user, as an Actor."""

    def authenticate(self, request: HttpRequest, token: str) -> services.Actor | None:
        meta = request_meta(request)
        row = services.verify_token(token, request_meta=meta)
        if row is None:
            return None
        actor = services.actor_for_token(row)
        actor.meta = meta  # where it acts from, for the audit trail
        return actor


class _VersionsApi(NinjaAPI):
    """The agent API; its OpenAPI document says errors come as ``application/problem+json``
    (RFC 9457), as they do."""

    def get_openapi_schema(self, *args: Any, **kwargs: Any) -> Any:
        schema = super().get_openapi_schema(*args, **kwargs)
        path_rules = path_parameter_rules()
        for path, operations in schema.get("paths", {}).items():
            for method, operation in operations.items():
                if method == "head":
                    # A HEAD shares its GET's function: its own operationId, as ids are unique.
                    operation["operationId"] += "_head"
                for status, links in _links(path, method).items():
                    answers = operation.get("responses", {})
                    answer = answers.get(status) or answers.get(int(status))
                    if answer is not None:
                        answer["links"] = links
                for parameter in operation.get("parameters") or ():
                    if parameter.get("in") == "path" and parameter["name"] in path_rules:
                        parameter["schema"] = {
                            "title": parameter["schema"].get("title", parameter["name"]),
                            **path_rules[parameter["name"]],
                        }
                        if path.endswith("/revert") and parameter["name"] == "set_id":
                            parameter["schema"]["pattern"] = WRITER_SET_ID_PATTERN
                for status, answer in (operation.get("responses") or {}).items():
                    content = answer.get("content") or {}
                    if str(status).startswith(("4", "5")) and "application/json" in content:
                        content["application/problem+json"] = content.pop("application/json")
                    if str(status) in ERROR_MEANINGS:
                        answer["description"] = ERROR_MEANINGS[str(status)]
        return schema


_PREFIX = "/api/v1"


def _to(path: str, method: str, **parameters: str) -> dict[str, Any]:
    """An OpenAPI link to ``method path`` with ``parameters`` from the answer (an operationRef:
    GET and HEAD share a function)."""
    pointer = (_PREFIX + path).replace("~", "~0").replace("/", "~1")
    return {"operationRef": f"#/paths/{pointer}/{method}", "parameters": parameters}


def _set_links(expression: str, *, revert: bool = True) -> dict[str, Any]:
    """Links from a change set id in an answer to what can be done with it (``revert``: the
    id is always a writer's set, never a restore set's)."""
    set_id = {"set_id": expression}
    links = {
        "GetChangeSet": _to("/change-sets/{set_id}", "get", **set_id),
        "DescribeChangeSet": _to("/change-sets/{set_id}", "patch", **set_id),
        "GetChangeSetDiff": _to("/change-sets/{set_id}/diff", "get", **set_id),
        "GetChangeSetReviews": _to("/change-sets/{set_id}/reviews", "get", **set_id),
        "RestoreChangeSet": _to("/change-sets/{set_id}/restore", "post", **set_id),
        "RevertChangeSet": _to("/change-sets/{set_id}/revert", "post", **set_id),
    }
    if not revert:
        del links["RevertChangeSet"]
    return links


def _links(path: str, method: str) -> dict[str, dict[str, Any]]:
    """The OpenAPI links of an operation's answers (by status), so that the ids one answer
    gives flow into the operations that take them (docs/api.md#fuzzing)."""
    path = path.removeprefix(_PREFIX)
    point = {"point_id": "$response.body#/restorePointId"}
    write = {
        **_set_links("$response.body#/changeSetId"),
        "GetRestorePoint": _to("/restore-points/{point_id}", "get", **point),
        "RestorePoint": _to("/restore-points/{point_id}/restore", "post", **point),
    }
    # A restore set is restored again to undo it, never reverted (400 in words).
    restored = {
        **_set_links("$response.body#/setId", revert=False),
        "GetRestoreReceipt": _to(
            "/restore-sets/{set_id}/receipt", "get", set_id="$response.body#/setId"
        ),
    }
    app = {"slug": "$response.body#/apps/0/slug"}
    here = {"slug": "$request.path.slug"}
    first_point = {"point_id": "$response.body#/items/0/id"}
    by_operation: dict[tuple[str, str], dict[str, dict[str, Any]]] = {
        # Who the token is → its first app's lists (an agent's first calls).
        ("/me", "get"): {
            "200": {
                "ListArtifacts": _to("/apps/{slug}/artifacts", "get", **app),
                "ListChangeSets": _to("/apps/{slug}/change-sets", "get", **app),
                "ListDeployments": _to("/apps/{slug}/deployments", "get", **app),
                "ListReviews": _to("/apps/{slug}/reviews", "get", **app),
            }
        },
        ("/apps/{slug}/artifacts", "get"): {
            "200": {
                "ReadArtifact": _to(
                    "/apps/{slug}/artifacts/{collection}/{name}",
                    "get",
                    **here,
                    collection="$response.body#/artifacts/0/collection",
                    name="$response.body#/artifacts/0/name",
                ),
                "ArtifactHistory": _to(
                    "/apps/{slug}/artifacts/{collection}/{name}/history",
                    "get",
                    **here,
                    collection="$response.body#/artifacts/0/collection",
                    name="$response.body#/artifacts/0/name",
                ),
            }
        },
        ("/apps/{slug}/artifacts/{collection}/{name}/history", "get"): {
            "200": {
                "GetRestorePoint": _to("/restore-points/{point_id}", "get", **first_point),
                "RestorePoint": _to("/restore-points/{point_id}/restore", "post", **first_point),
                "GetChangeSet": _to(
                    "/change-sets/{set_id}", "get", set_id="$response.body#/items/0/change_set"
                ),
            }
        },
        ("/apps/{slug}/artifacts/{collection}/{name}", "put"): {"200": write, "201": write},
        ("/apps/{slug}/artifacts/{collection}/{name}", "delete"): {"200": write},
        # The newest set may be a restore set, which is restored to undo it, never reverted.
        ("/apps/{slug}/change-sets", "get"): {
            "200": _set_links("$response.body#/items/0/id", revert=False)
        },
        ("/change-sets/{set_id}/restore", "post"): {"200": restored},
        ("/change-sets/{set_id}/revert", "post"): {"200": restored},
        ("/restore-points/{point_id}/restore", "post"): {"200": restored},
        ("/apps/{slug}/restore-to-release", "post"): {"200": restored},
    }
    return by_operation.get((path, method), {})


api = _VersionsApi(
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
install(api)


def _actor(request: HttpRequest) -> services.Actor:
    return request.auth  # type: ignore[attr-defined,no-any-return]


def _error(
    request: HttpRequest, status: int, code: str, message: str, **extra: Any
) -> HttpResponse:
    return problem(api, request, problem_body(status, code, message, **extra), status)


# Headers the OpenAPI document states (docs/api.md#conventions).
_ETAG_OUT = {
    "ETag": {
        "description": 'The sha256 of the source, quoted: "<sha256>".',
        "schema": {"type": "string"},
    }
}
_IF_NONE_MATCH_GET = {
    "name": "If-None-Match",
    "in": "header",
    "required": False,
    "description": "An ETag you hold (or *): 304 Not Modified when it is still current.",
    "schema": {"type": "string"},
}
_IF_MATCH = {
    "name": "If-Match",
    "in": "header",
    "required": False,
    "description": "Write only if the current ETag is one of these (strong comparison; a "
    "weak W/ tag never matches): else 412.",
    "schema": {"type": "string"},
}
_IF_NONE_MATCH_PUT = {
    "name": "If-None-Match",
    "in": "header",
    "required": False,
    "description": "* : create only (412 when the artifact exists); tags: 412 when one is "
    "the current ETag.",
    "schema": {"type": "string"},
}


def _entity_tags(header: str) -> list[tuple[bool, str]]:
    """The entity tags of an If-Match / If-None-Match header as (weak, opaque value)."""
    tags = []
    for part in header.split(","):
        tag = part.strip()
        weak = tag.startswith("W/")
        if weak:
            tag = tag[2:]
        tag = tag.strip('"')
        if tag:
            tags.append((weak, tag))
    return tags


def _none_match(header: str | None, current: str | None) -> bool:
    """Whether an If-None-Match header matches the current tag (weak comparison, RFC 9110
    §13.1.2): ``*`` matches any existing representation."""
    if header is None or current is None:
        return False
    return any(tag == "*" or tag == current for _weak, tag in _entity_tags(header))


# --- artifacts ----------------------------------------------------------------------------


@api.api_operation(
    ["GET", "HEAD"],
    "/apps/{slug}/artifacts",
    response={200: ArtifactList, **ERRORS},
    summary="List an app's artifacts (all, or a keyset page with limit and cursor)",
    tags=["artifacts"],
)
def get_artifacts(
    request: HttpRequest, response: HttpResponse, slug: str, params: Query[ArtifactsQuery]
) -> Any:
    app = services.app_for(slug, actor=_actor(request))
    page = selectors.artifact_page(
        app, include_deleted=params.include_deleted, cursor=params.cursor, limit=params.limit
    )
    return _linked(request, response, page)


def _validate_target(collection: str, name: str) -> None:
    """Refuse an unknown collection or a bad name (400) before touching the database."""
    services.validate_collection(collection)
    services.validate_name(name)


@api.api_operation(
    ["GET", "HEAD"],
    "/apps/{slug}/artifacts/{collection}/{name}",
    response={200: ArtifactOut | ArtifactAtOut, 304: None, **ERRORS},
    summary="Read an artifact (ETag: its sha256), now or at a ref (?at=)",
    tags=["artifacts"],
    openapi_extra={
        "parameters": [_IF_NONE_MATCH_GET],
        "responses": {
            200: {"headers": _ETAG_OUT},
            304: {"description": "Not Modified", "headers": _ETAG_OUT},
        },
    },
)
def get_artifact(
    request: HttpRequest,
    response: HttpResponse,
    slug: str,
    collection: str,
    name: str,
    params: Query[AtQuery],
) -> Any:
    app = services.app_for(slug, actor=_actor(request))
    _validate_target(collection, name)
    if params.at is not None:
        data = selectors.artifact_at(app, collection, name, selectors.named_ref(app, params.at))
    else:
        data = selectors.read_artifact(app, collection, name)
    if _none_match(request.headers.get("If-None-Match"), data["sha256"]):
        not_modified = HttpResponse(status=304)
        not_modified["ETag"] = f'"{data["sha256"]}"'
        return not_modified
    response["ETag"] = f'"{data["sha256"]}"'
    return data


@api.api_operation(
    ["GET", "HEAD"],
    "/apps/{slug}/artifacts/{collection}/{name}/history",
    response={200: ArtifactHistory, **ERRORS},
    summary="An artifact's restore points, newest first (who asked, who wrote, hashes)",
    tags=["history"],
)
def get_artifact_history(
    request: HttpRequest,
    response: HttpResponse,
    slug: str,
    collection: str,
    name: str,
    params: Query[HistoryQuery],
) -> Any:
    app = services.app_for(slug, actor=_actor(request))
    _validate_target(collection, name)
    page = selectors.artifact_history(
        app,
        collection,
        name,
        page=params.page,
        per_page=params.per_page,
        cursor=params.cursor,
        limit=params.limit,
    )
    return _linked(request, response, page)


def _linked(request: HttpRequest, response: HttpResponse, page: dict[str, Any]) -> Any:
    """``page`` with an RFC 8288 ``Link: <…>; rel="next"`` when one follows: this request's
    address with ``cursor`` = its next_cursor (and no page number)."""
    if page.get("next_cursor"):
        query = request.GET.copy()
        query.pop("page", None)
        query["cursor"] = page["next_cursor"]
        response["Link"] = f'<{request.path}?{query.urlencode()}>; rel="next"'
    return page


def _expected_from_if_match(
    request: HttpRequest, app: Any, collection: str, name: str
) -> tuple[str | None, bool]:
    """The hash an ``If-Match`` header pins, and whether one was given; 412 when it cannot match."""
    header = request.headers.get("If-Match")
    if header is None:
        return None, False
    current = _current_sha(app, collection, name)
    tags = _entity_tags(header)
    # Strong comparison (RFC 9110 §13.1.1): a weak tag never matches.
    if current is not None and any(
        not weak and (tag == "*" or tag == current) for weak, tag in tags
    ):
        return current, True
    message = IF_MATCH_FAILED.format(
        given=header[:100], current=f'"{current}"' if current else "(none: it does not exist)"
    )
    if any(weak for weak, _tag in tags):
        message += IF_MATCH_WEAK
    raise ApiError(412, "precondition_failed", message, current_sha256=current or "")


def _current_sha(app: Any, collection: str, name: str) -> str | None:
    """The artifact's current sha256, or None when it does not exist (or is a tombstone)."""
    key = f"{collection}/{name}"
    return selectors.artifact_shas(app, [key]).get(key) or None


def _create_only(request: HttpRequest, app: Any, collection: str, name: str) -> bool:
    """``If-None-Match`` on a write: ``*`` means create only (True: pin "absent"); tags refuse
    the write when one is the current ETag. 412 in words when it exists / matches."""
    header = request.headers.get("If-None-Match")
    if header is None:
        return False
    tags = _entity_tags(header)
    create_only = any(tag == "*" for _weak, tag in tags)
    current = _current_sha(app, collection, name)
    if current is not None and (create_only or any(tag == current for _w, tag in tags)):
        raise ApiError(
            412,
            "precondition_failed",
            IF_NONE_MATCH_EXISTS.format(
                given=header[:100], collection=collection, name=name, current=f'"{current}"'
            ),
            current_sha256=current,
        )
    return create_only


# A failed If-Match / If-None-Match is answered only after the service has checked the write's
# input (a bad value is a 400 whatever the headers say): it runs with this expected hash, which
# no artifact has and which no artifact's absence matches, and its stale write becomes the 412.
_MATCHES_NOTHING = "precondition-failed"


def _require_precondition(request: HttpRequest, app: Any, explicit: str | None) -> None:
    """428 when the app requires preconditions (docs/api.md#require-preconditions) and the
    write sends none: no If-Match, no If-None-Match, no expected_sha256."""
    if not app.require_preconditions or explicit is not None:
        return
    if "If-Match" in request.headers or "If-None-Match" in request.headers:
        return
    raise PreconditionRequired(PRECONDITION_REQUIRED.format(slug=app.slug))


def _artifact_url(app: Any, collection: str, name: str) -> str:
    """The API address of an artifact (its name quoted), for ``Location``."""
    return reverse(
        "versions_api:get_artifact",
        kwargs={"slug": app.slug, "collection": collection, "name": name},
    )


def _precondition(exc: StaleWrite, if_match: bool, explicit: str | None) -> StaleWrite:
    """A stale write that only an ``If-Match`` header asked for is a failed precondition."""
    if if_match and explicit is None:
        return PreconditionFailed(exc.message, current_sha256=exc.current_sha256)
    return exc


@api.put(
    "/apps/{slug}/artifacts/{collection}/{name}",
    response={200: WriteReceiptOut, 201: WriteReceiptOut, **ERRORS},
    summary="Write an artifact (captured as a restore point first)",
    tags=["artifacts"],
    openapi_extra={
        "parameters": [_IF_MATCH, _IF_NONE_MATCH_PUT],
        "responses": {200: {"headers": _ETAG_OUT}, 201: {"headers": _ETAG_OUT}},
    },
)
def put_artifact(
    request: HttpRequest,
    response: HttpResponse,
    slug: str,
    collection: str,
    name: str,
    body: WriteIn,
) -> Any:
    actor = _actor(request)
    app = services.app_for(slug, actor=actor, action=WRITE)
    _validate_target(collection, name)
    _require_precondition(request, app, body.expected_sha256)
    try:
        pinned, if_match = _expected_from_if_match(request, app, collection, name)
        if _create_only(request, app, collection, name):
            pinned, if_match = "", True
        failed = None
    except ApiError as exc:
        pinned, if_match, failed = _MATCHES_NOTHING, True, exc
    explicit = body.expected_sha256 if failed is None else None
    expected = explicit if explicit is not None else pinned
    try:
        receipt = services.write_artifact(
            app,
            collection,
            name,
            body.source,
            requested_by=body.requested_by,
            tool=body.tool or DEFAULT_TOOL,
            run_id=body.run_id,
            turn_id=body.turn_id,
            expected_sha256=expected,
            actor=actor,
            message=body.message,
            addresses=body.addresses,
        )
    except StaleWrite as exc:
        raise failed or _precondition(exc, if_match, explicit)
    response["ETag"] = f'"{receipt.sha256}"'
    created = not receipt.unchanged and receipt.previous_sha256 == ""
    if created:
        response["Location"] = _artifact_url(app, collection, name)
    return (201 if created else 200), receipt.as_dict()


@api.delete(
    "/apps/{slug}/artifacts/{collection}/{name}",
    response={200: WriteReceiptOut, **ERRORS},
    summary="Delete an artifact (it becomes a tombstone behind a restore point)",
    tags=["artifacts"],
    openapi_extra={"parameters": [_IF_MATCH]},
)
def delete_artifact(
    request: HttpRequest,
    slug: str,
    collection: str,
    name: str,
    params: Query[DeleteQuery],
) -> Any:
    # A delete's precondition comes in its query: strict like a body (docs/api.md#strict-inputs).
    refuse_unknown(request.GET, known_fields(DeleteQuery))
    actor = _actor(request)
    app = services.app_for(slug, actor=actor, action=WRITE)
    _validate_target(collection, name)
    _require_precondition(request, app, params.expected_sha256)
    try:
        pinned, if_match = _expected_from_if_match(request, app, collection, name)
        failed = None
    except ApiError as exc:
        pinned, if_match, failed = _MATCHES_NOTHING, True, exc
    explicit = params.expected_sha256 if failed is None else None
    expected = explicit if explicit is not None else pinned
    try:
        receipt = services.delete_artifact(
            app,
            collection,
            name,
            requested_by=params.requested_by,
            tool=params.tool or DEFAULT_TOOL,
            run_id=params.run_id,
            turn_id=params.turn_id,
            expected_sha256=expected,
            actor=actor,
            message=params.message,
            addresses=params.addresses,
        )
    except StaleWrite as exc:
        if exc.current_sha256 == "":
            # Nothing to delete: 404, whatever the precondition said (docs/api.md#http-details).
            raise NotFound(
                ARTIFACT_NOT_FOUND.format(collection=collection, name=name, app=app.slug)
            ) from None
        raise failed or _precondition(exc, if_match, explicit)
    return 200, receipt.as_dict()


# --- change sets --------------------------------------------------------------------------


@api.api_operation(
    ["GET", "HEAD"],
    "/apps/{slug}/change-sets",
    response={200: ChangeSetPage, **ERRORS},
    summary="List an app's change sets, newest first",
    tags=["change sets"],
)
def get_change_sets(
    request: HttpRequest, response: HttpResponse, slug: str, params: Query[PageQuery]
) -> Any:
    app = services.app_for(slug, actor=_actor(request))
    page = selectors.list_change_sets(
        app,
        page=params.page,
        per_page=params.per_page,
        cursor=params.cursor,
        limit=params.limit,
        run_id=params.run_id,
        turn_id=params.turn_id,
        written_by=params.written_by,
        since=params.since,
    )
    return _linked(request, response, page)


@api.api_operation(
    ["GET", "HEAD"],
    "/change-sets/{set_id}",
    response={200: ChangeSetDetail, **ERRORS},
    summary="A change set with its restore points",
    tags=["change sets"],
)
def get_change_set(
    request: HttpRequest, set_id: str, view: Literal["set", "now"] | None = None
) -> Any:
    change_set = services.set_for(set_id, actor=_actor(request))
    detail = selectors.change_set_detail(change_set)
    if view is not None:
        detail["diff"] = selectors.change_set_view(change_set, view)
    return detail


@api.patch(
    "/change-sets/{set_id}",
    response={200: DescribedOut, **ERRORS},
    summary="Set a change set's message (what the turn was asked or did)",
    tags=["change sets"],
)
def patch_change_set(request: HttpRequest, set_id: str, body: DescribeIn) -> Any:
    return services.describe_change_set(set_id, body.message, actor=_actor(request)).as_dict()


@api.api_operation(
    ["GET", "HEAD"],
    "/change-sets/{set_id}/diff",
    response={200: str, **ERRORS},
    summary="A change set's diff as unified diff text (view=set: what it did; now: to now)",
    tags=["change sets", "history"],
    openapi_extra={
        "responses": {200: {"content": {"text/x-diff": {"schema": {"type": "string"}}}}}
    },
)
def get_change_set_diff(
    request: HttpRequest, set_id: str, view: Literal["set", "now"] = "set"
) -> Any:
    change_set = services.set_for(set_id, actor=_actor(request))
    return HttpResponse(selectors.set_diff(change_set, view), content_type=DIFF_MEDIA_TYPE)


@api.api_operation(
    ["GET", "HEAD"],
    "/change-sets/{set_id}/reviews",
    response={200: SetReviewsOut, **ERRORS},
    summary="A change set's review state, its reviews and its line comment threads (anchors); "
    "all, or keyset pages of both together",
    tags=["change sets", "reviews"],
)
def get_change_set_reviews(
    request: HttpRequest, response: HttpResponse, set_id: str, params: Query[KeysetQuery]
) -> Any:
    change_set = services.set_for(set_id, actor=_actor(request))
    page = selectors.reviews_payload(change_set, cursor=params.cursor, limit=params.limit)
    return _linked(request, response, page)


@api.post(
    "/comments/{comment_id}/replies",
    response={201: ReplyOut, **ERRORS},
    summary="Reply to a line comment's thread (marked as the agent's)",
    tags=["reviews"],
)
def post_comment_reply(request: HttpRequest, comment_id: str, body: ReplyIn) -> Any:
    comment = services.reply(comment_id, body=body.body, actor=_actor(request))
    return 201, selectors.comment_dict(comment) | {"thread": comment.thread_id}


@api.api_operation(
    ["GET", "HEAD"],
    "/restore-points/{point_id}",
    response={200: PointDetail, **ERRORS},
    summary="A restore point with its previous source",
    tags=["history"],
)
def get_restore_point(request: HttpRequest, point_id: str) -> Any:
    return selectors.point_detail(services.point_for(point_id, actor=_actor(request)))


# --- restore: one flow for a set, a point and the release ----------------------------------

# Every field of a restore body is optional, so a request with no body is a plain restore.
_NO_BODY_SET = RestoreSetIn(dry_run=False, expected=None)
_NO_BODY_POINT = RestorePointIn(dry_run=False, expected_sha256=None)


def _restore(
    request: HttpRequest,
    kind: str,
    ident: str | None,
    *,
    dry_run: bool,
    expected: Any = None,
    app: Any = None,
) -> HttpResponse:
    """Run the restore flow and answer its receipt exactly as the engine wrote it (the keys of
    docs/api.md#receipts, in their order); a refused pre-flight is the error table's 409."""
    receipt = services.run_restore(
        kind, ident, actor=_actor(request), app=app, dry_run=dry_run, expected=expected
    )
    return api.create_response(request, receipt.as_dict(), status=200)


@api.post(
    "/change-sets/{set_id}/restore",
    response={200: RestoreReceiptOut, **ERRORS},
    summary="Restore all: the set's artifacts back to their state before it (or a dry run)",
    tags=["restore"],
)
def post_restore_change_set(
    request: HttpRequest, set_id: str, body: RestoreSetIn = _NO_BODY_SET
) -> Any:
    return _restore(request, SET, set_id, dry_run=body.dry_run, expected=body.expected)


@api.post(
    "/change-sets/{set_id}/revert",
    response={200: RestoreReceiptOut, **ERRORS},
    summary="Revert this set: take back what the set did, keeping later sets' work (or a dry run)",
    tags=["restore"],
)
def post_revert_change_set(
    request: HttpRequest, set_id: str, body: RestoreSetIn = _NO_BODY_SET
) -> Any:
    return _restore(request, REVERT, set_id, dry_run=body.dry_run, expected=body.expected)


@api.post(
    "/restore-points/{point_id}/restore",
    response={200: RestoreReceiptOut, **ERRORS},
    summary="Restore one artifact to its state before this point",
    tags=["restore"],
)
def post_restore_point(
    request: HttpRequest, point_id: str, body: RestorePointIn = _NO_BODY_POINT
) -> Any:
    point = services.point_for(point_id, actor=_actor(request))
    expected = None
    if body.expected_sha256 is not None:
        expected = {(point.artifact.collection, point.artifact.name): body.expected_sha256}
    return _restore(request, POINT, point.id, dry_run=body.dry_run, expected=expected)


@api.api_operation(
    ["GET", "HEAD"],
    "/restore-sets/{set_id}/receipt",
    response={200: RestoreReceiptOut, **ERRORS},
    summary="The receipt of a restore set",
    tags=["restore"],
)
def get_restore_receipt(request: HttpRequest, set_id: str) -> Any:
    change_set = services.set_for(set_id, actor=_actor(request))
    if change_set.kind != ChangeSet.RESTORE or not change_set.receipt:
        raise ApiError(404, "not_found", RECEIPT_NOT_FOUND.format(id=set_id))
    return api.create_response(request, change_set.receipt, status=200)


@api.post(
    "/apps/{slug}/restore-to-release",
    response={200: RestoreReceiptOut, **ERRORS},
    summary="Restore to release: every artifact changed since the release back to its state then",
    tags=["restore"],
)
def post_restore_to_release(
    request: HttpRequest, slug: str, body: RestoreSetIn = _NO_BODY_SET
) -> Any:
    app = services.app_for(slug, actor=_actor(request))
    return _restore(request, RELEASE, None, app=app, dry_run=body.dry_run, expected=body.expected)


# --- production (docs/architecture.md#environments) -----------------------------------------------

_NO_BODY_PROMOTE = PromoteIn(ref="draft", note="", expected=None, dry_run=False)
_NO_BODY_ROLLBACK = RollbackIn(to=None, note="")


@api.get(
    "/apps/{slug}/deployments",
    response={200: DeploymentPage, **ERRORS},
    summary="The app's production deployment, its deployments and the history of production",
    tags=["production"],
    by_alias=True,
)
def get_deployments(
    request: HttpRequest, response: HttpResponse, slug: str, params: Query[KeysetQuery]
) -> Any:
    app = services.app_for(slug, actor=_actor(request))
    page = selectors.deployment_page(app, cursor=params.cursor, limit=params.limit)
    return _linked(request, response, page)


@api.api_operation(
    ["GET", "HEAD"],
    "/apps/{slug}/production/history",
    response={200: ProductionHistoryPage, **ERRORS},
    summary="The history of production, newest first: every promotion, rollback and rollout "
    "step (keyset pages)",
    tags=["production"],
    by_alias=True,
)
def get_production_history(
    request: HttpRequest, response: HttpResponse, slug: str, params: Query[KeysetQuery]
) -> Any:
    app = services.app_for(slug, actor=_actor(request))
    page = selectors.production_history(app, cursor=params.cursor, limit=params.limit)
    return _linked(request, response, page)


@api.post(
    "/apps/{slug}/deployments",
    response={200: PromotionReceiptOut, **ERRORS},
    summary="Promote a state (default the draft) to production, or a dry run",
    tags=["production"],
    by_alias=True,
)
def post_deployment(request: HttpRequest, slug: str, body: PromoteIn = _NO_BODY_PROMOTE) -> Any:
    receipt = services.promote(
        slug,
        actor=_actor(request),
        ref=body.ref,
        note=body.note,
        expected=body.expected,
        dry_run=body.dry_run,
    )
    return _moved(request, slug, receipt)


def _moved(request: HttpRequest, slug: str, receipt: Any) -> HttpResponse:
    """A promotion's or rollback's answer: its receipt, and when production moved, ``Location``:
    the app's deployments, which the new one leads (docs/api.md#http-details)."""
    response = api.create_response(request, receipt.as_dict(), status=200)
    if receipt.deployment_id and receipt.kind in ("promotion", "rollback"):
        response["Location"] = reverse("versions_api:get_deployments", kwargs={"slug": slug})
    return response


@api.post(
    "/apps/{slug}/production/rollback",
    response={200: PromotionReceiptOut, **ERRORS},
    summary="Instant rollback: point production at an earlier deployment",
    tags=["production"],
    by_alias=True,
)
def post_rollback(request: HttpRequest, slug: str, body: RollbackIn = _NO_BODY_ROLLBACK) -> Any:
    receipt = services.rollback_production(slug, actor=_actor(request), to=body.to, note=body.note)
    return _moved(request, slug, receipt)


# --- reviews, compare, me -------------------------------------------------------------------


@api.api_operation(
    ["GET", "HEAD"],
    "/apps/{slug}/reviews",
    response={200: ReviewPage, **ERRORS},
    summary="The reviews people gave the app's change sets, newest first (keyset pages)",
    tags=["reviews"],
)
def get_reviews(
    request: HttpRequest, response: HttpResponse, slug: str, params: Query[ReviewsQuery]
) -> Any:
    app = services.app_for(slug, actor=_actor(request))
    page = selectors.review_page(
        app, cursor=params.cursor, limit=params.limit, verdict=params.verdict
    )
    return _linked(request, response, page)


@api.api_operation(
    ["GET", "HEAD"],
    "/apps/{slug}/compare/{refs}",
    response={200: CompareOut, **ERRORS},
    summary="Compare two refs (base...head): the files that differ with line counts, or a diff",
    tags=["history"],
    by_alias=True,
    openapi_extra={
        "responses": {
            200: {
                "content": {
                    "application/json": {"schema": {"$ref": "#/components/schemas/CompareOut"}},
                    "text/x-diff": {"schema": {"type": "string"}},
                }
            }
        }
    },
)
def get_compare(request: HttpRequest, slug: str, refs: str) -> Any:
    app = services.app_for(slug, actor=_actor(request))
    base, head = selectors.split_compare(refs)
    if _wants_diff(request):
        return HttpResponse(
            selectors.comparison_diff(app, base, head), content_type=DIFF_MEDIA_TYPE
        )
    return selectors.comparison(app, base, head)


def _wants_diff(request: HttpRequest) -> bool:
    """Whether the client asked for ``text/x-diff`` rather than JSON (``Accept``)."""
    accept = request.headers.get("Accept", "")
    return "text/x-diff" in accept and "application/json" not in accept


@api.api_operation(
    ["GET", "HEAD"],
    "/me",
    response={200: MeOut, **ERRORS},
    summary="Who this token is: its user, its apps and what it may do there, expiry, last use",
    tags=["agents"],
)
def get_me(request: HttpRequest) -> Any:
    return selectors.whoami(_actor(request))


# --- safe promotion (docs/api.md#safe-promotion) ---------------------------------------------


@api.post(
    "/apps/{slug}/rollout",
    response={200: dict[str, Any], **ERRORS},
    summary="Start, advance, complete or abort a gradual rollout",
    tags=["production"],
)
def post_rollout(request: HttpRequest, slug: str, body: RolloutIn) -> Any:
    receipt = services.promotion.rollout_action(
        slug,
        to=body.to,
        action=body.action,
        actor=_actor(request),
        note=body.note,
        ref=body.ref,
    )
    return _moved(request, slug, receipt)


@api.get(
    "/apps/{slug}/production/freeze",
    response={200: FreezeOut, **ERRORS},
    exclude_none=True,
    summary="Whether production is frozen, by whom, why and until when",
    tags=["production"],
)
def get_freeze(request: HttpRequest, slug: str) -> Any:
    return services.promotion.freeze_of(services.app_for(slug, actor=_actor(request)))


@api.post(
    "/apps/{slug}/production/freeze",
    response={200: FreezeOut, **ERRORS},
    exclude_none=True,
    summary="Freeze production (owners): nothing is promoted until it is unfrozen",
    tags=["production"],
)
def post_freeze(request: HttpRequest, slug: str, body: FreezeIn) -> Any:
    return services.promotion.freeze_production(
        slug, actor=_actor(request), reason=body.reason, until=body.until
    )


@api.post(
    "/apps/{slug}/production/unfreeze",
    response={200: FreezeOut, **ERRORS},
    exclude_none=True,
    summary="Unfreeze production (owners)",
    tags=["production"],
)
def post_unfreeze(request: HttpRequest, slug: str) -> Any:
    return services.promotion.unfreeze_production(slug, actor=_actor(request))


@api.get(
    "/apps/{slug}/schedules",
    response={200: dict[str, Any], **ERRORS},
    summary="The app's scheduled promotions, soonest first, and those that ran",
    tags=["production"],
)
def get_schedules(request: HttpRequest, slug: str) -> Any:
    app = services.app_for(slug, actor=_actor(request))
    return {"app": app.slug, "schedules": selectors.scheduled_promotions(app)}


@api.post(
    "/apps/{slug}/schedules",
    response={201: dict[str, Any], **ERRORS},
    summary="Schedule the promotion of a state, as it is now, at a future moment",
    tags=["production"],
)
def post_schedule(request: HttpRequest, slug: str, body: ScheduleIn) -> Any:
    receipt = services.promote(
        slug, actor=_actor(request), ref=body.ref, note=body.note, at=body.at
    )
    return 201, receipt.as_dict()


@api.delete(
    "/apps/{slug}/schedules/{schedule_id}",
    response={200: dict[str, Any], **ERRORS},
    summary="Cancel a scheduled promotion that has not run",
    tags=["production"],
)
def delete_schedule(request: HttpRequest, slug: str, schedule_id: str) -> Any:
    return services.promotion.cancel_schedule(slug, schedule_id=schedule_id, actor=_actor(request))


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
        if request.method == "HEAD" and request.path.startswith("/api/v1/"):
            # HEAD answers GET's headers without its body (RFC 9110 §9.3.2).
            if not response.streaming:
                response["Content-Length"] = str(len(response.content))
                response.content = b""
            return response
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
