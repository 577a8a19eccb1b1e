"""The state of an app's artifacts at a moment, and how each is known
(docs/architecture.md#release-review, docs/architecture.md#environments).

The one rule everything here rests on: the state of an artifact at moment T is the previous
state of its first restore point after T, or its current state when it has no point after T.
Retention removes an app's oldest unpinned points first, so when an artifact lost a point at or
after T (``Artifact.pruned_until >= T``) its first *remaining* point after T may not be its
first one, and its state at T is unknown: it is reported as pruned, never guessed.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.db.models import OuterRef, QuerySet, Subquery

from versions import conf
from versions.models import App, Artifact, Blob, RestorePoint

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


def _first_points_after(artifacts: QuerySet[Artifact], moment: datetime) -> QuerySet[RestorePoint]:
    """Each artifact's first restore point after ``moment``, in one query.

    An artifact's points are strictly ordered by time (captures lock the artifact row and
    stamp each point after its last write), so the first one is well defined. It is looked up
    once per artifact (one step down ``point_artifact_time``), however many points follow.
    """
    first = (
        RestorePoint.objects.filter(artifact=OuterRef("pk"), created_on__gt=moment)
        .order_by("created_on", "id")
        .values("id")[:1]
    )
    firsts = artifacts.order_by().annotate(first_point=Subquery(first)).values("first_point")
    return RestorePoint.objects.filter(id__in=firsts).only(*_POINT_FIELDS).order_by()


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
    artifacts: QuerySet[Artifact],
    moment: datetime,
    *,
    with_sources: bool,
    rows: list[Artifact] | None = None,
) -> list[ArtifactState]:
    if rows is None:
        rows = list(artifacts.order_by("collection", "name", "pk"))
    points = {p.artifact_id: p for p in _first_points_after(artifacts, moment)}
    by_pk = {a.pk: a for a in rows}
    for p in points.values():
        p.artifact = by_pk[p.artifact_id]  # no lazy load when a caller follows it
    states = [_state(a, points.get(a.pk), moment) for a in rows]
    return _with_sources(states) if with_sources else states


def states_at(
    app: App | str,
    moment: datetime,
    *,
    with_sources: bool = False,
    artifacts: list[Artifact] | None = None,
) -> list[ArtifactState]:
    """The state at ``moment`` of every artifact of the app (tombstones too), by collection
    and name. Two queries whatever the number of artifacts (three ``with_sources``); one
    fewer when the caller already read the app's ``artifacts`` (by collection, name and pk)."""
    of_app = (
        Artifact.objects.filter(app=app)
        if isinstance(app, App)
        else Artifact.objects.filter(app__slug=app)
    )
    return _states(of_app, moment, with_sources=with_sources, rows=artifacts)


def state_at(artifact: Artifact, moment: datetime, *, with_source: bool = False) -> ArtifactState:
    """The state of one artifact at ``moment`` (see :func:`states_at`)."""
    return _states(Artifact.objects.filter(pk=artifact.pk), moment, with_sources=with_source)[0]
