"""An app's webhooks with their delivery logs, and a member's email choices
(docs/architecture.md#notifications)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.db.models import Prefetch

from versions.models import App, DeliveryAttempt, EmailSubscription, Webhook, WebhookDelivery
from versions.terms import EVENT_LABELS

RECENT_DELIVERIES = 15


@dataclass
class DeliveryRow:
    """One delivery as its log shows it: the event, what became of it, and every try."""

    delivery: WebhookDelivery
    tries: list[DeliveryAttempt]

    @property
    def last(self) -> DeliveryAttempt | None:
        return self.tries[-1] if self.tries else None

    @property
    def state_label(self) -> str:
        if self.delivery.state == WebhookDelivery.DELIVERED:
            return "Delivered"
        if self.delivery.state == WebhookDelivery.FAILED:
            return "Failed"
        return "Sending" if not self.tries else f"Retrying (try {len(self.tries) + 1} next)"


@dataclass
class WebhookRow:
    """A webhook, its events in words and its recent deliveries, newest first."""

    webhook: Webhook
    events: list[tuple[str, str]]
    deliveries: list[DeliveryRow] = field(default_factory=list)


def webhooks_of(app: App, *, recent: int = RECENT_DELIVERIES) -> list[WebhookRow]:
    """``app``'s webhooks, oldest first, each with its ``recent`` newest deliveries (three
    queries per webhook at most, whatever its history)."""
    rows = []
    for webhook in Webhook.objects.filter(app=app).order_by("created_on", "id"):
        deliveries = (
            WebhookDelivery.objects.filter(webhook=webhook)
            .select_related("event")
            .order_by("-created_on", "-id")[:recent]
        )
        tries = Prefetch("tries", queryset=DeliveryAttempt.objects.order_by("attempted_on", "id"))
        rows.append(
            WebhookRow(
                webhook,
                [(name, EVENT_LABELS[name]) for name in webhook.event_list if name in EVENT_LABELS],
                [DeliveryRow(d, list(d.tries.all())) for d in deliveries.prefetch_related(tries)],
            )
        )
    return rows


def email_events_of(app: App, user: Any) -> list[str]:
    """The events of ``app`` that ``user`` chose to hear of by email."""
    if user is None or not getattr(user, "pk", None):
        return []
    found = EmailSubscription.objects.filter(app=app, user=user).first()
    return found.event_list if found is not None else []
