"""The Production tab (docs/architecture.md#environments): what production serves, its history,
Promote to production and Roll back production, and Preview of any state. Thin adapters over
``services.promote``, ``services.rollback_production`` and ``selectors.production_overview``; the
services check that the person may promote."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.dateparse import parse_datetime
from django.views.decorators.http import require_GET, require_http_methods

from versions import selectors, services
from versions.errors import InvalidInput, NotFound, PreflightFailed
from versions.messages import CHECK_COLLECTION
from versions.models import App
from versions.terms import (
    DRAFT,
    PRODUCTION,
    PROMOTE,
)
from versions.views._common import actor_of, app_of, is_fragment, panel_view, perms, render_tab
from versions.views.restoring import parse_expected

PROMOTE_TITLE = "Promote to production"
BAD_MOMENT = "Give a date and time (UTC), e.g. 2026-12-24 09:00."


def moment_utc(value: str) -> datetime | None:
    """A ``datetime-local`` field's value, read in UTC (None when empty); ``InvalidInput``."""
    if not value.strip():
        return None
    moment = parse_datetime(value.strip())
    if moment is None:
        raise InvalidInput(BAD_MOMENT, field="at")
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


ROLLBACK_TITLE = "Roll back production"


def _context(request: HttpRequest, app: App, **extra: Any) -> dict[str, Any]:
    # "Older events" pages production's history on by the API's cursor; a mangled one shows
    # the newest events.
    older = request.GET.get("history", "").strip() or None
    try:
        overview = selectors.production_overview(app, history_cursor=older)
    except InvalidInput:
        older, overview = None, selectors.production_overview(app)
    overview["history_is_older"] = older is not None
    ahead = selectors.draft_ahead(app)
    return {
        "app": app,
        "tab": "production",
        "overview": overview,
        "ahead": ahead,
        "protection": selectors.protection_of(app),
        "still_needs": [lack for c in ahead or [] for lack in c.review.lacks()],  # type: ignore[attr-defined]
        "preview_production": services.preview_url(app, PRODUCTION),
        "preview_draft": services.preview_url(app, DRAFT),
        **perms(request, app),
        **extra,
    }


def _body(request: HttpRequest, app: App, *, status: int = 200, **extra: Any) -> HttpResponse:
    ctx = _context(request, app, **extra)
    return render_tab(
        request,
        ctx,
        fragment="versions/partials/_production_body.html",
        page="versions/production.html",
        status=status,
        close_dialog=True,
    )


@require_GET
@panel_view
def production(request: HttpRequest, slug: str) -> HttpResponse:
    """The Production tab."""
    app = app_of(request, slug)
    return render_tab(
        request,
        _context(request, app),
        fragment="versions/partials/_production_body.html",
        page="versions/production.html",
    )


def _data(call: Any) -> dict[str, Any]:
    try:
        return dict(call().as_dict())
    except PreflightFailed as exc:
        return dict(exc.receipt.as_dict())
    except (InvalidInput, NotFound) as exc:
        return {"kind": "error", "findings": [], "message": exc.message}


@require_http_methods(["GET", "POST"])
@panel_view
def promote(request: HttpRequest, slug: str) -> HttpResponse:
    """GET: the dialog — what the promotion ships (production → the state). POST: Confirm
    promotion, with the hashes the person reviewed."""
    app = app_of(request, slug)
    params = request.POST if request.method == "POST" else request.GET
    ref = params.get("ref") or DRAFT
    expected = parse_expected(params.getlist("expected"))
    note = params.get("note", "")
    override = params.get("override_reason", "") if request.method == "POST" else ""
    actor = actor_of(request)
    # Safe promotion (docs/architecture.md#safe-promotion): Start rollout, Schedule promotion.
    mode = params.get("mode", "") if request.method == "POST" else ""

    def run(dry_run: bool) -> Any:
        return services.promote(
            app,
            actor=actor,
            ref=ref,
            note=note,
            expected=expected or None,
            dry_run=dry_run,
            override_reason=override,
            rollout=params.get("rollout", "") if mode == "rollout" else None,
            at=moment_utc(params.get("at", "")) or "" if mode == "schedule" else None,
        )

    if request.method == "POST":
        data = _data(lambda: run(False))
        status = 409 if data.get("kind") in ("preflight_failed", "error") else 200
        if not is_fragment(request) and status == 200:
            return redirect(reverse("versions:production", args=[app.slug]))
        return _body(request, app, status=status, receipt=data)
    data = _data(lambda: run(True))
    findings = data.get("findings") or []
    protection = [f for f in findings if f.get("collection") == PROTECTION_FINDING]
    failed_checks = [f for f in findings if f.get("collection") == CHECK_FINDING]
    overridable = len(protection) + len(failed_checks)
    ctx = {
        "app": app,
        "title": PROMOTE_TITLE,
        "ref": ref,
        "data": data,
        "protection_findings": protection,
        "check_findings": failed_checks,
        "other_findings": [
            f for f in findings if f.get("collection") not in (PROTECTION_FINDING, CHECK_FINDING)
        ],
        # Only protection or failing checks stand in the way: an owner may Promote anyway.
        "may_override": bool(overridable) and overridable == len(findings),
        "diffs": selectors.promotion_line_counts(app, data.get("changed") or []),
        "carry": _carry(data),
        "action": reverse("versions:promote", args=[app.slug]),
        **perms(request, app),
    }
    template = "versions/partials/_promote_dialog.html"
    return render(request, template if is_fragment(request) else "versions/promote_page.html", ctx)


# The collection a protection finding names (a change set, not an artifact), and a failing
# check's: an owner may promote past either with a reason.
PROTECTION_FINDING = "change set"
CHECK_FINDING = CHECK_COLLECTION


def _carry(data: dict[str, Any]) -> list[tuple[str, str]]:
    """What the person reviews in the dialog, sent back with the confirmation: for each change
    the promotion ships, the sha256 the promoted state gives it ("" = absent). The promotion
    compares them with that same state (a set's, the release's or the draft's), so a later
    draft write does not refuse the promotion of an earlier set."""
    return [
        (f"{c['collection']}/{c['name']}", c.get("to") or "") for c in data.get("changed") or []
    ]


@require_http_methods(["GET", "POST"])
@panel_view
def rollback(request: HttpRequest, slug: str, deployment_id: str) -> HttpResponse:
    """GET: the dialog. POST: Roll back production to this deployment."""
    app = app_of(request, slug)
    actor = actor_of(request)
    if request.method == "POST":
        data = _data(
            lambda: services.rollback_production(
                app, actor=actor, to=deployment_id, note=request.POST.get("note", "")
            )
        )
        if not is_fragment(request) and data.get("kind") != "error":
            return redirect(reverse("versions:production", args=[app.slug]))
        return _body(request, app, receipt=data, status=200 if data.get("kind") != "error" else 409)
    services.app_for(app, actor=actor, action=PROMOTE)  # the dialog is for promoters
    ctx = {
        "app": app,
        "title": ROLLBACK_TITLE,
        "deployment_id": deployment_id,
        "overview": selectors.production_overview(app),
        "action": reverse("versions:rollback", args=[app.slug, deployment_id]),
        **perms(request, app),
    }
    template = "versions/partials/_rollback_dialog.html"
    return render(request, template if is_fragment(request) else "versions/rollback_page.html", ctx)


def _panel_path(app: App, value: str) -> str:
    """``value`` when it is a path of this app's panel (the diff a preview came from), else "":
    never another site, nor a script URL."""
    prefix = f"/apps/{app.slug}/versions/"
    ok = value.startswith(prefix) and re.fullmatch(r"[A-Za-z0-9_\-./]*", value[len(prefix) :])
    return value if ok and ".." not in value else ""


@require_GET
@panel_view
def preview(request: HttpRequest, slug: str, ref: str) -> HttpResponse:
    """A state of the app rendered in a sandboxed frame (a signed, expiring link), beside the
    way back to its diff."""
    app = app_of(request, slug)
    services.resolve_state(app, ref)  # NotFound in words for an unknown ref
    ctx = {
        "app": app,
        "ref": ref,
        "src": services.preview_url(app, ref),
        "back": _panel_path(app, request.GET.get("back", "")),
        **perms(request, app),
    }
    return render(request, "versions/preview.html", ctx)
