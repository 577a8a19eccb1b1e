"""The capture service: every write to an artifact records a restore point first (SPEC §3)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.db import IntegrityError, transaction

from versions import conf, ids
from versions.errors import NotFound, StaleWrite
from versions.models import API_ROUTE, App, Artifact, ChangeSet, RestorePoint
from versions.services import retention, routes
from versions.services._store import lock_artifact, lock_or_create_artifact, repoint, sha256_hex
from versions.services._store import store_blob as _store_blob
from versions.services.validation import (
    encode_source,
    validate_collection,
    validate_name,
    validate_optional_id,
)

APP_NOT_FOUND = "There is no app “{slug}”."
ARTIFACT_NOT_FOUND = "There is no {collection} “{name}” in app “{app}”."
STALE_WRITE = (
    "“{name}” changed since you read it: you expected {expected}, it is now {current}. "
    "Nothing was written; read it again and retry."
)
# How often a write is retried when a concurrent transaction made it fail on a constraint
# (two writers creating one change set, a blob swept at the same moment).
_RETRIES = 3


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


def check_expected(artifact: Artifact, expected_sha256: str | None) -> None:
    """Refuse a stale write: the writer's expected hash is not the current one."""
    if expected_sha256 is None:
        return
    if expected_sha256 != artifact.sha256:
        raise StaleWrite(
            STALE_WRITE.format(
                name=artifact.name,
                expected=_short(expected_sha256),
                current=_short(artifact.sha256),
            ),
            current_sha256=artifact.sha256,
        )


def count_line_changes(old: str, new: str) -> tuple[int, int]:
    """Lines added and removed going from ``old`` to ``new`` (diff-match-patch line mode)."""
    from versions.diffing import count_line_changes as count

    return count(old, new)


def _change_set_for(app: App, *, point_id: str, ms: int, run_id: str, turn_id: str, by: str) -> str:
    """The change set a new capture joins: same run, else same turn within the gap, else new."""
    if run_id:
        existing = (
            ChangeSet.objects.filter(app=app, kind=ChangeSet.CHANGE, run_id=run_id)
            .values_list("id", flat=True)
            .first()
        )
        if existing:
            return existing
    elif turn_id:
        since = ids.ms_to_datetime(ms) - timedelta(seconds=conf.turn_gap_seconds())
        recent = (
            RestorePoint.objects.filter(
                app=app,
                turn_id=turn_id,
                run_id="",
                kind=RestorePoint.CAPTURE,
                created_on__gte=since,
            )
            .order_by("-created_on")
            .values_list("change_set_id", flat=True)
            .first()
        )
        if recent:
            return recent
    set_id = ids.change_set_id(point_id)
    ChangeSet.objects.create(
        id=set_id,
        app=app,
        kind=ChangeSet.CHANGE,
        created_on=ids.ms_to_datetime(ms),
        created_by=by,
        run_id=run_id,
        turn_id=turn_id,
    )
    return set_id


def next_point_ms(artifact: Artifact) -> int:
    """Capture time for a new point of ``artifact``: now, but strictly after its last write.

    The artifact row is locked, so its points are strictly ordered by time, which makes
    "the oldest point of an artifact in a set" well defined.
    """
    ms = ids.now_ms()
    if artifact.updated_on is not None:
        ms = max(ms, ids.datetime_to_ms(artifact.updated_on) + 1)
    return ms


def apply_source(
    artifact: Artifact, *, sha: str | None, source: str | None, size: int, by: str, now: Any
) -> None:
    """Make ``artifact`` hold blob ``sha`` (None: a tombstone); routes take the route-save path."""
    if artifact.collection == API_ROUTE:
        routes.save_route(artifact, sha=sha, source=source, size=size, by=by, now=now)
    else:
        repoint(artifact, sha=sha, size=size, by=by, now=now)


def _capture(
    app: App,
    artifact: Artifact,
    *,
    new_sha: str,
    new_text: str | None,
    requested_by: str,
    tool: str,
    run_id: str,
    turn_id: str,
) -> tuple[RestorePoint, int]:
    """Record the restore point of ``artifact`` before it becomes ``new_sha``."""
    ms = next_point_ms(artifact)
    point_id = ids.point_id(ms)
    previous_existed = not artifact.deleted
    previous_size = artifact.size if previous_existed else 0
    stored = previous_size <= conf.max_stored_bytes()
    old_text = artifact.source if previous_existed else ""
    added, removed = count_line_changes(old_text, new_text or "")
    set_id = _change_set_for(
        app, point_id=point_id, ms=ms, run_id=run_id, turn_id=turn_id, by=requested_by
    )
    point = RestorePoint.objects.create(
        id=point_id,
        app=app,
        artifact=artifact,
        kind=RestorePoint.CAPTURE,
        previous_blob_id=artifact.blob_id if (previous_existed and stored) else None,
        previous_sha256=artifact.sha256 if previous_existed else "",
        previous_size=previous_size,
        previous_existed=previous_existed,
        source_stored=stored,
        new_sha256=new_sha,
        requested_by=requested_by,
        tool=tool,
        created_on=ids.ms_to_datetime(ms),
        lines_added=added,
        lines_removed=removed,
        run_id=run_id,
        turn_id=turn_id,
        change_set_id=set_id,
    )
    if previous_existed and not stored and artifact.blob_id:
        # The point keeps no reference: the old blob may now be unreferenced.
        retention.sweep_after_commit({artifact.blob_id})
    return point, ms


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
    requested_by: str,
    tool: str,
    run_id: str | None = None,
    turn_id: str | None = None,
    expected_sha256: str | None = None,
) -> WriteReceipt:
    """Write ``source`` to an artifact, capturing its previous state as a restore point first.

    One transaction: if the point cannot be stored, the write does not land.
    """
    validate_collection(collection)
    validate_name(name)
    raw = encode_source(source)
    by = validate_optional_id(requested_by, "requested_by")
    tool = validate_optional_id(tool, "tool")
    run = validate_optional_id(run_id, "run_id")
    turn = validate_optional_id(turn_id, "turn_id")
    if expected_sha256 is not None:
        validate_optional_id(expected_sha256, "expected_sha256")
    sha = sha256_hex(raw)

    def attempt() -> WriteReceipt:
        with transaction.atomic():
            app_obj = resolve_app(app)
            artifact = lock_or_create_artifact(app_obj, collection, name, ids.ms_to_datetime(0))
            check_expected(artifact, expected_sha256)
            if not artifact.deleted and artifact.sha256 == sha and artifact.blob.raw == raw:  # type: ignore[union-attr]
                return WriteReceipt(
                    app_obj.slug, collection, name, sha, sha, None, None, 0, 0, unchanged=True
                )
            previous_sha = artifact.sha256
            _store_blob(raw, sha, len(source))
            point, ms = _capture(
                app_obj,
                artifact,
                new_sha=sha,
                new_text=source,
                requested_by=by,
                tool=tool,
                run_id=run,
                turn_id=turn,
            )
            apply_source(
                artifact, sha=sha, source=source, size=len(raw), by=by, now=point.created_on
            )
            retention.prune(app_obj)
            return WriteReceipt(
                app_obj.slug,
                collection,
                name,
                previous_sha,
                sha,
                point.id,
                point.change_set_id,
                point.lines_added,
                point.lines_removed,
                unchanged=False,
            )

    return _retrying(attempt)


def delete_artifact(
    app: App | str,
    collection: str,
    name: str,
    *,
    requested_by: str,
    tool: str,
    run_id: str | None = None,
    turn_id: str | None = None,
    expected_sha256: str | None = None,
) -> WriteReceipt:
    """Delete an artifact: it becomes a tombstone behind a restore point. Nothing is erased."""
    validate_collection(collection)
    validate_name(name)
    by = validate_optional_id(requested_by, "requested_by")
    tool = validate_optional_id(tool, "tool")
    run = validate_optional_id(run_id, "run_id")
    turn = validate_optional_id(turn_id, "turn_id")

    def attempt() -> WriteReceipt:
        with transaction.atomic():
            app_obj = resolve_app(app)
            artifact = lock_artifact(app_obj, collection, name)
            if artifact is None or artifact.deleted:
                if expected_sha256 not in (None, ""):
                    check_expected(
                        artifact
                        or Artifact(app=app_obj, collection=collection, name=name, sha256=""),
                        expected_sha256,
                    )
                raise NotFound(
                    ARTIFACT_NOT_FOUND.format(collection=collection, name=name, app=app_obj.slug)
                )
            check_expected(artifact, expected_sha256)
            previous_sha = artifact.sha256
            point, _ = _capture(
                app_obj,
                artifact,
                new_sha="",
                new_text=None,
                requested_by=by,
                tool=tool,
                run_id=run,
                turn_id=turn,
            )
            apply_source(artifact, sha=None, source=None, size=0, by=by, now=point.created_on)
            retention.prune(app_obj)
            return WriteReceipt(
                app_obj.slug,
                collection,
                name,
                previous_sha,
                "",
                point.id,
                point.change_set_id,
                point.lines_added,
                point.lines_removed,
                unchanged=False,
            )

    return _retrying(attempt)
