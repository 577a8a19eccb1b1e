"""Restore to release: every artifact that differs from its state at the release, back to
that state — a plan of the one engine (:mod:`versions.services.engine`).

The states come from :mod:`versions.selectors.states`; this module turns each into a target of
the engine, which pre-flights all of them, writes counter-points, skips matches and stores the
restore set in one transaction.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from versions import selectors, terms
from versions.errors import NotFound
from versions.models import App
from versions.selectors import NOT_STORED, STORED, ArtifactState
from versions.services import engine
from versions.services.access import Actor, app_for
from versions.services.engine import (
    Locker,
    Request,
    RestoreTarget,
    Subject,
    target_for_point,
)
from versions.services.receipts import RestoreReceipt
from versions.terms import SCOPE


def restore_target(state: ArtifactState) -> RestoreTarget:
    """This state as a target of the restore engine.

    A state known from a point is that point's "state before" (the engine's own reading
    of a point, so sizes and line counts come with it); a pruned one is a target the
    pre-flight refuses with the reason in words. A ``current`` state is the artifact's
    live blob, which the engine skips as already matching.
    """
    point = state.point
    if state.status in (STORED, NOT_STORED) and point is not None:
        target = target_for_point(
            artifact_id=state.artifact.pk,
            point_id=point.id,
            previous_existed=point.previous_existed,
            previous_blob_id=point.previous_blob_id,
            previous_sha256=point.previous_sha256,
            previous_size=point.previous_size,
            new_sha256=point.new_sha256,
            lines_added=point.lines_added,
            lines_removed=point.lines_removed,
        )
        return replace(target, unavailable=state.reason) if state.reason else target
    return RestoreTarget(
        artifact_id=state.artifact.pk,
        sha256=state.sha256,
        blob_id=state.blob_id,
        point_id=point.id if point is not None else None,
        unavailable=state.reason,
    )


@dataclass
class ReleasePlan(engine.RestorePlan):
    """Restore to release: every artifact that differs from its state at the release, back to
    that state; the receipt's ``restoredFromSet`` is the release set."""

    app: App | str
    scope: str | None = SCOPE
    audit_action = terms.RESTORED_TO_RELEASE  # a class default, not a field

    def lookup(self, request: Request) -> tuple[Subject, NotFound | None]:
        return Subject(app_for(self.app), ""), None  # the release set: once the actor may

    def targets(self, subject: Subject, lock: Locker) -> list[RestoreTarget]:
        # Inside the transaction: the engine locks the artifacts and re-checks every match.
        release = selectors.release_set(subject.app)
        subject.ref = release.id
        moment = selectors.release_moment(subject.app, release)
        states = selectors.differing(selectors.states_at(subject.app, moment))
        return [restore_target(s) for s in states]


def restore_to_release(
    app: App | str,
    *,
    by: str | None = None,
    dry_run: bool = False,
    expected: Mapping[Any, str] | None = None,
    actor: Actor | None = None,
) -> RestoreReceipt:
    """Return every artifact that differs from its state at the release to that state.

    The engine of Restore all: pre-flight of all before the first write (``PreflightFailed``
    lists every finding, nothing written), a counter-point before each write, skips, one
    transaction, and a restore set whose receipt has ``restoredFromSet`` = the release set and
    ``"scope": "since_release"``. When nothing differs the receipt is the ``noop`` one.
    ``expected`` maps ``"collection/name"`` to the sha256 the person reviewed as now;
    ``actor`` must may restore the app.
    """
    request = engine.requested(by=by, actor=actor, dry_run=dry_run, expected=expected)
    return engine.execute(ReleasePlan(app), request)
