"""Safe promotion in the panel (docs/architecture.md#safe-promotion): the rollout controls,
the freeze and the scheduled promotions of the Production tab, and the checks, watch and
locks section of the Settings page. Thin adapters over ``services.promotion`` and
``services.promote``, which check who may."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from versions import selectors, services
from versions.errors import InvalidInput, NotFound, PreflightFailed, VersionsError
from versions.models import COLLECTIONS
from versions.terms import MANAGE
from versions.views._common import actor_of, app_of, is_fragment, panel_view, perms
from versions.views.production import _body, moment_utc


def _answer(request: HttpRequest, app: Any, call: Any) -> HttpResponse:
    """Run ``call``; the Production tab with its receipt (or refusal, in words)."""
    try:
        data = dict(call())
        status = 200
    except PreflightFailed as exc:
        data, status = dict(exc.receipt.as_dict()), 409
    except (InvalidInput, NotFound) as exc:
        data, status = {"kind": "error", "findings": [], "message": exc.message}, 409
    if not is_fragment(request) and status == 200:
        return redirect(reverse("versions:production", args=[app.slug]))
    return _body(request, app, status=status, receipt=data)


@require_POST
@panel_view
def rollout(request: HttpRequest, slug: str) -> HttpResponse:
    """Advance, Complete rollout or Abort rollout (``step``); a rollout starts in the promote
    dialog (Start rollout)."""
    app = app_of(request, slug)
    actor = actor_of(request)
    step = request.POST.get("step", "")
    note = request.POST.get("note", "")

    def run() -> dict[str, Any]:
        if step == "advance":
            receipt = services.promotion.advance_rollout(
                app, to=request.POST.get("share", ""), actor=actor, note=note
            )
        elif step == "complete":
            receipt = services.promotion.complete_rollout(app, actor=actor, note=note)
        elif step == "abort":
            receipt = services.promotion.abort_rollout(app, actor=actor, note=note)
        else:
            return services.promotion.rollout_action(app, action=step[:40], actor=actor).as_dict()
        return receipt.as_dict()

    return _answer(request, app, run)


@require_POST
@panel_view
def freeze(request: HttpRequest, slug: str) -> HttpResponse:
    """Freeze production (a reason, an optional end in UTC) or Unfreeze (owners)."""
    app = app_of(request, slug)
    actor = actor_of(request)

    def run() -> dict[str, Any]:
        if request.POST.get("unfreeze"):
            state = services.promotion.unfreeze_production(app, actor=actor)
            return {"kind": "unfrozen", "message": "Production is unfrozen.", **state}
        until = moment_utc(request.POST.get("until", ""))
        state = services.promotion.freeze_production(
            app, actor=actor, reason=request.POST.get("reason", ""), until=until
        )
        return {"kind": "frozen", **state}

    return _answer(request, app, run)


@require_POST
@panel_view
def cancel_schedule(request: HttpRequest, slug: str, schedule_id: str) -> HttpResponse:
    """Cancel a scheduled promotion."""
    app = app_of(request, slug)
    actor = actor_of(request)
    return _answer(
        request,
        app,
        lambda: services.promotion.cancel_schedule(app, schedule_id=schedule_id, actor=actor),
    )


# --------------------------------------------------------------------------------------------
# The Settings page's section: checks, the watch, locks
# --------------------------------------------------------------------------------------------


def settings_context(request: HttpRequest, app: Any, **extra: Any) -> dict[str, Any]:
    """What the Settings page's safe-promotion section shows."""
    return {
        "app": app,
        "safe": selectors.safe_promotion_settings(app),
        "collections": COLLECTIONS,
        **perms(request, app),
        **extra,
    }


# Which part of the section an action belongs to: its outcome is drawn under that part's form.
_PARTS = {
    "add_check": "checks",
    "remove_check": "checks",
    "watch": "watch",
    "lock": "locks",
    "unlock": "locks",
}


def _section(request: HttpRequest, app: Any, what: str, **extra: Any) -> HttpResponse:
    status = 422 if extra.get("safe_error") else 200
    extra["part"] = _PARTS.get(what, "")
    if not is_fragment(request):
        if status == 200:
            anchor = {"checks": "#checks-title", "locks": "#locks-title"}.get(
                extra["part"], "#safe-promotion"
            )
            return redirect(reverse("versions:app_settings", args=[app.slug]) + anchor)
        ctx = settings_context(request, app, **extra)
        return render(request, "versions/safe_promotion_settings_page.html", ctx, status=status)
    ctx = settings_context(request, app, **extra)
    return render(request, "versions/partials/_safe_promotion_settings.html", ctx, status=status)


@require_POST
@panel_view
def settings_action(request: HttpRequest, slug: str) -> HttpResponse:
    """Add or remove a check, save the watch, lock or unlock an artifact (owners)."""
    actor = actor_of(request)
    app = services.app_for(slug, actor=actor, action=MANAGE)
    post = request.POST
    what = post.get("what", "")
    try:
        if what == "add_check":
            services.promotion.add_check(
                app,
                actor=actor,
                name=post.get("name", ""),
                method=post.get("method", "GET"),
                path=post.get("path", ""),
                expect_status=post.get("expect_status", "200"),
                expect_text=post.get("expect_text", ""),
            )
            done = f"Check “{post.get('name', '').strip()}” added."
        elif what == "remove_check":
            services.promotion.remove_check(app, actor=actor, name=post.get("name", ""))
            done = f"Check “{post.get('name', '')}” removed."
        elif what == "watch":
            services.promotion.set_watch(
                app,
                actor=actor,
                rollback_error_rate=post.get("rollback_error_rate", ""),
                watch_minutes=post.get("watch_minutes", ""),
            )
            done = "Watch saved."
        elif what == "lock":
            services.promotion.lock_artifact(
                app,
                actor=actor,
                collection=post.get("collection", ""),
                name=post.get("name", ""),
                reason=post.get("reason", ""),
            )
            done = f"{post.get('name', '')} is locked: agents may not write it."
        elif what == "unlock":
            services.promotion.unlock_artifact(
                app, actor=actor, collection=post.get("collection", ""), name=post.get("name", "")
            )
            done = f"{post.get('name', '')} is unlocked."
        else:
            raise InvalidInput("Unknown settings action.")
    except VersionsError as exc:
        # Nothing typed is lost: the form comes back with what was sent, and why it was not.
        return _section(request, app, what, safe_error=exc.message, sent=post, sent_what=what)
    return _section(request, app, what, safe_status=done)
