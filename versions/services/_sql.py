"""Prepared SQL for the capture hot path and retention.

A capture is a handful of single-row statements; building each through the ORM costs more
than running it, and capture must cost about a plain save. These helpers run the same
statements the ORM would, with the SQL built once, on the driver's own cursor
(:mod:`versions.rawsql`), on PostgreSQL pipelined (:func:`batch`) and prepared. Private to
``versions.services``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cache
from typing import Any

from django.db import DEFAULT_DB_ALIAS, connection, connections
from django.utils.dateparse import parse_datetime

from versions.models import (
    App,
    Artifact,
    Blob,
    ChangeSet,
    DeploymentEntry,
    DeploymentEvent,
    ReleaseMark,
    RestorePoint,
    SweepDebt,
    blob_hex,
    blob_key,
)
from versions.rawsql import batch as batch
from versions.rawsql import execute as _execute
from versions.rawsql import execute_first as _execute_first
from versions.services import _store


@dataclass(frozen=True)
class Cut:
    """The app's newest N-th unpinned capture point as a write's lock read saw it (N: the
    retention limit), and how many pinned captures were newer: once the write's own point is
    in, every unpinned capture at or before it is beyond the limit. The write's pruner takes
    it as its bound (see ``_sql`` "pruning")."""

    created_on: datetime
    point_id: str
    pinned_after: int


@dataclass
class ArtifactRow:
    """The columns of a locked artifact row that a capture needs."""

    pk: int
    blob_id: str | None
    sha256: str
    size: int
    deleted: bool
    updated_on: datetime | None
    # Read in the same statement as the lock (None: not read there; use read_blob):
    old_raw: bytes | None = None
    # The full copy a new version of this artifact may be stored as a delta against, read
    # with the lock (None: store a full copy).
    delta_base: _store.DeltaBase | None = None
    # Capture time of the app's newest point (read with the lock; None: none, or not read).
    app_last: datetime | None = None
    # PostgreSQL: where the app's newest N unpinned points end before this write (None: it
    # has fewer, or it was not read with the lock: see ``counted``).
    cut: Cut | None = None
    # Whether the lock read looked for the cut (PostgreSQL, a limit of one or more).
    counted: bool = False
    # The change set a capture would join, found with the lock (:class:`Grouping`).
    grouping: Grouping | None = None
    # SQLite: the app's unpinned captures from the newest ``keep``-th on, newest first (None:
    # not read with the lock).
    from_last_kept: list[ExcessRow] | None = None
    # The rows of the app's debt (pruned points not yet settled), counted up to the batch
    # (None: not read with the lock).
    owed: int | None = None

    @property
    def view_current(self) -> bool:
        """Whether the lock statement's view of the app (its grouping lookup, its retention
        count) includes this artifact's last write.

        On PostgreSQL a lock that waited for another writer returns the row as that writer
        left it, but the statement's subqueries still see the app as it was when the
        statement began: then the app's newest point is older than the row's last write,
        and a grouping lookup must be run again.
        """
        if self.updated_on is None:
            return False
        if self.app_last is None:
            return self.updated_on.timestamp() <= 0  # just created: no write yet
        return self.app_last >= self.updated_on


@dataclass(frozen=True)
class Grouping:
    """What the lock statement found for a write's run or turn (see :func:`lock_and_read`)."""

    run_id: str
    turn_id: str
    # The run's change set and whether it is pinned (run lookups).
    run_set: tuple[str, bool] | None
    # The set of the turn's newest capture since the lookup's start, whether it is pinned,
    # and that capture's time (turn lookups; the caller checks the time against its gap).
    turn_set: tuple[str, bool] | None
    turn_at: datetime | None


def _table(model: type) -> str:
    return connection.ops.quote_name(model._meta.db_table)  # type: ignore[attr-defined]


@cache
def _sql(vendor: str) -> dict[str, str]:
    artifact, blob = _table(Artifact), _table(Blob)
    point, change_set = _table(RestorePoint), _table(ChangeSet)
    json_cast = "::jsonb" if vendor == "postgresql" else ""
    app_table, mark = _table(App), _table(ReleaseMark)
    capture, counter = RestorePoint.CAPTURE, RestorePoint.COUNTER
    entry = _table(DeploymentEntry)
    debt = _table(SweepDebt)
    # PostgreSQL: a fence (OFFSET 0) keeps a correlated EXISTS a lookup per outer row. Without
    # it the planner may turn the sweep's checks into anti-joins and hashed subplans that read
    # every delta and hash every artifact and point of every app (3.3 ms with 2,000 apps,
    # against 0.15 ms). SQLite takes no OFFSET without LIMIT and probes per row anyway.
    fence = " OFFSET 0" if vendor == "postgresql" else ""
    # Whether change set ``cs`` is pinned: named, or its app's release.
    set_pinned = (
        f"CASE WHEN cs.name <> '' OR EXISTS (SELECT 1 FROM {app_table} AS ap "
        "WHERE ap.id = cs.app_id AND ap.release_set_id = cs.id) THEN 1 ELSE 0 END"
    )
    # A change set's id, followed by " pinned" when it is pinned (one column for both).
    set_ref = f"cs.id || CASE WHEN {set_pinned} = 1 THEN ' pinned' ELSE '' END"
    # The newest capture of a turn (without a run) since a moment; nothing for turn "".
    turn_newest = (
        f"FROM {point} AS p WHERE %s <> '' AND p.app_id = a.app_id AND p.turn_id = %s "
        "AND p.run_id = '' AND p.kind = 'capture' AND p.created_on >= %s "
        "ORDER BY p.created_on DESC LIMIT 1"
    )

    def referenced(sha: str, *, points: str = "") -> str:
        """Whether blob ``sha`` is referenced: by an artifact, a deployment or a point (those
        ``points`` further restricts, e.g. to the ones a statement does not delete)."""
        return (
            f"(EXISTS (SELECT 1 FROM {artifact} AS a WHERE a.blob_id = {sha}{fence}) "
            f"OR EXISTS (SELECT 1 FROM {entry} AS e WHERE e.blob_id = {sha}{fence}) "
            f"OR EXISTS (SELECT 1 FROM {point} AS p WHERE p.previous_blob_id = {sha}"
            f"{points}{fence}))"
        )

    # A blob among the candidates ({ids}), or the full copy a candidate delta needs, that nothing
    # references any more (nor a delta outside the candidates).
    sweep = (
        f"DELETE FROM {blob} WHERE sha256 IN (SELECT c.sha256 FROM {blob} AS c "
        f"WHERE c.sha256 IN ({{ids}}) UNION SELECT c.base_id FROM {blob} AS c "
        f"WHERE c.sha256 IN ({{ids}})) "
        f"AND NOT {referenced(f'{blob}.sha256')} "
        f"AND NOT EXISTS (SELECT 1 FROM {blob} AS d WHERE d.base_id = {blob}.sha256 "
        f"AND (d.sha256 NOT IN ({{ids}}) OR {referenced('d.sha256')}){fence})"
    )
    # In a pruner's statement, which still sees the points it deletes ("gone").
    outliving_gone = " AND NOT (p.id = ANY (SELECT g.id FROM gone AS g))"

    def lock_read(*, grouped: bool) -> str:
        return (
            "SELECT a.id, a.blob_id, a.sha256, a.size, a.deleted, a.updated_on, "
            "b.sha256, b.data, b.compressed, b.base_id, b.chain, k.data, k.compressed, "
            f"(SELECT p.created_on FROM {point} AS p WHERE p.app_id = a.app_id "
            "ORDER BY p.created_on DESC LIMIT 1)"
            + (
                # PostgreSQL: where the app's newest ``keep`` unpinned captures end before this
                # write (the newest ``keep``-th, read off the retention index: "cut" below),
                # and how many pinned captures are newer than it. The write's pruner takes it
                # as its bound instead of reading the index that far again (see "pruning").
                ", cut.created_on, cut.id, "
                f"(SELECT COUNT(*) FROM {point} AS q WHERE q.app_id = a.app_id "
                f"AND q.kind = '{capture}' AND q.pinned = %s "
                "AND (q.created_on, q.id) > (cut.created_on, cut.id))"
                if vendor == "postgresql"
                # SQLite: the points themselves from the newest N-th on (the next capture
                # takes the others beyond the limit), read off the retention index as
                # "excess_rows" reads them, so a write that prunes needs no query for them.
                else ", (SELECT json_group_array(json_array(id, previous_blob_id, "
                "change_set_id, artifact_id, created_on)) FROM (SELECT * "
                f"FROM {point} WHERE app_id = %s AND kind = '{capture}' AND pinned = %s "
                "ORDER BY created_on DESC, id DESC LIMIT -1 OFFSET %s))"
            )
            + (
                # The change set a capture would join: its run's open one (run "" finds
                # none; a restored or reverted set is closed) ...
                f", (SELECT {set_ref} FROM {change_set} AS cs WHERE cs.app_id = a.app_id "
                "AND cs.kind = 'change' AND cs.run_id = %s AND NOT (cs.run_id = '') "
                "AND NOT cs.closed), "
                # ... or its turn's newest capture's unless closed, and that capture's time.
                f"(SELECT {set_ref} FROM {change_set} AS cs WHERE cs.id = "
                f"(SELECT p.change_set_id {turn_newest}) AND NOT cs.closed), "
                f"(SELECT p.created_on {turn_newest})"
                if grouped
                else ""
            )
            # The rows the app owes (pruned points not yet settled), counted up to the batch
            # (see "prune_owing" and :mod:`versions.services.retention`).
            + f", (SELECT COUNT(*) FROM (SELECT 1 FROM {debt} AS o WHERE o.app_id = a.app_id "
            "LIMIT %s) AS owed)"
            + f" FROM {artifact} AS a LEFT JOIN {blob} AS b ON b.sha256 = a.blob_id "
            f"LEFT JOIN {blob} AS k ON k.sha256 = b.base_id "
            + (
                f"LEFT JOIN LATERAL (SELECT p.created_on, p.id FROM {point} AS p "
                f"WHERE p.app_id = a.app_id AND p.kind = '{capture}' AND p.pinned = %s "
                "ORDER BY p.created_on DESC, p.id DESC LIMIT 1 OFFSET %s) AS cut ON true "
                if vendor == "postgresql"
                else ""
            )
            + "WHERE a.app_id = %s AND a.collection = %s AND a.name = %s"
            + (" FOR UPDATE OF a" if vendor == "postgresql" else "")
        )

    # The pruner's statement up to what it owes (see "prune_owing" and "prune_settling").
    # "cut": the newest point beyond the limit. The write's lock read gives it (the newest
    # N-th before the write: beyond the limit once the write's newer point is in), with the
    # pinned captures newer than it then. It still holds when no more of those are pinned now:
    # only pruners delete captures, and only beyond a cut, so the captures newer than it are at
    # least those N (the write's own included) and the pinned among them, and at least N stay
    # unpinned. A point pinned since (a set named meanwhile) could leave fewer: then, or without
    # a given cut, the cut is read off the retention index, N entries deep. (LIMIT 1 over the
    # UNION ALL: the second branch runs only when the first gives no row.)
    pruning = (
        "WITH cut AS (SELECT c, i FROM ("
        f"SELECT %s::timestamptz AS c, %s::varchar AS i WHERE %s AND (SELECT COUNT(*) "
        f"FROM {point} AS q WHERE q.app_id = %s AND q.kind = '{capture}' AND q.pinned = true "
        "AND (q.created_on, q.id) > (%s::timestamptz, %s::varchar)) <= %s "
        f"UNION ALL (SELECT created_on, id FROM {point} WHERE app_id = %s "
        f"AND kind = '{capture}' AND pinned = false ORDER BY created_on DESC, id DESC "
        "LIMIT 1 OFFSET %s)) AS given LIMIT 1), "
        # The artifacts of the points beyond the cut, found by their keys: the ids are taken
        # first (an array, computed once), so no plan walks every artifact of the app against
        # a hashed list, as the generic plan did for an app with hundreds of artifacts.
        f"locked AS (SELECT a.id FROM {artifact} AS a WHERE a.id = ANY (ARRAY("
        f"SELECT p.artifact_id FROM {point} AS p WHERE p.app_id = %s "
        f"AND p.kind = '{capture}' AND p.pinned = false "
        "AND (p.created_on, p.id) <= (SELECT c, i FROM cut) "
        "AND NOT (p.change_set_id = ANY(%s)))) ORDER BY a.id FOR UPDATE OF a), "
        f"gone AS (DELETE FROM {point} AS p WHERE p.app_id = %s "
        f"AND p.kind = '{capture}' AND p.pinned = false "
        "AND (p.created_on, p.id) <= (SELECT c, i FROM cut) "
        "AND NOT (p.change_set_id = ANY(%s)) "
        "AND p.artifact_id IN (SELECT id FROM locked) "
        "RETURNING p.id, p.previous_blob_id, p.change_set_id, p.artifact_id, p.created_on), "
        f"moved AS (UPDATE {artifact} AS a SET pruned_until = CASE WHEN a.pruned_until "
        "IS NULL OR a.pruned_until < g.t THEN g.t ELSE a.pruned_until END "
        "FROM (SELECT artifact_id, MAX(created_on) AS t FROM gone GROUP BY artifact_id) "
        "AS g WHERE a.app_id = %s AND a.id = g.artifact_id RETURNING a.id), "
        # Every set a gone point was in lists it, emptied or not (an emptied set is removed
        # by the pruner that settles the app's debt; until then it reads as pruned).
        f"listed AS (UPDATE {change_set} AS cs SET pruned = cs.pruned || "
        "(SELECT jsonb_agg(jsonb_build_object('pointId', g.id, 'artifactId', "
        "g.artifact_id) ORDER BY g.created_on DESC, g.id DESC) FROM gone AS g "
        "WHERE g.change_set_id = cs.id) "
        "WHERE cs.id IN (SELECT change_set_id FROM gone) RETURNING cs.id), "
    )

    return {
        # The app's unpinned capture points beyond the newest N, newest first: one backward
        # scan of the retention index (which ends with the id, so this order is the index's),
        # reading the N kept entries and the ones beyond. Counter-points are not counted
        # (docs/architecture.md#retention): see "excess_counters".
        "excess_rows": (
            "SELECT id, previous_blob_id, change_set_id, artifact_id, created_on "
            f"FROM {point} WHERE app_id = %s AND kind = '{capture}' AND pinned = %s "
            "ORDER BY created_on DESC, id DESC "
            + ("LIMIT ALL" if vendor == "postgresql" else "LIMIT -1")
            + " OFFSET %s"
        ),
        # The unpinned counter-points of the app's restore sets older than its newest N unnamed
        # ones (a named set's points are pinned; so are the release's). Only points at or before
        # the N-th newest set's time are read, on the retention index.
        "excess_counters": (
            f"WITH kept AS (SELECT id, created_on FROM {change_set} WHERE app_id = %s "
            f"AND kind = '{ChangeSet.RESTORE}' AND name = '' "
            "ORDER BY created_on DESC, id DESC LIMIT %s) "
            "SELECT p.id, p.previous_blob_id, p.change_set_id, p.artifact_id, p.created_on "
            f"FROM {point} AS p WHERE p.app_id = %s AND p.kind = '{counter}' AND p.pinned = %s "
            "AND p.created_on <= (SELECT MIN(created_on) FROM kept) "
            "AND NOT EXISTS (SELECT 1 FROM kept WHERE kept.id = p.change_set_id) "
            "ORDER BY p.created_on DESC, p.id DESC"
        ),
        # A set retention emptied goes when the debt naming it is settled, unless a person
        # named it or marked it as the release since (the services refuse both, but a race may
        # win); then what pointed at a set that is gone is cleared (the foreign keys are
        # checked at commit). No statement needs the previous one's rows, so
        # on PostgreSQL they travel in one pipeline. Each finds its rows by the given sets' keys
        # and each gone set by its primary key: never a scan of every app's sets, as `NOT IN
        # (SELECT id FROM <all sets>)` was (docs/architecture.md#scale). No app predicate beside the
        # keys: a planner could then prefer the app's index and read every set or mark of the app.
        "delete_emptied_sets": (
            f"DELETE FROM {change_set} WHERE id IN ({{ids}}) AND name = '' "
            f"AND NOT EXISTS (SELECT 1 FROM {app_table} AS ap "
            f"WHERE ap.release_set_id = {change_set}.id) "
            f"AND NOT EXISTS (SELECT 1 FROM {point} AS p WHERE p.change_set_id = {change_set}.id) "
            # Whether a restore set or a release mark still points at it.
            f"RETURNING id, EXISTS (SELECT 1 FROM {change_set} AS r "
            f"WHERE r.restored_from_id = {change_set}.id), "
            f"EXISTS (SELECT 1 FROM {mark} AS m WHERE m.change_set_id = {change_set}.id)"
        ),
        "forget_gone_in_sets": (
            f"UPDATE {change_set} SET restored_from_id = NULL WHERE restored_from_id IN ({{ids}}) "
            f"AND NOT EXISTS (SELECT 1 FROM {change_set} AS gone "
            f"WHERE gone.id = {change_set}.restored_from_id)"
        ),
        "forget_gone_in_marks": (
            f"UPDATE {mark} SET change_set_id = NULL WHERE change_set_id IN ({{ids}}) "
            f"AND NOT EXISTS (SELECT 1 FROM {change_set} AS gone "
            f"WHERE gone.id = {mark}.change_set_id)"
        ),
        "delete_points": f"DELETE FROM {point} WHERE app_id = %s AND id IN ({{ids}})",
        # The app's debt (see "prune_owing"): what pruned points leave, a row each; the rows
        # owed, counted up to the batch; and all of them taken, to settle.
        "owe": f"INSERT INTO {debt} (app_id, blob_id, change_set_id) VALUES {{rows}}",
        "owed": (f"SELECT COUNT(*) FROM (SELECT 1 FROM {debt} WHERE app_id = %s LIMIT %s) AS owed"),
        "take_debt": f"DELETE FROM {debt} WHERE app_id = %s RETURNING blob_id, change_set_id",
        # Retention locks the artifacts whose pruned_until it moves, in one order, before it
        # deletes anything (PostgreSQL).
        "lock_artifacts": (
            f"SELECT id FROM {artifact} WHERE app_id = %s AND id IN ({{ids}}) "
            "ORDER BY id FOR UPDATE"
        ),
        # The pruner of a write that took the app over its limit (PostgreSQL), in one
        # statement, under the pruner's lock:
        # - "locked": the artifacts whose unpinned captures lie beyond the newest N, except the
        #   protected sets', locked in one order (a restore locks its artifacts in that order
        #   too) before anything is deleted: "gone" reads them;
        # - "gone": those points deleted as they are now (a point pinned meanwhile stays; one
        #   another pruner took is gone already);
        # - "moved": their artifacts' pruned_until moved forward;
        # - "listed": every set they were in lists them (an emptied one too, so until it goes
        #   it reads as pruned, never as restorable: docs/architecture.md#retention);
        # then, in "prune_owing", each gone point owes a row of the app's debt ("owed": the
        # blob it held, its set), and in "prune_settling", which a pruner runs instead once the
        # app owes a batch of rows (``VERSIONS_SWEEP_BATCH``), the rows owed before are
        # settled ("settled") with this pruner's blobs:
        # - "emptied": the sets they name that are left with no point deleted, and what
        #   pointed at them cleared ("unlinked", "unmarked"), as the models' SET_NULL says. A
        #   set named or marked as the release since it was emptied stays (the services refuse
        #   both; a race that wins leaves a pinned, pruned set, never a broken key);
        # - "swept": the blobs, and the full copies only those needed, deleted when nothing
        #   else references them (a blob referenced again is not, and its debt is paid). The
        #   statement still sees the points it deletes, so their references do not count.
        # Settling in batches pays a sweep's and a set removal's work once for many points, and
        # takes both off most writes at the limit (docs/architecture.md#scale: prune_vs_write); an
        # app leaves at most a batch of points unsettled: their blobs unswept, their emptied sets
        # listed as pruned.
        # No row is modified twice: "emptied" skips the sets of "gone", which "listed"
        # updates (they are owed to the next batch); restore sets hold no capture, so
        # "unlinked" touches none of the sets of "gone". Each reference check is fenced (see
        # ``fence``) so it stays a lookup per candidate.
        "prune_owing": (
            pruning
            # What each gone point leaves to settle: the blob it held and its set.
            + f"owed AS (INSERT INTO {debt} (app_id, blob_id, change_set_id) "
            "SELECT %s, COALESCE(previous_blob_id, ''), change_set_id FROM gone RETURNING 1) "
            "SELECT (SELECT COUNT(*) FROM gone), (SELECT COUNT(*) FROM owed)"
        )
        if vendor == "postgresql"
        else "",
        "prune_settling": (
            pruning
            # The blobs of this pruner's points are swept with the batch; their sets are owed
            # to the next one (a set "listed" updates cannot be deleted in the same statement).
            + f"owed AS (INSERT INTO {debt} (app_id, blob_id, change_set_id) "
            "SELECT %s, '', change_set_id FROM gone RETURNING 1), "
            f"settled AS (DELETE FROM {debt} WHERE app_id = %s "
            "RETURNING blob_id, change_set_id), "
            # A set earlier pruners left with no point goes, unless a person named it or marked
            # it as the release since (the services refuse both, but a race may win).
            f"emptied AS (DELETE FROM {change_set} AS e "
            "WHERE e.id IN (SELECT change_set_id FROM settled) AND e.name = '' "
            f"AND NOT EXISTS (SELECT 1 FROM {app_table} AS ap WHERE ap.release_set_id = e.id) "
            "AND NOT EXISTS (SELECT 1 FROM gone AS g WHERE g.change_set_id = e.id) "
            f"AND NOT EXISTS (SELECT 1 FROM {point} AS q WHERE q.change_set_id = e.id) "
            "RETURNING e.id), "
            f"unlinked AS (UPDATE {change_set} AS r SET restored_from_id = NULL "
            "WHERE r.restored_from_id IN (SELECT id FROM emptied) "
            "AND NOT EXISTS (SELECT 1 FROM gone AS g WHERE g.change_set_id = r.id) "
            "RETURNING r.id), "
            f"unmarked AS (UPDATE {mark} AS m SET change_set_id = NULL "
            "WHERE m.change_set_id IN (SELECT id FROM emptied) RETURNING m.id), "
            "held AS (SELECT previous_blob_id AS s FROM gone WHERE previous_blob_id IS NOT NULL "
            "UNION SELECT blob_id FROM settled WHERE blob_id <> ''), "
            # A candidate's base is looked up per candidate (a join could read every blob).
            f"swept AS (DELETE FROM {blob} AS x WHERE x.sha256 IN (SELECT s FROM held "
            f"UNION SELECT (SELECT c.base_id FROM {blob} AS c WHERE c.sha256 = h.s{fence}) "
            "FROM held AS h) "
            f"AND NOT {referenced('x.sha256', points=outliving_gone)} "
            f"AND NOT EXISTS (SELECT 1 FROM {blob} AS d WHERE d.base_id = x.sha256 "
            "AND (NOT (d.sha256 = ANY (SELECT s FROM held)) "
            f"OR {referenced('d.sha256', points=outliving_gone)}){fence}) "
            "RETURNING x.sha256) "
            "SELECT (SELECT COUNT(*) FROM gone), (SELECT COUNT(*) FROM swept)"
        )
        if vendor == "postgresql"
        else "",
        # One pruner per app at a time (PostgreSQL, a transaction-level advisory lock: writers
        # never take it, so it never waits on one), whose commit need not wait for the disk
        # and whose statement runs its generic plan (see :func:`pruner_statements`).
        "pruner_lock": (
            "SELECT set_config('synchronous_commit', 'off', true), "
            "set_config('plan_cache_mode', 'force_generic_plan', true), "
            "pg_advisory_xact_lock(%s, %s)"
        ),
        "pruned_until": (
            f"UPDATE {artifact} SET pruned_until = CASE WHEN pruned_until IS NULL "
            "OR pruned_until < %s THEN %s ELSE pruned_until END WHERE app_id = %s AND id = %s"
        ),
        # Appends to a set's pruned list.
        "append_pruned": (
            f"UPDATE {change_set} SET pruned = pruned || %s::jsonb WHERE app_id = %s AND id = %s"
            if vendor == "postgresql"
            else f"UPDATE {change_set} SET pruned = json_insert(pruned{{appends}}) "
            "WHERE app_id = %s AND id = %s"
        ),
        # One statement: a blob goes only if, at that moment, nothing references it. The full
        # copies the candidates are deltas against are candidates too; one goes only if every
        # delta that needs it goes with it (a delta is never a base: chains are one deep).
        # (The candidates and their bases are one list, found on the primary key: an OR of
        # the two would have the planner scan the tables.) Each check is fenced (see ``fence``).
        # No deployment may reference it either (docs/architecture.md#environments).
        "sweep": sweep,
        # The lock, the current source and the retention count, in one statement (on SQLite
        # the write lock is already held, so the count cannot go stale; on PostgreSQL it is
        # the app as the statement began). The blob's sha is read back so a join that
        # PostgreSQL re-checked after waiting for the lock is detected.
        "lock_read": lock_read(grouped=False),
        "lock_read_grouped": lock_read(grouped=True),
        # The app's unpinned capture points (what retention counts), counted up to a cap.
        "unpinned": (
            f"SELECT COUNT(*) FROM (SELECT 1 FROM {point} WHERE app_id = %s "
            f"AND kind = '{capture}' AND pinned = %s LIMIT %s) AS capped"
        ),
        # A blob and, for a delta, the full copy it needs: one query.
        "blob": (
            f"SELECT b.data, b.compressed, b.base_id, k.data, k.compressed FROM {blob} AS b "
            f"LEFT JOIN {blob} AS k ON k.sha256 = b.base_id WHERE b.sha256 = %s"
        ),
        "insert_blob": (
            f"INSERT INTO {blob} (sha256, data, size, chars, compressed, created_on, base_id, "
            "chain) VALUES (%s, %s, %s, %s, %s, %s, %s, %s) ON CONFLICT (sha256) DO NOTHING"
        ),
        "insert_set": (
            f"INSERT INTO {change_set} (id, app_id, kind, name, created_on, created_by, "
            "restored_from_id, receipt, run_id, turn_id, pruned, message) "
            f"VALUES (%s, %s, 'change', '', %s, %s, NULL, NULL, %s, %s, %s{json_cast}, %s)"
        ),
        # A later write's message, kept only when the set has none yet (the first one given).
        "set_message": f"UPDATE {change_set} SET message = %s WHERE id = %s AND message = ''",
        # A set found for grouping, and whether it is pinned (named, or the app's release):
        # a point joining a pinned set is pinned too. A closed set (a restore or revert acted
        # on it) is never joined.
        "set_by_run": (
            f"SELECT cs.id, {set_pinned} FROM {change_set} AS cs "
            "WHERE cs.app_id = %s AND cs.kind = 'change' AND cs.run_id = %s "
            "AND NOT (cs.run_id = '') AND NOT cs.closed"
        ),
        "set_by_turn": (
            f"SELECT cs.id, {set_pinned} FROM {change_set} AS cs WHERE cs.id = "
            f"(SELECT p.change_set_id FROM {point} AS p WHERE p.app_id = %s "
            "AND p.turn_id = %s AND p.run_id = '' AND p.kind = 'capture' AND p.created_on >= %s "
            "ORDER BY p.created_on DESC LIMIT 1) AND NOT cs.closed"
        ),
        "insert_point": (
            f"INSERT INTO {point} (id, app_id, artifact_id, kind, previous_blob_id, "
            "previous_sha256, previous_size, previous_existed, source_stored, new_sha256, "
            "requested_by, written_by, tool, created_on, lines_added, lines_removed, run_id, "
            "turn_id, name, change_set_id, pinned) VALUES "
            "(%s, %s, %s, 'capture', %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, "
            "'', %s, %s)"
        ),
        # The set a restore set restored (an undo protects it from retention too).
        "restored_from": (
            f"SELECT restored_from_id FROM {change_set} WHERE app_id = %s AND id = %s"  # noqa: S608
        ),
        # The latest promotion of a deployment: where it came from (a rollback's target).
        "promotion_of": (
            "SELECT from_deployment_id, id, unchanged "
            f"FROM {_table(DeploymentEvent)} WHERE app_id = %s AND kind = %s "
            'AND to_deployment_id = %s ORDER BY "on" DESC, id DESC LIMIT 1'
        ),
        "update_artifact": (
            f"UPDATE {artifact} SET blob_id = %s, sha256 = %s, size = %s, deleted = %s, "
            "route_key = NULL, updated_on = %s, updated_by = %s WHERE id = %s"
        ),
    }


# The vendor of each database engine configured, looked up by its setting: reading it off the
# connection goes through Django's per-thread connection lookup, once per statement otherwise.
_VENDORS: dict[str, str] = {}


def _vendor() -> str:
    engine = connections.settings[DEFAULT_DB_ALIAS]["ENGINE"]
    vendor = _VENDORS.get(engine)
    if vendor is None:
        vendor = _VENDORS[engine] = connection.vendor
    return vendor


def _q(name: str) -> str:
    return _sql(_vendor())[name]


def _key(sha: str | None) -> Any:
    """Blob key ``sha`` as a statement's parameter: its 32 bytes on PostgreSQL, where keys are
    stored so (``BlobKeyField``); read keys come back through ``blob_hex``."""
    if sha is None or _vendor() != "postgresql":
        return sha
    return blob_key(sha)


def _run(name: str, params: Sequence[Any], *, fetch: bool = False, binary: bool = False) -> Any:
    """Run prepared statement ``name``; with ``fetch``, return its first row."""
    return _execute(_q(name), params, "one" if fetch else "", binary=binary)


def restored_from(app_id: int, set_id: str) -> str | None:
    """The set restore set ``set_id`` of app ``app_id`` restored, or None."""
    row = _run("restored_from", [app_id, set_id], fetch=True)
    return None if row is None else row[0]


def promotion_of(app_id: int, deployment_id: str) -> tuple[str | None, int, int] | None:
    """The latest promotion to ``deployment_id`` in app ``app_id``: the deployment it
    replaced (None: the first), its event's id and its unchanged count; None when there is
    none. A prepared statement: a rollback's one read besides its lock."""
    row = _run("promotion_of", [app_id, DeploymentEvent.PROMOTION, deployment_id], fetch=True)
    return None if row is None else (row[0], row[1], row[2])


def moment(value: datetime) -> Any:
    """``value`` as the database takes it; adapt once, pass to several statements."""
    return connection.ops.adapt_datetimefield_value(value)


def _read_dt(value: object) -> datetime | None:
    """A stored datetime as an aware UTC datetime (SQLite hands back naive ones or text)."""
    if value is None:
        return None
    if isinstance(value, datetime):
        parsed: datetime | None = value
    else:
        try:
            parsed = datetime.fromisoformat(str(value))
        except ValueError:
            parsed = parse_datetime(str(value))
    if parsed is not None and parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed


def lock_and_read(
    app_id: int,
    collection: str,
    name: str,
    keep: int,
    *,
    run_id: str = "",
    turn_id: str = "",
    turn_since: datetime | None = None,
    sweep_batch: int = 1,
) -> ArtifactRow | None:
    """The artifact row, locked for update (PostgreSQL; SQLite holds the write lock), with its
    current source and the retention count, or None. When it is the transaction's first
    statement, the transaction's BEGIN travels with it (:func:`versions.rawsql.execute_first`).

    On PostgreSQL ``cut`` is where the app's newest ``keep`` unpinned points end, as the
    statement began (see :attr:`ArtifactRow.view_current` and :class:`Cut`). On SQLite, where
    the write lock is held, ``from_last_kept`` lists the unpinned captures from the newest
    ``keep``-th on: the ones the next capture takes beyond the limit.
    ``run_id``, else ``turn_id`` with ``turn_since``: the change set a capture of that run or
    turn would join is looked up in the same statement (``grouping``). ``owed`` counts the
    rows of the app's debt (pruned points not yet settled), up to ``sweep_batch``.
    """
    postgresql = _vendor() == "postgresql"
    deep = max(keep - 1, 0)
    params: list[Any] = [True] if postgresql else [app_id, False, deep]
    turn = turn_id if (turn_id and not run_id and turn_since is not None) else ""
    grouped = bool(run_id or turn)
    if grouped:
        since = moment(turn_since or datetime(1970, 1, 1, tzinfo=UTC))
        params += [run_id, turn, turn, since, turn, turn, since]
    params.append(sweep_batch)
    if postgresql:
        params += [False, deep]  # the cut's lateral read
    row = _execute_first(
        _q("lock_read_grouped" if grouped else "lock_read"),
        [*params, app_id, collection, name],
        "one",
        binary=True,
    )
    if row is None:
        return None
    g = 17 if postgresql else 15  # the grouping's columns
    blob_id = blob_hex(row[1])
    old_raw = None
    delta_base = None
    if blob_id is not None and row[6] == row[1]:
        data, compressed, base_id, chain, base_data, base_compressed = row[7:13]
        old_raw, delta_base = _store.read_with_base(
            blob_id, data, compressed, blob_hex(base_id), chain, base_data, base_compressed
        )
    return ArtifactRow(
        row[0],
        blob_id,
        row[2] or "",
        row[3],
        bool(row[4]),
        _read_dt(row[5]),
        old_raw,
        delta_base,
        _read_dt(row[13]),
        cut=_cut(row[14], row[15], row[16]) if postgresql else None,
        counted=postgresql and keep > 0,
        grouping=Grouping(
            run_id, turn, _set_ref(row[g]), _set_ref(row[g + 1]), _read_dt(row[g + 2])
        )
        if grouped
        else None,
        from_last_kept=None if postgresql else _excess_rows(json.loads(row[14])),
        owed=row[-1],
    )


def _cut(created_on: Any, point_id: str | None, pinned_after: int) -> Cut | None:
    at = _read_dt(created_on)
    return Cut(at, point_id, int(pinned_after)) if at is not None and point_id else None


def _excess_rows(rows: Sequence[Sequence[Any]]) -> list[ExcessRow]:
    return [(r[0], blob_hex(r[1]), r[2], r[3], _read_dt(r[4])) for r in rows]  # type: ignore[misc]


def _set_ref(value: str | None) -> tuple[str, bool] | None:
    if not value:
        return None
    set_id, _, flag = value.partition(" ")
    return set_id, flag == "pinned"


def count_unpinned(app_id: int, cap: int) -> int:
    """The app's unpinned capture points, counted up to ``cap``."""
    return int(_run("unpinned", [app_id, False, cap], fetch=True)[0])


def read_blob(sha: str) -> bytes:
    """The stored bytes of blob ``sha`` (one query, a delta's base with it)."""
    data, compressed, base_key, base_data, base_compressed = _run(
        "blob", [_key(sha)], fetch=True, binary=True
    )
    base_id = blob_hex(base_key)
    if base_id is None:
        return Blob.unpack(data, compressed)
    return Blob.unpack_delta(data, base_id, Blob.full_copy(base_id, base_data, base_compressed))


def insert_blob(
    raw: bytes, sha: str, chars: int, created_on: Any, base: _store.DeltaBase | None = None
) -> None:
    """Store ``raw`` under ``sha`` unless that blob is stored already (``created_on``: a
    :func:`moment`): as a delta against ``base`` (the previous version's full copy) where
    that saves bytes and keeps the chain bounded, else as a full copy."""
    data, compressed, base_id, chain = _store.pack_after(raw, base)
    _run(
        "insert_blob",
        [_key(sha), data, len(raw), chars, compressed, created_on, _key(base_id), chain],
    )


def find_set_by_run(app_id: int, run_id: str) -> tuple[str, bool] | None:
    """The app's change set of run ``run_id`` and whether it is pinned, or None."""
    row = _run("set_by_run", [app_id, run_id], fetch=True)
    return (row[0], bool(row[1])) if row else None


def find_set_by_turn(app_id: int, turn_id: str, since: datetime) -> tuple[str, bool] | None:
    """The set of the app's newest capture of turn ``turn_id`` since ``since`` (without a
    run) and whether it is pinned, or None."""
    row = _run("set_by_turn", [app_id, turn_id, moment(since)], fetch=True)
    return (row[0], bool(row[1])) if row else None


def insert_change_set(
    set_id: str,
    app_id: int,
    created_on: Any,
    by: str,
    run_id: str,
    turn_id: str,
    message: str = "",
) -> None:
    """A new writer's change set (``created_on``: a :func:`moment`), with the turn's message
    in the same statement."""
    _run("insert_set", [set_id, app_id, created_on, by, run_id, turn_id, "[]", message])


def keep_first_message(set_id: str, message: str) -> None:
    """Give set ``set_id`` the message ``message`` unless it has one already."""
    _run("set_message", [message, set_id])


def insert_point(
    *,
    point_id: str,
    app_id: int,
    artifact_id: int,
    previous_blob_id: str | None,
    previous_sha256: str,
    previous_size: int,
    previous_existed: bool,
    source_stored: bool,
    new_sha256: str,
    requested_by: str,
    tool: str,
    created_on: Any,
    lines_added: int,
    lines_removed: int,
    run_id: str,
    turn_id: str,
    change_set_id: str,
    pinned: bool = False,
    written_by: str = "",
) -> None:
    """A capture point (``created_on``: a :func:`moment`); ``written_by``: the authenticated
    principal beside the claimed ``requested_by``."""
    _run(
        "insert_point",
        [
            point_id,
            app_id,
            artifact_id,
            _key(previous_blob_id),
            previous_sha256,
            previous_size,
            previous_existed,
            source_stored,
            new_sha256,
            requested_by,
            written_by,
            tool,
            created_on,
            lines_added,
            lines_removed,
            run_id,
            turn_id,
            change_set_id,
            pinned,
        ],
    )


def update_artifact(pk: int, *, sha: str | None, size: int, by: str, now: Any) -> None:
    """Point a non-route artifact at blob ``sha`` (None: a tombstone); ``now``: a
    :func:`moment`."""
    _run("update_artifact", [_key(sha), sha or "", size if sha else 0, sha is None, now, by, pk])


def _in(name: str, values: list) -> str:
    return _q(name).format(ids=", ".join(["%s"] * len(values)))


# A point beyond the retention limit: (id, blob, set, artifact, time).
ExcessRow = tuple[str, str | None, str, int, datetime]


def excess_points(app_id: int, keep: int) -> list[ExcessRow]:
    """The app's unpinned points beyond the newest ``keep`` (newest first, ties by id)."""
    return _excess_rows(_execute(_q("excess_rows"), [app_id, False, keep], "all") or [])


def pruner_statements(
    app_id: int, keep: int, protect: list[str], *, settle: bool = True, cut: Cut | None = None
) -> list[tuple[str, list[Any]]]:
    """Retention after a write that took the app over its limit, as the statements of one
    transaction of its own, which the write's round trip can carry after its COMMIT
    (PostgreSQL): the app's pruner lock, then one statement that locks the artifacts whose
    points go in one order, deletes the unpinned captures beyond the newest ``keep`` *as they
    are then* (except the ``protect``-ed sets'; other writers may have committed, or pruned,
    since), lists them in their sets, and owes each one's blob and set to the app's debt; with
    ``settle``, settles the rows owed before: sweeps their blobs (and this pruner's) and
    removes the sets they left with no point. ``cut``: where the write's lock read saw the
    newest ``keep`` end, taken as the bound unless points newer than it were pinned since."""
    protected = list(protect)
    given = (
        [cut.created_on, cut.point_id, True, app_id, cut.created_on, cut.point_id]
        + [cut.pinned_after]
        if cut is not None
        else [None, None, False, app_id, None, None, 0]
    )
    pruning = [*given, app_id, keep, app_id, protected, app_id, protected, app_id, app_id]
    return [
        # One pruner per app at a time. Its commit need not wait for the disk: if the server
        # stopped before it reached it, the points would simply still be there, and the next
        # write over the limit prunes them (an asynchronous commit never leaves half of it).
        # Its statement, prepared on the connection, runs its generic plan (every key a
        # parameter, every read by the app's index): left to choose, PostgreSQL planned it
        # afresh for each write once statistics of many apps made a custom plan look cheaper,
        # and planning it cost more than running it (0.45 ms a write).
        (_q("pruner_lock"), [_PRUNER_LOCK_SPACE, app_id]),
        (
            _q("prune_settling" if settle else "prune_owing"),
            [*pruning, app_id] if settle else pruning,
        ),
    ]


def excess_counters(
    app_id: int, restore_sets: int
) -> list[tuple[str, str | None, str, int, datetime]]:
    """The app's unpinned counter-points whose restore set is not one of its newest
    ``restore_sets`` unnamed ones (newest first): (id, blob, set, artifact, time)."""
    rows = _execute(_q("excess_counters"), [app_id, restore_sets, app_id, False], "all")
    return _excess_rows(rows or [])


# The advisory lock space of retention (any constant; the app's id is the second key).
_PRUNER_LOCK_SPACE = 0x7665_7273  # "vers"


def lock_artifacts(app_id: int, artifact_ids: list[int]) -> None:
    """Lock the given artifact rows of the app in id order (PostgreSQL; SQLite holds the write
    lock). Nothing is read back: in a :func:`batch` the statements after it wait for the locks."""
    if artifact_ids and _vendor() == "postgresql":
        ordered = sorted(artifact_ids)
        _execute(_in("lock_artifacts", ordered), [app_id, *ordered])


def delete_points(app_id: int, point_ids: list[str]) -> None:
    _execute(_in("delete_points", point_ids), [app_id, *point_ids])


def advance_pruned_until(app_id: int, newest: dict[int, datetime]) -> None:
    """Move each artifact's ``pruned_until`` forward to the given moment (never back)."""
    for artifact_id, when in newest.items():
        at = moment(when)
        _execute(_q("pruned_until"), [at, at, app_id, artifact_id])


def count_owed(app_id: int, cap: int) -> int:
    """The rows of the app's debt (pruned points not yet settled), counted up to ``cap``."""
    return int(_run("owed", [app_id, cap], fetch=True)[0])


def owe(app_id: int, rows: list[tuple[str, str]]) -> None:
    """Add (blob, set) rows to the app's debt: what pruned points leave to settle ("": none)."""
    for start in range(0, len(rows), _OWE_CHUNK):
        chunk = rows[start : start + _OWE_CHUNK]
        sql = _q("owe").format(rows=", ".join(["(%s, %s, %s)"] * len(chunk)))
        _execute(sql, [v for blob, set_id in chunk for v in (app_id, _key(blob), set_id)])


# Rows per INSERT of debt: SQLite allows 999 parameters to a statement in older builds.
_OWE_CHUNK = 300


def take_debt(app_id: int) -> list[tuple[str, str]]:
    """Remove every row the app owes, returning them (blob, set), to settle them."""
    rows = _execute(_q("take_debt"), [app_id], "all") or []
    return [(blob_hex(row[0]) or "", row[1]) for row in rows]


def delete_emptied_change_sets(set_ids: list[str]) -> set[str]:
    """Delete the change sets among ``set_ids`` left with no point, unnamed and not the app's
    release, and clear what pointed at them (a restore set's ``restored_from``, a release
    mark), as the models' SET_NULL says; returns the ids deleted."""
    if not set_ids:
        return set()
    rows = _execute(_in("delete_emptied_sets", set_ids), set_ids, "all") or []
    for column, name in ((1, "forget_gone_in_sets"), (2, "forget_gone_in_marks")):
        pointed_at = sorted(row[0] for row in rows if row[column])
        if pointed_at:
            _execute(_in(name, pointed_at), pointed_at)
    return {row[0] for row in rows}


# Path/value pairs per json_insert call: SQLite allows 127 arguments to a function by default.
_APPEND_CHUNK = 50


def append_pruned(app_id: int, additions: dict[str, list[dict]]) -> None:
    """Add to each change set's ``pruned`` list the points retention removed from it (an
    emptied set too: it is removed when the app's debt is settled)."""
    postgresql = _vendor() == "postgresql"
    for set_id, entries in additions.items():
        if postgresql:
            _execute(_q("append_pruned"), [json.dumps(entries), app_id, set_id])
        else:  # json_insert takes a bounded number of arguments: append in chunks
            for start in range(0, len(entries), _APPEND_CHUNK):
                chunk = entries[start : start + _APPEND_CHUNK]
                sql = _q("append_pruned").format(appends=", '$[#]', json(%s)" * len(chunk))
                _execute(sql, [*(json.dumps(entry) for entry in chunk), app_id, set_id])


def sweep_blobs(candidates: list[str]) -> int:
    """Delete the blobs among ``candidates`` that no artifact, point or deployment references,
    with the full copies that only deltas among them needed."""
    if not candidates:
        return 0
    return int(_execute(_in("sweep", candidates), [_key(c) for c in candidates] * 3))
