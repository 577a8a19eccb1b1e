"""Webhooks on an app's Settings page (owners) and a member's email choices
(docs/architecture.md#notifications): thin adapters over ``services.change_app``, which checks
who may, refuses bad input in words and keeps every change in the audit trail."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.views.decorators.http import require_http_methods, require_POST

from versions import selectors, services
from versions.errors import InvalidInput
from versions.models import App
from versions.terms import EVENT_LABELS, MANAGE
from versions.views._common import actor_of, is_fragment, panel_view, perms, render_tab
from versions.views.protection import current_form, settings_page

DONE = {
    "add": "Webhook added: the events you chose are sent to it from now on.",
    "change": "Webhook saved.",
    "enable": "Webhook turned on: events are sent to it again.",
    "disable": "Webhook turned off: no events are sent to it until you turn it on.",
    "delete": "Webhook deleted, with its delivery log.",
    "redeliver": "Sent again: the new delivery is at the top of the webhook's log.",
}
EMAIL_SAVED = "Saved: {what}"
EMAIL_NONE = "you get no email about this app."
EMAIL_SOME = "you get an email when: {events}."


def _request(post: Any) -> tuple[str, dict[str, Any]]:
    """The form's action and what ``services.change_app`` takes for it."""
    action = str(post.get("action", ""))
    target = str(post.get("id", ""))
    if action == "add":
        return action, {
            "add": {
                "url": post.get("url", ""),
                "secret": post.get("secret", ""),
                "events": post.getlist("events"),
            }
        }
    if action == "change":
        return action, {
            "change": target,
            "url": post.get("url", ""),
            "secret": post.get("secret", ""),
            "events": post.getlist("events"),
        }
    if action in ("enable", "disable"):
        return action, {"change": target, "active": action == "enable"}
    if action in ("delete", "redeliver"):
        return action, {action: target}
    return action, {}


@require_POST
@panel_view
def webhook_action(request: HttpRequest, slug: str) -> HttpResponse:
    """Add, change, turn on or off, delete a webhook, or send a delivery again."""
    actor = actor_of(request)
    app = services.app_for(slug, actor=actor, action=MANAGE)
    action, change = _request(request.POST)
    try:
        services.change_app(app, actor=actor, webhook=change)
    except InvalidInput as exc:
        kept: dict[str, Any] = {k: request.POST.get(k, "") for k in ("url", "id")}
        kept["events"] = request.POST.getlist("events")
        kept["action"] = action
        return settings_page(
            request, app, current_form(app), webhook_error=exc.message, webhook_form=kept
        )
    if not is_fragment(request):
        return redirect(reverse("versions:app_settings", args=[app.slug]) + "#webhooks-title")
    return settings_page(request, app, current_form(app), webhook_message=DONE.get(action, ""))


def _notifications_page(request: HttpRequest, app: App, **extra: Any) -> HttpResponse:
    chosen = selectors.email_events_of(app, request.user)
    ctx = {
        "app": app,
        "tab": "notifications",
        "event_choices": list(EVENT_LABELS.items()),
        "chosen": chosen,
        "email": getattr(request.user, "email", ""),
    }
    ctx.update(perms(request, app), **extra)
    return render_tab(
        request,
        ctx,
        fragment="versions/partials/_notifications_body.html",
        page="versions/notifications.html",
        status=422 if extra.get("error") else 200,
    )


@require_http_methods(["GET", "POST"])
@panel_view
def notifications(request: HttpRequest, slug: str) -> HttpResponse:
    """GET: the events of the app the person hears of by email. POST: choose them."""
    actor = actor_of(request)
    app = services.app_for(slug, actor=actor)
    if request.method == "GET":
        return _notifications_page(request, app)
    chosen = request.POST.getlist("events")
    try:
        services.change_app(app, actor=actor, email_events=chosen)
    except InvalidInput as exc:
        return _notifications_page(request, app, error=exc.message)
    if not is_fragment(request):
        return redirect(reverse("versions:notifications", args=[app.slug]))
    names = [EVENT_LABELS[e].lower() for e in selectors.email_events_of(app, request.user)]
    what = EMAIL_SOME.format(events="; ".join(names)) if names else EMAIL_NONE
    return _notifications_page(request, app, status_message=EMAIL_SAVED.format(what=what))
