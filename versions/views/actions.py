"""Naming sets and points, marking and unmarking the release: thin adapters over services."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from versions import selectors, services
from versions.errors import InvalidInput
from versions.views._common import actor_of, app_of, is_fragment, panel_view, perms

SAVED_NAME = "Name saved."
REMOVED_NAME = "Name removed."
NO_NAME = "No name to remove."
MARKED = "Marked as release."
UNMARKED = "Release mark removed."


def _name_status(name: str, *, had_name: bool) -> str:
    """What saving a name did: saved it, removed it, or nothing (it was empty and stays so)."""
    if name:
        return SAVED_NAME
    return REMOVED_NAME if had_name else NO_NAME


def _controls(
    request: HttpRequest,
    slug: str,
    set_id: str,
    *,
    status: str = "",
    error: str = "",
    previous_release: str | None = None,
) -> HttpResponse:
    """The set's controls (target) with its head and the moved release badge (out of band)."""
    app = app_of(request, slug)
    row = selectors.change_set_row(app, set_id)
    selectors.attach_review_states(app, [row])  # the head swapped in keeps its review status
    ctx = {
        "app": app,
        "cs": row,
        "history": selectors.release_history(app),
        "status": status,
        "error": error,
        "previous_release": previous_release,
        "oob": True,
        **perms(request, app),
    }
    return render(
        request,
        "versions/partials/_set_controls_response.html",
        ctx,
        status=422 if error else 200,
    )


@require_POST
@panel_view
def name_change_set(request: HttpRequest, slug: str, set_id: str) -> HttpResponse:
    """Save (or clear) a change set's name."""
    app = app_of(request, slug)
    had_name = bool(selectors.change_set_row(app, set_id).name)  # 404 for another app's set
    name = request.POST.get("name", "")
    try:
        cs = services.name_change_set(set_id, name, actor=actor_of(request), app=app)
    except InvalidInput as exc:
        if not is_fragment(request):
            return HttpResponse(exc.message, status=400, content_type="text/plain")
        return _controls(request, slug, set_id, error=exc.message)
    if not is_fragment(request):
        return redirect(reverse("versions:change_set", args=[slug, set_id]))
    return _controls(request, slug, set_id, status=_name_status(cs.name, had_name=had_name))


@require_POST
@panel_view
def mark_release(request: HttpRequest, slug: str, set_id: str) -> HttpResponse:
    """Mark a set as the app's release (the mark moves from any other set)."""
    app = app_of(request, slug)
    previous = app.release_set_id
    try:
        services.mark_release(set_id, actor=actor_of(request), app=app)
    except InvalidInput as exc:
        if not is_fragment(request):
            return HttpResponse(exc.message, status=400, content_type="text/plain")
        return _controls(request, slug, set_id, error=exc.message)
    if not is_fragment(request):
        return redirect(reverse("versions:change_set", args=[slug, set_id]))
    return _controls(
        request,
        slug,
        set_id,
        status=MARKED,
        previous_release=previous if previous and previous != set_id else None,
    )


@require_POST
@panel_view
def unmark_release(request: HttpRequest, slug: str, set_id: str) -> HttpResponse:
    """Remove the app's release mark (shown on the set that carries it)."""
    app = app_of(request, slug)
    selectors.change_set_row(app, set_id)  # NotFound for a set of another app
    services.unmark_release(app, actor=actor_of(request))
    if not is_fragment(request):
        return redirect(reverse("versions:change_set", args=[slug, set_id]))
    return _controls(request, slug, set_id, status=UNMARKED)


@require_POST
@panel_view
def name_point(request: HttpRequest, slug: str, point_id: str) -> HttpResponse:
    """Save (or clear) a restore point's name."""
    app = app_of(request, slug)
    point = selectors.get_point(app, point_id)
    had_name = bool(point.name)
    error = status = ""
    try:
        services.name_point(
            point.id, request.POST.get("name", ""), actor=actor_of(request), app=app
        )
    except InvalidInput as exc:
        error = exc.message
    if not is_fragment(request):
        if error:
            return HttpResponse(error, status=400, content_type="text/plain")
        return redirect(reverse("versions:restore_point", args=[slug, point_id]))
    point = selectors.get_point(app, point_id)
    if not error:
        status = _name_status(point.name, had_name=had_name)
    ctx = {
        "app": app,
        "point": point,
        "status": status,
        "error": error,
        "oob": True,
        **perms(request, app),
    }
    return render(
        request,
        "versions/partials/_point_controls_response.html",
        ctx,
        status=422 if error else 200,
    )
