"""What an app's owners set for safe promotion (docs/architecture.md#safe-promotion): its HTTP
checks, its watch (error-rate bound, minutes) and the production freeze. Each change is kept
in the audit trail."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone

from versions import messages as words
from versions import terms
from versions.errors import Conflict, InvalidInput, NotFound
from versions.models import App, AppCheck, PromotionPolicy
from versions.services import gates
from versions.services.access import Actor, app_for
from versions.services.audit import record
from versions.services.validation import clean_note
from versions.terms import MANAGE, PROMOTE


def add_check(
    app: App | str,
    *,
    actor: Actor,
    name: object,
    path: object,
    method: object = AppCheck.GET,
    expect_status: object = 200,
    expect_text: object = "",
) -> AppCheck:
    """Add an HTTP check to the app (owners); a path that leaves the app is refused."""
    app_obj = app_for(app, actor=actor, action=MANAGE)
    fields = gates.clean_check(
        name=name, method=method, path=path, expect_status=expect_status, expect_text=expect_text
    )
    if AppCheck.objects.filter(app=app_obj).count() >= AppCheck.MAX_PER_APP:
        raise Conflict(words.CHECK_TOO_MANY.format(slug=app_obj.slug, limit=AppCheck.MAX_PER_APP))
    try:
        with transaction.atomic():
            check = AppCheck.objects.create(app=app_obj, created_by=actor.name, **fields)
            record(
                terms.CHECK_ADDED,
                actor=actor,
                app=app_obj,
                targets=[check.name],
                details={k: v for k, v in fields.items() if k != "name"},
            )
    except IntegrityError:
        raise Conflict(
            words.CHECK_NAME_TAKEN.format(slug=app_obj.slug, name=fields["name"])
        ) from None
    return check


def remove_check(app: App | str, *, actor: Actor, name: str) -> None:
    """Remove an HTTP check of the app (owners)."""
    app_obj = app_for(app, actor=actor, action=MANAGE)
    with transaction.atomic():
        deleted, _ = AppCheck.objects.filter(app=app_obj, name=name).delete()
        if not deleted:
            raise NotFound(words.CHECK_NOT_FOUND.format(slug=app_obj.slug, name=str(name)[:80]))
        record(terms.CHECK_REMOVED, actor=actor, app=app_obj, targets=[name])


def set_watch(
    app: App | str, *, actor: Actor, rollback_error_rate: object, watch_minutes: object
) -> PromotionPolicy:
    """How the live app judges a new deployment: the error-rate bound (1-100 %) and how many
    minutes after a promotion production is watched (1-1,440)."""
    app_obj = app_for(app, actor=actor, action=MANAGE)
    rate, minutes = _whole(rollback_error_rate), _whole(watch_minutes)
    if rate is None or not 1 <= rate <= 100:
        raise InvalidInput(words.WATCH_BAD_RATE, field="rollback_error_rate")
    if minutes is None or not 1 <= minutes <= 1440:
        raise InvalidInput(words.WATCH_BAD_MINUTES, field="watch_minutes")
    with transaction.atomic():
        policy, _ = PromotionPolicy.objects.select_for_update().get_or_create(app=app_obj)
        policy.rollback_error_rate, policy.watch_minutes = rate, minutes
        policy.save(update_fields=["rollback_error_rate", "watch_minutes"])
        record(
            terms.WATCH_CHANGED,
            actor=actor,
            app=app_obj,
            details={"rollback_error_rate": rate, "watch_minutes": minutes},
        )
    return policy


def _whole(value: object) -> int | None:
    if isinstance(value, str) and value.strip().isdigit():
        return int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return value


def _production_owner(app: App | str, actor: Actor) -> App:
    """The app, for an owner who may also promote it: a token freezes production only when
    made ``--can-promote`` (production is no plain token's business)."""
    app_obj = app_for(app, actor=actor, action=MANAGE)
    actor.require(PROMOTE, app_obj)
    return app_obj


def freeze_production(
    app: App | str, *, actor: Actor, reason: object, until: datetime | None = None
) -> dict[str, Any]:
    """Freeze production (owners): nothing is promoted — by hand, schedule or rollout —
    until it is unfrozen (or ``until`` passes); rolling back stays allowed."""
    app_obj = _production_owner(app, actor)
    text = clean_note(reason)
    if not text:
        raise InvalidInput(words.FREEZE_REASON_NEEDED, field="reason")
    now = timezone.now()
    if until is not None:
        if timezone.is_naive(until):
            until = timezone.make_aware(until, timezone.get_current_timezone())
        if until <= now:
            raise InvalidInput(
                words.FREEZE_END_PAST.format(until=f"{until:%Y-%m-%d %H:%M} UTC"), field="until"
            )
    with transaction.atomic():
        policy, _ = PromotionPolicy.objects.select_for_update().get_or_create(app=app_obj)
        if gates.frozen(policy, now):
            raise Conflict(words.ALREADY_FROZEN.format(slug=app_obj.slug))
        policy.frozen_on, policy.frozen_until = now, until
        policy.frozen_by, policy.frozen_reason = actor.name, text
        policy.save(update_fields=["frozen_on", "frozen_until", "frozen_by", "frozen_reason"])
        record(
            terms.PRODUCTION_FROZEN,
            actor=actor,
            app=app_obj,
            reason=text,
            details={"until": until.isoformat() if until else None},
        )
    return freeze_of(app_obj)


def unfreeze_production(app: App | str, *, actor: Actor) -> dict[str, Any]:
    """Lift production's freeze (owners)."""
    app_obj = _production_owner(app, actor)
    with transaction.atomic():
        policy = PromotionPolicy.objects.select_for_update().filter(app=app_obj).first()
        if policy is None or not gates.frozen(policy):
            raise Conflict(words.NOT_FROZEN.format(slug=app_obj.slug))
        policy.frozen_on = policy.frozen_until = None
        policy.frozen_by = policy.frozen_reason = ""
        policy.save(update_fields=["frozen_on", "frozen_until", "frozen_by", "frozen_reason"])
        record(terms.PRODUCTION_UNFROZEN, actor=actor, app=app_obj)
    return freeze_of(app_obj)


def freeze_of(app: App) -> dict[str, Any]:
    """The freeze as the API and MCP say it: ``{"frozen": false}`` or who, why, until."""
    policy = gates.policy_of(app)
    if not gates.frozen(policy):
        return {"frozen": False}
    return {
        "frozen": True,
        "since": policy.frozen_on.isoformat() if policy.frozen_on else None,
        "until": policy.frozen_until.isoformat() if policy.frozen_until else None,
        "by": policy.frozen_by,
        "reason": policy.frozen_reason,
        "message": gates.frozen_words(app, policy),
    }
