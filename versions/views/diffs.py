"""Then→now diffs of the panel: the diff section, its hunk pages and its gap expanders."""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from versions import conf, diffing, selectors, services
from versions.formatting import kb
from versions.models import RestorePoint
from versions.selectors import ArtifactChange
from versions.views._common import actor_of, int_param, panel_view, perms

HUNKS_PER_PAGE = 20
# Unchanged lines one click of an expander reveals; a longer gap keeps the rest collapsed.
GAP_CHUNK = 200

NOT_STORED = (
    "The source before this change was {size}, over the {cap} storage limit, so it was not "
    "stored. The change itself is recorded (hashes, who, when), but this state cannot be shown "
    "or restored."
)
PRUNED = (
    "The restore point that held this artifact's state before the set was pruned by retention "
    "(an app keeps its newest {keep} unpinned points). That state cannot be shown or restored."
)
ADDED = "Created by this change: it did not exist before. Restoring it makes it a tombstone."
REMOVED = "Deleted since: the artifact is now a tombstone. Restoring it brings it back."
ABSENT = "It did not exist before this change and does not exist now; nothing differs."
IDENTICAL = (
    "Its current source matches the state before this change byte for byte. "
    "A restore would skip it."
)
CHANGED_SINCE = "This artifact changed since the diff was shown. Reload to see the current diff."
# The same cases in the set's own view (before the set → right after it).
SET_ADDED = "Created by this set: it did not exist before it."
SET_REMOVED = "Deleted by this set."
SET_ABSENT = "It did not exist before this set, nor right after it."
SET_IDENTICAL = (
    "This set changed it and changed it back: right after the set it matched its state before."
)


# Computed diffs by (then blob, now blob): blobs are content-addressed, so the key is the
# content. Paging and expanders then reuse the first view's result without reloading sources.
_RESULTS: OrderedDict[tuple[str, str], diffing.DiffResult] = OrderedDict()
_RESULTS_LOCK = threading.Lock()
RESULTS_SIZE = 16
_ABSENT = "-"


def _key(change: ArtifactChange) -> tuple[str, str]:
    point = change.point
    then = (
        (point.previous_blob_id or "") if point is not None and point.previous_existed else _ABSENT
    )
    now = _ABSENT if change.now_deleted else (change.now_blob_id or "")
    return then, now


def _cached(key: tuple[str, str]) -> diffing.DiffResult | None:
    with _RESULTS_LOCK:
        hit = _RESULTS.get(key)
        if hit is not None:
            _RESULTS.move_to_end(key)
        return hit


def _remember(key: tuple[str, str], result: diffing.DiffResult) -> None:
    with _RESULTS_LOCK:
        _RESULTS[key] = result
        while len(_RESULTS) > RESULTS_SIZE:
            _RESULTS.popitem(last=False)


def clear_cache() -> None:
    """Forget computed diffs (benchmarks measure first views)."""
    with _RESULTS_LOCK:
        _RESULTS.clear()


def pair_key(
    then_blob: str | None, now_blob: str | None, *, then_exists: bool, now_exists: bool
) -> tuple[str, str]:
    """The cache key of a diff of two stored states (content-addressed, as every diff here)."""
    return (
        (then_blob or "") if then_exists else _ABSENT,
        (now_blob or "") if now_exists else _ABSENT,
    )


def is_cached(key: tuple[str, str]) -> bool:
    return _cached(key) is not None


def blob_pair_diff(
    then_blob: str | None,
    now_blob: str | None,
    *,
    then_exists: bool,
    now_exists: bool,
    sources: dict[str, bytes] | None = None,
) -> diffing.DiffResult:
    """The diff of two stored states by their blobs (cached by content, like every diff here):
    a side that does not exist is ``None`` (added / removed). ``sources``: blobs already read
    (``selectors.blob_sources``), else they are read here."""
    key = pair_key(then_blob, now_blob, then_exists=then_exists, now_exists=now_exists)
    result = _cached(key)
    if result is None:
        if sources is None:
            sources = selectors.blob_sources({b for b in (then_blob, now_blob) if b})
        then = sources.get(then_blob or "", b"") if then_exists else None
        now = sources.get(now_blob or "", b"") if now_exists else None
        result = diffing.compute_diff(then, now)
        _remember(key, result)
    return result


def prepare(changes: list[ArtifactChange]) -> None:
    """Load, in one query, the sources of the inline changes whose diff is not cached."""
    selectors.load_sources(
        [ch for ch in changes if ch.inline and ch.point is not None and _cached(_key(ch)) is None]
    )


def diff_result(change: ArtifactChange) -> diffing.DiffResult:
    """The then→now diff of a change (cached by content); sources loaded when needed."""
    key = _key(change)
    result = _cached(key)
    if result is None:
        if change.now_source is None and change.then_source is None:
            selectors.load_sources([change])
        point = change.point
        then = change.then_source if point is not None and point.previous_existed else None
        now = None if change.now_deleted else (change.now_source or "")
        result = diffing.compute_diff(then, now)
        _remember(key, result)
    return result


@dataclass
class DiffView:
    """What a diff section shows: words for the special cases and one page of hunks."""

    change: ArtifactChange
    status: str  # changed | added | removed | identical | absent | not_stored | pruned | lazy
    message: str
    result: diffing.DiffResult | None = None
    page: diffing.DiffPage | None = None
    notes: Any = None  # its line comments (selectors.LineNotes), given by the view
    lock: str = ""  # why agents may not write the artifact (its lock), given by the view

    @property
    def artifact(self) -> Any:
        return self.change.artifact

    @property
    def left_sha(self) -> str | None:
        """The blob of the "then" side (the state before the set), or None when absent."""
        point = self.change.point
        return point.previous_sha256 if point is not None and point.previous_existed else None

    @property
    def set_id(self) -> str | None:
        point = self.change.point
        return point.change_set_id if point is not None else None

    @property
    def point_id(self) -> str:
        return self.change.point.id if self.change.point else f"pruned-{self.change.artifact.pk}"

    @property
    def now_sha(self) -> str:
        return self.change.now_sha

    @property
    def view(self) -> str:
        return self.change.view

    @property
    def lines_added(self) -> int:
        return self.result.lines_added if self.result else 0

    @property
    def lines_removed(self) -> int:
        return self.result.lines_removed if self.result else 0


def _not_stored(point: RestorePoint) -> str:
    return NOT_STORED.format(size=kb(point.previous_size), cap=kb(conf.max_stored_bytes()))


def build_diff(change: ArtifactChange, page: int = 1) -> DiffView:
    """The diff view of one artifact change (its sources loaded, or lazy)."""
    point = change.point
    if point is None:
        return DiffView(change, "pruned", PRUNED.format(keep=conf.points_per_app()))
    if not change.inline:
        return DiffView(change, "lazy", "")
    if change.after is not None and change.after.unknown:
        return DiffView(change, "pruned", change.after.unknown)
    if point.previous_existed and not point.source_stored:
        return DiffView(change, "not_stored", _not_stored(point))
    own = change.after is not None
    if not point.previous_existed and change.now_deleted:
        return DiffView(change, "absent", SET_ABSENT if own else ABSENT)
    if point.previous_existed and not point.previous_blob_id:
        # Stored but its blob is gone: treat as not stored rather than guess.
        return DiffView(change, "not_stored", _not_stored(point))
    result = diff_result(change)
    if result.is_added:
        status, message = "added", SET_ADDED if own else ADDED
    elif result.is_removed:
        status, message = "removed", SET_REMOVED if own else REMOVED
    elif result.identical:
        status, message = "identical", SET_IDENTICAL if own else IDENTICAL
    else:
        status, message = "changed", ""
    page_obj = None
    if result.hunk_count:
        number = min(max(1, page), result.num_pages(HUNKS_PER_PAGE))
        page_obj = result.page(number, HUNKS_PER_PAGE)
    return DiffView(change, status, message, result, page_obj)


@require_GET
@panel_view
def diff_section(request: HttpRequest, slug: str, point_id: str) -> HttpResponse:
    """The whole diff section of one point (lazy-loaded artifacts of big sets)."""
    app, point = selectors.app_point(slug, point_id)
    services.app_for(app, actor=actor_of(request))
    view = build_diff(selectors.point_change(point, _view(request)))
    with_notes(request, app, [view])
    with_locks(app, [view])
    ctx = {"app": app, "diff": view, **perms(request, app)}
    return render(request, "versions/partials/_diff.html", ctx)


def with_locks(app: Any, diffs: list[DiffView]) -> None:
    """Give the diffs whose heads are drawn their artifact's lock, in words (an app without
    locks: no query)."""
    locks = selectors.artifact_locks(app)
    for diff in diffs:
        diff.lock = locks.get((diff.artifact.collection, diff.artifact.name), "")


def with_notes(request: HttpRequest, app: Any, diffs: list[DiffView]) -> None:
    """Give the diffs their line comments (``views.reviews.line_notes``)."""
    from versions.views.reviews import line_notes

    line_notes(
        request,
        app,
        diffs,
        left=lambda d: d.left_sha,
        right=lambda d: d.now_sha or None,
        set_id=lambda d: d.set_id,
        view=lambda d: d.view,
    )


def _view(request: HttpRequest) -> str:
    """``?view=set`` (the set's own change) or the default then → now."""
    view = request.GET.get("view", selectors.NOW_VIEW)
    return view if view in selectors.VIEWS else selectors.NOW_VIEW


@require_GET
@panel_view
def diff_page(request: HttpRequest, slug: str, point_id: str) -> HttpResponse:
    """The next page of hunks of a then→now diff ("Show more hunks")."""
    app, point = selectors.app_point(slug, point_id)
    services.app_for(app, actor=actor_of(request))
    change = selectors.point_change(point, _view(request))
    if request.GET.get("now", change.now_sha) != change.now_sha:
        return render(request, "versions/partials/_diff_stale.html", {"message": CHANGED_SINCE})
    view = build_diff(change, page=int_param(request.GET.get("page"), 1))
    with_notes(request, app, [view])
    ctx = {"app": app, "diff": view, **perms(request, app)}
    return render(request, "versions/partials/_diff_page.html", ctx)


@require_GET
@panel_view
def diff_context(request: HttpRequest, slug: str, point_id: str) -> HttpResponse:
    """Unchanged lines behind an "N unchanged lines" expander."""
    app, point = selectors.app_point(slug, point_id)
    services.app_for(app, actor=actor_of(request))
    change = selectors.point_change(point, _view(request))
    if request.GET.get("now", change.now_sha) != change.now_sha:
        return render(request, "versions/partials/_diff_stale.html", {"message": CHANGED_SINCE})
    old_start = int_param(request.GET.get("old"))
    new_start = int_param(request.GET.get("new"))
    count = int_param(request.GET.get("count"))
    take = min(count, GAP_CHUNK)
    try:
        rows = diff_result(change).context_lines(old_start, new_start, take)
    except diffing.StaleContext:
        return render(request, "versions/partials/_diff_stale.html", {"message": CHANGED_SINCE})
    rest = None
    if count > take:
        rest = diffing.Gap(old_start + take, new_start + take, count - take)
    shown = build_diff(change)
    with_notes(request, app, [shown])
    return render(
        request,
        "versions/partials/_diff_context.html",
        {
            "notes": shown.notes,
            **perms(request, app),
            "app": app,
            "pid": point.id,
            "rows": rows,
            "rest": rest,
            "now": change.now_sha,
            "view": change.view,
        },
    )
