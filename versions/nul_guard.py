"""No NUL character from an address reaches the database (PostgreSQL refuses it in text, and
the error would be a 500): a NUL in the path names nothing (404, in words), one in the query
string is bad input (400, in words). The API answers its problem details, the panel a page.
"""

from __future__ import annotations

from collections.abc import Callable

from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render

from versions.api.errors import PROBLEM_CONTENT_TYPE, problem_body

API_PREFIX = "/api/v1/"
NUL_IN_PATH = "There is nothing at an address with a NUL character in it."
NUL_IN_QUERY = (
    "The address's query has a NUL character in it, which no id, name or search can hold. "
    "Nothing was done."
)


def _has_nul(request: HttpRequest) -> tuple[bool, bool]:
    """Whether the path, and whether the query string's names or values, hold a NUL."""
    in_query = any(
        "\x00" in key or any("\x00" in value for value in values)
        for key, values in request.GET.lists()
    )
    return "\x00" in request.path, in_query


def nul_guard(get_response: Callable[[HttpRequest], HttpResponse]) -> Callable:
    """Middleware: refuse an address with a NUL character before any view reads it."""

    def middleware(request: HttpRequest) -> HttpResponse:
        in_path, in_query = _has_nul(request)
        if not (in_path or in_query):
            return get_response(request)
        status, message = (404, NUL_IN_PATH) if in_path else (400, NUL_IN_QUERY)
        if request.path.startswith(API_PREFIX):
            code = "not_found" if status == 404 else "invalid_input"
            response = JsonResponse(problem_body(status, code, message), status=status)
            response["Content-Type"] = PROBLEM_CONTENT_TYPE
            return response
        if status == 404:
            raise Http404(message)
        return render(request, "400.html", {"message": message}, status=400)

    return middleware
