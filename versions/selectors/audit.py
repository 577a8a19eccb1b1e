"""Reading the audit trail: the Activity pages, the export, and the walk that checks the chain
(``manage.py verify_audit``; the hash recipe is in :mod:`versions.audit_chain`)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.core.paginator import Page, Paginator
from django.db.models import Q, QuerySet

from versions.audit_chain import GENESIS, event_hash
from versions.models import App, AuditChainHead, AuditEvent

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


@dataclass(frozen=True)
class ChainCheck:
    """What walking the chain found: how many events hold, and the first break in words."""

    count: int
    problem: str = ""
    event_id: str = ""

    @property
    def intact(self) -> bool:
        return not self.problem


def _rows() -> Iterator[AuditEvent]:
    return AuditEvent.objects.order_by("seq").iterator(chunk_size=2000)


def verify_audit_chain() -> ChainCheck:
    """Walk the audit trail from its first event and name the first one altered, inserted or
    missing (one pass, two rows in hand)."""
    slugs = dict(App.objects.values_list("pk", "slug"))
    head = AuditChainHead.objects.filter(pk=1).values_list("seq", "hash").first()
    head_seq = head[0] if head is not None else None
    expected_prev, expected_seq, count = GENESIS, 1, 0
    before: AuditEvent | None = None
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
    return ChainCheck(count)


def export_document(event: AuditEvent, slug: str | None) -> dict[str, Any]:
    """One event as ``export_audit`` writes it: what the chain hashes, with its hashes."""
    return {**event.document(slug), "prev_hash": event.prev_hash, "hash": event.hash}


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
