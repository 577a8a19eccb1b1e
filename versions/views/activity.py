"""The Activity tab: an app's audit trail for its owners, and the whole instance's for
superusers; newest first, filtered by action and by person. The services decide who may read
it (anyone else finds no such page); the selectors read it."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils.http import urlencode
from django.views.decorators.http import require_GET

from versions import selectors, services, terms
from versions.models import App
from versions.views._common import actor_of, panel_view, perms, render_tab


def _context(request: HttpRequest, app: App | None) -> dict[str, Any]:
    action = request.GET.get("action", "")[:40]
    person = request.GET.get("person", "")[:200]
    actions, people = selectors.activity_filters(app)
    page = selectors.activity_page(
        app, action=action, person=person, page=request.GET.get("page") or 1
    )
    filters = {key: value for key, value in (("action", action), ("person", person)) if value}
    return {
        "app": app,
        "tab": "activity",
        "page": page,
        "events": [(event, terms.ACTION_LABELS.get(event.action, event.action)) for event in page],
        "action": action,
        "person": person,
        "actions": [(name, terms.ACTION_LABELS.get(name, name)) for name in actions],
        "people": people,
        "query": urlencode(filters),
        **(perms(request, app) if app is not None else {}),
    }


@require_GET
@panel_view
def app_activity(request: HttpRequest, slug: str) -> HttpResponse:
    """An app's Activity, for its owners."""
    app = services.activity_scope(actor_of(request), slug)
    return render_tab(
        request,
        _context(request, app),
        fragment="versions/partials/_activity_body.html",
        page="versions/activity.html",
    )


@require_GET
@panel_view
def instance_activity(request: HttpRequest) -> HttpResponse:
    """The whole instance's Activity, for superusers."""
    services.activity_scope(actor_of(request))
    return render(request, "versions/instance_activity.html", _context(request, None))
