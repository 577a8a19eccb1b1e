"""Release review (SPEC §6b): the state of artifacts at a moment, what changed since the
release, and Restore to release.

The one rule everything here rests on: the state of an artifact at moment T is the previous
state of its first restore point after T, or its current state when it has no point after T.
Retention removes an app's oldest unpinned points first, so when an artifact lost a point at or
after T (``Artifact.pruned_until >= T``) its first *remaining* point after T may not be its
first one, and its state at T is unknown: it is reported as pruned, never guessed.

Restore to release computes one target per artifact that differs from its release state and
hands them to the restore engine (:mod:`versions.services.restore`), which pre-flights all of
them, writes counter-points, skips matches and stores the restore set in one transaction.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from django.db.models import Exists, Max, OuterRef, Q, QuerySet, Subquery

from versions import conf, selectors
from versions.errors import Conflict
from versions.models import App, Artifact, Blob, ChangeSet, RestorePoint
from versions.services.capture import resolve_app
from versions.services.restore import (
    RestoreReceipt,
    RestoreTarget,
    _restore_targets,
    _run,
    normalise_expected,
    target_for_point,
)
from versions.services.validation import validate_optional_id

SCOPE = "since_release"

NO_RELEASE = (
    "App “{slug}” has no change set marked as its release. Open the Change sets tab, expand "
    "the set you trust and click Mark as release; then Restore to release can return to it."
)
STATE_NOT_STORED = (
    "Its source at the release was {size:,} bytes, over the {cap:,}-byte limit for stored "
    "sources, so it was not kept: its state at the release cannot be shown or restored."
)
STATE_PRUNED = (
    "A restore point of it from after the release was pruned by retention (only the newest "
    "{keep} unpinned points of an app are kept), so its state at the release is gone: it "
    "cannot be shown or restored."
)

# What an artifact's state at a moment is known from.
CURRENT = "current"  # no point after the moment: it is its current state
STORED = "stored"  # the previous state of its first point after the moment, stored
NOT_STORED = "not_stored"  # that previous source was over the size cap
PRUNED = "pruned"  # a point after the moment may be gone: unknown

# How an artifact differs from its state at the release.
ADDED = "added"
CHANGED = "changed"
REMOVED = "removed"
UNKNOWN = "unknown"

_POINT_FIELDS = (
    "id",
    "artifact_id",
    "change_set_id",
    "created_on",
    "previous_existed",
    "previous_blob_id",
    "previous_sha256",
    "previous_size",
    "source_stored",
    "new_sha256",
    "lines_added",
    "lines_removed",
    "requested_by",
    "tool",
    "kind",
)


@dataclass(frozen=True)
class ArtifactState:
    """The state of one artifact at a moment, and how it is known.

    ``sha256`` is the state's hash ("" = the artifact did not exist; None = unknown, pruned).
    ``blob_id`` is the stored blob of the state (None when absent or not available);
    ``reason`` says in words why the state is not available. ``point`` is the artifact's first
    restore point after the moment (None when it has none). ``source`` is the state's text
    when asked for (``with_sources``): "" when absent, None when not available.
    """

    artifact: Artifact
    status: str
    sha256: str | None
    blob_id: str | None
    point: RestorePoint | None = None
    reason: str | None = None
    source: str | None = None

    @property
    def key(self) -> str:
        return f"{self.artifact.collection}/{self.artifact.name}"

    @property
    def existed(self) -> bool | None:
        """Whether the artifact existed at the moment (None when unknown)."""
        return None if self.sha256 is None else self.sha256 != ""

    @property
    def available(self) -> bool:
        """Whether the state's source is known (so it can be shown and restored to)."""
        return self.status in (CURRENT, STORED)

    @property
    def differs(self) -> bool:
        """Whether the artifact's current bytes differ from this state (True when unknown).

        Blobs are keyed by the sha256 of their bytes, so equal hashes are the same stored bytes.
        """
        return self.sha256 is None or self.sha256 != self.artifact.sha256

    @property
    def change(self) -> str:
        """``added``, ``changed``, ``removed`` or ``unknown``: from this state to now."""
        if self.sha256 is None:
            return UNKNOWN
        if self.sha256 == "":
            return ADDED
        if self.artifact.deleted:
            return REMOVED
        return CHANGED

    def target(self) -> RestoreTarget:
        """This state as a target of the restore engine.

        A state known from a point is that point's "state before" (the engine's own reading
        of a point, so sizes and line counts come with it); a pruned one is a target the
        pre-flight refuses with the reason in words. A ``current`` state is the artifact's
        live blob, which the engine skips as already matching.
        """
        point = self.point
        if self.status in (STORED, NOT_STORED) and point is not None:
            target = target_for_point(
                artifact_id=self.artifact.pk,
                point_id=point.id,
                previous_existed=point.previous_existed,
                previous_blob_id=point.previous_blob_id,
                previous_sha256=point.previous_sha256,
                previous_size=point.previous_size,
                new_sha256=point.new_sha256,
                lines_added=point.lines_added,
                lines_removed=point.lines_removed,
            )
            return replace(target, unavailable=self.reason) if self.reason else target
        return RestoreTarget(
            artifact_id=self.artifact.pk,
            sha256=self.sha256,
            blob_id=self.blob_id,
            point_id=point.id if point is not None else None,
            unavailable=self.reason,
        )


def _first_points_after(artifacts: QuerySet[Artifact], moment: datetime) -> QuerySet[RestorePoint]:
    """Each artifact's first restore point after ``moment``, in one query.

    An artifact's points are strictly ordered by time (captures lock the artifact row and
    stamp each point after its last write), so the first one is well defined.
    """
    first = (
        RestorePoint.objects.filter(artifact=OuterRef("artifact"), created_on__gt=moment)
        .order_by("created_on", "id")
        .values("id")[:1]
    )
    return (
        RestorePoint.objects.filter(artifact__in=artifacts.values("pk"), created_on__gt=moment)
        .filter(id=Subquery(first))
        .only(*_POINT_FIELDS)
        .order_by()
    )


def _state(artifact: Artifact, point: RestorePoint | None, moment: datetime) -> ArtifactState:
    if artifact.pruned_until is not None and artifact.pruned_until >= moment:
        return ArtifactState(
            artifact,
            PRUNED,
            None,
            None,
            point=point,
            reason=STATE_PRUNED.format(keep=conf.points_per_app()),
        )
    if point is None:
        return ArtifactState(artifact, CURRENT, artifact.sha256, artifact.blob_id)
    if not point.previous_existed:
        return ArtifactState(artifact, STORED, "", None, point=point)
    if point.previous_blob_id is None:
        return ArtifactState(
            artifact,
            NOT_STORED,
            point.previous_sha256,
            None,
            point=point,
            reason=STATE_NOT_STORED.format(size=point.previous_size, cap=conf.max_stored_bytes()),
        )
    return ArtifactState(
        artifact, STORED, point.previous_sha256, point.previous_blob_id, point=point
    )


def _with_sources(states: list[ArtifactState]) -> list[ArtifactState]:
    """The states with their ``source`` filled from one blob query."""
    wanted = {s.blob_id for s in states if s.blob_id}
    texts = {b.sha256: b.text for b in Blob.objects.filter(sha256__in=wanted)} if wanted else {}
    out = []
    for s in states:
        if s.sha256 == "":
            source: str | None = ""
        else:
            source = texts.get(s.blob_id) if s.blob_id else None
        out.append(
            ArtifactState(s.artifact, s.status, s.sha256, s.blob_id, s.point, s.reason, source)
        )
    return out


def _states(
    artifacts: QuerySet[Artifact], moment: datetime, *, with_sources: bool
) -> list[ArtifactState]:
    rows = list(artifacts.order_by("collection", "name", "pk"))
    points = {p.artifact_id: p for p in _first_points_after(artifacts, moment)}
    by_pk = {a.pk: a for a in rows}
    for p in points.values():
        p.artifact = by_pk[p.artifact_id]  # no lazy load when a caller follows it
    states = [_state(a, points.get(a.pk), moment) for a in rows]
    return _with_sources(states) if with_sources else states


def states_at(
    app: App | str, moment: datetime, *, with_sources: bool = False
) -> list[ArtifactState]:
    """The state at ``moment`` of every artifact of the app (tombstones too), by collection
    and name. Two queries whatever the number of artifacts (three ``with_sources``)."""
    app_obj = resolve_app(app)
    return _states(Artifact.objects.filter(app=app_obj), moment, with_sources=with_sources)


def state_at(artifact: Artifact, moment: datetime, *, with_source: bool = False) -> ArtifactState:
    """The state of one artifact at ``moment`` (see :func:`states_at`)."""
    return _states(Artifact.objects.filter(pk=artifact.pk), moment, with_sources=with_source)[0]


# --------------------------------------------------------------------------------------------
# The release
# --------------------------------------------------------------------------------------------


def release_set(app: App | str) -> ChangeSet:
    """The set marked as the app's release, or ``InvalidInput`` (409) in words."""
    app_obj = resolve_app(app)
    # Read the mark from the database: the caller's App may predate a mark or unmark.
    marked = App.objects.filter(pk=app_obj.pk).values("release_set_id")[:1]
    cs = ChangeSet.objects.filter(pk=Subquery(marked)).first()
    if cs is None:
        raise Conflict(NO_RELEASE.format(slug=app_obj.slug))
    return cs


def release_moment(app: App | str, change_set: ChangeSet | None = None) -> datetime:
    """When the release set was complete: the capture time of its last point.

    A release set's points are pinned, so never pruned; a set without points counts from its
    own creation time.
    """
    cs = change_set or release_set(app)
    last = RestorePoint.objects.filter(change_set_id=cs.id).aggregate(m=Max("created_on"))["m"]
    return max(last, cs.created_on) if last is not None else cs.created_on


@dataclass
class SinceRelease:
    """What changed since an app's release: the sets after it (newest first) and, per artifact
    that differs from its state at the release, that state (sources loaded)."""

    app: App
    release: ChangeSet
    moment: datetime
    sets: list[ChangeSet]
    changes: list[ArtifactState]

    @property
    def added(self) -> list[ArtifactState]:
        return [s for s in self.changes if s.change == ADDED]

    @property
    def changed(self) -> list[ArtifactState]:
        return [s for s in self.changes if s.change == CHANGED]

    @property
    def removed(self) -> list[ArtifactState]:
        return [s for s in self.changes if s.change == REMOVED]

    @property
    def unavailable(self) -> list[ArtifactState]:
        return [s for s in self.changes if not s.available]


def _sets_after(app: App, moment: datetime, release: ChangeSet) -> list[ChangeSet]:
    """Sets with a point after ``moment`` (or created after it), newest first, with the totals
    and tools a set row shows; three queries."""
    later_point = RestorePoint.objects.filter(change_set=OuterRef("pk"), created_on__gt=moment)
    sets: list[ChangeSet] = list(
        selectors.with_totals(
            ChangeSet.objects.filter(app=app)
            .exclude(pk=release.pk)
            .filter(Q(created_on__gt=moment) | Exists(later_point))
        ).order_by("-created_on", "-id")
    )
    selectors.attach_tools(sets)
    return sets


def differing(states: Iterable[ArtifactState]) -> list[ArtifactState]:
    """The states an artifact's current bytes differ from (or that are unknown)."""
    return [s for s in states if s.differs]


def since_release(app: App | str, *, with_sources: bool = True) -> SinceRelease:
    """The sets after the app's release and the artifacts that differ from their state at it.

    Artifacts unchanged since (or changed and changed back) are not listed. Raises
    ``InvalidInput`` (409) when no release is marked.
    """
    app_obj = resolve_app(app)
    release = release_set(app_obj)
    moment = release_moment(app_obj, release)
    changes = differing(states_at(app_obj, moment))
    if with_sources:
        changes = _with_sources(changes)
    return SinceRelease(app_obj, release, moment, _sets_after(app_obj, moment, release), changes)


def restore_to_release(
    app: App | str,
    *,
    by: str,
    dry_run: bool = False,
    expected: Mapping[Any, str] | None = None,
) -> RestoreReceipt:
    """Return every artifact that differs from its state at the release to that state.

    The engine of Restore all: pre-flight of all before the first write (``PreflightFailed``
    lists every finding, nothing written), a counter-point before each write, skips, one
    transaction, and a restore set whose receipt has ``restoredFromSet`` = the release set and
    ``"scope": "since_release"``. When nothing differs the receipt is the ``noop`` one.
    ``expected`` maps ``"collection/name"`` to the sha256 the person reviewed as now.
    """
    by = validate_optional_id(by, "by")
    reviewed = normalise_expected(expected)
    app_obj = resolve_app(app)
    release = release_set(app_obj)

    def body() -> RestoreReceipt:
        # Inside the transaction: the engine locks the artifacts and re-checks every match.
        moment = release_moment(app_obj, release)
        targets = [s.target() for s in differing(states_at(app_obj, moment))]
        return _restore_targets(
            app_obj,
            targets,
            by=by,
            restored_from=release.id,
            scope=SCOPE,
            dry_run=dry_run,
            expected=reviewed,
        )

    return _run(app_obj, release.id, by, dry_run, body)
