"""Retention (newest N unpinned points per app) and pins (SPEC §2)."""

from __future__ import annotations

import logging
from datetime import datetime

from django.db import DatabaseError, connection, transaction
from django.db.models import Q

from versions import conf
from versions.models import App, RestorePoint
from versions.services import _sql

logger = logging.getLogger(__name__)


def sweep_blobs(candidates: set[str]) -> None:
    """Sweep the unreferenced blobs among ``candidates``: at once on SQLite, where writers are
    serialized (nothing can re-reference a blob between the check and the delete), else after
    the writer's transaction committed (:func:`sweep_after_commit`)."""
    if not candidates:
        return
    if connection.vendor == "sqlite":
        _sql.sweep_blobs(sorted(candidates))
    else:
        sweep_after_commit(candidates)


def sweep_after_commit(candidates: set[str]) -> None:
    """Sweep unreferenced blobs among ``candidates`` once the writer's transaction committed.

    Outside the writer's transaction so a concurrent writer that re-references a blob makes
    the sweep fail (harmlessly) rather than the write.
    """
    doomed = sorted(candidates)

    def sweep() -> None:
        try:
            if connection.in_atomic_block:  # run inside an outer transaction: keep it usable
                with transaction.atomic():
                    _sql.sweep_blobs(doomed)
            else:  # one statement, its own transaction: one round trip
                _sql.sweep_blobs(doomed)
        except DatabaseError:  # pragma: no cover - a race; the next sweep will get it
            logger.info("blob sweep skipped after a concurrent reference", exc_info=True)

    transaction.on_commit(sweep)


def prune_after_commit(app: App) -> None:
    """Prune the app once the writer's transaction committed, in a transaction of its own.

    A top-level writer on PostgreSQL holds only its artifact's lock, and retention moves other
    artifacts' ``pruned_until``: pruning inside the write could wait for another writer that
    waits for it. Alone, the pruner first becomes the app's only one, then locks what it
    touches in one order, so it only ever waits. If it still fails (a writer joined a set it
    emptied), it gives up: the next write over the limit prunes again.
    """

    def prune_alone() -> None:
        try:
            with transaction.atomic():
                prune(app, alone=True)
        except DatabaseError:
            logger.warning("retention of app %s left for the next write", app.slug, exc_info=True)

    # robust: the write has landed whatever happens here; an error is logged, not raised.
    transaction.on_commit(prune_alone, robust=True)


def prune(app: App, *, alone: bool = False) -> int:
    """Delete the app's unpinned points beyond the newest N; returns how many went.

    ``alone``: the caller's transaction does nothing else (:func:`prune_after_commit`): it
    waits to be the app's only pruner, its last statements carry the COMMIT, and the blobs it
    leaves unreferenced go with them (a writer re-referencing one meanwhile fails on its
    foreign key at commit, and retries).
    """
    excess = _sql.excess_points(app.pk, conf.points_per_app(), first=alone)
    if not excess:
        return 0
    by_set: dict[str, list[dict]] = {}
    newest_pruned: dict[int, datetime] = {}
    for point_id, _blob, set_id, artifact_id, created_on in excess:
        by_set.setdefault(set_id, []).append({"pointId": point_id, "artifactId": artifact_id})
        if artifact_id not in newest_pruned or created_on > newest_pruned[artifact_id]:
            newest_pruned[artifact_id] = created_on
    blobs = {row[1] for row in excess if row[1]}
    with _sql.batch(commit=alone):  # none of these needs the one before's rows
        _sql.lock_artifacts(list(newest_pruned))
        _sql.delete_points([row[0] for row in excess])
        # pruned_until only ever moves forward (a point pinned for a while and pruned later
        # is older than what was pruned before it).
        _sql.advance_pruned_until(newest_pruned)
        # A change set left with no points is gone with them (named or release sets are
        # pinned, so never emptied); one that lost some keeps the list, so Restore all can
        # say which artifact's state before the turn was pruned.
        _sql.delete_emptied_change_sets(sorted(by_set))
        _sql.append_pruned(by_set)
        if alone:
            _sql.sweep_blobs(sorted(blobs))
        else:
            sweep_blobs(blobs)
    return len(excess)


def refresh_pins(*, set_ids: list[str] | None = None, point_ids: list[str] | None = None) -> None:
    """Recompute ``pinned`` for the points of the given sets / the given points."""
    points = RestorePoint.objects.all()
    if set_ids is not None:
        points = points.filter(change_set_id__in=set_ids)
    if point_ids is not None:
        points = points.filter(id__in=point_ids)
    release_ids = [
        rid
        for rid in App.objects.filter(release_set__isnull=False).values_list(
            "release_set_id", flat=True
        )
        if rid
    ]
    pinned_q = ~Q(name="") | ~Q(change_set__name="") | Q(change_set_id__in=release_ids)
    points.filter(pinned_q).exclude(pinned=True).update(pinned=True)
    points.exclude(pinned_q).exclude(pinned=False).update(pinned=False)
