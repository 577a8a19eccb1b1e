"""Reading the audit trail: the Activity pages, the export, and the walk that checks the chain
(``manage.py verify_audit``; the hash recipe is in :mod:`versions.audit_chain`)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.core.paginator import Page, Paginator
from django.db.models import Q, QuerySet

from versions.audit_chain import GENESIS, event_hash, loaded_digest
from versions.models import App, AuditChainHead, AuditEvent
from versions.terms import APP_LOADED

ACTIVITY_PER_PAGE = 50

ALTERED = "Event {id} (#{seq}) was altered: what it records no longer matches its hash."
ALTERED_LINK = (
    "Event {id} (#{seq}) was altered: its hash is no longer the one the event after it "
    "({next}) follows."
)
INSERTED = (
    "Event {id} (#{seq}) was inserted: it was not appended through the audit trail (the event "
    "after it follows the one before it)."
)
INSERTED_AFTER_HEAD = (
    "Event {id} (#{seq}) was inserted: it comes after the chain's latest event (#{head}) and "
    "was not appended through the audit trail."
)
MISSING = "Event #{first} is missing: event {id} (#{seq}) follows an event that is not there."
MISSING_MANY = (
    "Events #{first} to #{last} are missing: event {id} (#{seq}) follows an event that is not "
    "there."
)
MISSING_LATEST = (
    "Event #{first} is missing: the chain's latest event is #{head}, the trail ends at #{last}."
)
MISSING_LATEST_MANY = (
    "Events #{first} to #{head} are missing: the chain's latest event is #{head}, the trail "
    "ends at #{last}."
)
INTACT = "{count} events, chain intact"
# Events loaded with their app from another Versions (docs/operations.md#dump-load).
LOADED_INTACT = "{count} events loaded with {apps} app(s) from other Versions intact"
LOADED_ALTERED = (
    "Loaded event {id} (#{seq} of the chain it came from) was altered: what it records no "
    "longer matches its hash."
)
LOADED_LINK = (
    "Loaded event {id} (#{seq} of the chain it came from) does not follow event {before} "
    "(#{before_seq}) of that chain: one of them was altered or replaced."
)
LOADED_WITHOUT_LOAD = (
    "Event {id} was inserted: it is marked as loaded with app {slug}, and no load of that app "
    "is in the chain."
)
LOADED_CHANGED = (
    "The events loaded with app {slug} by event {load} were changed: it loaded {expected}, "
    "{found} are there now, or some were replaced."
)


@dataclass(frozen=True)
class ChainCheck:
    """What walking the chain found: how many events hold, and the first break in words."""

    count: int
    problem: str = ""
    event_id: str = ""
    loaded: int = 0
    loaded_apps: int = 0

    @property
    def intact(self) -> bool:
        return not self.problem


def _rows() -> Iterator[AuditEvent]:
    return AuditEvent.objects.filter(origin_seq__isnull=True).order_by("seq").iterator(2000)


@dataclass(frozen=True)
class LoadedWalk:
    """What walking one app's loaded events found: how many, their digest, the first break."""

    count: int
    digest: str
    problem: str = ""
    event_id: str = ""


def walk_loaded(events: Iterable[AuditEvent], slug: str) -> LoadedWalk:
    """Check events loaded with app ``slug`` (in the order they were loaded): each one's hash
    recomputes from its ``prev_hash``, and an event that comes right after another of the same
    chain follows its hash (the events of other apps between them stayed where they were)."""
    seen: list[tuple[str, str, int, str]] = []
    last: dict[str, AuditEvent] = {}
    for event in events:
        seq = event.chain_seq
        if event_hash(event.prev_hash, event.document(slug)) != event.hash:
            words = LOADED_ALTERED.format(id=event.id, seq=seq)
            return LoadedWalk(len(seen), "", words, event.id)
        before = last.get(event.origin_chain)
        if before is not None and before.chain_seq + 1 == seq and before.hash != event.prev_hash:
            words = LOADED_LINK.format(
                id=event.id, seq=seq, before=before.id, before_seq=before.chain_seq
            )
            return LoadedWalk(len(seen), "", words, event.id)
        last[event.origin_chain] = event
        seen.append((event.id, event.origin_chain, seq, event.hash))
    return LoadedWalk(len(seen), loaded_digest(seen))


def _check_loaded(slugs: dict[int, str], loads: dict[int, AuditEvent]) -> ChainCheck | None:
    """The loaded events, app by app, against the ``app_loaded`` event of this chain that
    brought them: None when they hold, else the first problem (count: loaded events intact)."""
    rows = AuditEvent.objects.filter(origin_seq__isnull=False).order_by("app_id", "seq")
    by_app: dict[int, list[AuditEvent]] = {}
    for row in rows.iterator(chunk_size=2000):
        by_app.setdefault(row.app_id or 0, []).append(row)
    count = 0
    for app_id in sorted(set(by_app) | set(loads)):
        events, load, slug = by_app.get(app_id, []), loads.get(app_id), slugs.get(app_id, "")
        if load is None:
            words = LOADED_WITHOUT_LOAD.format(id=events[0].id, slug=slug or "(none)")
            return ChainCheck(count, words, events[0].id)
        walk = walk_loaded(events, slug)
        if walk.problem:
            return ChainCheck(count + walk.count, walk.problem, walk.event_id)
        expected = load.details.get("events", 0)
        if walk.count != expected or (walk.count and walk.digest != load.details.get("digest")):
            words = LOADED_CHANGED.format(
                slug=slug, load=load.id, expected=expected, found=walk.count
            )
            return ChainCheck(count, words, load.id)
        count += walk.count
    return None


def verify_audit_chain() -> ChainCheck:
    """Walk the audit trail from its first event and name the first one altered, inserted or
    missing (one pass, two rows in hand); then the events loaded with apps from other Versions,
    each app's against the load that brought them."""
    slugs = dict(App.objects.values_list("pk", "slug"))
    head = AuditChainHead.objects.filter(pk=1).values_list("seq", "hash").first()
    head_seq = head[0] if head is not None else None
    expected_prev, expected_seq, count = GENESIS, 1, 0
    before: AuditEvent | None = None
    loads: dict[int, AuditEvent] = {}
    rows = _rows()
    row = next(rows, None)
    while row is not None:
        after = next(rows, None)
        if head_seq is not None and row.seq > head_seq:
            words = INSERTED_AFTER_HEAD.format(id=row.id, seq=row.seq, head=head_seq)
            return ChainCheck(count, words, row.id)
        links = row.prev_hash == expected_prev
        intact = event_hash(row.prev_hash, row.document(slugs.get(row.app_id or 0))) == row.hash
        if links and intact and row.seq == expected_seq:
            if row.action == APP_LOADED and row.app_id is not None:
                loads[row.app_id] = row
            expected_prev, expected_seq, count, before, row = (
                row.hash,
                row.seq + 1,
                count + 1,
                row,
                after,
            )
            continue
        if not links and before is not None and row.prev_hash == before.prev_hash:
            words = INSERTED.format(id=before.id, seq=before.seq)
            return ChainCheck(count - 1, words, before.id)
        if not intact and after is not None and after.prev_hash == expected_prev:
            return ChainCheck(count, INSERTED.format(id=row.id, seq=row.seq), row.id)
        if intact and row.seq > expected_seq:
            template = MISSING if row.seq == expected_seq + 1 else MISSING_MANY
            words = template.format(first=expected_seq, last=row.seq - 1, id=row.id, seq=row.seq)
            return ChainCheck(count, words, row.id)
        if not links and intact and before is not None:
            words = ALTERED_LINK.format(id=before.id, seq=before.seq, next=row.id)
            return ChainCheck(count - 1, words, before.id)
        return ChainCheck(count, ALTERED.format(id=row.id, seq=row.seq), row.id)
    if head_seq is not None and head_seq >= expected_seq:
        template = MISSING_LATEST if head_seq == expected_seq else MISSING_LATEST_MANY
        words = template.format(first=expected_seq, head=head_seq, last=expected_seq - 1)
        return ChainCheck(count, words)
    if head is not None and before is not None and head[1] != before.hash:
        return ChainCheck(count, ALTERED.format(id=before.id, seq=before.seq), before.id)
    broken = _check_loaded(slugs, loads)
    if broken is not None:
        return ChainCheck(count, broken.problem, broken.event_id, loaded=broken.count)
    loaded = AuditEvent.objects.filter(origin_seq__isnull=False).count()
    return ChainCheck(count, loaded=loaded, loaded_apps=len(loads))


def export_document(event: AuditEvent, slug: str | None) -> dict[str, Any]:
    """One event as ``export_audit`` writes it: what the chain hashes, with its hashes."""
    document = {**event.document(slug), "prev_hash": event.prev_hash, "hash": event.hash}
    if event.loaded:  # of another Versions' chain (docs/operations.md#dump-load)
        document["origin_chain"] = event.origin_chain
    return document


def audit_export(app: App | None = None, since: datetime | None = None) -> Iterator[dict[str, Any]]:
    """Every event (of ``app``; from ``since`` on), oldest first, as export documents."""
    slugs = dict(App.objects.values_list("pk", "slug"))
    rows = AuditEvent.objects.order_by("seq")
    if app is not None:
        rows = rows.filter(app=app)
    if since is not None:
        rows = rows.filter(created_on__gte=since)
    for event in rows.iterator(chunk_size=2000):
        yield export_document(event, slugs.get(event.app_id or 0))


def _activity_rows(app: App | None, action: str, person: str) -> QuerySet[AuditEvent]:
    rows = AuditEvent.objects.select_related("app").order_by("-seq")
    if app is not None:
        rows = rows.filter(app=app)
    if action:
        rows = rows.filter(action=action)
    if person:
        rows = rows.filter(
            Q(actor_name=person)
            | Q(actor_kind=AuditEvent.TOKEN, actor_name__endswith=f"… of {person}")
        )
    return rows


def activity_page(
    app: App | None = None, *, action: str = "", person: str = "", page: int | str | None = 1
) -> Page[AuditEvent]:
    """A page of the audit trail, newest first (of ``app``, or the whole instance), filtered by
    action and by person (a user's own events and their tokens')."""
    paginator = Paginator(_activity_rows(app, action, person), ACTIVITY_PER_PAGE)
    return paginator.get_page(page)


def activity_filters(app: App | None = None) -> tuple[list[str], list[str]]:
    """The actions and the people that occur (in ``app``'s trail), for the filter's choices."""
    rows = AuditEvent.objects.all()
    if app is not None:
        rows = rows.filter(app=app)
    actions = sorted(set(rows.values_list("action", flat=True).order_by().distinct()[:200]))
    people = rows.exclude(actor_kind=AuditEvent.TOKEN).values_list("actor_name", flat=True)
    return actions, sorted({p for p in people.order_by().distinct()[:500] if p})
