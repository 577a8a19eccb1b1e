"""The agent API's answers other than success: the one error → status table (docs/api.md#errors) and
the handlers that turn every failure into RFC 9457 problem details (``application/problem+json``:
``type``, ``title``, ``status``, ``detail``) that keep ``{"error": "<code>", "message":
"<words>"}`` and the keys of docs/api.md#receipts and docs/api.md#errors as extension members
(docs/api.md#errors)."""

from __future__ import annotations

from http import HTTPStatus
from typing import Any

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.http import Http404, HttpRequest, HttpResponse
from ninja import NinjaAPI
from ninja.errors import AuthenticationError, HttpError, ValidationError

from versions import conf
from versions.errors import (
    Conflict,
    Forbidden,
    InvalidInput,
    InvalidSpec,
    Locked,
    NotFound,
    PreconditionFailed,
    PreconditionRequired,
    PreflightFailed,
    StaleWrite,
    TooLarge,
    Unauthenticated,
    UnknownField,
    VersionsError,
)

UNAUTHORIZED = "Send a valid agent token: “Authorization: Bearer <token>”."
BODY_TOO_LARGE = (
    "The request body is larger than this server accepts ({limit:,} bytes). Nothing was written."
)

# The one error → status table of the API (errors carry no HTTP status). The first class an
# error is an instance of gives its status, so subclasses come before their bases.
ERROR_STATUS: tuple[tuple[type[VersionsError], int], ...] = (
    (UnknownField, 422),
    (Locked, 423),
    (PreflightFailed, 409),
    (PreconditionFailed, 412),
    (PreconditionRequired, 428),
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


PROBLEM_CONTENT_TYPE = "application/problem+json"
# Problem types are told apart by their ``error`` code; "about:blank" says the type adds nothing
# beyond the status, whose phrase is the title (RFC 9457 §4.2.1).
PROBLEM_TYPE = "about:blank"


def problem_body(status: int, code: str, message: str, **extra: Any) -> dict[str, Any]:
    """An RFC 9457 problem: its members, then ``error``, ``message`` and the extra keys."""
    try:
        title = HTTPStatus(status).phrase
    except ValueError:
        title = "Error"
    return {
        "type": PROBLEM_TYPE,
        "title": title,
        "status": status,
        "detail": message,
        "error": code,
        "message": message,
        **extra,
    }


def problem(api: NinjaAPI, request: HttpRequest, body: dict[str, Any], status: int) -> HttpResponse:
    """The response of a problem ``body`` (see :func:`problem_body`)."""
    response = api.create_response(request, body, status=status)
    response["Content-Type"] = PROBLEM_CONTENT_TYPE
    return response


def status_of(exc: VersionsError) -> int:
    """The HTTP status of a service error, from :data:`ERROR_STATUS`."""
    return next(status for cls, status in ERROR_STATUS if isinstance(exc, cls))


class ApiError(Exception):
    """An answer of the API's own (not a service error), with its status, code and extra keys."""

    def __init__(self, status: int, code: str, message: str, **extra: Any) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.extra = extra


def _where(loc: Any) -> list[str]:
    """Where a validation error is: ``["body", "source"]``, not ninja's ``["body", "body",
    "source"]`` (the second part is the view's argument, which a client never sees)."""
    parts = [str(part) for part in loc]
    if parts[:2] == ["body", "body"]:
        parts = ["body", *parts[2:]]
    return parts


def _words(msg: str) -> str:
    """A validator's message as we wrote it, without pydantic's "Value error, " prefix."""
    return msg.removeprefix("Value error, ")


def install(api: NinjaAPI) -> None:
    """Register every handler on ``api``."""

    def error(
        request: HttpRequest, status: int, code: str, message: str, **extra: Any
    ) -> HttpResponse:
        return problem(api, request, problem_body(status, code, message, **extra), status)

    def on_api_error(request: HttpRequest, exc: ApiError) -> HttpResponse:
        return error(request, exc.status, exc.code, exc.message, **exc.extra)

    def on_versions_error(request: HttpRequest, exc: VersionsError) -> HttpResponse:
        status = status_of(exc)
        if isinstance(exc, PreflightFailed):
            answer = exc.answer()
            body = problem_body(status, exc.code, exc.message)
            return problem(api, request, {**body, **answer}, status)
        if isinstance(exc, StaleWrite):
            return error(request, status, exc.code, exc.message, current_sha256=exc.current_sha256)
        extra: dict[str, Any] = (
            {"field": exc.field} if isinstance(exc, InvalidInput) and exc.field else {}
        )
        if isinstance(exc, UnknownField):
            extra["suggestion"] = exc.suggestion
        response = error(request, status, exc.code, exc.message, **extra)
        if isinstance(exc, Unauthenticated):
            response["WWW-Authenticate"] = 'Bearer realm="versions"'
        return response

    def on_validation_error(request: HttpRequest, exc: ValidationError) -> HttpResponse:
        details = [
            {"loc": _where(err.get("loc", ())), "msg": _words(str(err.get("msg", "")))}
            for err in exc.errors
        ]
        first = details[0] if details else {"loc": [], "msg": "invalid"}
        loc = first["loc"]
        where = ".".join(loc) or "request"
        return error(request, 422, "validation_error", f"{where}: {first['msg']}", details=details)

    def on_auth_error(request: HttpRequest, exc: AuthenticationError) -> HttpResponse:
        response = error(request, 401, "unauthorized", UNAUTHORIZED)
        response["WWW-Authenticate"] = 'Bearer realm="versions"'
        return response

    def on_http_error(request: HttpRequest, exc: HttpError) -> HttpResponse:
        if exc.status_code == 400:
            return error(request, 400, "bad_request", f"{exc.message}: send a JSON object.")
        return error(request, exc.status_code, "error", exc.message)

    def on_too_big(request: HttpRequest, exc: RequestDataTooBig) -> HttpResponse:
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE or conf.max_write_bytes()
        return error(request, 413, "too_large", BODY_TOO_LARGE.format(limit=limit))

    def on_404(request: HttpRequest, exc: Http404) -> HttpResponse:
        return error(request, 404, "not_found", "Not found.")

    api.add_exception_handler(ApiError, on_api_error)  # type: ignore[arg-type]
    api.add_exception_handler(VersionsError, on_versions_error)  # type: ignore[arg-type]
    api.add_exception_handler(ValidationError, on_validation_error)  # type: ignore[arg-type]
    api.add_exception_handler(AuthenticationError, on_auth_error)  # type: ignore[arg-type]
    api.add_exception_handler(HttpError, on_http_error)  # type: ignore[arg-type]
    api.add_exception_handler(RequestDataTooBig, on_too_big)  # type: ignore[arg-type]
    api.add_exception_handler(Http404, on_404)  # type: ignore[arg-type]
