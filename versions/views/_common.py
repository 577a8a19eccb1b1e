"""Shared pieces of the panel views: permissions, htmx helpers."""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.template.loader import render_to_string

VIEW_PERM = "versions.view_changeset"
CHANGE_PERM = "versions.change_changeset"
RESTORE_PERM = "versions.restore_changeset"

NO_VIEW = "You are signed in but may not view change sets. Ask an admin for the view permission."
NO_CHANGE = "You may not name change sets or mark releases. Ask an admin for that permission."
NO_RESTORE = "You may not restore. Ask an admin for the restore permission; nothing was written."


def forbidden(request: HttpRequest, message: str) -> HttpResponse:
    """A 403 in words (a page, or for htmx a short fragment the page shows as an error)."""
    html = render_to_string("versions/forbidden.html", {"message": message}, request=request)
    response = HttpResponse(html, status=403)
    response["X-Versions-Error"] = message.encode("ascii", "replace").decode()
    return response


def panel_view(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """Login required, then the view permission (403 in words without it)."""

    @login_required
    @wraps(view)
    def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if not request.user.has_perm(VIEW_PERM):
            return forbidden(request, NO_VIEW)
        response = view(request, *args, **kwargs)
        response.headers.setdefault("Vary", "HX-Request")
        return response

    return wrapper


def perms(request: HttpRequest) -> dict[str, bool]:
    """What the signed-in person may do, for templates to hide the rest."""
    user = request.user
    return {"can_change": user.has_perm(CHANGE_PERM), "can_restore": user.has_perm(RESTORE_PERM)}


def is_fragment(request: HttpRequest) -> bool:
    """An htmx request that wants a fragment (not a history restore, which needs the page)."""
    htmx = getattr(request, "htmx", None)
    return bool(htmx) and not htmx.history_restore_request  # type: ignore[union-attr]


CSRF_FAILED = (
    "This page's form has expired or was not sent from the panel, so nothing was written. "
    "Reload the page and try again."
)


def csrf_failure(request: HttpRequest, reason: str = "") -> HttpResponse:
    """CSRF refusals in words, like every other 403 of the panel (settings.CSRF_FAILURE_VIEW)."""
    return forbidden(request, CSRF_FAILED)


def int_param(value: str | None, default: int = 0) -> int:
    """A whole number from a query parameter; ``default`` when it is missing or not a number."""
    try:
        return int(value or default)
    except ValueError:
        return default
