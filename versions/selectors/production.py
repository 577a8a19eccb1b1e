"""Production reads (docs/architecture.md#environments): the app's deployments and the history of
its production, as the panel, the API and MCP show them."""

from __future__ import annotations

from typing import Any

from versions.diffing import count_line_changes
from versions.messages import PRODUCTION_STILL_SERVES
from versions.models import App, Deployment, DeploymentEvent
from versions.selectors.agent import iso_utc
from versions.selectors.panel import blob_sources

HISTORY_LIMIT = 50


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
    }


def event_out(event: DeploymentEvent) -> dict[str, Any]:
    """One promotion or rollback of the history as JSON: who, when, note, from → to."""
    return {
        "kind": event.kind,
        "from": event.from_deployment_id,
        "to": event.to_deployment_id,
        "by": event.by,
        "on": iso_utc(event.on),
        "note": event.note,
    }


def production_overview(app: App) -> dict[str, Any]:
    """The app's production deployment, its deployments (newest first) and its history."""
    production = App.objects.filter(pk=app.pk).values_list("production_id", flat=True).first()
    deployments = Deployment.objects.filter(app=app).order_by("-created_on", "-id")
    history = DeploymentEvent.objects.filter(app=app).order_by("-on", "-id")[:HISTORY_LIMIT]
    return {
        "app": app.slug,
        "production": production,
        "deployments": [deployment_out(d, production) for d in deployments],
        "history": [event_out(e) for e in history],
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


def production_notice(app: App) -> str:
    """The words a restore, revert or write of the app shows beside its receipt: that it
    changed the draft and production still serves its deployment ("" without production)."""
    current = App.objects.filter(pk=app.pk).values_list("production_id", flat=True).first()
    return PRODUCTION_STILL_SERVES.format(deployment=current) if current else ""
