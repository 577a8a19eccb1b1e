"""Safe promotion's verbs in one namespace of the facade (docs/architecture.md#safe-promotion):
``services.promotion.<verb>``. Promoting itself stays ``services.promote`` (with ``rollout=``
and ``at=``); everything here is a plan of the one engine, a rule it pre-flights, or an
owner's setting kept in the audit trail."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.utils import timezone

from versions.errors import PreflightFailed, VersionsError
from versions.models import ScheduledPromotion
from versions.services import deployments, gates, locks, rollouts, safeguards, schedules
from versions.services.deployments import promote


def run_due_schedules(now: datetime | None = None) -> list[tuple[str, dict[str, Any]]]:
    """Promote every scheduled promotion due at ``now`` (default: now), oldest first, each
    through the same pre-flight as a promotion by hand, with the state fixed when it was
    scheduled; answers (schedule id, receipt) of each. A schedule is claimed before it runs,
    so two workers never run one twice."""
    moment = now or timezone.now()
    due = list(
        ScheduledPromotion.objects.filter(status=ScheduledPromotion.SCHEDULED, at__lte=moment)
        .order_by("at", "id")
        .values_list("pk", flat=True)
    )
    ran: list[tuple[str, dict[str, Any]]] = []
    for schedule_id in due:
        claimed = ScheduledPromotion.objects.filter(
            pk=schedule_id, status=ScheduledPromotion.SCHEDULED
        ).update(status=ScheduledPromotion.RUNNING)
        if not claimed:
            continue
        found = ScheduledPromotion.objects.select_related("app").get(pk=schedule_id)
        note = " ".join(filter(None, [schedules.SCHEDULE_NOTE.format(id=schedule_id), found.note]))
        try:
            result = promote(
                found.app,
                by=found.created_by or "schedule",
                ref=found.ref,
                note=note[:500],
                expected=found.state,
            ).as_dict()
            status = ScheduledPromotion.PROMOTED
        except PreflightFailed as exc:
            result, status = exc.answer(), ScheduledPromotion.REFUSED
        except VersionsError as exc:
            result = {"kind": "error", "error": exc.code, "message": exc.message}
            status = ScheduledPromotion.REFUSED
        ScheduledPromotion.objects.filter(pk=schedule_id).update(
            status=status, result=result, ran_on=timezone.now()
        )
        ran.append((schedule_id, result))
    return ran


class Promotion:
    """The verbs and reads of safe promotion, reached as ``services.promotion``."""

    # A move of production's history as its receipt.
    event_receipt = staticmethod(deployments.event_receipt)

    # Checks (owners), and running them on a state.
    add_check = staticmethod(safeguards.add_check)
    remove_check = staticmethod(safeguards.remove_check)
    clean_check_path = staticmethod(gates.clean_check_path)
    run_http_checks = staticmethod(gates.run_http_checks)
    set_watch = staticmethod(safeguards.set_watch)
    # Gradual rollouts and the watch.
    advance_rollout = staticmethod(rollouts.advance_rollout)
    complete_rollout = staticmethod(rollouts.complete_rollout)
    abort_rollout = staticmethod(rollouts.abort_rollout)
    rollout_action = staticmethod(rollouts.rollout_action)
    auto_rollback = staticmethod(rollouts.auto_rollback)
    run_post_promotion_checks = staticmethod(rollouts.run_post_promotion_checks)
    count_answer = staticmethod(rollouts.count_answer)
    pin_visitor = staticmethod(rollouts.pin_visitor)
    # Schedules.
    schedule_promotion = staticmethod(schedules.schedule_promotion)
    cancel_schedule = staticmethod(schedules.cancel_schedule)
    run_due_schedules = staticmethod(run_due_schedules)
    # Freeze and locks.
    freeze_production = staticmethod(safeguards.freeze_production)
    unfreeze_production = staticmethod(safeguards.unfreeze_production)
    freeze_of = staticmethod(safeguards.freeze_of)
    lock_artifact = staticmethod(locks.lock_artifact)
    unlock_artifact = staticmethod(locks.unlock_artifact)


promotion = Promotion()
