"""The Members tab (docs/architecture.md#access): an app's owners add users or groups with a role,
change roles, remove members. Thin adapters over :mod:`versions.services` (``add_member``,
``change_role``, ``remove_member``), which check that the person is an owner and keep the audit
log."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.text import capfirst
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from versions import messages, selectors, services
from versions.errors import InvalidInput, NotFound
from versions.models import App, AppMembership
from versions.terms import (
    MANAGE,
)
from versions.views._common import actor_of, is_fragment, panel_view, perms, render_tab

ADDED = "{whom} is now {role} of this app."
CHANGED = "{whom} is now {role}."
REMOVED = "{whom} was removed from this app."


def _sentence(template: str, membership: AppMembership) -> str:
    """``template`` said of ``membership``: a sentence starts with a capital (“User “rita””),
    and a role reads with its article (“an owner”, “a viewer”)."""
    role = membership.role
    article = "an" if role[:1] in "aeiou" else "a"
    return capfirst(template.format(whom=membership.whom, role=f"{article} {role}"))


def _manageable(request: HttpRequest, slug: str) -> App:
    return services.app_for(slug, actor=actor_of(request), action=MANAGE)


def _context(request: HttpRequest, app: App, **extra: Any) -> dict[str, Any]:
    users, groups = selectors.member_candidates()
    return {
        "app": app,
        "tab": "members",
        "members": selectors.members(app),
        "history": selectors.member_history(app),
        "roles": AppMembership.ROLE_CHOICES,
        "user_names": users,
        "group_names": groups,
        **perms(request, app),
        **extra,
    }


def _body(request: HttpRequest, app: App, *, status: int = 200, **extra: Any) -> HttpResponse:
    ctx = _context(request, app, **extra)
    return render_tab(
        request,
        ctx,
        fragment="versions/partials/_members_body.html",
        page="versions/members.html",
        status=status,
        close_dialog=True,
    )


@require_GET
@panel_view
def members(request: HttpRequest, slug: str) -> HttpResponse:
    """The Members tab: who has which role, and the recent changes."""
    app = _manageable(request, slug)
    return render_tab(
        request,
        _context(request, app),
        fragment="versions/partials/_members_body.html",
        page="versions/members.html",
    )


@require_POST
@panel_view
def add_member(request: HttpRequest, slug: str) -> HttpResponse:
    """Add a user or a group with a role."""
    app = _manageable(request, slug)
    kind = request.POST.get("kind", "user")
    name = request.POST.get("name", "").strip()
    try:
        membership = services.add_member(
            app,
            role=request.POST.get("role", ""),
            username=name if kind == "user" else None,
            group=name if kind == "group" else None,
            actor=actor_of(request),
        )
    except (InvalidInput, NotFound) as exc:
        return _body(request, app, status=422, error=exc.message, form=request.POST)
    if not is_fragment(request):
        return redirect(reverse("versions:members", args=[app.slug]))
    status = _sentence(ADDED, membership)
    return _body(request, app, status_message=status)


@require_POST
@panel_view
def change_role(request: HttpRequest, slug: str, membership_id: int) -> HttpResponse:
    """Change one member's role."""
    app = _manageable(request, slug)
    try:
        membership = services.change_role(
            app, membership_id, request.POST.get("role", ""), actor=actor_of(request)
        )
    except InvalidInput as exc:
        return _body(request, app, status=422, error=exc.message)
    if not is_fragment(request):
        return redirect(reverse("versions:members", args=[app.slug]))
    status = _sentence(CHANGED, membership)
    return _body(request, app, status_message=status)


@require_http_methods(["GET", "POST"])
@panel_view
def remove_member(request: HttpRequest, slug: str, membership_id: int) -> HttpResponse:
    """GET: the confirmation dialog. POST: remove the member."""
    app = _manageable(request, slug)
    membership = next((m for m in selectors.members(app) if m.pk == membership_id), None)
    if membership is None:
        raise NotFound(messages.MEMBERSHIP_NOT_FOUND.format(slug=app.slug))
    if request.method == "GET":
        ctx = {"app": app, "membership": membership, "whom": membership.whom}
        if is_fragment(request):
            return render(request, "versions/partials/_member_remove_dialog.html", ctx)
        return render(request, "versions/member_remove_page.html", ctx)
    try:
        services.remove_member(app, membership_id, actor=actor_of(request))
    except InvalidInput as exc:
        return _body(request, app, status=422, error=exc.message)
    if not is_fragment(request):
        return redirect(reverse("versions:members", args=[app.slug]))
    return _body(request, app, status_message=_sentence(REMOVED, membership))
