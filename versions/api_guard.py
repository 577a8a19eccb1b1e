"""The agent API answers JSON even when the database goes away mid-request (docs/api.md#errors).

A dropped connection (``OperationalError``, ``InterfaceError`` or any other ``django.db.Error``
that escapes a view) under ``/api/v1/`` answers 503 as problem details like every other error of
the API (``application/problem+json``, ``error: "unavailable"``, ``message``) instead of
Django's HTML 500, so an agent reads the failure and can retry.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from django.db import Error as DatabaseError
from django.http import HttpRequest, HttpResponse, JsonResponse

from versions.api.errors import PROBLEM_CONTENT_TYPE, problem_body

logger = logging.getLogger(__name__)

API_PREFIX = "/api/v1/"
UNAVAILABLE = (
    "The database could not be reached while answering this request, so it may not have been "
    "carried out. Nothing is half-written: try again in a moment, and read the state before "
    "writing again."
)
RETRY_AFTER_SECONDS = "5"


class DatabaseUnavailableAsJson:
    """Middleware: a database error escaping an API view answers JSON 503, never HTML 500."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if not isinstance(exception, DatabaseError) or not request.path.startswith(API_PREFIX):
            return None
        logger.error(
            "database error while answering %s %s", request.method, request.path, exc_info=True
        )
        response = JsonResponse(
            problem_body(503, "unavailable", UNAVAILABLE),
            status=503,
            content_type=PROBLEM_CONTENT_TYPE,
            json_dumps_params={"ensure_ascii": False},
        )
        response["Retry-After"] = RETRY_AFTER_SECONDS
        return response
