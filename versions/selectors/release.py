"""Release review reads (docs/architecture.md#release-review): the release, when it was complete,
what changed since."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from django.core.paginator import Page, Paginator
from django.db.models import Exists, Max, OuterRef, Q, Subquery

from versions.errors import Conflict
from versions.models import App, ChangeSet, RestorePoint
from versions.selectors.panel import app_of, attach_tools, with_point_totals
from versions.selectors.states import (
    ADDED,
    CHANGED,
    REMOVED,
    ArtifactState,
    _with_sources,
    states_at,
)

NO_RELEASE = (
    "App “{slug}” has no change set marked as its release. Open the Change sets tab, expand "
    "the set you trust and click Mark as release; then Restore to release can return to it."
)


def release_set(app: App | str) -> ChangeSet:
    """The set marked as the app's release, or ``InvalidInput`` (409) in words."""
    app_obj = app_of(app)
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
    set_count: int = 0
    sets_page: Page | None = None

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


SINCE_PER_PAGE = 25


def _sets_after(
    app: App, moment: datetime, release: ChangeSet, page: int | str | None
) -> tuple[list[ChangeSet], Page]:
    """One page of the sets with a point after ``moment`` (or created after it), newest first,
    with the totals and tools a set row shows (computed for the page's sets only)."""
    # The app's points only: a planner that hashes the subquery then reads this app's points
    # (its id leads their indexes), never every app's.
    later_point = RestorePoint.objects.filter(
        app_id=app.pk, change_set=OuterRef("pk"), created_on__gt=moment
    )
    after = (
        ChangeSet.objects.filter(app=app)
        .exclude(pk=release.pk)
        .filter(Q(created_on__gt=moment) | Exists(later_point))
        .order_by("-created_on", "-id")
    )
    page_obj = Paginator(after.values_list("id", flat=True), SINCE_PER_PAGE).get_page(page)
    ids = list(page_obj.object_list)
    sets: list[ChangeSet] = list(
        with_point_totals(app, ChangeSet.objects.filter(app=app, pk__in=ids)).order_by(
            "-created_on", "-id"
        )
    )
    attach_tools(sets)
    page_obj.object_list = sets  # type: ignore[assignment]
    return sets, page_obj


def differing(states: Iterable[ArtifactState]) -> list[ArtifactState]:
    """The states an artifact's current bytes differ from (or that are unknown)."""
    return [s for s in states if s.differs]


def since_release(
    app: App | str, *, with_sources: bool = True, page: int | str | None = None
) -> SinceRelease:
    """The sets after the app's release (one page of them, ``page``) and the artifacts that
    differ from their state at it.

    Artifacts unchanged since (or changed and changed back) are not listed. Raises
    ``Conflict`` when no release is marked.
    """
    app_obj = app_of(app)
    release = release_set(app_obj)
    moment = release_moment(app_obj, release)
    changes = differing(states_at(app_obj, moment))
    if with_sources:
        changes = _with_sources(changes)
    sets, sets_page = _sets_after(app_obj, moment, release, page)
    return SinceRelease(
        app_obj,
        release,
        moment,
        sets,
        changes,
        set_count=sets_page.paginator.count,
        sets_page=sets_page,
    )
