"""The Since release tab (SPEC §6b): what changed since the release, and Restore to release.

Thin adapters over :mod:`versions.services.release`. The cumulative diff of an artifact runs
from its state at the release — the previous source of its first restore point after the
release — to its current source, which is exactly that point's then→now diff, so the panel's
diff renderer (and its hunk pages and gap expanders, keyed by that point) shows it as is.
"""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.template.loader import render_to_string
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods

from versions import selectors
from versions.errors import InvalidInput, PreflightFailed, VersionsError
from versions.models import App
from versions.selectors import ArtifactChange
from versions.services import release
from versions.views._common import (
    NO_RESTORE,
    RESTORE_PERM,
    forbidden,
    is_fragment,
    panel_view,
    perms,
)
from versions.views.diffs import DiffView, build_diff
from versions.views.restoring import parse_expected

TITLE = "Restore to release"
ADDED_SINCE = (
    "Created since the release: it did not exist then. Restore to release makes it a tombstone."
)
REMOVED_SINCE = (
    "Deleted since the release: it is now a tombstone. Restore to release brings it back."
)


def _diffs(review: release.SinceRelease) -> list[DiffView]:
    """The panel's diff views of every artifact that differs from its release state."""
    changes: list[ArtifactChange] = []
    for i, state in enumerate(review.changes):
        pruned = state.status == release.PRUNED
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
    ctx: dict[str, Any] = {"app": app, "tab": "release", **perms(request), **extra}
    try:
        review = release.since_release(app, with_sources=False)
    except InvalidInput as exc:
        ctx.update(review=None, no_release=exc.message)
        return ctx
    ctx.update(
        review=review,
        diffs=_diffs(review),
        expected=[(s.key, s.artifact.sha256) for s in review.changes],
    )
    return ctx


@require_GET
@panel_view
def since_release(request: HttpRequest, slug: str) -> HttpResponse:
    """The Since release tab: the sets after the release and the cumulative diffs."""
    app = selectors.get_app(slug)
    ctx = _context(request, app)
    if is_fragment(request):
        return render(request, "versions/partials/_release_body.html", ctx)
    return render(request, "versions/since_release.html", ctx)


def _dry_run(app: App, by: str, expected: dict[str, str]) -> dict[str, Any]:
    try:
        return release.restore_to_release(
            app, by=by, dry_run=True, expected=expected or None
        ).as_dict()
    except PreflightFailed as exc:
        return dict(exc.receipt.as_dict())
    except VersionsError as exc:
        return {"kind": "error", "findings": [], "message": exc.message}


@require_http_methods(["GET", "POST"])
@panel_view
def restore_to_release(request: HttpRequest, slug: str) -> HttpResponse:
    """GET: the confirmation dialog (a dry run). POST: Confirm restore."""
    if not request.user.has_perm(RESTORE_PERM):
        return forbidden(request, NO_RESTORE)
    app = selectors.get_app(slug)
    by = request.user.get_username()
    params = request.POST if request.method == "POST" else request.GET
    expected = parse_expected(params.getlist("expected"))
    if request.method == "GET":
        data = _dry_run(app, by, expected)
        keys = []
        for group in ("items", "skipped", "findings"):
            for entry in data.get(group) or []:
                key = f"{entry.get('collection')}/{entry.get('name')}"
                if key not in keys:
                    keys.append(key)
        now = selectors.artifact_shas(app, keys)
        ctx = {
            "app": app,
            "title": TITLE,
            "release_id": data.get("restoredFromSet") or app.release_set_id,
            "data": data,
            "carry": [(k, expected.get(k, now.get(k, ""))) for k in keys],
            "ret": "release",
            "target": "#tab-body",
            "action": reverse("versions:restore_to_release", args=[app.slug]),
            "cancel_url": reverse("versions:since_release", args=[app.slug]),
            **perms(request),
        }
        if is_fragment(request):
            return render(request, "versions/partials/_release_dialog.html", ctx)
        return render(request, "versions/since_release.html", {**ctx, "confirm": True})
    try:
        data = release.restore_to_release(app, by=by, expected=expected or None).as_dict()
    except PreflightFailed as exc:
        data = dict(exc.receipt.as_dict())
    except VersionsError as exc:
        data = {"kind": "error", "message": exc.message, "written": 0}
    kind = data.get("kind")
    status = 409 if kind == "preflight_failed" else 200
    if not is_fragment(request):
        if kind == "restore" and data.get("setId"):
            return redirect(reverse("versions:receipt", args=[app.slug, data["setId"]]))
        ctx = _context(request, app, receipt=data)
        return render(request, "versions/since_release.html", ctx, status=status)
    ctx = _context(request, app, receipt=data)
    html: str = render_to_string("versions/partials/_release_body.html", ctx, request=request)
    html += '<div id="dialog-slot" hx-swap-oob="true"></div>'  # close the dialog
    return HttpResponse(html, status=status)
