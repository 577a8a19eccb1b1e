"""Shared pieces of the panel views: the person's Actor, errors in words, htmx helpers.

The panel checks nothing itself: every view builds the signed-in person's
:class:`~versions.services.Actor` (:func:`actor_of`) and calls the services, which raise
``Forbidden`` or ``NotFound`` in words; :func:`panel_view` turns those into the panel's 403 and
404 pages.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.contrib.auth.views import redirect_to_login
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.template.loader import render_to_string
from django.utils.http import url_has_allowed_host_and_scheme

from versions import services
from versions.errors import Forbidden, NotFound
from versions.models import App
from versions.request_meta import request_meta
from versions.terms import (
    VIEW,
)


def actor_of(request: HttpRequest) -> services.Actor:
    """The signed-in person as the services' Actor, built once per request."""
    actor = getattr(request, "_versions_actor", None)
    if actor is None:
        actor = services.actor_for_user(request.user)
        actor.meta = request_meta(request)
        request._versions_actor = actor  # type: ignore[attr-defined]
    return actor


def app_of(request: HttpRequest, slug: str) -> App:
    """The app ``slug`` as this person may see it (NotFound / Forbidden from the services)."""
    return services.app_for(slug, actor=actor_of(request))


def forbidden(
    request: HttpRequest, message: str, *, title: str = "Not allowed", back: str | None = None
) -> HttpResponse:
    """A 403 in words: a page, or for htmx the ``X-Versions-Error`` header the panel shows in
    place (the page stays as it was). ``back``: where the page's link leads (default: the apps,
    when the person may view them)."""
    if back is None and actor_of(request).may(VIEW):
        back = "/"
    context = {"message": message, "title": title, "back": back}
    html = render_to_string("versions/forbidden.html", context, request=request)
    response = HttpResponse(html, status=403)
    response["X-Versions-Error"] = message.encode("ascii", "replace").decode()
    return response


def not_found(request: HttpRequest, message: str, *, app: App | None = None) -> HttpResponse:
    """A 404 in words: templates/404.html, even with DEBUG on (Django's debug page would show
    its URL patterns instead of what was not found); for htmx the message in the
    ``X-Versions-Error`` header as well. ``app``: the app the missing page belonged to, when
    this person may see it — the page then leads back to it."""
    context = {"exception": message, "request_path": request.path, "app": app}
    html = render_to_string("404.html", context, request=request)
    response = HttpResponse(html, status=404)
    if message:
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
        try:
            services.require_panel(actor_of(request))
            response = view(request, *args, **kwargs)
        except Forbidden as exc:
            return forbidden(request, exc.message)
        except NotFound as exc:
            return not_found(request, exc.message, app=_visible_app(request, kwargs))
        except Http404 as exc:
            return not_found(request, str(exc), app=_visible_app(request, kwargs))
        response.headers.setdefault("Vary", "HX-Request")
        return response

    return signed_in


def _visible_app(request: HttpRequest, kwargs: dict[str, Any]) -> App | None:
    """The app a missing page's address names, if this person may see it (else None: a 404
    never says whether an app they may not see exists)."""
    slug = kwargs.get("slug")
    if slug is None:  # a page outside any app (workspaces)
        return None
    try:
        return app_of(request, slug)
    except (NotFound, Forbidden):
        return None


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


def perms(request: HttpRequest, app: App | None = None) -> dict[str, bool]:
    """What the signed-in person may do (on ``app``; without one, on every app — workspaces
    belong to no app), as the services decide it, for templates to hide the rest; the services
    refuse it anyway."""
    return actor_of(request).abilities(app)


def render_tab(
    request: HttpRequest,
    ctx: dict[str, Any],
    *,
    fragment: str,
    page: str,
    status: int = 200,
    close_dialog: bool = False,
) -> HttpResponse:
    """A tab's body for htmx (``fragment``; ``close_dialog``: and the dialog slot emptied out
    of band, after an action confirmed in it), or its whole ``page``."""
    if not is_fragment(request):
        return render(request, page, ctx, status=status)
    html = str(render_to_string(fragment, ctx, request=request))
    if close_dialog:
        html += '<div id="dialog-slot" hx-swap-oob="true"></div>'
    return HttpResponse(html, status=status)


def is_fragment(request: HttpRequest) -> bool:
    """An htmx request that wants a fragment (not a history restore, which needs the page)."""
    htmx = getattr(request, "htmx", None)
    return bool(htmx) and not htmx.history_restore_request  # type: ignore[union-attr]


def list_refresh(request: HttpRequest, path: str | None = None) -> dict[str, Any]:
    """What a list of rows needs to refresh itself after an action (panel.js merges the answer
    in): its own address (``path``, default this request's, with its filters and page) and the
    rows open on the page (``?open=``), whose heads come back open."""
    query = request.GET.copy()
    open_ids = set(query.getlist("open"))
    query.pop("open", None)
    encoded = query.urlencode()
    base = path or request.path
    return {"refresh_url": f"{base}?{encoded}" if encoded else base, "open_ids": open_ids}


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
