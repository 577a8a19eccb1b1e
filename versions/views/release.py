"""The Since release tab (docs/architecture.md#release-review): what changed since the release, and
Restore to release.

Thin adapters over :func:`versions.selectors.since_release` and the restore flow. The
cumulative diff of an artifact runs from its state at the release — the previous source of its
first restore point after the release — to its current source, which is exactly that point's
then→now diff, so the panel's diff renderer (and its hunk pages and gap expanders, keyed by
that point) shows it as is.
"""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.template.loader import render_to_string
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods

from versions import selectors, services
from versions.errors import Conflict
from versions.models import App
from versions.selectors import ArtifactChange
from versions.terms import (
    RELEASE,
)
from versions.views._common import app_of, is_fragment, list_refresh, panel_view, perms
from versions.views.diffs import DiffView, build_diff, with_locks
from versions.views.restoring import Flow, notice_after, restore_flow

TITLE = "Restore to release"
ADDED_SINCE = (
    "Created since the release: it did not exist then. Restore to release makes it a tombstone."
)
REMOVED_SINCE = (
    "Deleted since the release: it is now a tombstone. Restore to release brings it back."
)


def _diffs(review: selectors.SinceRelease) -> list[DiffView]:
    """The panel's diff views of every artifact that differs from its release state."""
    changes: list[ArtifactChange] = []
    for i, state in enumerate(review.changes):
        pruned = state.status == selectors.PRUNED
        changes.append(
            ArtifactChange(
                artifact=state.artifact,
                point=None if pruned else state.point,
                pruned=pruned,
                inline=pruned or i < selectors.INLINE_DIFFS,
            )
        )
    # Then (the release state) and now sources of the inline diffs, from one blob query.
    selectors.load_sources(changes)
    views = []
    for state, change in zip(review.changes, changes, strict=True):
        view = build_diff(change)
        if state.reason:
            view.message = state.reason
        elif view.status == "added":
            view.message = ADDED_SINCE
        elif view.status == "removed":
            view.message = REMOVED_SINCE
        views.append(view)
    return views


def _context(request: HttpRequest, app: App, **extra: Any) -> dict[str, Any]:
    """Everything the Since release tab shows (review is None when no release is marked)."""
    ctx: dict[str, Any] = {"app": app, "tab": "release", **perms(request, app), **extra}
    ctx.update(list_refresh(request, reverse("versions:since_release", args=[app.slug])))
    try:
        review = selectors.since_release(app, with_sources=False, page=request.GET.get("page"))
    except Conflict as exc:
        ctx.update(review=None, no_release=exc.message)
        return ctx
    diffs = _diffs(review)
    with_locks(app, diffs)
    ctx.update(
        page=review.sets_page,
        review=review,
        diffs=diffs,
        expected=[(s.key, s.artifact.sha256) for s in review.changes],
    )
    return ctx


@require_GET
@panel_view
def since_release(request: HttpRequest, slug: str) -> HttpResponse:
    """The Since release tab: the sets after the release and the cumulative diffs."""
    app = app_of(request, slug)
    ctx = _context(request, app)
    if is_fragment(request):
        return render(request, "versions/partials/_release_body.html", ctx)
    return render(request, "versions/since_release.html", ctx)


@require_http_methods(["GET", "POST"])
@panel_view
def restore_to_release(request: HttpRequest, slug: str) -> HttpResponse:
    """GET: the confirmation dialog (a dry run). POST: Confirm restore."""
    app = app_of(request, slug)
    flow = Flow(
        kind=RELEASE,
        app=app,
        ident=None,
        title=TITLE,
        ret="release",
        action=reverse("versions:restore_to_release", args=[app.slug]),
        cancel_url=reverse("versions:since_release", args=[app.slug]),
        target="#tab-body",
        dialog_template="versions/partials/_release_dialog.html",
        page_template="versions/since_release.html",
        after=_after_release,
        extra={"release_id": app.release_set_id, "confirm": True},
    )
    return restore_flow(request, flow)


def _after_release(request: HttpRequest, flow: Flow, data: services.RestoreReceipt) -> HttpResponse:
    """The Since release tab again, with the receipt on top (or the receipt page)."""
    app = flow.app
    kind = data.outcome
    status = 409 if kind == "preflight_failed" else 200
    if not is_fragment(request) and kind in ("restore", "revert") and data.set_id:
        return redirect(reverse("versions:receipt", args=[app.slug, data.set_id]))
    ctx = _context(request, app, receipt=data, production_notice=notice_after(app, data))
    if not is_fragment(request):
        return render(request, "versions/since_release.html", ctx, status=status)
    html: str = render_to_string("versions/partials/_release_body.html", ctx, request=request)
    html += '<div id="dialog-slot" hx-swap-oob="true"></div>'  # close the dialog
    return HttpResponse(html, status=status)
