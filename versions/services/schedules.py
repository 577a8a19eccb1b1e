"""Scheduled promotions (docs/architecture.md#safe-promotion): a state fixed when it is
scheduled — its sha256 map — promoted at a moment by the worker, through the same pre-flight
as any promotion (protection, checks and freeze apply then). A state that changed since is
refused, in words, never shipped in its later form.

The worker calls :func:`run_due_schedules` (``versions/promotion_tasks.py``); tests call it
directly with a moment.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from django.db import transaction
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from versions import ids, terms
from versions import messages as words
from versions.errors import Conflict, InvalidInput, NotFound
from versions.models import App, ScheduledPromotion
from versions.services import refs as states
from versions.services.access import Actor, app_for
from versions.services.audit import Command, record
from versions.services.receipts import SCHEDULED, PromotionReceipt
from versions.services.validation import clean_note
from versions.terms import PROMOTE

RUNNING = ScheduledPromotion.RUNNING
SCHEDULE_NOTE = "Scheduled as {id}"


def _moment(at: object) -> datetime:
    """``at`` as an aware datetime (a datetime, or ISO 8601 text with its offset)."""
    example = "2026-12-24T09:00:00Z"
    moment = parse_datetime(at) if isinstance(at, str) else at
    if not isinstance(moment, datetime) or timezone.is_naive(moment):
        raise InvalidInput(words.SCHEDULE_NOT_A_TIME.format(example=example), field="at")
    return moment.astimezone(UTC)


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def schedule_promotion(
    app: App | str,
    *,
    at: object,
    actor: Actor | None = None,
    by: str | None = None,
    ref: str = states.DRAFT,
    note: str = "",
    dry_run: bool = False,
) -> PromotionReceipt:
    """Promote the state ``ref`` names, as it is now, at ``at`` (in the future, else refused
    in words). Answers ``kind: scheduled`` with the schedule's id."""
    moment = _moment(at)
    now = timezone.now()
    if moment <= now:
        raise InvalidInput(
            words.SCHEDULE_IN_PAST.format(
                at=f"{moment:%Y-%m-%d %H:%M:%S} UTC", now=f"{now:%Y-%m-%d %H:%M:%S}"
            ),
            field="at",
        )
    app_obj = app_for(app, actor=actor, action=PROMOTE) if actor is not None else None
    app_obj = app_obj or states.resolve_app(app)
    note = clean_note(note)
    state = states.resolve_state(app_obj, states.check_ref(ref))
    fixed = {entry.key: entry.sha256 or "" for entry in state.entries if not entry.missing}
    who = by or (actor.name if actor is not None else "command")
    ms = ids.now_ms()
    schedule_id = f"sp_{ids.base36(ms)}_{ids.random_suffix()}"
    receipt = PromotionReceipt(
        kind=SCHEDULED,
        ref=state.ref,
        created_by=who,
        note=note,
        schedule_id=schedule_id,
        at=_iso(moment),
        message=words.SCHEDULED_MESSAGE.format(
            ref=state.ref,
            at=f"{moment:%Y-%m-%d %H:%M} UTC",
            count=len(fixed),
            s="" if len(fixed) == 1 else "s",
            id=schedule_id,
        ),
    )
    if dry_run:
        return receipt
    with transaction.atomic():
        ScheduledPromotion.objects.create(
            id=schedule_id,
            app=app_obj,
            ref=state.ref,
            at=moment,
            state=fixed,
            note=note,
            created_by=who,
            created_on=ids.ms_to_datetime(ms),
        )
        record(
            terms.PROMOTION_SCHEDULED,
            actor=actor if actor is not None else Command(who),
            app=app_obj,
            targets=[schedule_id, state.ref],
            reason=note,
            details={"at": _iso(moment), "artifacts": len(fixed)},
        )
        # The worker runs what is due at that moment (docs/operations.md#worker).
        from versions import promotion_tasks, tasks  # the tasks import the services

        tasks.enqueue_on_commit(promotion_tasks.run_due_promotions.using(run_after=moment))
    return receipt


def cancel_schedule(
    app: App | str, *, schedule_id: str, actor: Actor | None = None
) -> dict[str, Any]:
    """Cancel a scheduled promotion that has not run; it then promotes nothing."""
    app_obj = app_for(app, actor=actor, action=PROMOTE) if actor is not None else None
    app_obj = app_obj or states.resolve_app(app)
    with transaction.atomic():
        found = (
            ScheduledPromotion.objects.select_for_update()
            .filter(pk=str(schedule_id)[:40], app=app_obj)
            .first()
        )
        if found is None:
            raise NotFound(
                words.SCHEDULE_NOT_FOUND.format(slug=app_obj.slug, id=str(schedule_id)[:40])
            )
        if found.status != ScheduledPromotion.SCHEDULED:
            raise Conflict(words.SCHEDULE_NOT_PENDING.format(id=found.pk, status=found.status))
        found.status = ScheduledPromotion.CANCELLED
        found.ran_on = timezone.now()
        found.save(update_fields=["status", "ran_on"])
        record(
            terms.SCHEDULE_CANCELLED,
            actor=actor,
            app=app_obj,
            targets=[found.pk],
        )
    return {
        "kind": "cancelled",
        "scheduleId": found.pk,
        "message": words.SCHEDULE_CANCELLED_MESSAGE.format(id=found.pk),
    }
