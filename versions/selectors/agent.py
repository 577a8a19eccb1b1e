"""What an agent reads (docs/api.md#routes, docs/api.md#mcp): an app's artifacts, one artifact with
its source, change sets and one set with its restore points — as plain JSON-ready dicts, the same
for the API and the MCP server. Fixed queries whatever the number of rows."""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from django.db.models import Count, Exists, OuterRef, Sum

from versions.errors import NotFound
from versions.models import App, Artifact, ChangeSet, RestorePoint
from versions.selectors.paging import after, newest_first_page
from versions.selectors.set_states import set_states

PER_PAGE_DEFAULT = 50
ARTIFACT_NOT_FOUND = "There is no {collection} “{name}” in app “{slug}”."
ARTIFACT_DELETED = "The {collection} “{name}” of app “{slug}” was deleted (it is a tombstone)."


def iso_utc(moment: datetime | None) -> str:
    if moment is None:
        return ""
    utc = moment.astimezone(UTC)
    return utc.strftime("%Y-%m-%dT%H:%M:%S.") + f"{utc.microsecond // 1000:03d}Z"


def artifact_summary(artifact: Artifact) -> dict[str, Any]:
    return {
        "collection": artifact.collection,
        "name": artifact.name,
        "sha256": artifact.sha256,
        "size": artifact.size,
        "deleted": artifact.deleted,
        "updated_on": iso_utc(artifact.updated_on),
        "updated_by": artifact.updated_by,
    }


def list_artifacts(app: App, *, include_deleted: bool = False) -> list[dict[str, Any]]:
    """The app's artifacts (without sources), by collection and name."""
    rows = Artifact.objects.filter(app=app).order_by("collection", "name")
    if not include_deleted:
        rows = rows.live()
    return [artifact_summary(a) for a in rows]


def name_spellings(name: str) -> set[str]:
    """``name`` as asked and in NFC, the form writes store it in (an artifact written before
    names were normalised keeps the spelling it was written in)."""
    return {name, unicodedata.normalize("NFC", name)}


def read_artifact(app: App, collection: str, name: str) -> dict[str, Any]:
    """One live artifact with its source; NotFound for an unknown or deleted one (the caller
    validated the collection and name)."""
    artifact = (
        Artifact.objects.select_related("blob__base")
        .filter(app=app, collection=collection, name__in=name_spellings(name))
        .first()
    )
    if artifact is None:
        raise NotFound(ARTIFACT_NOT_FOUND.format(collection=collection, name=name, slug=app.slug))
    if artifact.deleted:
        raise NotFound(ARTIFACT_DELETED.format(collection=collection, name=name, slug=app.slug))
    return {"app": app.slug, **artifact_summary(artifact), "source": artifact.source}


def _summaries(sets: list[ChangeSet]) -> list[dict[str, Any]]:
    """Summaries of ``sets`` in two queries whatever their number."""
    ids = [cs.id for cs in sets]
    stats = {
        row["change_set_id"]: row
        for row in RestorePoint.objects.filter(change_set_id__in=ids)
        .values("change_set_id")
        .annotate(
            n_points=Count("id"),
            n_artifacts=Count("artifact_id", distinct=True),
            added=Sum("lines_added"),
            removed=Sum("lines_removed"),
        )
    }
    who: dict[str, tuple[dict[str, None], dict[str, None]]] = {i: ({}, {}) for i in ids}
    for set_id, requested_by, tool in (
        RestorePoint.objects.filter(change_set_id__in=ids)
        .order_by("created_on", "id")
        .values_list("change_set_id", "requested_by", "tool")
    ):
        if requested_by:
            who[set_id][0][requested_by] = None
        if tool:
            who[set_id][1][tool] = None
    out = []
    for cs in sets:
        row: Any = stats.get(cs.id) or {}
        out.append(
            {
                "id": cs.id,
                "kind": cs.kind,
                "name": cs.name,
                "message": cs.message,
                "created_on": iso_utc(cs.created_on),
                "created_by": cs.created_by,
                "requested_by": list(who[cs.id][0]),
                "tools": list(who[cs.id][1]),
                "artifacts": row.get("n_artifacts", 0),
                "points": row.get("n_points", 0),
                "lines_added": row.get("added") or 0,
                "lines_removed": row.get("removed") or 0,
                "is_release": cs.app.release_set_id == cs.id,
                "restored_from": cs.restored_from_id,
                "run_id": cs.run_id,
                "turn_id": cs.turn_id,
                # The points retention pruned from the set: every one of them when it has no
                # point left, and then nothing of it can be restored.
                "pruned": list(cs.pruned or []),
            }
        )
    return out


def list_change_sets(
    app: App,
    *,
    page: int = 1,
    per_page: int = PER_PAGE_DEFAULT,
    cursor: str | None = None,
    limit: int | None = None,
    run_id: str | None = None,
    turn_id: str | None = None,
    written_by: str | None = None,
    since: datetime | None = None,
) -> dict[str, Any]:
    """One page of the app's change sets, newest first: by page number, or after ``cursor``
    when one is given or ``limit`` is (a keyset page, docs/api.md#cursors); only those of
    ``run_id``, ``turn_id``, with a point ``written_by``, created at or after ``since``."""
    rows = ChangeSet.objects.filter(app=app).select_related("app")
    if run_id is not None:
        rows = rows.filter(run_id=run_id)
    if turn_id is not None:
        rows = rows.filter(turn_id=turn_id)
    if written_by is not None:
        by = RestorePoint.objects.filter(change_set_id=OuterRef("pk"), written_by=written_by)
        rows = rows.filter(Exists(by))
    if since is not None:
        rows = rows.filter(created_on__gte=since)
    rows = rows.order_by("-created_on", "-id")
    total = rows.count()
    if cursor is not None or limit is not None:
        size = limit or per_page
        sets, next_cursor = newest_first_page(rows, cursor=cursor, limit=size)
        return {
            "app": app.slug,
            "page": None,
            "per_page": size,
            "total": total,
            "next_page": None,
            "next_cursor": next_cursor,
            "items": _summaries(sets),
        }
    start = (page - 1) * per_page
    sets = list(rows[start : start + per_page])
    more = start + per_page < total
    return {
        "app": app.slug,
        "page": page,
        "per_page": per_page,
        "total": total,
        "next_page": page + 1 if more else None,
        "next_cursor": after(sets[-1]) if more and sets else None,
        "items": _summaries(sets),
    }


def point_out(point: RestorePoint) -> dict[str, Any]:
    return {
        "id": point.id,
        "kind": point.kind,
        "artifact": {
            "app": point.app.slug,
            "collection": point.artifact.collection,
            "name": point.artifact.name,
        },
        "previous_sha256": point.previous_sha256,
        "previous_existed": point.previous_existed,
        "previous_size": point.previous_size,
        "source_stored": point.source_stored,
        "new_sha256": point.new_sha256,
        "requested_by": point.requested_by,
        "written_by": point.written_by,
        "tool": point.tool,
        "created_on": iso_utc(point.created_on),
        "lines_added": point.lines_added,
        "lines_removed": point.lines_removed,
        "run_id": point.run_id,
        "turn_id": point.turn_id,
        "name": point.name,
    }


# A restore set's receipt kind when it reverted the set it acted on.
REVERT_KIND = "revert"
ACTED_ON_BY_LIMIT = 5


@dataclass
class ActedOnBy:
    """The restore sets that acted on a set, newest first: those that reverted it and those
    that restored it (Restore all, Restore of one of its points, Restore to release)."""

    reverted_by: Sequence[ChangeSet] = field(default_factory=list)
    restored_by: Sequence[ChangeSet] = field(default_factory=list)

    def as_dict(self) -> dict[str, str | None]:
        """The newest of each as the set's detail names them (null for none)."""
        return {
            "restoredBy": self.restored_by[0].id if self.restored_by else None,
            "revertedBy": self.reverted_by[0].id if self.reverted_by else None,
        }


def acted_on_by(change_set: ChangeSet, *, limit: int = ACTED_ON_BY_LIMIT) -> ActedOnBy:
    """The newest restore sets (at most ``limit`` of each kind) that acted on ``change_set``."""
    rows = (
        ChangeSet.objects.filter(restored_from=change_set, kind=ChangeSet.RESTORE)
        .only("id", "created_on", "created_by", "app_id")
        .order_by("-created_on", "-id")
    )
    reverted = list(rows.filter(receipt__kind=REVERT_KIND)[:limit])
    restored = list(rows.exclude(receipt__kind=REVERT_KIND)[:limit])
    return ActedOnBy(reverted_by=reverted, restored_by=restored)


def change_set_detail(change_set: ChangeSet) -> dict[str, Any]:
    """A change set with its restore points, oldest first, and the restore sets that restored
    or reverted it (``restoredBy`` / ``revertedBy``: the newest of each)."""
    points = (
        RestorePoint.objects.filter(change_set=change_set)
        .select_related("artifact", "app")
        .order_by("created_on", "id")
    )
    return {
        **_summaries([change_set])[0],
        "app": change_set.app.slug,
        "restore_points": [point_out(p) for p in points],
        "receipt": change_set.receipt,
        **acted_on_by(change_set, limit=1).as_dict(),
    }


def change_set_view(change_set: ChangeSet, view: str) -> dict[str, Any]:
    """A set's diff summary in one of the two views of docs/architecture.md#revert — ``set`` (before
    it → right after it: what it did) or ``now`` (before it → the current sources) — with its line
    totals, per artifact the change and its counts, and in words why a side is unknown."""
    states = set_states(change_set.id, view)
    return {
        "view": view,
        "lines_added": states.lines_added,
        "lines_removed": states.lines_removed,
        "artifacts": [
            {
                "collection": a.artifact.collection,
                "name": a.artifact.name,
                "change": a.change,
                "lines_added": a.lines_added,
                "lines_removed": a.lines_removed,
                "reason": a.reason,
            }
            for a in states.artifacts
        ],
    }
