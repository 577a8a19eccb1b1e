"""Safe promotion's verbs in one namespace of the facade (docs/architecture.md#safe-promotion):
``services.promotion.<verb>``. Promoting itself stays ``services.promote`` (with ``rollout=``
and ``at=``); everything here is a plan of the one engine, a rule it pre-flights, or an
owner's setting kept in the audit trail."""

from __future__ import annotations

from versions.services import gates, locks, rollouts, safeguards, schedules


class Promotion:
    """The verbs and reads of safe promotion, reached as ``services.promotion``."""

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
    # Schedules.
    schedule_promotion = staticmethod(schedules.schedule_promotion)
    cancel_schedule = staticmethod(schedules.cancel_schedule)
    run_due_schedules = staticmethod(schedules.run_due_schedules)
    # Freeze and locks.
    freeze_production = staticmethod(safeguards.freeze_production)
    unfreeze_production = staticmethod(safeguards.unfreeze_production)
    freeze_of = staticmethod(safeguards.freeze_of)
    lock_artifact = staticmethod(locks.lock_artifact)
    unlock_artifact = staticmethod(locks.unlock_artifact)


promotion = Promotion()
