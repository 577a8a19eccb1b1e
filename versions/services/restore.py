"""The restore engine (SPEC §4): Restore, Restore all, pre-flight, counter-points, receipts, undo.

A restore is a forward write: every artifact it changes gets a ``counter`` restore point first,
and all of them land in one restore set (``rs_…``), so a restore is undone by restoring that set.
A restore *re-points* (SPEC §11): artifacts move to blobs that are already stored and counter-
points reference the blobs they replace; no source bytes are copied or re-read, except where a
route spec must be validated or a line count cannot be derived from the restored point.

Everything — pre-flight, counter-points, writes, the restore set — is one transaction. Effects
outside the database (the route-table generation bump) run only after it commits.

Restore to release (SPEC §6b) reuses :func:`restore_targets`: it computes the targets (one per
artifact, each the state to return to) and lets the engine do the rest.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from django.db import connection, transaction
from django.db.models import Min

from versions import conf, ids
from versions.diffing import count_line_changes
from versions.errors import InvalidInput, NotFound, PreflightFailed
from versions.models import API_ROUTE, App, Artifact, AuditEvent, Blob, ChangeSet, RestorePoint
from versions.services import _restore_sql, _sql, retention, routes
from versions.services._store import repoint_many
from versions.services.access import RESTORE as MAY_RESTORE
from versions.services.access import Actor, principal
from versions.services.capture import close_acted_on_set
from versions.services.validation import validate_collection, validate_name, validate_optional_id

NOOP_MESSAGE = "Every artifact already matched the state before this set — nothing was written."
NOOP_POINT_MESSAGE = (
    "The artifact already matched the state before this point — nothing was written."
)
SET_NOT_FOUND = "There is no change set “{id}”."
POINT_NOT_FOUND = "There is no restore point “{id}”."
PREFLIGHT_FAILED = "Nothing was written: the pre-flight check found {count} problem{s}. {details}"
RESTORED = "Restored {written} artifact{s} from {source}; {skipped} already matched."
DRY_RUN = "A restore would write {written} artifact{s}; {skipped} already match."
EXPECTED_NOT_MAPPING = (
    "expected must map “collection/name” to the sha256 you reviewed as now, "
    'e.g. {"pltf_page/index": "<sha256>"}.'
)
EXPECTED_BAD_KEY = (
    "expected has a key “{key}” that is not of the form “collection/name” (a known collection "
    "and an artifact name), so it can name no artifact."
)
EXPECTED_BAD_VALUE = 'expected[“{key}”] must be a sha256 in hex ("" for absent).'
_HEX = "0123456789abcdefABCDEF"

# Pre-flight findings, one reason in words per failing artifact.
FINDING_NOT_STORED = (
    "Its source before this change was {size:,} bytes, over the {cap:,}-byte limit for stored "
    "sources, so it was not kept and cannot be restored."
)
FINDING_PRUNED = (
    "Its restore point from this set was pruned by retention (only the newest {keep} "
    "unpinned points of an app are kept), so its state before this set is gone."
)
FINDING_GONE = "The artifact no longer exists in this app, so there is nothing to restore onto."
FINDING_AMBIGUOUS = (
    "Restoring it would make two live routes answer {key}: it and “{other}”. "
    "Change or restore the other route first."
)
FINDING_BAD_ROUTE = "The route-save path does not accept its stored route spec: {detail}"
FINDING_DRIFT = (
    "It changed since you reviewed it: you reviewed {expected}, it is now {current}. "
    "Review the change again before restoring."
)
ALREADY_MATCHED = "already matched"

# The tool recorded on counter-points.
RESTORE_TOOL = "versions:restore"

RESTORE = "restore"
REVERT = "revert"  # the receipt kind of a restore set written by Revert this set (SPEC §14)
NOOP = "noop"
DRY_RUN_KIND = "dry_run"
PREFLIGHT_FAILED_KIND = "preflight_failed"


def iso_ms(moment: datetime) -> str:
    """``2026-09-05T17:31:54.724Z``: UTC, milliseconds, Z."""
    moment = moment.astimezone(UTC)
    return f"{moment:%Y-%m-%dT%H:%M:%S}.{moment.microsecond // 1000:03d}Z"


@dataclass
class RestoreReceipt:
    """What a restore did (``restore``), did not need to do (``noop``), would do (``dry_run``),
    or refused to do (``preflight_failed``). ``.as_dict()`` is the JSON of SPEC §4."""

    kind: str
    restored_from: str
    set_id: str | None = None
    items: list[dict[str, Any]] = field(default_factory=list)
    skipped: list[dict[str, Any]] = field(default_factory=list)
    findings: list[dict[str, Any]] = field(default_factory=list)
    message: str = ""
    created_by: str = ""
    created_on: str | None = None
    scope: str | None = None
    # Revert this set (SPEC §14): the set reverted; its receipts say "revert" / "revertedSet".
    reverted_set: str | None = None
    # A dry run's later work (SPEC §14): per artifact, the sets that changed it after the set
    # (``laterChanges``), and each of those sets once with its author and time (``laterSets``).
    later_changes: list[dict[str, Any]] | None = None
    later_sets: list[dict[str, Any]] | None = None

    @property
    def written(self) -> int:
        return len(self.items) if self.kind == RESTORE else 0

    def as_dict(self) -> dict[str, Any]:
        data: dict[str, Any]
        if self.kind == RESTORE:
            data = {
                "setId": self.set_id,
                "kind": REVERT if self.reverted_set else RESTORE,
                "restoredFromSet": self.restored_from,
                "items": [dict(item) for item in self.items],
                "skipped": [dict(item) for item in self.skipped],
                "created_by": self.created_by,
                "created_on": self.created_on,
            }
        elif self.kind == NOOP:
            data = {
                "kind": NOOP,
                "restoredFromSet": self.restored_from,
                "written": 0,
                "message": self.message,
                "skipped": [dict(item) for item in self.skipped],
            }
        elif self.kind == DRY_RUN_KIND:
            data = {
                "kind": DRY_RUN_KIND,
                "restoredFromSet": self.restored_from,
                "items": [dict(item) for item in self.items],
                "skipped": [dict(item) for item in self.skipped],
                "findings": [dict(item) for item in self.findings],
            }
        else:
            data = {
                "kind": PREFLIGHT_FAILED_KIND,
                "restoredFromSet": self.restored_from,
                "written": 0,
                "findings": [dict(item) for item in self.findings],
                "skipped": [dict(item) for item in self.skipped],
                "message": self.message,
            }
        if self.scope is not None:
            data["scope"] = self.scope
        if self.reverted_set is not None:
            data["revertedSet"] = self.reverted_set
        if self.later_changes:  # only when there is later work: a dry run's keys stay as they were
            data["laterChanges"] = [dict(item) for item in self.later_changes]
            data["laterSets"] = [dict(item) for item in self.later_sets or []]
        return data


@dataclass(frozen=True)
class RestoreTarget:
    """One artifact and the state a restore returns it to.

    ``sha256`` is the target's hash ("" = absence: the artifact becomes a tombstone; None =
    unknown, e.g. its point was pruned). ``blob_id``
    is the stored blob of that state (None for absence, or when the state is not available,
    in which case ``unavailable`` says why in words). ``point_*`` describe the restore point the
    state comes from, when there is one: its id goes on the receipt, and its line counts give
    the counter-point's counts for free when the artifact still holds that point's result.
    """

    artifact_id: int
    sha256: str | None
    blob_id: str | None
    point_id: str | None = None
    size: int = 0
    unavailable: str | None = None
    point_new_sha256: str | None = None
    point_lines_added: int = 0
    point_lines_removed: int = 0
    # A state that is not stored yet (a revert's merge result): its source, which the engine
    # stores as a blob (keyed by ``sha256``) just before re-pointing, and its (added, removed)
    # line counts from the live source, already known to whoever computed it.
    text: str | None = None
    lines: tuple[int, int] | None = None

    @property
    def absent(self) -> bool:
        return self.sha256 == ""

    @property
    def sha(self) -> str:
        """The known target hash ("" for absence); only for targets that passed pre-flight."""
        return self.sha256 or ""


def target_for_point(
    *,
    artifact_id: int,
    point_id: str,
    previous_existed: bool,
    previous_blob_id: str | None,
    previous_sha256: str,
    previous_size: int,
    new_sha256: str,
    lines_added: int,
    lines_removed: int,
) -> RestoreTarget:
    """The target "state before this point" of a restore point's fields."""
    unavailable = None
    if previous_existed and previous_blob_id is None:
        unavailable = FINDING_NOT_STORED.format(size=previous_size, cap=conf.max_stored_bytes())
    return RestoreTarget(
        artifact_id=artifact_id,
        sha256=previous_sha256 if previous_existed else "",
        blob_id=previous_blob_id if previous_existed else None,
        point_id=point_id,
        size=previous_size if previous_existed else 0,
        unavailable=unavailable,
        point_new_sha256=new_sha256,
        point_lines_added=lines_added,
        point_lines_removed=lines_removed,
    )


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
)


def _target_from_row(row: tuple) -> RestoreTarget:
    """:func:`target_for_point` of a ``_POINT_FIELDS`` row, built positionally (one per
    artifact of a Restore all)."""
    (pid, artifact_id, existed, blob_id, prev_sha, prev_size, new_sha, added, removed) = row
    if not existed:
        return RestoreTarget(artifact_id, "", None, pid, 0, None, new_sha, added, removed)
    unavailable = None
    if blob_id is None:
        unavailable = FINDING_NOT_STORED.format(size=prev_size, cap=conf.max_stored_bytes())
    return RestoreTarget(
        artifact_id, prev_sha, blob_id, pid, prev_size, unavailable, new_sha, added, removed
    )


def _short(sha: str) -> str:
    return sha[:12] if sha else "“absent”"


def _expected_key(key: object) -> tuple[str, str]:
    """``(collection, name)`` of an ``expected`` key: a known collection and a name artifacts
    may have (SPEC §3), else a key that can name no artifact, refused in words."""
    parts: tuple[object, ...] = ()
    if isinstance(key, tuple) and len(key) == 2:
        parts = key
    elif isinstance(key, str) and "/" in key:
        parts = tuple(key.split("/", 1))
    try:
        collection, name = parts
        return validate_collection(collection), validate_name(name)
    except (ValueError, InvalidInput):
        raise InvalidInput(EXPECTED_BAD_KEY.format(key=key), field="expected") from None


def normalise_expected(expected: object) -> dict[tuple[str, str], str] | None:
    """``expected`` as {(collection, name): sha256}.

    Keys are ``"collection/name"`` (names never contain "/") or ``(collection, name)`` tuples;
    values the sha256 the person reviewed as "now", ``""`` for an absent artifact.
    """
    if expected is None:
        return None
    if not isinstance(expected, Mapping):
        raise InvalidInput(EXPECTED_NOT_MAPPING, field="expected")
    result: dict[tuple[str, str], str] = {}
    for key, value in expected.items():
        if not isinstance(value, str) or len(value) > 64 or value.strip(_HEX):
            raise InvalidInput(EXPECTED_BAD_VALUE.format(key=key), field="expected")
        # Hashes are compared case-insensitively (SPEC §15), as a write's expected_sha256 is.
        result[_expected_key(key)] = value.lower()
    return result


def _finding(artifact: LiveArtifact | None, target: RestoreTarget, reason: str) -> dict[str, Any]:
    return {
        "name": artifact.name if artifact else "",
        "collection": artifact.collection if artifact else "",
        "pointId": target.point_id,
        "reason": reason,
    }


@dataclass(slots=True)
class LiveArtifact:
    """The live state of an artifact row, as locked: no source, no model instance."""

    pk: int
    app_id: int
    collection: str
    name: str
    blob_id: str | None
    sha256: str
    size: int
    deleted: bool
    route_key: str | None
    updated_on: datetime

    def as_model(self) -> Artifact:
        return Artifact(
            id=self.pk,
            app_id=self.app_id,
            collection=self.collection,
            name=self.name,
            blob_id=self.blob_id,
            sha256=self.sha256,
            size=self.size,
            deleted=self.deleted,
            route_key=self.route_key,
            updated_on=self.updated_on,
        )


def _points_sql() -> str:
    """SELECT of a set's points (``_POINT_FIELDS``), oldest first; built by the ORM once."""
    key = connection.vendor
    if key not in _SQL_CACHE:
        query = (
            RestorePoint.objects.filter(change_set_id="?")
            .order_by("created_on", "id")
            .values_list(*_POINT_FIELDS)
        )
        sql, _params = query.query.sql_with_params()
        _SQL_CACHE[key] = sql
    return _SQL_CACHE[key]


_SQL_CACHE: dict[str, str] = {}


def lock_artifacts(artifact_ids: Iterable[int], *, lock: bool) -> dict[int, LiveArtifact]:
    """The artifact rows, locked in primary-key order in one query (no source bytes loaded).

    One consistent lock order makes concurrent restores of overlapping sets queue, never
    deadlock; a second Restore all of the same set then sees the first one's result.
    """
    pks = sorted(set(artifact_ids))
    if not pks:
        return {}
    read = _restore_sql.read_moment
    return {
        pk: LiveArtifact(
            pk,
            app_id,
            collection,
            name,
            blob_id,
            sha,
            size,
            bool(deleted),
            route_key,
            read(updated),
        )
        for pk, app_id, collection, name, blob_id, sha, size, deleted, route_key, updated in (
            _restore_sql.lock_artifacts(pks, lock=lock)
        )
    }


def _texts(shas: Iterable[str]) -> dict[str, str]:
    """Texts of the given blobs, one query; only for routes to validate and uncounted lines."""
    wanted = {s for s in shas if s}
    if not wanted:
        return {}
    return {blob.sha256: blob.text for blob in Blob.objects.filter(sha256__in=wanted)}


def _blob_meta(shas: Iterable[str]) -> dict[str, tuple[int, int]]:
    """{sha256: (bytes, chars)} of the given blobs, one query, without their data."""
    wanted = sorted({s for s in shas if s})
    if not wanted:
        return {}
    if connection.vendor == "sqlite":
        # SQLite would pick the primary-key index and then walk each row's overflow pages
        # (the bytes) to reach size and chars; the covering index answers from the index alone.
        qn = connection.ops.quote_name
        rows = []
        with connection.cursor() as cursor:
            for start in range(0, len(wanted), 900):
                chunk = wanted[start : start + 900]
                sql = (
                    f"SELECT sha256, size, chars FROM {qn(Blob._meta.db_table)} "  # noqa: S608
                    f"INDEXED BY blob_meta WHERE sha256 IN ({', '.join(['%s'] * len(chunk))})"
                )
                cursor.execute(sql, chunk)
                rows.extend(cursor.fetchall())
    else:
        rows = list(Blob.objects.filter(sha256__in=wanted).values_list("sha256", "size", "chars"))
    return {sha: (size, chars) for sha, size, chars in rows}


def _chars(target: RestoreTarget, meta: Mapping[str, tuple[int, int]]) -> int:
    """The target's length in characters: its blob's, or its text's when not stored yet."""
    if target.text is not None:
        return len(target.text)
    return meta.get(target.sha, (0, 0))[1]


def _line_counts(
    plan: list[tuple[RestoreTarget, LiveArtifact]],
) -> dict[int, tuple[int, int]]:
    """(added, removed) going from each live artifact to its target.

    When the artifact still holds exactly what the restored point wrote, the counts are that
    point's counts inverted; only otherwise are the two texts read and counted.
    """
    counts: dict[int, tuple[int, int]] = {}
    uncounted: list[tuple[RestoreTarget, LiveArtifact]] = []
    for target, live in plan:
        if target.lines is not None:
            counts[live.pk] = target.lines
        elif target.point_new_sha256 is not None and live.sha256 == target.point_new_sha256:
            counts[live.pk] = (target.point_lines_removed, target.point_lines_added)
        else:
            uncounted.append((target, live))
    if uncounted:
        texts = _texts([t.sha for t, _ in uncounted] + [a.sha256 for _, a in uncounted])
        for target, live in uncounted:
            old = texts.get(live.sha256, "") if not live.deleted else ""
            new = texts.get(target.sha, "") if not target.absent else ""
            counts[live.pk] = count_line_changes(old, new)
    return counts


def _check_routes(
    app: App,
    plan: list[tuple[RestoreTarget, LiveArtifact]],
    findings: list[dict[str, Any]],
) -> dict[int, tuple[str, str]]:
    """Pre-flight of the routes a restore writes: the spec parses and, in the state after the
    whole restore, no two live routes answer the same method and path.

    Returns {artifact pk: (route source, route key)} for the routes that will hold a spec.
    """
    writes = [(t, a) for t, a in plan if a.collection == API_ROUTE]
    if not writes:
        return {}
    texts = _texts(t.sha for t, _ in writes if not t.absent)
    accepted: dict[int, tuple[str, str]] = {}
    for target, artifact in writes:
        if target.absent:
            continue
        source = target.text if target.text is not None else texts.get(target.sha, "")
        try:
            spec = routes.parse_route_spec(source)
        except InvalidInput as exc:
            findings.append(_finding(artifact, target, FINDING_BAD_ROUTE.format(detail=exc)))
            continue
        accepted[artifact.pk] = (source, spec.key)
    # The other live routes keep their keys; the written ones take their targets' keys.
    written_pks = [a.pk for _, a in writes]
    taken: dict[str, str] = {
        key: name
        for key, name in Artifact.objects.live()
        .filter(app=app, route_key__isnull=False)
        .exclude(pk__in=written_pks)
        .values_list("route_key", "name")
        if key
    }
    for target, artifact in writes:
        if artifact.pk not in accepted:
            continue
        key = accepted[artifact.pk][1]
        other = taken.get(key)
        if other is not None:
            findings.append(
                _finding(artifact, target, FINDING_AMBIGUOUS.format(key=key, other=other))
            )
        else:
            taken[key] = artifact.name
    return accepted


def _insert_counter_points(points: list[tuple[Any, ...]]) -> None:
    """Store the counter-points of a restore: rows of ``_restore_sql.COUNTER_COLUMNS`` values
    (``created_on`` adapted for the database); other fields take their defaults.

    The values are plain text, numbers, booleans and one moment, so they are passed as they
    are instead of through the ORM's per-value preparation (which would cost more than the
    writes themselves).
    """
    _restore_sql.insert_counter_points(points)


def restore_targets(
    app: App,
    targets: list[RestoreTarget],
    *,
    by: str,
    restored_from: str,
    scope: str | None = None,
    dry_run: bool = False,
    expected: Mapping[tuple[str, str], str] | None = None,
    noop_message: str = NOOP_MESSAGE,
    reverted_set: str | None = None,
    written_by: str | None = None,
) -> RestoreReceipt:
    """Return every target's artifact to its target state, or write nothing.

    Call inside ``transaction.atomic()``. Pre-flights every target before the first write
    (``PreflightFailed`` lists every finding; a dry run returns them instead), skips artifacts
    whose bytes already match, writes a counter-point before each write, and stores the restore
    set with its receipt. ``restored_from`` is the id of the set the targets come from.
    """
    live = lock_artifacts({t.artifact_id for t in targets}, lock=not dry_run)
    ordered = list(targets)  # the set's order, as the person reviewed it (locks: id order)
    findings: list[dict[str, Any]] = []
    skipped: list[dict[str, Any]] = []
    plan: list[tuple[RestoreTarget, LiveArtifact]] = []
    for target in ordered:
        artifact = live.get(target.artifact_id)
        if artifact is None or artifact.app_id != app.pk:
            findings.append(_finding(None, target, FINDING_GONE))
            continue
        # Strict byte comparison: blobs are keyed by the sha256 of their bytes, so the same
        # hash is the same stored row, hence the same bytes (even when the target's own copy
        # was not kept: the live blob is that very content).
        if target.sha256 is not None and (
            artifact.deleted if target.absent else artifact.blob_id == target.sha256
        ):
            skipped.append(_finding(artifact, target, ALREADY_MATCHED))
            continue
        if target.unavailable:
            findings.append(_finding(artifact, target, target.unavailable))
            continue
        if expected is not None:
            reviewed = expected.get((artifact.collection, artifact.name))
            if reviewed is not None and reviewed != artifact.sha256:
                findings.append(
                    _finding(
                        artifact,
                        target,
                        FINDING_DRIFT.format(
                            expected=_short(reviewed), current=_short(artifact.sha256)
                        ),
                    )
                )
                continue
        plan.append((target, artifact))
    route_sources = _check_routes(app, plan, findings)

    if dry_run:
        counts = _line_counts(plan)
        meta = _blob_meta(t.sha for t, _ in plan)
        items = [
            {
                "name": artifact.name,
                "collection": artifact.collection,
                "pointId": target.point_id,
                "linesAdded": counts[artifact.pk][0],
                "linesRemoved": counts[artifact.pk][1],
                "chars": _chars(target, meta),
                "action": "delete"
                if target.absent
                else ("recreate" if artifact.deleted else "write"),
            }
            for target, artifact in plan
        ]
        message = (
            noop_message
            if not plan and not findings
            else DRY_RUN.format(
                written=len(items), s="" if len(items) == 1 else "s", skipped=len(skipped)
            )
        )
        return RestoreReceipt(
            kind=DRY_RUN_KIND,
            restored_from=restored_from,
            items=items,
            skipped=skipped,
            findings=findings,
            message=message,
            scope=scope,
            reverted_set=reverted_set,
        )

    if findings:
        details = " ".join(f"{f['name'] or f['pointId']}: {f['reason']}" for f in findings)
        receipt = RestoreReceipt(
            kind=PREFLIGHT_FAILED_KIND,
            restored_from=restored_from,
            skipped=skipped,
            findings=findings,
            created_by=by,
            scope=scope,
            reverted_set=reverted_set,
        )
        receipt.message = PREFLIGHT_FAILED.format(
            count=len(findings), s="" if len(findings) == 1 else "s", details=details
        )
        raise PreflightFailed(receipt.message, receipt=receipt)

    if not plan:
        return RestoreReceipt(
            kind=NOOP,
            restored_from=restored_from,
            skipped=skipped,
            message=noop_message,
            created_by=by,
            scope=scope,
            reverted_set=reverted_set,
        )
    return _write(
        app,
        plan,
        route_sources,
        skipped=skipped,
        by=by,
        restored_from=restored_from,
        scope=scope,
        reverted_set=reverted_set,
        written_by=written_by if written_by is not None else principal(None, by),
    )


def _write(
    app: App,
    plan: list[tuple[RestoreTarget, LiveArtifact]],
    route_sources: dict[int, tuple[str, str]],
    *,
    skipped: list[dict[str, Any]],
    by: str,
    restored_from: str,
    scope: str | None,
    reverted_set: str | None = None,
    written_by: str = "",
) -> RestoreReceipt:
    """The writes of a pre-flighted restore: set, counter-points, re-pointing, retention.
    ``written_by``: the authenticated principal, recorded on every counter-point."""
    # One moment for the whole restore, strictly after every artifact's last write, so each
    # counter-point is its artifact's newest point.
    ms = ids.now_ms()
    for _, artifact in plan:
        ms = max(ms, ids.datetime_to_ms(artifact.updated_on) + 1)
    now = ids.ms_to_datetime(ms)
    set_id = ids.restore_set_id(ms)
    counts = _line_counts(plan)
    meta = _blob_meta(t.sha for t, _ in plan)

    points: list[tuple[Any, ...]] = []
    items: list[dict[str, Any]] = []
    stamp = f"rp_{ids.base36(ms)}_"
    moment = connection.ops.adapt_datetimefield_value(now)
    app_id = app.pk
    for (target, artifact), suffix in zip(
        plan, _restore_sql.random_suffixes(len(plan)), strict=True
    ):
        counter_id = stamp + suffix
        added, removed = counts[artifact.pk]
        # Counter-points are exempt from the size cap: the blob exists already.
        points.append(
            (
                counter_id,
                app_id,
                artifact.pk,
                artifact.blob_id,
                artifact.sha256,
                artifact.size if not artifact.deleted else 0,
                not artifact.deleted,
                target.sha,
                by,
                written_by,
                RESTORE_TOOL,
                moment,
                added,
                removed,
                set_id,
            )
        )
        items.append(
            {
                "name": artifact.name,
                "collection": artifact.collection,
                "pointId": target.point_id,
                "counterPointId": counter_id,
                "chars": _chars(target, meta),
            }
        )
    receipt = RestoreReceipt(
        kind=RESTORE,
        restored_from=restored_from,
        set_id=set_id,
        items=items,
        skipped=skipped,
        created_by=by,
        created_on=iso_ms(now),
        scope=scope,
        reverted_set=reverted_set,
    )
    receipt.message = RESTORED.format(
        written=len(items),
        s="" if len(items) == 1 else "s",
        source=restored_from,
        skipped=len(skipped),
    )
    _restore_sql.insert_restore_set(set_id, app_id, now, by, restored_from, receipt.as_dict())
    close_acted_on_set(app_id, restored_from)
    _insert_counter_points(points)
    for target, _ in plan:
        if target.text is not None:  # a merge result: stored now, inside the transaction
            _sql.insert_blob(target.text.encode(), target.sha, len(target.text), moment)

    repoint_many(
        # The blob's own size (read with its length, no bytes) is authoritative; a target
        # built without one (size 0) still re-points correctly.
        [
            (a.pk, t.blob_id, meta.get(t.sha, (t.size, 0))[0])
            for t, a in plan
            if a.collection != API_ROUTE
        ],
        by=by,
        now=now,
    )
    route_writes = [(t, a) for t, a in plan if a.collection == API_ROUTE]
    if route_writes:
        # Every written route gives up its key first, so routes that trade paths within one
        # restore (pre-flight checked the end state) can be saved in any order.
        Artifact.objects.filter(pk__in=[a.pk for _, a in route_writes]).update(route_key=None)
        for target, live in route_writes:
            live.route_key = None
            source = route_sources.get(live.pk, (None, None))[0]
            routes.save_route(
                live.as_model(),
                sha=target.blob_id,
                source=source,
                size=meta.get(target.sha, (target.size, 0))[0],
                by=by,
                now=now,
            )
    retention.prune_after_restore(app, set_id, restored_from)
    return receipt


def later_changes(
    since: Mapping[int, datetime], *, exclude_set: str
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The later work a restore to "before" overrides (SPEC §14): for each artifact id in
    ``since``, the sets other than ``exclude_set`` with a point on it after its moment.

    Returns ``laterChanges`` ``[{"name", "collection", "sets": ["cs_…"]}]`` (artifacts without
    later sets are left out; sets oldest first) and ``laterSets``, each of those sets once,
    oldest first: ``{"setId", "kind", "name", "created_by", "created_on"}`` — what a dialog
    needs to say "also undoes cs_… by <who>, 2 h later". Three queries at most.
    """
    if not since:
        return [], []
    rows = (
        RestorePoint.objects.filter(artifact_id__in=list(since), created_on__gt=min(since.values()))
        .exclude(change_set_id=exclude_set)
        .order_by("created_on", "id")
        .values_list("artifact_id", "change_set_id", "created_on")
    )
    per_artifact: dict[int, list[str]] = {}
    for artifact_id, set_id, created_on in rows:
        if created_on > since[artifact_id]:
            sets = per_artifact.setdefault(artifact_id, [])
            if set_id not in sets:
                sets.append(set_id)
    if not per_artifact:
        return [], []
    changes = [
        {"name": name, "collection": collection, "sets": per_artifact[pk]}
        for pk, collection, name in Artifact.objects.filter(pk__in=list(per_artifact))
        .order_by("collection", "name")
        .values_list("pk", "collection", "name")
    ]
    wanted = {set_id for sets in per_artifact.values() for set_id in sets}
    later_sets = [
        {
            "setId": set_id,
            "kind": kind,
            "name": name,
            "created_by": created_by,
            "created_on": iso_ms(created_on),
        }
        for set_id, kind, name, created_by, created_on in ChangeSet.objects.filter(pk__in=wanted)
        .order_by("created_on", "id")
        .values_list("id", "kind", "name", "created_by", "created_on")
    ]
    return changes, later_sets


def _with_later_changes(
    receipt: RestoreReceipt, since: Mapping[int, datetime], exclude_set: str
) -> RestoreReceipt:
    """A dry run's receipt with its ``laterChanges`` and ``laterSets``."""
    receipt.later_changes, receipt.later_sets = later_changes(since, exclude_set=exclude_set)
    return receipt


def run_audited(app: App, set_ref: str, by: str, dry_run: bool, body: Any) -> RestoreReceipt:
    """Run ``body`` in one transaction; a refused pre-flight is kept in the app's audit log.

    The audit event is written after the restore's transaction rolled back, so it survives it.
    """
    try:
        with transaction.atomic():
            return body()
    except PreflightFailed as exc:
        if not dry_run:
            AuditEvent.objects.create(
                app_id=app.pk,
                kind=PREFLIGHT_FAILED_KIND,
                by=by,
                change_set_ref=set_ref,
                data=exc.receipt.as_dict(),
            )
        raise


def _set_targets(set_id: str, pruned_entries: list[dict[str, Any]]) -> list[RestoreTarget]:
    """For every artifact in the set, the state before the set: its oldest point's previous
    state, or a finding when retention pruned that point."""
    oldest: dict[int, RestoreTarget] = {}
    # The same SQL the ORM would build, compiled once per process and run as is: building and
    # converting it through the queryset costs more than the query itself.
    with connection.cursor() as cursor:
        cursor.execute(_points_sql(), [set_id])
        rows = cursor.fetchall()
    for row in rows:
        if row[1] not in oldest:
            oldest[row[1]] = _target_from_row(row)
    # Retention prunes a set's oldest points first, so an artifact that lost any point of the
    # set lost its state before the set.
    pruned: dict[int, str] = {}
    for entry in pruned_entries:
        artifact_id, point_id = entry.get("artifactId"), entry.get("pointId")
        if artifact_id is None:
            continue
        if artifact_id not in pruned or str(point_id) < pruned[artifact_id]:
            pruned[artifact_id] = str(point_id)
    reason = FINDING_PRUNED.format(keep=conf.points_per_app())
    for artifact_id, point_id in pruned.items():
        oldest[artifact_id] = RestoreTarget(
            artifact_id=artifact_id,
            sha256=None,
            blob_id=None,
            point_id=point_id,
            unavailable=reason,
        )
    return list(oldest.values())


def _by(by: str | None, actor: Actor | None) -> str:
    """Who is recorded: ``by`` when given, else the actor's name."""
    return by if by else (actor.name if actor is not None else "")


def _check(actor: Actor | None, addressed: App | None, owner: App, missing: NotFound) -> App:
    """The owner app of what is restored, once the caller may restore it: a set or point of
    another app than the one addressed is ``missing``; the actor must may restore."""
    if addressed is not None and addressed.pk != owner.pk:
        raise missing
    if actor is not None:
        actor.check(MAY_RESTORE, owner, missing=missing)
    return owner


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
    findings: it lists them. Raises ``PreflightFailed`` (nothing written) or ``NotFound``.
    ``actor`` must may restore the set's app (``Forbidden``); ``app``, when given, is the app
    the caller addressed: a set of another app is ``NotFound``.
    """
    by = validate_optional_id(_by(by, actor), "by")
    reviewed = normalise_expected(expected)
    if not isinstance(set_id, str):
        raise NotFound(SET_NOT_FOUND.format(id=set_id))
    found = _restore_sql.change_set_and_app(set_id)
    if found is None:
        raise NotFound(SET_NOT_FOUND.format(id=set_id))
    found_id, pruned_entries, owner = found
    _check(actor, app, owner, NotFound(SET_NOT_FOUND.format(id=set_id)))
    app = owner

    def body() -> RestoreReceipt:
        receipt = restore_targets(
            app,
            _set_targets(found_id, pruned_entries),
            by=by,
            restored_from=found_id,
            dry_run=dry_run,
            expected=reviewed,
            written_by=principal(actor, by),
        )
        if not dry_run:
            return receipt
        # Later work this restore would override: after each artifact's first point in the set.
        firsts = (
            RestorePoint.objects.filter(change_set_id=found_id)
            .values("artifact_id")
            .annotate(first=Min("created_on"))
            .values_list("artifact_id", "first")
        )
        return _with_later_changes(receipt, dict(firsts), found_id)

    return run_audited(app, found_id, by, dry_run, body)


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
    by = validate_optional_id(_by(by, actor), "by")
    if expected_sha256 is not None:
        if not isinstance(expected_sha256, str) or len(expected_sha256) > 64:
            raise InvalidInput(EXPECTED_BAD_VALUE.format(key="expected_sha256"), field="expected")
        if expected_sha256.strip(_HEX):
            raise InvalidInput(EXPECTED_BAD_VALUE.format(key="expected_sha256"), field="expected")
        expected_sha256 = expected_sha256.lower()
    row = (
        RestorePoint.objects.filter(id=point_id)
        .values_list(
            *_POINT_FIELDS, "app_id", "change_set_id", "artifact__collection", "artifact__name"
        )
        .first()
        if isinstance(point_id, str)
        else None
    )
    if row is None:
        raise NotFound(POINT_NOT_FOUND.format(id=point_id))
    *fields, app_id, set_id, collection, name = row
    missing = NotFound(POINT_NOT_FOUND.format(id=point_id))
    app = _check(actor, app, App.objects.get(pk=app_id), missing)
    if expected_sha256 is None and expected:
        expected_sha256 = (normalise_expected(expected) or {}).get((collection, name))
    reviewed = None if expected_sha256 is None else {(collection, name): expected_sha256}

    def body() -> RestoreReceipt:
        receipt = restore_targets(
            app,
            [_target_from_row(tuple(fields))],
            by=by,
            restored_from=set_id,
            dry_run=dry_run,
            expected=reviewed,
            noop_message=NOOP_POINT_MESSAGE,
            written_by=principal(actor, by),
        )
        if not dry_run:
            return receipt
        moment = RestorePoint.objects.filter(id=point_id).values_list("created_on", flat=True)
        return _with_later_changes(receipt, {fields[1]: moment.get()}, set_id)

    return run_audited(app, set_id, by, dry_run, body)
