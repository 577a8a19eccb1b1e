"""The capture service: every write to an artifact records a restore point first
(docs/architecture.md#write-path)."""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db import IntegrityError, connection, transaction

from versions import conf, ids, rawsql
from versions.diffing import count_line_changes
from versions.errors import InvalidInput, NotFound, StaleWrite
from versions.messages import (
    APP_NOT_FOUND,
    ARTIFACT_NOT_FOUND,
    NAME_LOOKS_LIKE,
)
from versions.models import API_ROUTE, App, Artifact
from versions.services import _sql, locks, retention, routes, webhooks
from versions.services._store import sha256_hex
from versions.services.access import (
    Actor,
    app_for,
    principal,
)
from versions.services.reviews import address_roots, mark_addressed
from versions.services.validation import (
    check_new_name,
    encode_source,
    validate_collection,
    validate_message,
    validate_name,
    validate_optional_id,
)
from versions.terms import (
    CHANGE_SET_CREATED,
    WRITE,
)

STALE_WRITE = (
    "“{name}” changed since you read it: you expected {expected}, it is now {current}. "
    "Nothing was written; read it again and retry."
)
# How often a write is retried when a concurrent transaction made it fail on a constraint
# (two writers creating one change set, a blob swept at the same moment).
_RETRIES = 3
# How far back a turn lookup made before the capture time is known reaches beyond the gap.
_CLOCK_SLACK_SECONDS = 60


@dataclass(frozen=True)
class WriteReceipt:
    """What a write did: the hashes before and after, its restore point and change set."""

    app: str
    collection: str
    name: str
    previous_sha256: str
    sha256: str
    restore_point_id: str | None
    change_set_id: str | None
    lines_added: int
    lines_removed: int
    unchanged: bool

    def as_dict(self) -> dict[str, Any]:
        return {
            "artifact": {"app": self.app, "collection": self.collection, "name": self.name},
            "previousSha256": self.previous_sha256,
            "sha256": self.sha256,
            "restorePointId": self.restore_point_id,
            "changeSetId": self.change_set_id,
            "linesAdded": self.lines_added,
            "linesRemoved": self.lines_removed,
            "unchanged": self.unchanged,
        }


def _short(sha: str) -> str:
    return sha[:12] if sha else "“absent” (the empty marker)"


def resolve_app(app: App | str) -> App:
    """The App for an App or a slug, or NotFound."""
    if isinstance(app, App):
        return app
    found = App.objects.filter(slug=app).first()
    if found is None:
        raise NotFound(APP_NOT_FOUND.format(slug=app))
    return found


def _writable(app: App | str, actor: Actor | None) -> App | str:
    """The app, checked for ``actor`` (it may write to it); as given for a trusted caller."""
    return app if actor is None else app_for(app, actor=actor, action=WRITE)


def _requester(requested_by: str | None, actor: Actor | None) -> str:
    """Who asked: the caller's claim, else the actor's name."""
    if requested_by:
        return requested_by
    return actor.name if actor is not None else ""


def check_expected(
    current: Artifact | _sql.ArtifactRow | None, name: str, expected_sha256: str | None
) -> None:
    """Refuse a stale write: the writer's expected hash is not the current one."""
    if expected_sha256 is None:
        return
    current_sha = current.sha256 if current is not None else ""
    # Hex digests are case-insensitive: an upper-case copy of the current hash is not stale.
    if expected_sha256.lower() != current_sha:
        raise StaleWrite(
            STALE_WRITE.format(
                name=name, expected=_short(expected_sha256), current=_short(current_sha)
            ),
            current_sha256=current_sha,
        )


def _change_set_for(
    app_id: int,
    *,
    point_id: str,
    ms: int,
    at: Any,
    run_id: str,
    turn_id: str,
    by: str,
    found: _sql.Grouping | None = None,
    message: str = "",
) -> tuple[str, bool]:
    """The change set a new capture joins: same run, else same turn within the gap, else new.

    Returns the set's id and whether it is pinned (named, or the app's release), in which case
    the new point is pinned too. ``found``: what the lock statement looked up for this run or
    turn, when its view of the app was current; else the lookup runs here.
    """
    if run_id:
        if found is not None and found.run_id == run_id:
            existing = found.run_set
        else:
            existing = _sql.find_set_by_run(app_id, run_id)
        if existing:
            _keep_first_message(existing[0], message)
            return existing
    elif turn_id:
        since = ids.ms_to_datetime(ms) - timedelta(seconds=conf.turn_gap_seconds())
        if found is not None and found.turn_id == turn_id:
            # The lookup started earlier than ``since`` (before the capture time was known):
            # its newest capture counts only if it is within the gap of this one.
            in_gap = found.turn_at is not None and found.turn_at >= since
            recent = found.turn_set if in_gap else None
        else:
            recent = _sql.find_set_by_turn(app_id, turn_id, since)
        if recent:
            _keep_first_message(recent[0], message)
            return recent
    set_id = ids.change_set_id(point_id)
    _sql.insert_change_set(set_id, app_id, at, by, run_id, turn_id, message)
    webhooks.emit(
        app_id,
        CHANGE_SET_CREATED,
        {
            "changeSet": set_id,
            "firstPoint": point_id,
            "requestedBy": by,
            "runId": run_id,
            "turnId": turn_id,
            "message": message,
        },
    )
    return set_id, False


def _keep_first_message(set_id: str, message: str) -> None:
    """A set keeps the first message its writes give: a later one fills it only while empty
    (a write without a message runs no statement for it)."""
    if message:
        _sql.keep_first_message(set_id, message)


def next_point_ms(artifact: Artifact | _sql.ArtifactRow) -> int:
    """Capture time for a new point of ``artifact``: now, but strictly after its last write
    and (when the lock read it) after the app's newest point.

    The artifact row is locked, so its points are strictly ordered by time, which makes
    "the oldest point of an artifact in a set" well defined. Writers of one app are
    serialized on SQLite, so there an app's points are strictly ordered too: two writes in
    the same millisecond never tie, and "the newest N points" means the last N written.
    """
    ms = ids.now_ms()
    if artifact.updated_on is not None:
        ms = max(ms, ids.datetime_to_ms(artifact.updated_on) + 1)
    app_last = getattr(artifact, "app_last", None)
    if app_last is not None:
        ms = max(ms, ids.datetime_to_ms(app_last) + 1)
    return ms


def apply_source(
    artifact: Artifact | _sql.ArtifactRow,
    *,
    sha: str | None,
    source: str | None,
    size: int,
    by: str,
    now: datetime,
    at: Any = None,
) -> None:
    """Make ``artifact`` hold blob ``sha`` (None: a tombstone); routes, given as an
    :class:`Artifact`, take the route-save path. ``at`` is ``now`` as :func:`_sql.moment`."""
    if isinstance(artifact, Artifact) and artifact.collection == API_ROUTE:
        routes.save_route(artifact, sha=sha, source=source, size=size, by=by, now=now)
    else:
        _sql.update_artifact(
            artifact.pk, sha=sha, size=size, by=by, now=_sql.moment(now) if at is None else at
        )


@dataclass(frozen=True)
class _Captured:
    point_id: str
    change_set_id: str
    created_on: Any
    lines_added: int
    lines_removed: int
    pinned: bool


def _lock(
    app: App, collection: str, name: str, *, create: bool, keep: int, who: _Who
) -> _sql.ArtifactRow | None:
    """Lock the artifact row (reading its source, and the change set the writer's run or turn
    would join, with it); with ``create``, a missing one is made first as a tombstone.

    Creating with ``ignore_conflicts`` and then locking makes two writers creating the same
    artifact queue on one row instead of one of them failing on the unique constraint.
    """
    since = None
    if who.turn_id and not who.run_id:
        # The capture time is not known before the lock: look up from the gap before now (a
        # capture is not earlier than now; a minute more in case the clock steps back), and
        # the capture checks the time it found against its own.
        gap = timedelta(seconds=conf.turn_gap_seconds() + _CLOCK_SLACK_SECONDS)
        since = ids.ms_to_datetime(ids.now_ms()) - gap

    def lock() -> _sql.ArtifactRow | None:
        return _sql.lock_and_read(
            app.pk,
            collection,
            name,
            keep,
            run_id=who.run_id,
            turn_id=who.turn_id,
            turn_since=since,
            sweep_batch=conf.sweep_batch(),
        )

    row = lock()
    if row is None and create:
        skeleton = _refuse_a_look_alike(app, collection, name)
        Artifact.objects.bulk_create(
            [
                Artifact(
                    app=app,
                    collection=collection,
                    name=name,
                    skeleton=skeleton,
                    blob=None,
                    sha256="",
                    deleted=True,
                    updated_on=ids.ms_to_datetime(0),
                )
            ],
            ignore_conflicts=True,
        )
        row = lock()
        assert row is not None
    return row


def _refuse_a_look_alike(app: App, collection: str, name: str) -> str:
    """The new artifact's skeleton, or InvalidInput: spaces around the name, or naming the
    artifact of the collection it looks like (a tombstone too: it can be restored). Only a new
    artifact pays this query."""
    skeleton = check_new_name(name)
    existing = (
        Artifact.objects.filter(app=app, collection=collection, skeleton=skeleton)
        .exclude(name=name)
        .values_list("name", flat=True)
        .first()
    )
    if existing is not None:
        raise InvalidInput(
            NAME_LOOKS_LIKE.format(name=name, existing=existing, collection=collection),
            field="name",
        )
    return skeleton


def _old_bytes(row: _sql.ArtifactRow) -> bytes:
    """The locked artifact's current bytes (b"" for a tombstone)."""
    if row.deleted or not row.blob_id:
        return b""
    return row.old_raw if row.old_raw is not None else _sql.read_blob(row.blob_id)


def _capture(
    app: App,
    row: _sql.ArtifactRow,
    *,
    ms: int,
    at: Any,
    old_raw: bytes,
    new_raw: bytes,
    new_sha: str,
    who: _Who,
) -> _Captured:
    """Record the restore point of the locked artifact ``row`` before it becomes ``new_sha``."""
    point_id = ids.point_id(ms)
    previous_existed = not row.deleted
    previous_size = row.size if previous_existed else 0
    stored = previous_size <= conf.max_stored_bytes()
    added, removed = count_line_changes(old_raw, new_raw)
    set_id, pinned = _change_set_for(
        app.pk,
        point_id=point_id,
        ms=ms,
        at=at,
        run_id=who.run_id,
        turn_id=who.turn_id,
        by=who.requested_by,
        found=row.grouping if row.view_current else None,
        message=who.message,
    )
    _sql.insert_point(
        point_id=point_id,
        app_id=app.pk,
        artifact_id=row.pk,
        previous_blob_id=row.blob_id if (previous_existed and stored) else None,
        previous_sha256=row.sha256 if previous_existed else "",
        previous_size=previous_size,
        previous_existed=previous_existed,
        source_stored=stored,
        new_sha256=new_sha,
        requested_by=who.requested_by,
        written_by=who.written_by,
        tool=who.tool,
        created_on=at,
        lines_added=added,
        lines_removed=removed,
        run_id=who.run_id,
        turn_id=who.turn_id,
        change_set_id=set_id,
        pinned=pinned,
    )
    if previous_existed and not stored and row.blob_id:
        # The point keeps no reference: the old blob may now be unreferenced.
        retention.sweep_after_commit({row.blob_id})
    return _Captured(point_id, set_id, ids.ms_to_datetime(ms), added, removed, pinned)


def _write(
    app: App,
    row: _sql.ArtifactRow,
    collection: str,
    name: str,
    *,
    sha: str | None,
    source: str | None,
    size: int,
    by: str,
    now: datetime,
    at: Any,
) -> None:
    target: Artifact | _sql.ArtifactRow = row
    if collection == API_ROUTE:
        target = Artifact(
            pk=row.pk,
            app=app,
            collection=collection,
            name=name,
            blob_id=row.blob_id,
            sha256=row.sha256,
            size=row.size,
            deleted=row.deleted,
            updated_on=row.updated_on,  # type: ignore[misc]
        )
    apply_source(target, sha=sha, source=source, size=size, by=by, now=now, at=at)


def _over_limit(row: _sql.ArtifactRow, keep: int, captured: _Captured) -> bool:
    """Whether this capture may take the app over its limit of ``keep`` unpinned points.

    What the lock statement read is exact on SQLite (the write lock was held). On PostgreSQL
    it is the app as the statement began: when the lock waited for another writer of
    the artifact, that writer's point is not in it, so the pruner runs anyway (it finds the
    points beyond the limit again, as they are then, and prunes none when there are none).
    Writers of different artifacts racing may each miss the other's point: the next write
    counts both.
    """
    if row.from_last_kept is not None:
        return bool(_beyond(row, captured))
    if not row.counted or not row.view_current:
        return True
    # No cut: fewer than N before the write. Else the newest N-th is beyond the limit after
    # an unpinned capture (after a pinned one, maybe: its pruner reads the cut itself).
    return row.cut is not None


def _cut(row: _sql.ArtifactRow, captured: _Captured) -> _sql.Cut | None:
    """PostgreSQL: the pruner's bound read with the lock, when it holds for this write (its
    point, unpinned, is newer than any the lock read saw: :func:`next_point_ms`)."""
    if not row.counted or not row.view_current or captured.pinned:
        return None
    return row.cut


def _settles(row: _sql.ArtifactRow) -> bool:
    """Whether this write's pruner settles what the app owes (see "prune_settling"): once the
    rows owed before it, with the one it leaves, make a batch, or when nobody counted."""
    return row.owed is None or retention.settles(row.owed)


def _beyond(row: _sql.ArtifactRow, captured: _Captured) -> list[_sql.ExcessRow]:
    """SQLite: the points beyond the limit once this capture is in (a pinned one does not
    count against it)."""
    rows = row.from_last_kept or []
    return rows[1:] if captured.pinned else rows


@dataclass(frozen=True)
class _Who:
    """Who writes, with which tool, in which run and turn (validated)."""

    requested_by: str
    tool: str
    run_id: str
    turn_id: str
    # The authenticated principal (Actor.label), beside the claimed requested_by
    # (docs/api.md#turn-messages).
    written_by: str = ""
    # The turn's message (docs/api.md#turn-messages), "" when none was given.
    message: str = ""

    @classmethod
    def of(
        cls,
        requested_by: object,
        tool: object,
        run_id: object,
        turn_id: object,
        *,
        actor: Actor | None = None,
        message: object = None,
    ) -> _Who:
        claimed = validate_optional_id(requested_by, "requested_by")
        return cls(
            claimed,
            validate_optional_id(tool, "tool"),
            validate_optional_id(run_id, "run_id"),
            validate_optional_id(turn_id, "turn_id"),
            written_by=principal(actor, claimed),
            message=validate_message(message),
        )


def _capture_and_write(
    app: App,
    row: _sql.ArtifactRow,
    collection: str,
    name: str,
    *,
    old_raw: bytes,
    raw: bytes,
    sha: str | None,
    source: str | None,
    who: _Who,
    keep: int,
) -> WriteReceipt:
    """Steps 3-5 of the write path: the new blob (``sha`` None: a delete), the restore point,
    the write, retention, the receipt; in one round trip where the database allows."""
    ms = next_point_ms(row)
    at = _sql.moment(ids.ms_to_datetime(ms))
    # The write's last statements: at the top level on PostgreSQL, COMMIT travels with them,
    # and retention's own transaction after it.
    with _batch(collection) as batch:
        if sha is not None and source is not None:
            _sql.insert_blob(raw, sha, len(source), at, row.delta_base)
        captured = _capture(
            app, row, ms=ms, at=at, old_raw=old_raw, new_raw=raw, new_sha=sha or "", who=who
        )
        _write(
            app,
            row,
            collection,
            name,
            sha=sha,
            source=source,
            size=len(raw),
            by=who.requested_by,
            now=captured.created_on,
            at=at,
        )
        over = _over_limit(row, keep, captured)
        # Serialized writers (SQLite), or part of a larger transaction (a restore, a test):
        # prune inside it. Else the write's transaction is its own: prune in one of its own
        # after it, sent with it where the batch allows.
        inside = connection.vendor == "sqlite" or not rawsql.outermost()
        if over and not inside:
            retention.prune_after_commit(
                app,
                protect=[captured.change_set_id],
                batch=batch,
                settle=_settles(row),
                cut=_cut(row, captured),
            )
    if over and inside:
        found = _beyond(row, captured) if row.from_last_kept is not None else None
        retention.prune(app, protect=[captured.change_set_id], excess=found, settle=_settles(row))
    return WriteReceipt(
        app.slug,
        collection,
        name,
        row.sha256,
        sha or "",
        captured.point_id,
        captured.change_set_id,
        captured.lines_added,
        captured.lines_removed,
        unchanged=False,
    )


def _batch(collection: str) -> AbstractContextManager[rawsql.Batch]:
    """A capture's statements, ending its transaction, in one round trip where the database
    allows; a route's write goes through the route-save path (the ORM), which runs statement
    by statement."""
    if collection == API_ROUTE:
        return nullcontext(rawsql.Batch(can_follow=False))
    return _sql.batch(commit=True)


def _retrying(func: Any) -> Any:
    for attempt in range(_RETRIES):
        try:
            return func()
        except IntegrityError:
            if attempt == _RETRIES - 1:
                raise
    raise AssertionError("unreachable")


def write_artifact(
    app: App | str,
    collection: str,
    name: str,
    source: str,
    *,
    requested_by: str | None = None,
    tool: str,
    run_id: str | None = None,
    turn_id: str | None = None,
    expected_sha256: str | None = None,
    actor: Actor | None = None,
    message: str | None = None,
    addresses: list[str] | None = None,
) -> WriteReceipt:
    """Write ``source`` to an artifact, capturing its previous state as a restore point first.

    One transaction: if the point cannot be stored, the write does not land. ``actor``: who
    writes (checked: it may write to the app); without it, a trusted command. ``message``:
    the turn's message, kept by its change set when it has none yet (docs/api.md#turn-messages).
    ``addresses``: comment threads of the app the write answers (docs/api.md#reviews); they then
    read "addressed in" its restore point.
    """
    validate_collection(collection)
    name = validate_name(name)
    raw = encode_source(source)
    app = _writable(app, actor)
    answers = address_roots(resolve_app(app), addresses) if addresses is not None else []
    who = _Who.of(
        _requester(requested_by, actor), tool, run_id, turn_id, actor=actor, message=message
    )
    if expected_sha256 is not None:
        validate_optional_id(expected_sha256, "expected_sha256")
    sha = sha256_hex(raw)

    def attempt() -> WriteReceipt:
        with transaction.atomic():
            app_obj = resolve_app(app)
            locks.check_unlocked(app_obj, collection, name, actor)
            keep = conf.points_per_app()
            row = _lock(app_obj, collection, name, create=True, keep=keep, who=who)
            assert row is not None
            check_expected(row, name, expected_sha256)
            old_raw = _old_bytes(row)
            if not row.deleted and row.sha256 == sha and old_raw == raw:
                return WriteReceipt(
                    app_obj.slug, collection, name, sha, sha, None, None, 0, 0, unchanged=True
                )
            receipt = _capture_and_write(
                app_obj,
                row,
                collection,
                name,
                old_raw=old_raw,
                raw=raw,
                sha=sha,
                source=source,
                who=who,
                keep=keep,
            )
            if answers and receipt.restore_point_id:
                mark_addressed(app_obj, answers, receipt.restore_point_id, actor=actor)
            return receipt

    return _retrying(attempt)


def delete_artifact(
    app: App | str,
    collection: str,
    name: str,
    *,
    requested_by: str | None = None,
    tool: str,
    run_id: str | None = None,
    turn_id: str | None = None,
    expected_sha256: str | None = None,
    actor: Actor | None = None,
    message: str | None = None,
    addresses: list[str] | None = None,
) -> WriteReceipt:
    """Delete an artifact: it becomes a tombstone behind a restore point. Nothing is erased.
    ``addresses``: as for :func:`write_artifact`."""
    validate_collection(collection)
    name = validate_name(name)
    app = _writable(app, actor)
    answers = address_roots(resolve_app(app), addresses) if addresses is not None else []
    who = _Who.of(
        _requester(requested_by, actor), tool, run_id, turn_id, actor=actor, message=message
    )

    def attempt() -> WriteReceipt:
        with transaction.atomic():
            app_obj = resolve_app(app)
            locks.check_unlocked(app_obj, collection, name, actor)
            keep = conf.points_per_app()
            row = _lock(app_obj, collection, name, create=False, keep=keep, who=who)
            if row is None or row.deleted:
                if expected_sha256 not in (None, ""):
                    check_expected(row, name, expected_sha256)
                raise NotFound(
                    ARTIFACT_NOT_FOUND.format(collection=collection, name=name, app=app_obj.slug)
                )
            check_expected(row, name, expected_sha256)
            receipt = _capture_and_write(
                app_obj,
                row,
                collection,
                name,
                old_raw=_old_bytes(row),
                raw=b"",
                sha=None,
                source=None,
                who=who,
                keep=keep,
            )
            if answers and receipt.restore_point_id:
                mark_addressed(app_obj, answers, receipt.restore_point_id, actor=actor)
            return receipt

    return _retrying(attempt)
