"""A change set's own diff (docs/architecture.md#revert): what the set itself did, before it → right
after it.

A set's then → now view mixes in whatever later sets did to the same artifacts; its own view
shows, per artifact, its state just before the set's first point on it and its state right
after the set's last point on it, with the +/− line counts of that view, so a set's row can
show counts that match the diff shown. States come from
:func:`versions.selectors.states.state_at` (the one rule
for "the state of an artifact at a moment"), so a source that was not stored or was pruned is
said in words, never guessed.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from versions.diffing import count_line_changes
from versions.errors import NotFound
from versions.models import Artifact, ChangeSet, RestorePoint
from versions.selectors.states import ArtifactState, state_at

SET_NOT_FOUND = "There is no change set “{id}”."

# How an artifact's own change in a set reads.
ADDED = "added"
CHANGED = "changed"
REMOVED = "removed"
UNCHANGED = "unchanged"  # changed and changed back within the set
UNKNOWN = "unknown"  # a state is not available


@dataclass(frozen=True)
class SetArtifactStates:
    """One artifact of a set: its state before the set and right after it (sources loaded:
    ``""`` for absent, None when not available), and the +/− lines of before → after."""

    artifact: Artifact
    before: ArtifactState
    after: ArtifactState
    lines_added: int
    lines_removed: int

    @property
    def available(self) -> bool:
        """Whether both sides are known, so the diff can be shown."""
        return self.before.source is not None and self.after.source is not None

    @property
    def reason(self) -> str | None:
        """Why a side is not available, in words (None when both are)."""
        return self.before.reason or self.after.reason

    @property
    def change(self) -> str:
        """``added``, ``removed``, ``changed``, ``unchanged`` or ``unknown``."""
        if not self.available:
            return UNKNOWN
        if self.before.sha256 == self.after.sha256:
            return UNCHANGED
        if self.before.sha256 == "":
            return ADDED
        if self.after.sha256 == "":
            return REMOVED
        return CHANGED


@dataclass(frozen=True)
class SetStates:
    """A set's own diff: its artifacts by collection and name, and the view's line totals."""

    set_id: str
    artifacts: list[SetArtifactStates]

    @property
    def lines_added(self) -> int:
        return sum(a.lines_added for a in self.artifacts)

    @property
    def lines_removed(self) -> int:
        return sum(a.lines_removed for a in self.artifacts)


def set_states(set_id: str, view: str = "set") -> SetStates:
    """Per artifact of change set ``set_id`` (a restore set too), its state before the set and
    right after it (``view="set"``) or now (``view="now"``), with the +/− line counts of that
    view. Raises ``NotFound``."""
    if not isinstance(set_id, str) or not ChangeSet.objects.filter(pk=set_id).exists():
        raise NotFound(SET_NOT_FOUND.format(id=set_id))
    spans: dict[int, tuple[datetime, datetime]] = {}
    for artifact_id, created_on in (
        RestorePoint.objects.filter(change_set_id=set_id)
        .order_by("created_on", "id")
        .values_list("artifact_id", "created_on")
    ):
        first = spans.get(artifact_id, (created_on, created_on))[0]
        spans[artifact_id] = (first, created_on)
    artifacts = Artifact.objects.filter(pk__in=list(spans)).order_by("collection", "name", "pk")
    out = []
    for artifact in artifacts:
        first, last = spans[artifact.pk]
        # Points are stamped in whole milliseconds, strictly increasing per artifact: the
        # first point after a moment just before the set's first one is that very point.
        before = state_at(artifact, first - timedelta(microseconds=1), with_source=True)
        after = (
            state_at(artifact, last, with_source=True)
            if view == "set"
            else ArtifactState(
                artifact,
                "current",
                artifact.sha256,
                artifact.blob_id,
                source="" if artifact.deleted else artifact.source,
            )
        )
        if before.source is not None and after.source is not None:
            added, removed = count_line_changes(before.source, after.source)
        else:
            added = removed = 0
        out.append(SetArtifactStates(artifact, before, after, added, removed))
    return SetStates(set_id, out)
