"""Pages of the panel: the app list, the two tabs, and expanding a set or a point."""

from __future__ import annotations

import json
from typing import Any, cast

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from versions import selectors, services
from versions.models import App, ChangeSet, RestorePoint
from versions.terms import REVIEW
from versions.views._common import actor_of, app_of, is_fragment, list_refresh, panel_view, perms
from versions.views.diffs import build_diff, prepare, with_locks, with_notes
from versions.views.reviews import reviews_context
from versions.workspace import log_sets


@require_GET
@panel_view
def home(request: HttpRequest) -> HttpResponse:
    """The apps (and workspaces) a person can open, and the change sets of those apps that
    await the person's review."""
    actor = actor_of(request)
    page = selectors.app_page(
        services.visible_app_ids(actor), request.GET.get("q", ""), request.GET.get("page")
    )
    awaited = awaiting(request, list(page.object_list))
    for a in page.object_list:
        a.awaiting = len(awaited.get(a.pk, []))  # type: ignore[attr-defined]
    return render(
        request,
        "versions/home.html",
        {
            "page": page,
            "q": request.GET.get("q", "").strip()[:100],
            "awaiting": [c for a in page.object_list for c in awaited.get(a.pk, [])],
            "workspace_cards": log_sets.workspace_cards(),
        },
    )


def awaiting(request: HttpRequest, apps: list[App]) -> dict[int, list[ChangeSet]]:
    """The change sets of ``apps`` that await the signed-in person's review (on the apps
    where they may review), by app (docs/architecture.md#reviews)."""
    actor = actor_of(request)
    mine = [a for a in apps if actor.may(REVIEW, a)]
    return selectors.awaiting_review(actor.name, mine) if mine else {}


def _panel_context(request: HttpRequest, app: App, tab: str) -> dict[str, Any]:
    return {"app": app, "tab": tab, **perms(request, app)}


@require_GET
@panel_view
def change_sets(request: HttpRequest, slug: str) -> HttpResponse:
    """The Change sets tab: newest first, paginated; or the sets the search box and filters
    find (docs/architecture.md#reviewing)."""
    app = app_of(request, slug)
    ctx = _panel_context(request, app, "sets")
    ctx.update(list_refresh(request))
    query = selectors.SetQuery.from_query(request.GET)
    ctx["query_form"] = query
    if query.active:
        ctx["page"] = selectors.search_change_sets(app, query, request.GET.get("page"))
        ctx["query"] = query.as_query()
    else:
        ctx["page"] = selectors.change_set_page(app, request.GET.get("page"))
    ctx["page"].object_list = selectors.nest_restore_sets(list(ctx["page"].object_list))
    selectors.attach_review_states(app, list(ctx["page"].object_list))
    ctx["awaiting"] = awaiting(request, [app]).get(app.pk, [])
    if is_fragment(request):
        return render(request, "versions/partials/_set_list.html", ctx)
    return render(request, "versions/panel.html", ctx)


@require_GET
@panel_view
def restore_points(request: HttpRequest, slug: str) -> HttpResponse:
    """The Restore points tab: newest first, paginated, filterable."""
    app = app_of(request, slug)
    filters = selectors.PointFilters.from_query(request.GET)
    ctx = _panel_context(request, app, "points")
    ctx.update(list_refresh(request))
    ctx.update(
        page=selectors.restore_point_page(app, filters, request.GET.get("page")),
        filters=filters,
        options=selectors.point_filter_options(app),
    )
    if is_fragment(request):
        return render(request, "versions/partials/_point_list.html", ctx)
    return render(request, "versions/panel.html", ctx)


def set_view(request: HttpRequest) -> str:
    """Which diff an expanded set shows: ``set`` (what it did, the default) or ``now``."""
    view = request.GET.get("view", selectors.SET_VIEW)
    return view if view in selectors.VIEWS else selectors.SET_VIEW


def expanded_set_context(
    request: HttpRequest, app: App, set_id: str, *, view: str | None = None, **extra: Any
) -> dict[str, Any]:
    """Everything the expanded row of a set shows, in the view asked for."""
    view = view or set_view(request)
    xs = selectors.expanded_set(app, set_id, view)
    prepare(xs.changes)
    diffs = [build_diff(ch) for ch in xs.changes]
    with_notes(request, app, diffs)
    with_locks(app, diffs)
    expected = [(ch.key, ch.artifact.sha256) for ch in xs.changes]
    cs = xs.change_set
    selectors.attach_review_states(app, [cs])
    firsts = [ch.point for ch in xs.changes if ch.point is not None]
    first = min(firsts, key=lambda p: (p.created_on, p.id)) if firsts else None
    if all(d.result is not None or d.status in ("pruned", "not_stored", "absent") for d in diffs):
        # The row's counts are the view's: what the diffs below add up to.
        cs.added = sum(d.lines_added for d in diffs)  # type: ignore[attr-defined]
        cs.removed = sum(d.lines_removed for d in diffs)  # type: ignore[attr-defined]
        cs.counts_view = view  # type: ignore[attr-defined]
    return {
        "view": view,
        "before_ref": first.id if first is not None else None,
        "app": app,
        "cs": xs.change_set,
        "xs": xs,
        "diffs": diffs,
        "expected": expected,
        "history": xs.release_history,
        "expanded": True,
        **perms(request, app),
        **extra,
    }


@require_GET
@panel_view
def change_set(request: HttpRequest, slug: str, set_id: str) -> HttpResponse:
    """One set: expanded (or collapsed, for htmx ``?collapsed=1``), or its own page."""
    app = app_of(request, slug)
    if is_fragment(request) and request.GET.get("collapsed"):
        row = selectors.change_set_row(app, set_id)
        selectors.attach_review_states(app, [row])
        ctx = {"app": app, "cs": row, **perms(request, app)}
        return render(request, "versions/partials/_set_row.html", ctx)
    ctx = expanded_set_context(request, app, set_id)
    if is_fragment(request):
        return render(request, "versions/partials/_set_expanded.html", ctx)
    ctx["tab"] = "sets"
    ctx.update(reviews_context(request, app, cast(ChangeSet, ctx["cs"])))
    return render(request, "versions/set_page.html", ctx)


def point_context(request: HttpRequest, app: App, point: RestorePoint, **extra: Any) -> dict:
    """Everything the expanded row of a point shows."""
    diff = build_diff(selectors.point_change(point))
    with_notes(request, app, [diff])
    with_locks(app, [diff])
    return {
        "app": app,
        "point": point,
        "diff": diff,
        "expanded": True,
        **perms(request, app),
        **extra,
    }


@require_GET
@panel_view
def restore_point(request: HttpRequest, slug: str, point_id: str) -> HttpResponse:
    """One point: expanded (or collapsed, for htmx ``?collapsed=1``), or its own page."""
    app, point = selectors.app_point(slug, point_id)
    services.app_for(app, actor=actor_of(request))
    if is_fragment(request) and request.GET.get("collapsed"):
        ctx = {"app": app, "point": point, **perms(request, app)}
        return render(request, "versions/partials/_point_row.html", ctx)
    ctx = point_context(request, app, point)
    if is_fragment(request):
        return render(request, "versions/partials/_point_expanded.html", ctx)
    ctx["tab"] = "points"
    return render(request, "versions/point_page.html", ctx)


def receipt_page_context(request: HttpRequest, app: App, rs: ChangeSet) -> dict[str, Any]:
    """A restore set's receipt page: the receipt, its JSON, and the restore sets that undid it."""
    stored = rs.receipt or {}
    undone_by = selectors.undone_by(app, rs)
    return {
        "app": app,
        "rs": rs,
        "receipt": services.read_receipt(stored),
        "receipt_text": json.dumps(stored, indent=2, ensure_ascii=False),
        "undone_by": undone_by,
        **perms(request, app),
    }
