"""Shared pieces of the panel views: permissions, htmx helpers."""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.contrib.auth.views import redirect_to_login
from django.http import HttpRequest, HttpResponse
from django.template.loader import render_to_string
from django.utils.http import url_has_allowed_host_and_scheme

VIEW_PERM = "versions.view_changeset"
CHANGE_PERM = "versions.change_changeset"
RESTORE_PERM = "versions.restore_changeset"

NO_VIEW = "You are signed in but may not view change sets. Ask an admin for the view permission."
NO_CHANGE = "You may not name change sets or mark releases. Ask an admin for that permission."
NO_RESTORE = "You may not restore. Ask an admin for the restore permission; nothing was written."


def forbidden(
    request: HttpRequest, message: str, *, title: str = "Not allowed", back: str | None = None
) -> HttpResponse:
    """A 403 in words: a page, or for htmx the ``X-Versions-Error`` header the panel shows in
    place (the page stays as it was). ``back``: where the page's link leads (default: the apps,
    when the person may view them)."""
    if back is None and request.user.has_perm(VIEW_PERM):
        back = "/"
    context = {"message": message, "title": title, "back": back}
    html = render_to_string("versions/forbidden.html", context, request=request)
    response = HttpResponse(html, status=403)
    response["X-Versions-Error"] = message.encode("ascii", "replace").decode()
    return response


def panel_view(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """Login required, then the view permission (403 in words without it)."""

    @wraps(view)
    def signed_in(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if not request.user.is_authenticated and getattr(request, "htmx", False):
            return _sign_in_again(request)
        return login_required(permitted)(request, *args, **kwargs)

    def permitted(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if not request.user.has_perm(VIEW_PERM):
            return forbidden(request, NO_VIEW)
        response = view(request, *args, **kwargs)
        response.headers.setdefault("Vary", "HX-Request")
        return response

    return signed_in


def _sign_in_again(request: HttpRequest) -> HttpResponse:
    """An in-page (htmx) request whose session expired: the whole page goes to the sign-in
    page and comes back to where the person was after it, instead of the sign-in page being
    swapped into the panel. Nothing was done."""
    current = request.headers.get("HX-Current-URL", "")
    back = "/"
    if url_has_allowed_host_and_scheme(
        current, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    ):
        parts = urlsplit(current)
        back = parts.path + (f"?{parts.query}" if parts.query else "")
    response = HttpResponse(status=204)
    response["HX-Redirect"] = redirect_to_login(back, settings.LOGIN_URL)["Location"]
    return response


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
    """CSRF refusals in words, like every other 403 of the panel (settings.CSRF_FAILURE_VIEW):
    a form that expired, with the way back to the page it was sent from."""
    referer = request.headers.get("Referer", "")
    if not url_has_allowed_host_and_scheme(
        referer, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    ):
        referer = ""
    return forbidden(request, CSRF_FAILED, title="This form expired", back=referer or None)


def int_param(value: str | None, default: int = 0) -> int:
    """A whole number from a query parameter; ``default`` when it is missing or not a number."""
    try:
        return int(value or default)
    except ValueError:
        return default
