"""Read-side queries of the Versions panel (selectors: services write, selectors read).

Every list here runs a fixed number of queries whatever the number of rows: aggregates come in
one query per page over the page's own rows, related rows in one query per page, and sources
(blobs) in one query for all the diffs a page shows. Each query names the app's rows where the
planner can use them, so none reads every app's rows whatever the statistics say
(docs/architecture.md#scale).
"""

from __future__ import annotations

import os
import threading
from collections import defaultdict
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from django.core.paginator import Page, Paginator
from django.db import connection
from django.db.models import Count, Exists, Max, OuterRef, Q, QuerySet, Subquery, Sum
from django.db.models.functions import Coalesce

from versions import rawsql
from versions.errors import NotFound
from versions.models import (
    COLLECTION_CHOICES,
    App,
    Artifact,
    Blob,
    ChangeSet,
    ReleaseMark,
    RestorePoint,
    blob_hex,
    blob_key,
)
from versions.replicas import read_alias
from versions.selectors.agent import acted_on_by
from versions.selectors.reviews import protection_of, review_states

SETS_PER_PAGE = 25
POINTS_PER_PAGE = 50
# An expanded set renders the diffs of its first artifacts inline; the others load when
# scrolled into view, so a 200-artifact set opens as fast as a 2-artifact one.
INLINE_DIFFS = 12

COLLECTION_LABELS = dict(COLLECTION_CHOICES)

APP_NOT_FOUND = "There is no app “{slug}”."
SET_NOT_IN_APP = "There is no change set “{id}” in app “{slug}”."
POINT_NOT_IN_APP = "There is no restore point “{id}” in this app."
RESTORE_SET_NOT_IN_APP = "There is no restore set “{id}” in this app."


def app_list(app_ids: Iterable[int] | None = None) -> QuerySet[App]:
    """Apps with their set count and last activity, for the home page; only ``app_ids`` when
    given (the apps a person sees)."""
    apps = _visible(app_ids)
    return apps.annotate(
        set_count=Count("change_sets", distinct=True),
        last_change=Max("change_sets__created_on"),
    ).order_by("slug")


APPS_PER_PAGE = 24


def _visible(app_ids: Iterable[int] | None) -> QuerySet[App]:
    """Every app (None), or those ``app_ids`` names: a query of ids (the services' answer of
    who sees what) stays a subquery, so the apps list never sends every visible id as a list
    of literals."""
    if app_ids is None:
        return App.objects.all()
    if isinstance(app_ids, QuerySet):
        return App.objects.filter(pk__in=app_ids)
    return App.objects.filter(pk__in=list(app_ids))


def app_page(app_ids: Iterable[int] | None, query: str, page: int | str | None) -> Page:
    """One page of the apps a person sees (``app_ids``; None: all), by slug, filtered by name or
    slug (``query``), each with its set count and last change — computed for the page's apps
    only, each from its own index entries (app, created_on), so the page costs the same however
    many apps and sets the database holds, and however many sets the page's apps have."""
    apps = _visible(app_ids)
    query = query.strip()[:100]
    if query:
        apps = apps.filter(Q(slug__icontains=query) | Q(name__icontains=query))
    own_sets = ChangeSet.objects.filter(app_id=OuterRef("pk")).order_by()
    apps = apps.annotate(
        set_count=Subquery(own_sets.values("app_id").annotate(n=Count("pk")).values("n")[:1]),
        last_change=Subquery(own_sets.order_by("-created_on").values("created_on")[:1]),
    )
    page_obj = Paginator(apps.order_by("slug"), APPS_PER_PAGE).get_page(page)
    rows = list(page_obj.object_list)
    for a in rows:
        a.set_count = a.set_count or 0  # type: ignore[attr-defined]
    page_obj.object_list = rows
    return page_obj


def app_of(app: App | str) -> App:
    """The App for an App or a slug (with its release set), or ``NotFound``."""
    if isinstance(app, App):
        return app
    found = App.objects.select_related("release_set").filter(slug=app).first()
    if found is None:
        raise NotFound(APP_NOT_FOUND.format(slug=app))
    return found


# --------------------------------------------------------------------------------------------
# Change sets
# --------------------------------------------------------------------------------------------


def with_totals(qs: QuerySet[ChangeSet]) -> QuerySet[ChangeSet]:
    """Annotate sets with what a set row shows: artifacts, points, lines added and removed."""
    return qs.annotate(
        artifact_count=Count("points__artifact", distinct=True),
        point_count=Count("points", distinct=True),
        added=Sum("points__lines_added"),
        removed=Sum("points__lines_removed"),
    )


def with_point_totals(app: App, qs: QuerySet[ChangeSet]) -> QuerySet[ChangeSet]:
    """``qs`` (a few sets, already chosen: never a page still to count or skip) with the totals
    of :func:`attach_totals`, each a subquery over that set's points (the points'
    change_set index, and the app's id): no join of the sets with every point."""
    points = (
        RestorePoint.objects.filter(app_id=app.pk, change_set_id=OuterRef("pk"))
        .order_by()
        .values("change_set_id")
    )

    def total(aggregate: Any) -> Subquery:
        return Subquery(points.annotate(total=aggregate).values("total")[:1])

    return qs.annotate(
        artifact_count=Coalesce(total(Count("artifact_id", distinct=True)), 0),
        point_count=Coalesce(total(Count("id")), 0),
        added=total(Sum("lines_added")),
        removed=total(Sum("lines_removed")),
    )


def attach_totals(app: App, sets: list[ChangeSet]) -> None:
    """Give each set what a set row shows (artifacts, points, lines added and removed), from
    one query over the points of these sets only (the points' change_set index, and the app's
    id besides): a join of the sets with the points, counted or paginated, let the planner hash
    every app's points."""
    totals: dict[str, Any] = {}
    if sets:
        totals = {
            row["change_set_id"]: row
            for row in RestorePoint.objects.filter(
                app_id=app.pk, change_set_id__in=[s.id for s in sets]
            )
            .order_by()
            .values("change_set_id")
            .annotate(
                artifact_count=Count("artifact_id", distinct=True),
                point_count=Count("id"),
                added=Sum("lines_added"),
                removed=Sum("lines_removed"),
            )
        }
    for s in sets:
        row = totals.get(s.id, {})
        s.artifact_count = row.get("artifact_count", 0)  # type: ignore[attr-defined]
        s.point_count = row.get("point_count", 0)  # type: ignore[attr-defined]
        s.added = row.get("added")  # type: ignore[attr-defined]
        s.removed = row.get("removed")  # type: ignore[attr-defined]


def attach_tools(sets: list[ChangeSet]) -> None:
    """Give each set ``tools`` (sorted distinct tool names) with one query for all of them."""
    tools: dict[str, set[str]] = defaultdict(set)
    if sets:
        rows = (
            RestorePoint.objects.filter(change_set_id__in=[s.id for s in sets])
            .values_list("change_set_id", "tool")
            .distinct()
        )
        for set_id, tool in rows:
            if tool:
                tools[set_id].add(tool)
    for s in sets:
        s.tools = sorted(tools[s.id])  # type: ignore[attr-defined]


def attach_review_states(app: App, sets: list[ChangeSet]) -> None:
    """Give each agent's set ``review`` (its review state under the app's protection, for the
    row's status); restore sets are people's own actions and carry none. The panel's rows ask
    for it (two queries a page); other readers of sets do not pay for it."""
    changes = [s for s in sets if s.kind == ChangeSet.CHANGE]
    found = review_states([s.id for s in changes], protection_of(app)) if changes else {}
    for s in sets:
        s.review = found.get(s.id)  # type: ignore[attr-defined]


def change_set_page(app: App, page: int | str | None) -> Page:
    """One page of the app's change sets, newest first, with totals and tools."""
    qs = ChangeSet.objects.filter(app=app).order_by("-created_on", "-id")
    paginator = Paginator(qs, SETS_PER_PAGE)
    page_obj = paginator.get_page(page)
    sets = list(page_obj.object_list)
    attach_totals(app, sets)
    attach_tools(sets)
    attach_artifacts(sets)
    page_obj.object_list = sets
    return page_obj


def change_set_row(app: App, set_id: str) -> ChangeSet:
    """One set with the same totals as a list row, or 404."""
    cs = with_point_totals(app, ChangeSet.objects.filter(app=app, id=set_id)).first()
    if cs is None:
        raise NotFound(SET_NOT_IN_APP.format(id=set_id, slug=app.slug))
    cs.app = app
    attach_tools([cs])
    attach_artifacts([cs])
    return cs


# The two views of a set's diff (docs/architecture.md#revert): what the set itself did (before it →
# right after it), or its then → now (before it → the artifact's current source).
SET_VIEW = "set"
NOW_VIEW = "now"
VIEWS = (SET_VIEW, NOW_VIEW)


@dataclass(frozen=True)
class AfterState:
    """An artifact's state right after a set: the previous state of the first later point on
    it, or its current state when there is none. ``unknown``: in words, why it is not known
    (that later point was pruned)."""

    blob_id: str | None
    exists: bool
    sha256: str
    unknown: str | None = None


AFTER_PRUNED = (
    "The restore point that held this artifact's state right after the set was pruned by "
    "retention, so what the set itself did cannot be shown. Switch to then → now."
)


@dataclass
class ArtifactChange:
    """One artifact of an expanded set: its oldest point in the set, and the state shown as
    "now" — its current state, or (``after``) its state right after the set."""

    artifact: Artifact
    point: RestorePoint | None
    pruned: bool = False
    inline: bool = True
    # Sources as text, or as their stored UTF-8 bytes (``load_sources``: a big source is diffed
    # without being decoded whole; the diff decodes the lines it shows).
    then_source: str | bytes | None = None
    now_source: str | bytes | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    after: AfterState | None = None

    @property
    def key(self) -> str:
        return f"{self.artifact.collection}/{self.artifact.name}"

    @property
    def view(self) -> str:
        return SET_VIEW if self.after is not None else NOW_VIEW

    @property
    def now_blob_id(self) -> str | None:
        """The blob of the "now" side: right after the set, or the current source."""
        return self.after.blob_id if self.after is not None else self.artifact.blob_id

    @property
    def now_deleted(self) -> bool:
        """Whether the "now" side is absent (a tombstone, or deleted by the set)."""
        return not self.after.exists if self.after is not None else self.artifact.deleted

    @property
    def now_sha(self) -> str:
        return self.after.sha256 if self.after is not None else self.artifact.sha256


@dataclass
class ExpandedSet:
    """An expanded change set: the set, per-artifact changes and the app's release history."""

    change_set: ChangeSet
    changes: list[ArtifactChange]
    release_history: list[ReleaseMark]
    restored_by: Sequence[ChangeSet]
    reverted_by: Sequence[ChangeSet] = field(default_factory=list)


def load_sources(changes: list[ArtifactChange]) -> None:
    """Fill then/now sources of the given inline changes from one blob query."""
    wanted: set[str] = set()
    for ch in changes:
        if not ch.inline:
            continue
        if ch.point is not None and ch.point.previous_blob_id:
            wanted.add(ch.point.previous_blob_id)
        if ch.now_blob_id:
            wanted.add(ch.now_blob_id)
    sources = blob_sources(wanted)
    for ch in changes:
        if not ch.inline:
            continue
        ch.then_source = then_source(ch.point, sources) if ch.point is not None else None
        ch.now_source = sources.get(ch.now_blob_id or "")


def then_source(point: RestorePoint, sources: dict[str, bytes] | None = None) -> str | bytes | None:
    """The point's previous source: None when it did not exist *or* was not stored.

    ``sources`` are blobs' UTF-8 bytes by sha256 (``blob_sources``); without them the blob is
    queried and decoded. Callers tell the two apart with ``point.previous_existed`` and
    ``point.source_stored``.
    """
    if not point.previous_existed or not point.previous_blob_id:
        return None
    if sources is not None:
        return sources.get(point.previous_blob_id)
    return point.previous_source


def blob_sources(shas: Iterable[str]) -> dict[str, bytes]:
    """The sources (UTF-8 bytes) of the given blobs by sha256, from one query.

    Only the bytes and the compression flag are read (no model instances); on PostgreSQL in
    binary format (no hex text to parse for a bytea). Big blobs are stored zlib-compressed:
    decompressing releases the GIL, so a page with several of them (a then→now diff has two)
    inflates them on two cores at once.
    """
    shas = set(shas)
    if not shas:
        return {}
    # The blobs and, for deltas, the full copies they need (docs/architecture.md#storage), in the
    # same query: one list found on the primary key (an OR of the two had PostgreSQL scan every
    # app's blobs).
    wanted = sorted(shas)
    postgresql = connection.vendor == "postgresql"
    table = connection.ops.quote_name(Blob._meta.db_table)
    marks = ", ".join(["%s"] * len(wanted))
    # The two halves are each found on the primary key: the blobs asked for, then the full
    # copy each delta names, looked up by its key (LIMIT 1 keeps the lateral lookup one, where
    # a join could hash every app's blobs); a blob asked for that is also a base comes twice
    # and is kept once. (An IN over a UNION of both had the planner walk every app's blobs.)
    rows = rawsql.execute(
        f"SELECT b.sha256, b.data, b.compressed, b.base_id FROM {table} AS b "  # noqa: S608
        f"WHERE b.sha256 IN ({marks}) "
        f"UNION ALL SELECT b.sha256, b.data, b.compressed, b.base_id FROM {table} AS c "
        f"{_base_lookup(table)} WHERE c.sha256 IN ({marks})",
        [blob_key(sha) for sha in wanted] * 2 if postgresql else wanted * 2,
        "all",
        binary=True,
        using=read_alias(),  # a replica's, when this request may read there
    )
    if postgresql:  # blob keys are stored as bytes there
        rows = [(blob_hex(sha), data, packed, blob_hex(base)) for sha, data, packed, base in rows]
    rows = list({row[0]: row for row in rows}.values())  # a base asked for itself comes twice
    deltas = [(sha, data, base) for sha, data, _, base in rows if base is not None]
    rows = [(sha, data, compressed) for sha, data, compressed, base in rows if base is None]
    # A full copy that deltas here are read against is decompressed once per thread and kept
    # with its dictionary (``Blob.full_copy``): a delta and its base, the usual then→now pair
    # of a busy artifact, then cost one decompression, not two.
    bases_here = {base for _, _, base in deltas}
    sources = {
        sha: Blob.full_copy(sha, data, compressed)
        for sha, data, compressed in rows
        if sha in bases_here
    }
    rows = [row for row in rows if row[0] not in bases_here]
    packed = [(sha, data) for sha, data, compressed in rows if compressed]
    sources.update((sha, _raw(data, False)) for sha, data, compressed in rows if not compressed)
    if len(packed) > 1:
        # Every other blob on a helper thread, the rest here, concurrently.
        pool = _inflate_pool()
        futures = [(sha, pool.submit(_raw, data, True)) for sha, data in packed[1::2]]
        sources.update((sha, _raw(data, True)) for sha, data in packed[::2])
        sources.update((sha, future.result()) for sha, future in futures)
    else:
        sources.update((sha, _raw(data, True)) for sha, data in packed)
    sources.update(
        (sha, Blob.unpack_delta(data, base, sources[base])) for sha, data, base in deltas
    )
    return sources


def _base_lookup(table: str) -> str:
    """The full copy a delta ``c`` names, as ``b``: on PostgreSQL a lateral lookup by key that
    the planner cannot turn into a hash of every blob; SQLite joins by looking each key up."""
    if connection.vendor == "postgresql":
        return (
            f"CROSS JOIN LATERAL (SELECT * FROM {table} AS f "  # noqa: S608
            "WHERE f.sha256 = c.base_id LIMIT 1) AS b"
        )
    return f"JOIN {table} AS b ON b.sha256 = c.base_id"


def _raw(data: bytes | memoryview, compressed: bool) -> bytes:
    """A blob's UTF-8 bytes from its stored bytes (as ``Blob.raw``)."""
    return Blob(data=data, compressed=compressed).raw


_POOL: tuple[int, ThreadPoolExecutor] | None = None
_POOL_LOCK = threading.Lock()


def _inflate_pool() -> ThreadPoolExecutor:
    """One helper thread per process (made again in a forked worker: threads do not fork)."""
    global _POOL
    pid = os.getpid()
    with _POOL_LOCK:
        if _POOL is None or _POOL[0] != pid:
            _POOL = (pid, ThreadPoolExecutor(max_workers=1, thread_name_prefix="blob-inflate"))
        return _POOL[1]


def after_states(last_points: Iterable[RestorePoint]) -> dict[int, AfterState]:
    """Each artifact's state right after its last point of a set (``last_points``: that point
    per artifact), by artifact id, in one query: the previous state of the first later point
    on it, or its current state when nothing wrote it since."""
    last = list(last_points)
    if not last:
        return {}
    later = RestorePoint.objects.filter(
        artifact_id=OuterRef("artifact_id"), created_on__gt=OuterRef("created_on")
    ).order_by("created_on", "id")
    rows = (
        RestorePoint.objects.filter(pk__in=[p.pk for p in last])
        .annotate(
            next_id=Subquery(later.values("id")[:1]),
            next_blob=Subquery(later.values("previous_blob_id")[:1]),
            next_existed=Subquery(later.values("previous_existed")[:1]),
            next_sha=Subquery(later.values("previous_sha256")[:1]),
        )
        .values_list(
            "artifact_id",
            "created_on",
            "next_id",
            "next_blob",
            "next_existed",
            "next_sha",
            "artifact__blob_id",
            "artifact__deleted",
            "artifact__sha256",
            "artifact__pruned_until",
        )
    )
    out: dict[int, AfterState] = {}
    for art_id, moment, next_id, blob, existed, sha, cur_blob, deleted, cur_sha, pruned in rows:
        if pruned is not None and pruned >= moment:
            out[art_id] = AfterState(None, False, "", unknown=AFTER_PRUNED)
        elif next_id is None:
            out[art_id] = AfterState(None if deleted else cur_blob, not deleted, cur_sha)
        else:
            out[art_id] = AfterState(blob if existed else None, bool(existed), sha or "")
    return out


def expanded_set(app: App, set_id: str, view: str = SET_VIEW) -> ExpandedSet:
    """A change set with, per artifact, its oldest point in the set and the state shown as now:
    right after the set (``view="set"``, what the set itself did) or its current state."""
    cs = change_set_row(app, set_id)
    points = list(
        RestorePoint.objects.filter(change_set=cs)
        .select_related("artifact")
        .order_by("created_on", "id")
    )
    if cs.kind == ChangeSet.RESTORE and cs.receipt:
        # A restore's counter-points share one moment: list them as its receipt does (the
        # order of the set it restored), not by their ids' random suffixes.
        items = cs.receipt.get("items", [])
        written = {item.get("counterPointId"): i for i, item in enumerate(items)}
        points.sort(key=lambda p: written.get(p.id, len(written)))
    oldest: dict[int, RestorePoint] = {}
    newest: dict[int, RestorePoint] = {}
    for p in points:
        oldest.setdefault(p.artifact_id, p)
        newest[p.artifact_id] = p
    after = after_states(newest.values()) if view == SET_VIEW else {}
    changes = [
        ArtifactChange(artifact=p.artifact, point=p, after=after.get(p.artifact_id))
        for p in oldest.values()
    ]
    pruned_ids = {int(item["artifactId"]) for item in (cs.pruned or []) if "artifactId" in item}
    missing = pruned_ids - set(oldest)
    if missing:
        for art in Artifact.objects.filter(pk__in=missing):
            changes.append(ArtifactChange(artifact=art, point=None, pruned=True))
    for i, ch in enumerate(changes):
        ch.inline = i < INLINE_DIFFS
    history = release_history(app)
    acted = acted_on_by(cs)
    return ExpandedSet(cs, changes, history, acted.restored_by, acted.reverted_by)


def release_history(app: App, limit: int = 8) -> list[ReleaseMark]:
    """Who marked or unmarked which set as release, newest first."""
    return list(ReleaseMark.objects.filter(app=app).order_by("-on", "-id")[:limit])


# --------------------------------------------------------------------------------------------
# Restore points
# --------------------------------------------------------------------------------------------


@dataclass
class PointFilters:
    """The restore-point filters of the panel (all optional, exact matches)."""

    artifact: str = ""  # "collection/name"
    collection: str = ""
    tool: str = ""
    who: str = ""

    @classmethod
    def from_query(cls, query: Any) -> PointFilters:
        return cls(
            artifact=(query.get("artifact") or "").strip(),
            collection=(query.get("collection") or "").strip(),
            tool=(query.get("tool") or "").strip(),
            who=(query.get("who") or "").strip(),
        )

    @property
    def active(self) -> bool:
        return bool(self.artifact or self.collection or self.tool or self.who)

    def as_query(self) -> str:
        from urllib.parse import urlencode

        pairs = {k: v for k, v in vars(self).items() if v}
        return urlencode(pairs)

    def apply(self, qs: QuerySet[RestorePoint]) -> QuerySet[RestorePoint]:
        if self.artifact:
            collection, _, name = self.artifact.partition("/")
            qs = qs.filter(artifact__collection=collection, artifact__name=name)
        if self.collection:
            qs = qs.filter(artifact__collection=self.collection)
        if self.tool:
            qs = qs.filter(tool=self.tool)
        if self.who:
            qs = qs.filter(requested_by=self.who)
        return qs


@dataclass
class FilterOptions:
    artifacts: list[tuple[str, str]]
    collections: list[tuple[str, str]]
    tools: list[str]
    who: list[str]


def point_filter_options(app: App) -> FilterOptions:
    """The values the restore-point filters offer, from the app's points (three queries)."""
    # The app's artifacts that have a point, each asked of its own points (the points'
    # (artifact, created_on) index): a join with the points hashed every app's points.
    has_point = RestorePoint.objects.filter(app_id=app.pk, artifact_id=OuterRef("pk"))
    arts = (
        Artifact.objects.filter(app=app)
        .filter(Exists(has_point))
        .values_list("collection", "name")
        .order_by("collection", "name")
    )
    artifacts = [(f"{c}/{n}", f"{n} ({COLLECTION_LABELS.get(c, c)})") for c, n in arts]
    collections = sorted({c for c, _ in arts})
    base = RestorePoint.objects.filter(app=app).order_by()
    tools = sorted(t for t in base.values_list("tool", flat=True).distinct() if t)
    who = sorted(w for w in base.values_list("requested_by", flat=True).distinct() if w)
    return FilterOptions(
        artifacts=artifacts,
        collections=[(c, COLLECTION_LABELS.get(c, c)) for c in collections],
        tools=tools,
        who=who,
    )


def restore_point_page(app: App, filters: PointFilters, page: int | str | None) -> Page:
    """One page of the app's restore points, newest first, filtered."""
    qs = filters.apply(
        RestorePoint.objects.filter(app=app)
        .select_related("artifact", "change_set")
        .order_by("-created_on", "-id")
    )
    return Paginator(qs, POINTS_PER_PAGE).get_page(page)


def get_point(app: App, point_id: str) -> RestorePoint:
    """One restore point of ``app`` with its artifact, or 404."""
    point = (
        RestorePoint.objects.select_related("artifact", "change_set")
        .filter(app=app, id=point_id)
        .first()
    )
    if point is None:
        raise _no_point(point_id)
    return point


def app_point(slug: str, point_id: str) -> tuple[App, RestorePoint]:
    """``app_of`` and ``get_point`` in one query: the app and its point, or the same errors."""
    point = (
        RestorePoint.objects.select_related("artifact", "change_set", "app__release_set")
        .filter(app__slug=slug, id=point_id)
        .first()
    )
    if point is None:
        app_of(slug)  # NotFound for an unknown app first, as the two lookups do
        raise _no_point(point_id)
    return point.app, point


def _no_point(point_id: str) -> NotFound:
    return NotFound(POINT_NOT_IN_APP.format(id=point_id))


def point_change(point: RestorePoint, view: str = NOW_VIEW) -> ArtifactChange:
    """The then→now change of one point (previous source → the artifact's current source), or
    with ``view="set"`` its set's own change of that artifact (→ its state right after the set).

    Sources are loaded by the caller (``load_sources``) only when a diff is not cached.
    """
    after = None
    if view == SET_VIEW and point.change_set_id:
        last = (
            RestorePoint.objects.filter(change_set_id=point.change_set_id, artifact=point.artifact)
            .order_by("-created_on", "-id")
            .first()
        )
        if last is not None:
            after = after_states([last]).get(point.artifact_id)
    return ArtifactChange(artifact=point.artifact, point=point, after=after)


def restore_set(app: App, set_id: str) -> ChangeSet:
    """A restore set (kind restore) of ``app``, or 404."""
    cs = (
        ChangeSet.objects.filter(app=app, id=set_id, kind=ChangeSet.RESTORE)
        .select_related("restored_from")
        .first()
    )
    if cs is None:
        raise NotFound(RESTORE_SET_NOT_IN_APP.format(id=set_id))
    return cs


def undone_by(app: App, restore_set: ChangeSet) -> list[ChangeSet]:
    """The restore sets that undid ``restore_set``, oldest first."""
    return list(
        ChangeSet.objects.filter(app=app, restored_from=restore_set)
        .order_by("created_on", "id")
        .only("id", "created_on", "created_by", "app_id")
    )


def artifact_shas(app: App, keys: list[str]) -> dict[str, str]:
    """Current sha256 per "collection/name" ("" for a tombstone) for the given keys."""
    q = Q()
    for key in keys:
        collection, _, name = key.partition("/")
        q |= Q(collection=collection, name=name)
    if not keys:
        return {}
    return {
        f"{c}/{n}": sha
        for c, n, sha in Artifact.objects.filter(q, app=app).values_list(
            "collection", "name", "sha256"
        )
    }


# --------------------------------------------------------------------------------------------
# Finding sets (docs/architecture.md#reviewing): one search box and the Change sets filters
# --------------------------------------------------------------------------------------------

# A collapsed row names its first few artifacts, then "+N more".
ROW_ARTIFACTS = 3
KIND_FILTERS = ("", "change", "restore")
# A set's message (what the agent said it did, docs/api.md#turn-messages) is searched once the model
# has it.
_HAS_MESSAGE = any(f.name == "message" for f in ChangeSet._meta.get_fields())


@dataclass
class SetQuery:
    """The search box and filters of the Change sets tab (all optional).

    ``q`` matches, case-insensitively, a set's id, name, who asked, and the tools and artifact
    names of its points; ``kind`` keeps one kind (``change`` hides restore sets); ``who`` and
    ``tool`` are exact; ``artifact`` matches an artifact's name (contains); ``named`` keeps
    named sets, ``release`` the release set.
    """

    q: str = ""
    kind: str = ""
    who: str = ""
    tool: str = ""
    artifact: str = ""
    named: bool = False
    release: bool = False

    @classmethod
    def from_query(cls, query: Any) -> SetQuery:
        kind = (query.get("kind") or "").strip()
        return cls(
            q=(query.get("q") or "").strip()[:200],
            kind=kind if kind in KIND_FILTERS else "",
            who=(query.get("who") or "").strip()[:150],
            tool=(query.get("tool") or "").strip()[:200],
            artifact=(query.get("artifact") or "").strip()[:200],
            named=query.get("named") in ("1", "on", "true"),
            release=query.get("release") in ("1", "on", "true"),
        )

    @property
    def active(self) -> bool:
        return bool(
            self.q
            or self.kind
            or self.who
            or self.tool
            or self.artifact
            or self.named
            or self.release
        )

    def as_query(self) -> str:
        from urllib.parse import urlencode

        pairs: dict[str, str] = {}
        for key in ("q", "kind", "who", "tool", "artifact"):
            if getattr(self, key):
                pairs[key] = getattr(self, key)
        if self.named:
            pairs["named"] = "1"
        if self.release:
            pairs["release"] = "1"
        return urlencode(pairs)

    def apply(self, app: App, qs: QuerySet[ChangeSet]) -> QuerySet[ChangeSet]:
        """The filters as conditions on the app's sets: columns of the set itself, or EXISTS
        over its points (the points' change_set index) — never the sources."""
        # The app's points only (its id leads their indexes): a planner that hashes the
        # subquery then reads this app's points, never every app's (docs/architecture.md#scale).
        points = RestorePoint.objects.filter(app_id=app.pk, change_set=OuterRef("pk"))
        if self.kind:
            qs = qs.filter(kind=self.kind)
        if self.who:
            qs = qs.filter(created_by=self.who)
        if self.named:
            qs = qs.exclude(name="")
        if self.release:
            qs = qs.filter(pk=app.release_set_id or "")
        if self.tool:
            qs = qs.filter(Exists(points.filter(tool=self.tool)))
        if self.artifact:
            qs = qs.filter(Exists(points.filter(artifact_id__in=_named(app, self.artifact))))
        if self.q:
            q = self.q
            words = Q(id__icontains=q) | Q(name__icontains=q) | Q(created_by__icontains=q)
            if _HAS_MESSAGE:
                words |= Q(message__icontains=q)
            qs = qs.filter(
                words
                | Exists(points.filter(Q(tool__icontains=q) | Q(artifact_id__in=_named(app, q))))
            )
        return qs


def _named(app: App, text: str) -> QuerySet[Artifact, Any]:
    """The ids of the app's artifacts whose name contains ``text`` (a subquery on the app's
    own artifacts: matching the name through a join read every app's artifacts)."""
    return Artifact.objects.filter(app_id=app.pk, name__icontains=text).values("pk")


@dataclass
class SetSearchPage:
    """One page of found sets, newest first, without counting every match (a count would read
    all of them): ``has_next`` comes from fetching one row more than a page."""

    object_list: list[ChangeSet]
    number: int
    has_next: bool

    @property
    def has_previous(self) -> bool:
        return self.number > 1

    def next_page_number(self) -> int:
        return self.number + 1

    def previous_page_number(self) -> int:
        return self.number - 1


def search_change_sets(app: App, query: SetQuery, page: int | str | None = 1) -> SetSearchPage:
    """The app's sets that match ``query``, newest first, a page at a time, with the totals,
    tools and first artifacts a row shows.

    The sets are read in the app's (app, created_on) index order, newest first, and the scan
    stops once a page is full; every condition is a column of the set or an EXISTS over its
    points, so the cost is bounded by the app and does not read any source.
    """
    try:
        number = max(1, int(page or 1))
    except (TypeError, ValueError):
        number = 1
    base = query.apply(app, ChangeSet.objects.filter(app=app)).order_by("-created_on", "-id")
    start = (number - 1) * SETS_PER_PAGE
    ids = list(base.values_list("pk", flat=True)[start : start + SETS_PER_PAGE + 1])
    has_next = len(ids) > SETS_PER_PAGE
    ids = ids[:SETS_PER_PAGE]
    sets = list(
        with_point_totals(app, ChangeSet.objects.filter(app=app, pk__in=ids)).order_by(
            "-created_on", "-id"
        )
    )
    attach_tools(sets)
    attach_artifacts(sets)
    return SetSearchPage(sets, number, has_next)


def attach_artifacts(sets: list[ChangeSet], first: int = ROW_ARTIFACTS) -> None:
    """Give each set ``first_artifacts`` (the names of its first few artifacts, in the order
    they were written) and ``more_artifacts`` (how many others), from one query."""
    names: dict[str, list[str]] = defaultdict(list)
    if sets:
        rows = (
            RestorePoint.objects.filter(change_set_id__in=[s.id for s in sets])
            .annotate(
                # Each name by its key, from the points found by their sets' keys: a join
                # could hash every app's artifacts, or walk all of this app's points.
                artifact_name=Subquery(
                    Artifact.objects.filter(pk=OuterRef("artifact_id")).values("name")[:1]
                )
            )
            .order_by("change_set_id", "created_on", "id")
            .values_list("change_set_id", "artifact_name")
        )
        for set_id, name in rows:
            if name not in names[set_id]:
                names[set_id].append(name)
    for s in sets:
        every = names[s.id]
        s.first_artifacts = every[:first]  # type: ignore[attr-defined]
        s.more_artifacts = max(0, len(every) - first)  # type: ignore[attr-defined]


def restore_words(cs: ChangeSet) -> str:
    """What a restore set restored, in words: "Restore all of cs_… by ada", "Revert of cs_…
    by ada", "Restore of rp_… (cs_…) by ada", "Restore to release cs_… by ada", "Undo of rs_… by
    ada" ("" for a change set)."""
    if cs.kind != ChangeSet.RESTORE:
        return ""
    receipt = cs.receipt or {}
    target = cs.restored_from_id or str(receipt.get("restoredFromSet") or "")
    who = f" by {cs.created_by}" if cs.created_by else ""
    if receipt.get("revertedSet"):
        return f"Revert of {receipt['revertedSet']}{who}"
    if receipt.get("restoredPoint"):
        return f"Restore of {receipt['restoredPoint']} ({target}){who}"
    if receipt.get("scope"):
        return f"Restore to release {target}{who}"
    if target.startswith("rs_"):
        return f"Undo of {target}{who}"
    return f"Restore all of {target}{who}" if target else f"Restore{who}"


def nest_restore_sets(sets: list[ChangeSet]) -> list[ChangeSet]:
    """The rows of a page of sets with each restore set right under the set it restored
    when that set is on the page (``under``: its id; ``depth``: how far in); the others keep
    their place, newest first."""
    on_page = {cs.id for cs in sets}
    children: dict[str, list[ChangeSet]] = {}
    for cs in sets:
        cs.under = None  # type: ignore[attr-defined]
        parent = cs.restored_from_id
        if cs.kind == ChangeSet.RESTORE and parent in on_page and parent != cs.id:
            cs.under = parent  # type: ignore[attr-defined]
            children.setdefault(parent or "", []).append(cs)
    out: list[ChangeSet] = []

    def place(cs: ChangeSet, depth: int) -> None:
        cs.depth = depth  # type: ignore[attr-defined]
        out.append(cs)
        for child in sorted(children.get(cs.id, []), key=lambda c: (c.created_on, c.id)):
            place(child, min(depth + 1, 2))

    for cs in sets:
        if getattr(cs, "under", None) is None:
            place(cs, 0)
    return out
