"""Production reads (docs/architecture.md#environments): the app's deployments and the history of
its production, as the panel, the API and MCP show them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.utils import timezone

from versions.diffing import count_line_changes
from versions.messages import DRAFT_HOLDS_PRODUCTION, FINDING_LOCKED, PRODUCTION_STILL_SERVES
from versions.models import (
    App,
    AppCheck,
    ArtifactLock,
    Deployment,
    DeploymentEvent,
    DeploymentWatch,
    PromotionPolicy,
    ScheduledPromotion,
)
from versions.selectors.agent import iso_utc
from versions.selectors.paging import newest_first_page
from versions.selectors.panel import blob_sources
from versions.selectors.reviews import draft_changes

# The deployments' overview shows the newest events of production's history; a page of the
# history without ``limit`` has this many.
HISTORY_LIMIT = 50
HISTORY_PAGE_MAX = 200


def deployment_out(deployment: Deployment, production_id: str | None) -> dict[str, Any]:
    """One deployment as JSON."""
    return {
        "id": deployment.id,
        "ref": deployment.ref,
        "source_set": deployment.source_set,
        "artifacts": deployment.size,
        "created_by": deployment.created_by,
        "created_on": iso_utc(deployment.created_on),
        "note": deployment.note,
        "is_production": deployment.id == production_id,
        "checks": deployment.checks,
    }


def event_out(event: DeploymentEvent) -> dict[str, Any]:
    """One promotion or rollback of the history as JSON: who, when, note, from → to."""
    out = {
        "kind": event.kind,
        "from": event.from_deployment_id,
        "to": event.to_deployment_id,
        "by": event.by,
        "on": iso_utc(event.on),
        "note": event.note,
    }
    receipt = event.receipt or {}
    for key in ("rollout", "cause"):  # a rollout's share, an automatic rollback's cause
        if key in receipt:
            out[key] = receipt[key]
    return out


def production_overview(app: App, *, history_cursor: str | None = None) -> dict[str, Any]:
    """The app's production deployment, its deployments (newest first) and its history (the
    newest ``HISTORY_LIMIT`` events, or those after ``history_cursor``, and the cursor of the
    rest). A cursor that is not one is ``InvalidInput``."""
    production, candidate, share = App.objects.filter(pk=app.pk).values_list(
        "production_id", "candidate_id", "rollout_share"
    ).first() or (None, None, 0)
    deployments = Deployment.objects.filter(app=app).order_by("-created_on", "-id")
    history = production_history(app, cursor=history_cursor, limit=HISTORY_LIMIT)
    served = served_deployments(app)
    return {
        "app": app.slug,
        "production": production,
        "deployments": [deployment_out(d, production) for d in deployments],
        # What Roll back production may go to: not the deployment production serves.
        "rollback_targets": sorted(served - {production}),
        "history": history["items"],
        "history_next_cursor": history["next_cursor"],
        "rollout": rollout_of(candidate, share),
        "freeze": freeze_state(app),
        "schedules": scheduled_promotions(app, pending_only=True),
        "schedules_refused": refused_schedules(app),
    }


def served_deployments(app: App) -> set[str]:
    """The deployments production of ``app`` ever served: a promotion (a completed rollout is
    one) or a rollback moved it there. A rollout's candidate is not one until it completes."""
    return set(
        DeploymentEvent.objects.filter(
            app=app,
            kind__in=(DeploymentEvent.PROMOTION, DeploymentEvent.ROLLBACK),
            to_deployment__isnull=False,
        ).values_list("to_deployment_id", flat=True)
    )


def production_history(
    app: App, *, cursor: str | None = None, limit: int | None = None
) -> dict[str, Any]:
    """The history of the app's production, newest first: a keyset page of ``limit`` events
    (every promotion, rollback and rollout step) after ``cursor`` (docs/api.md#cursors)."""
    rows = DeploymentEvent.objects.filter(app=app)
    found, next_cursor = newest_first_page(
        rows, cursor=cursor, limit=limit or HISTORY_PAGE_MAX, moment="on"
    )
    return {"app": app.slug, "next_cursor": next_cursor, "items": [event_out(e) for e in found]}


# --- safe promotion (docs/architecture.md#safe-promotion) -----------------------------------


def rollout_of(candidate: str | None, share: int) -> dict[str, Any] | None:
    """The running rollout: its candidate, share and what the watch counted (None: none)."""
    if candidate is None:
        return None
    watch = DeploymentWatch.objects.filter(pk=candidate).values_list("requests", "errors").first()
    requests, errors = watch or (0, 0)
    return {"candidate": candidate, "share": share, "requests": requests, "errors": errors}


def freeze_state(app: App) -> dict[str, Any]:
    """Production's freeze: ``{"frozen": false}``, or since when, by whom, why, until when."""
    policy = PromotionPolicy.objects.filter(app=app).first()
    now = timezone.now()
    if (
        policy is None
        or policy.frozen_on is None
        or (policy.frozen_until is not None and policy.frozen_until <= now)
    ):
        return {"frozen": False}
    return {
        "frozen": True,
        "since": iso_utc(policy.frozen_on),
        "until": iso_utc(policy.frozen_until) if policy.frozen_until else None,
        "by": policy.frozen_by,
        "reason": policy.frozen_reason,
    }


def scheduled_promotions(app: App, *, pending_only: bool = False) -> list[dict[str, Any]]:
    """The app's scheduled promotions, soonest first (with those that ran, unless
    ``pending_only``)."""
    rows = ScheduledPromotion.objects.filter(app=app).order_by("at", "id")
    if pending_only:
        rows = rows.filter(status=ScheduledPromotion.SCHEDULED)
    return [_schedule_out(row) for row in rows[:100]]


def _schedule_out(row: ScheduledPromotion) -> dict[str, Any]:
    return {
        "id": row.id,
        "ref": row.ref,
        "at": iso_utc(row.at),
        "status": row.status,
        "artifacts": len(row.state or {}),
        "note": row.note,
        "created_by": row.created_by,
        "result": row.result,
    }


# How long the Production tab keeps saying that a scheduled promotion was refused at its moment.
REFUSED_SHOWN_FOR = timedelta(days=7)


def refused_schedules(app: App) -> list[dict[str, Any]]:
    """The app's scheduled promotions refused at their moment in the last week (a freeze, a
    failing check, missing approvals, a state that changed), newest first: nothing ran, and the
    person who scheduled one learns why where they left it."""
    rows = ScheduledPromotion.objects.filter(
        app=app,
        status=ScheduledPromotion.REFUSED,
        ran_on__gte=timezone.now() - REFUSED_SHOWN_FOR,
    ).order_by("-ran_on", "-id")[:5]
    return [_schedule_out(row) for row in rows]


def lock_who(locked_by: str, reason: str) -> dict[str, str]:
    """Who locked an artifact and why, as the lock messages say it (``by``, ``reason``)."""
    return {"by": locked_by or "an owner", "reason": f" (“{reason}”)" if reason else ""}


def lock_words(locked_by: str, reason: str) -> str:
    """Why an agent may not write a locked artifact, in words (a restore's finding, a diff's
    head)."""
    return FINDING_LOCKED.format(**lock_who(locked_by, reason))


def artifact_locks(app: App) -> dict[tuple[str, str], str]:
    """The app's locked artifacts: ``(collection, name)`` → who locked it and why, in words, so
    that everyone who reads its diffs sees the lock (the list is on the owners' Settings page).
    No query for an app without locks."""
    if not app.artifact_locks:
        return {}
    rows = ArtifactLock.objects.filter(app=app).values_list(
        "collection", "name", "locked_by", "reason"
    )
    return {(collection, name): lock_words(by, reason) for collection, name, by, reason in rows}


def safe_promotion_settings(app: App) -> dict[str, Any]:
    """What the Settings page shows of safe promotion: the HTTP checks, the watch, the locks."""
    policy = PromotionPolicy.objects.filter(app=app).first() or PromotionPolicy(app=app)
    return {
        "checks": list(AppCheck.objects.filter(app=app).order_by("name")),
        "rollback_error_rate": policy.rollback_error_rate,
        "watch_minutes": policy.watch_minutes,
        "locks": list(ArtifactLock.objects.filter(app=app).order_by("collection", "name")),
    }


def promotion_line_counts(app: App, changed: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What a promotion ships, per changed artifact: production's version → the promoted one,
    with the lines it adds and removes (sources from one blob query)."""
    shas = {c.get(side) for c in changed for side in ("from", "to") if c.get(side)}
    sources = blob_sources(s for s in shas if s)
    out = []
    for c in changed:
        before = sources.get(c.get("from") or "", b"")
        after = sources.get(c.get("to") or "", b"")
        added, removed = count_line_changes(before.decode(), after.decode())
        out.append({**c, "lines_added": added, "lines_removed": removed})
    return out


@dataclass(frozen=True)
class ProductionNotice:
    """What a restore, revert or write says of production beside its dialog or receipt: that
    production still serves its deployment (promoting would ship the draft: ``ships``), or that
    the draft holds just what production serves. Empty (false) without production."""

    text: str = ""
    ships: bool = False

    def __str__(self) -> str:
        return self.text

    def __bool__(self) -> bool:
        return bool(self.text)


def production_notice(
    app: App, planned: Mapping[tuple[str, str], str | None] | None = None
) -> ProductionNotice:
    """The production notice of ``app``'s draft as it is (a receipt), or as a plan would leave
    it (``planned``, as :func:`draft_changes` takes it: a dialog)."""
    current = App.objects.filter(pk=app.pk).values_list("production_id", flat=True).first()
    if not current:
        return ProductionNotice()
    if draft_changes(app, current, planned):
        return ProductionNotice(PRODUCTION_STILL_SERVES.format(deployment=current), ships=True)
    when = "now" if planned is None else "afterwards"
    return ProductionNotice(DRAFT_HOLDS_PRODUCTION.format(when=when, deployment=current))
