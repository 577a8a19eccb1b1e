"""An app's Settings page (docs/architecture.md#protection): its owners say what promoting to
production needs from reviews. A thin adapter over ``services.change_app``, which checks
that the person is an owner and keeps the change in the audit trail."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.views.decorators.http import require_http_methods

from versions import selectors, services
from versions.errors import InvalidInput
from versions.forms import ProtectionForm
from versions.models import COLLECTIONS, App
from versions.terms import EVENT_LABELS, MANAGE
from versions.views._common import actor_of, is_fragment, panel_view, perms, render_tab

SAVED = "Saved: {summary}"
OFF = "promoting needs no review."
ON = (
    "each change set needs {n} approval{s} from someone other than its authors"
    "{blocks}{stale} before it may go to production."
)


def summary(app: App) -> str:
    """What the app's protection asks, in one sentence."""
    protection = selectors.protection_of(app)
    n = protection.required_approvals
    if n == 0:
        return OFF
    return ON.format(
        n=n,
        s="" if n == 1 else "s",
        blocks=", and no open change request" if protection.block_on_changes_requested else "",
        stale=" (approvals go stale when later writes join it)" if protection.dismiss_stale else "",
    )


def settings_page(
    request: HttpRequest, app: App, form: ProtectionForm, **extra: Any
) -> HttpResponse:
    ctx = {
        "app": app,
        "tab": "settings",
        "form": form,
        "summary": summary(app),
        "webhooks": selectors.webhooks_of(app),
        "event_choices": list(EVENT_LABELS.items()),
        "webhook_form": {},
    }
    # Safe promotion's section (docs/architecture.md#safe-promotion): checks, watch, locks.
    ctx.update(safe=selectors.safe_promotion_settings(app), collections=COLLECTIONS)
    ctx.update(perms(request, app), **extra)
    return render_tab(
        request,
        ctx,
        fragment="versions/partials/_settings_body.html",
        page="versions/settings.html",
        status=422 if form.errors or extra.get("error") or extra.get("webhook_error") else 200,
    )


def current_form(app: App) -> ProtectionForm:
    """The protection form as the app's protection is now."""
    current = selectors.protection_of(app)
    return ProtectionForm(
        initial={
            "required_approvals": current.required_approvals,
            "block_on_changes_requested": current.block_on_changes_requested,
            "dismiss_stale": current.dismiss_stale,
        }
    )


@require_http_methods(["GET", "POST"])
@panel_view
def app_settings(request: HttpRequest, slug: str) -> HttpResponse:
    """GET: the app's protection, for its owners. POST: save it."""
    actor = actor_of(request)
    app = services.app_for(slug, actor=actor, action=MANAGE)
    if request.method == "GET":
        return settings_page(request, app, current_form(app))
    form = ProtectionForm(request.POST)
    if not form.is_valid():
        return settings_page(request, app, form)
    try:
        services.change_app(app, actor=actor, protection=form.cleaned_data)
    except InvalidInput as exc:
        return settings_page(request, app, form, error=exc.message)
    if not is_fragment(request):
        return redirect(reverse("versions:app_settings", args=[app.slug]))
    return settings_page(request, app, form, status_message=SAVED.format(summary=summary(app)))
