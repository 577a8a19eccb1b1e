"""Restore all and Restore (a point): two plans of the one engine (:mod:`.engine`).

Restore all returns every artifact of a change set to its state before the set: per artifact,
the "state before" of its oldest point in the set. Restoring a restore set (``rs_…``) undoes
that restore: its points are the counter-points. Restore returns one artifact to its state
before one point. The engine pre-flights, locks, writes behind counter-points and answers the
receipt; these plans only say which state each artifact goes to.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from django.db import connection

from versions import conf, rawsql
from versions.errors import InvalidInput, NotFound
from versions.messages import (
    NOOP_MESSAGE,
    NOOP_POINT_MESSAGE,
    POINT_NOT_FOUND,
    SET_NOT_FOUND,
)
from versions.models import App, Blob, RestorePoint, blob_hex
from versions.services import _restore_sql, engine
from versions.services.access import Actor
from versions.services.engine import (
    EXPECTED_BAD_VALUE,
    FINDING_NOT_STORED,
    FINDING_PRUNED,
    Locker,
    Request,
    RestoreTarget,
    Subject,
    checked_sha,
    normalise_expected,
    pruned_points,
    refused_target,
)
from versions.services.receipts import RestoreReceipt

__all__ = [
    "NOOP_MESSAGE",
    "NOOP_POINT_MESSAGE",
    "POINT_NOT_FOUND",
    "SET_NOT_FOUND",
    "RestoreReceipt",
    "normalise_expected",
    "restore_change_set",
    "restore_point",
]


_POINT_FIELDS = (
    "id",
    "artifact_id",
    "previous_existed",
    "previous_blob_id",
    "previous_sha256",
    "previous_size",
    "new_sha256",
    "lines_added",
    "lines_removed",
    "created_on",
)


def _target_from_row(row: tuple) -> RestoreTarget:
    """:func:`~versions.services.engine.target_for_point` of a :func:`_points_sql` row, built
    positionally (one per artifact of a Restore all)."""
    pid, artifact_id, existed, key, prev_sha, prev_size, new_sha, added, removed, on = row[:10]
    blob_id = blob_hex(key)  # stored as bytes on PostgreSQL
    if not existed:
        return RestoreTarget(artifact_id, "", None, pid, 0, None, new_sha, added, removed, since=on)
    unavailable = None
    if blob_id is None:
        unavailable = FINDING_NOT_STORED.format(size=prev_size, cap=conf.max_stored_bytes())
    blob_size, chars = row[10:12] if len(row) > 10 else (0, None)
    if chars is not None:  # the blob's own size and length, read with the point
        prev_size = blob_size
    return RestoreTarget(
        artifact_id, prev_sha, blob_id, pid, prev_size, unavailable, new_sha, added, removed,
        since=on, chars=chars,
    )  # fmt: skip


_ARTIFACT_NAME = ("artifact__collection", "artifact__name")
_SQL_CACHE: dict[str, str] = {}


def _points_sql() -> str:
    """SELECT of a set's points (``_POINT_FIELDS``), oldest first, each with its previous
    blob's size and length in characters (NULL when none is stored).

    On SQLite the blob's two numbers come from the covering ``blob_meta`` index (the table
    row would be reached through the bytes' overflow pages), and ``created_on`` is read as
    the text it is stored as: only a dry run reads it as a moment."""
    key = connection.vendor
    if key not in _SQL_CACHE:
        qn = connection.ops.quote_name
        sqlite = key == "sqlite"
        columns = [f"p.{qn(field)}" for field in _POINT_FIELDS[:-1]]
        columns.append("CAST(p.created_on AS TEXT)" if sqlite else "p.created_on")
        _SQL_CACHE[key] = (
            f"SELECT {', '.join(columns)}, b.size, b.chars "  # noqa: S608
            f"FROM {qn(RestorePoint._meta.db_table)} AS p "
            f"LEFT JOIN {qn(Blob._meta.db_table)} AS b{' INDEXED BY blob_meta' if sqlite else ''} "
            "ON b.sha256 = p.previous_blob_id WHERE p.change_set_id = %s "
            "ORDER BY p.created_on, p.id"
        )
    return _SQL_CACHE[key]


@dataclass
class SetPlan(engine.RestorePlan):
    """Restore all: every artifact of the set back to its state before the set."""

    set_id: object

    def lookup(self, request: Request) -> tuple[Subject, NotFound]:
        missing = NotFound(SET_NOT_FOUND.format(id=self.set_id))
        found = (
            _restore_sql.change_set_and_app(self.set_id) if isinstance(self.set_id, str) else None
        )
        if found is None:
            raise missing
        set_id, pruned, app = found
        return Subject(app, set_id, pruned), missing

    def targets(self, subject: Subject, lock: Locker) -> list[RestoreTarget]:
        # The same SQL the ORM would build, compiled once per process and run as is: building
        # and converting it through the queryset costs more than the query itself.
        rows = rawsql.execute(_points_sql(), [subject.ref], "all")
        oldest: dict[int, RestoreTarget] = {}
        for row in rows:
            if row[1] not in oldest:
                oldest[row[1]] = _target_from_row(row)
        pruned = pruned_points(subject.data)
        subject.emptied = bool(pruned) and not rows
        reason = FINDING_PRUNED.format(keep=conf.points_per_app())
        for artifact_id, point_id in pruned.items():
            oldest[artifact_id] = refused_target(artifact_id, point_id, reason)
        return list(oldest.values())


@dataclass
class PointPlan(engine.RestorePlan):
    """Restore: one artifact back to its state before one point."""

    point_id: object
    expected_sha256: str | None = None
    noop_message = NOOP_POINT_MESSAGE  # a class default, not a field

    def lookup(self, request: Request) -> tuple[Subject, NotFound]:
        missing = NotFound(POINT_NOT_FOUND.format(id=self.point_id))
        row = (
            RestorePoint.objects.filter(id=self.point_id)
            .values_list(*_POINT_FIELDS, "app_id", "change_set_id", *_ARTIFACT_NAME)
            .first()
            if isinstance(self.point_id, str)
            else None
        )
        if row is None:
            raise missing
        *fields, app_id, set_id, collection, name = row
        # The reviewed hash of this one artifact: ``expected_sha256``, else ``expected``'s.
        reviewed = self.expected_sha256
        if reviewed is None and request.expected:
            reviewed = request.expected.get((collection, name))
        request.expected = None if reviewed is None else {(collection, name): reviewed}
        return Subject(App.objects.get(pk=app_id), set_id, _target_from_row(tuple(fields))), missing

    def targets(self, subject: Subject, lock: Locker) -> list[RestoreTarget]:
        return [subject.data]

    @property
    def restored_point(self) -> str | None:  # type: ignore[override]
        return self.point_id if isinstance(self.point_id, str) else None


def restore_change_set(
    set_id: str,
    *,
    by: str | None = None,
    dry_run: bool = False,
    expected: Mapping[Any, str] | None = None,
    actor: Actor | None = None,
    app: App | None = None,
) -> RestoreReceipt:
    """Restore all: return every artifact of the set to its state before the set, or nothing.

    ``expected`` maps ``"collection/name"`` (or ``(collection, name)``) to the sha256 the person
    reviewed as "now"; an artifact that changed since is a pre-flight finding. Restoring a
    restore set (``rs_…``) undoes that restore. A dry run writes nothing and never raises for
    findings (it lists them), except for a set retention emptied, refused alike. Raises
    ``PreflightFailed`` (nothing written) or ``NotFound``. ``actor`` must may restore the set's
    app (``Forbidden``); ``app``, when given, is the app the caller addressed: a set of another
    app is ``NotFound``.
    """
    request = engine.requested(
        by=by, actor=actor, dry_run=dry_run, expected=expected, addressed=app
    )
    return engine.execute(SetPlan(set_id), request)


def restore_point(
    point_id: str,
    *,
    by: str | None = None,
    expected_sha256: str | None = None,
    dry_run: bool = False,
    actor: Actor | None = None,
    app: App | None = None,
    expected: Mapping[Any, str] | None = None,
) -> RestoreReceipt:
    """Restore one artifact to its state before ``point_id``, behind a counter-point.

    ``expected_sha256`` is the artifact's sha256 the person reviewed as "now"; if it changed
    since, the restore is refused (``PreflightFailed``, nothing written). The receipt's
    ``restoredFromSet`` is the point's change set. ``actor`` and ``app`` as for
    :func:`restore_change_set`; ``expected`` (a mapping as for Restore all) may give the
    reviewed hash instead of ``expected_sha256``.
    """
    if expected_sha256 is not None:
        if not isinstance(expected_sha256, str):
            raise InvalidInput(EXPECTED_BAD_VALUE.format(key="expected_sha256"), field="expected")
        expected_sha256 = checked_sha(expected_sha256, "expected_sha256")
    request = engine.requested(
        by=by, actor=actor, dry_run=dry_run, expected=expected, addressed=app
    )
    return engine.execute(PointPlan(point_id, expected_sha256), request)
