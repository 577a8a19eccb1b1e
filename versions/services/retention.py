"""Retention (newest N unpinned points per app) and pins: the rules, on both databases.

The rules, the same on SQLite and PostgreSQL (only the SQL differs, in ``_sql``):

- a write over the limit prunes the app's unpinned capture points beyond the newest
  ``VERSIONS_POINTS_PER_APP``, never those of the writer's own set; a restore also prunes the
  counter-points of restore sets older than the newest ``VERSIONS_RESTORE_SETS_PER_APP``
  unnamed ones, never those of the restore, the set it restored or the restore it undoes;
- a pruned point's artifact's ``pruned_until`` moves forward, and the point is listed in its
  set's ``pruned`` (an emptied set too: until it is removed it reads as pruned, never as
  restorable, and naming or marking it is refused);
- what each pruned point leaves is owed to the app's debt (``SweepDebt``: its blob, its set);
- the pruner that makes a batch (the rows owed before it, with its own, reach
  ``VERSIONS_SWEEP_BATCH``) settles the rows owed before it: sweeps their blobs, with its own
  points' blobs, when nothing references them any more, and removes their sets left with no
  point (unless named or marked as the release since), clearing what pointed at them; its own
  points' sets are owed to the next batch. An app leaves at most a batch unsettled.

Settling in batches was chosen by measurement (``bench_scale``'s ``prune_vs_write``; see
docs/performance.md): on PostgreSQL it takes the sweep and the set removal off most writes at
the limit; on SQLite it costs no more than settling at once. A top-level write on PostgreSQL
runs these rules as one statement after its COMMIT (:func:`prune_after_commit`); everywhere
else (SQLite's writes, restores, a write inside a larger transaction) :func:`prune` runs them
statement by statement.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from datetime import datetime

from django.db import DatabaseError, connection, transaction
from django.db.models import Q

from versions import conf, rawsql
from versions.models import App, RestorePoint
from versions.rawsql import Batch
from versions.services import _sql

logger = logging.getLogger(__name__)

# Restore sets' ids start with it (docs/architecture.md#domain: ``rs_<ms>_<rand>``).
RESTORE_SET_PREFIX = "rs_"


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


def prune_after_commit(
    app: App,
    *,
    protect: Iterable[str] = (),
    batch: Batch | None = None,
    settle: bool = True,
    cut: _sql.Cut | None = None,
) -> None:
    """Prune the app once the writer's transaction committed, in a transaction of its own.

    A top-level writer on PostgreSQL holds only its artifact's lock, and retention moves other
    artifacts' ``pruned_until``: pruning inside the write could wait for another writer that
    waits for it. Alone, the pruner first becomes the app's only one, then locks what it
    touches in one order, so it only ever waits. If it still fails (a writer joined a set it
    emptied), it gives up: the next write over the limit prunes again. ``protect``: as
    :func:`prune`. ``batch``: the writer's last statements, where the pruner's transaction
    can travel after their COMMIT (:meth:`~versions.rawsql.Batch.follow`): no round trip of
    its own. Elsewhere (queries recorded, a route's write) it runs statement by statement once
    the writer committed. What the pruned points leave (their blobs, their emptied sets) is
    owed to the app's debt, which a pruner with ``settle`` pays (see ``_sql``
    "prune_settling"). ``cut``: where the write's lock read saw the app's newest N unpinned
    points end (the pruner's bound, unless points were pinned since; see ``_sql`` "pruning").
    """
    statements = _sql.pruner_statements(
        app.pk, conf.points_per_app(), list(protect), settle=settle, cut=cut
    )

    def gave_up(exc: Exception) -> None:
        logger.warning("retention of app %s left for the next write", app.slug, exc_info=exc)

    if batch is not None and batch.can_follow:
        batch.follow(statements, on_error=gave_up)
        return

    def prune_alone() -> None:
        try:
            with transaction.atomic():
                for sql, params in statements:
                    rawsql.execute(sql, params)
        except DatabaseError as exc:
            gave_up(exc)

    # robust: the write has landed whatever happens here; an error is logged, not raised.
    transaction.on_commit(prune_alone, robust=True)


def prune_after_restore(app: App, restore_set_id: str, restored_from: str) -> int:
    """Retention after a restore (docs/architecture.md#retention): it never prunes the points of the
    new restore set, of the set it restored, nor — when that was itself a restore set, i.e. this is
    an undo — of the set that one restored; so the restore can be undone, and the undo undone."""
    protect = {restore_set_id, restored_from}
    if restored_from.startswith(RESTORE_SET_PREFIX):
        # A prepared statement: compiling it as an ORM query cost each restore 0.2-0.3 ms.
        origin = _sql.restored_from(app.pk, restored_from)
        if origin:
            protect.add(origin)
    return prune(app, protect=protect, counters=True)


def settles(owed: int) -> bool:
    """Whether a pruner settles the app's debt: when the rows the app owed before it
    (counted up to the batch), with the one its pruning adds, make ``VERSIONS_SWEEP_BATCH``."""
    return owed + 1 >= conf.sweep_batch()


def prune(
    app: App,
    *,
    protect: Iterable[str] = (),
    counters: bool = False,
    excess: list[_sql.ExcessRow] | None = None,
    settle: bool | None = None,
) -> int:
    """Prune the app's unpinned capture points beyond the newest N (``VERSIONS_POINTS_PER_APP``)
    and, with ``counters`` (after a restore), the counter-points of restore sets that are not
    among its newest ``VERSIONS_RESTORE_SETS_PER_APP`` unnamed ones; returns how many went.

    Statement by statement: a write on SQLite (inside the write, whose lock serializes
    writers), a write inside a larger transaction, a restore. A top-level write on PostgreSQL
    runs the same rules as one statement (:func:`prune_after_commit`).

    ``protect``: sets none of whose points go (the writer's own turn, or a restore's sets):
    they count against the limit, and retention prunes older points of other sets instead —
    when only they are left, the app stays over the limit until the next write.

    ``excess``: the points beyond the limit, when the caller read them already (a write on
    SQLite reads them with its lock). ``settle``: whether this pruner settles the app's debt
    (:func:`settles`, from the rows owed that the write read with its lock); None: counted here.
    """
    protected = set(protect)
    if excess is None:
        excess = _sql.excess_points(app.pk, conf.points_per_app())
    excess = [row for row in excess if row[2] not in protected]
    if counters:
        excess += [
            row
            for row in _sql.excess_counters(app.pk, conf.restore_sets_per_app())
            if row[2] not in protected
        ]
    if not excess:
        return 0
    by_set: dict[str, list[dict]] = {}
    newest_pruned: dict[int, datetime] = {}
    for point_id, _blob, set_id, artifact_id, created_on in excess:
        by_set.setdefault(set_id, []).append({"pointId": point_id, "artifactId": artifact_id})
        if artifact_id not in newest_pruned or created_on > newest_pruned[artifact_id]:
            newest_pruned[artifact_id] = created_on
    if settle is None:
        settle = settles(_sql.count_owed(app.pk, conf.sweep_batch()))
    # On PostgreSQL the statements travel together; only the settling waits for the rows
    # owed that the statement before it returns.
    with _sql.batch():
        _sql.lock_artifacts(app.pk, list(newest_pruned))
        _sql.delete_points(app.pk, [row[0] for row in excess])
        # pruned_until only ever moves forward (a point pinned for a while and pruned later
        # is older than what was pruned before it).
        _sql.advance_pruned_until(app.pk, newest_pruned)
        # Every set a pruned point was in lists it, emptied or not: an emptied set lingers,
        # listed as pruned (never as restorable), until the pruner that settles the debt.
        _sql.append_pruned(app.pk, by_set)
        _leave(app, excess, settle=settle)
    return len(excess)


def _leave(app: App, gone: list[_sql.ExcessRow], *, settle: bool) -> None:
    """Owe what the ``gone`` points leave to the app's debt, a row each: the blob it held and
    its set. A settling pruner first settles the rows owed before it: it sweeps their blobs
    with its own, and removes their sets left with no point (unless named or marked as the
    release since), clearing what pointed at them; its own sets are owed to the next batch.
    """
    if not settle:
        _sql.owe(app.pk, [(row[1] or "", row[2]) for row in gone])
        return
    owed = _sql.take_debt(app.pk)
    own_sets = {row[2] for row in gone}
    _sql.delete_emptied_change_sets(sorted({s for _b, s in owed if s and s not in own_sets}))
    _sql.owe(app.pk, [("", row[2]) for row in gone])
    sweep_blobs({blob for blob, _s in owed if blob} | {row[1] for row in gone if row[1]})


def refresh_pins(*, set_ids: list[str] | None = None, point_ids: list[str] | None = None) -> None:
    """Recompute ``pinned`` for the points of the given sets / the given points."""
    points = RestorePoint.objects.all()
    if set_ids is not None:
        points = points.filter(change_set_id__in=set_ids)
    if point_ids is not None:
        points = points.filter(id__in=point_ids)
    # Only the sets involved can be a release: never read every app's mark
    # (docs/architecture.md#scale).
    involved = (
        list(set_ids)
        if set_ids is not None
        else list(points.values_list("change_set_id", flat=True).distinct())
    )
    release_ids = list(
        App.objects.filter(release_set_id__in=involved)
        .order_by()
        .values_list("release_set_id", flat=True)
    )
    pinned_q = ~Q(name="") | ~Q(change_set__name="") | Q(change_set_id__in=release_ids)
    points.filter(pinned_q).exclude(pinned=True).update(pinned=True)
    points.exclude(pinned_q).exclude(pinned=False).update(pinned=False)
