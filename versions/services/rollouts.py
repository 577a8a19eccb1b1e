"""Gradual rollouts and the watch (docs/architecture.md#safe-promotion): plans of the one
engine that move an app's candidate pointer and share — ``Advance``, ``Complete rollout``,
``Abort rollout`` — and the automatic rollback of a watched deployment.

A rollout starts as a promotion (``promote(…, rollout=<1-99>)``): its deployment becomes the
app's *candidate*, served to that share of visitors, each pinned to one deployment by a signed
cookie. Completing moves production to the candidate (a promotion in the history); aborting
drops the candidate (everyone on production; one pointer move).

The live app counts the answers of a watched deployment — a rollout's candidate, production
for its first ``watch_minutes`` after a promotion — in each process, adding them to the
deployment's :class:`~versions.models.DeploymentWatch` every few answers; when more than the
app's ``rollback_error_rate`` of at least :data:`MIN_REQUESTS` answers were errors (5xx, or no
page or route found), the deployment is rolled back by itself: ``kind: auto_rollback``. The
HTTP checks run again after a promotion (:func:`run_post_promotion_checks`, a task of the
worker) and a failure rolls back the same way — except a check the promotion went past on
purpose (Promote anyway).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils import timezone

from versions import messages as words
from versions import terms
from versions.errors import Conflict, InvalidInput, NotFound
from versions.models import App, Deployment, DeploymentEvent, DeploymentWatch, RolloutVisitor
from versions.services import engine, gates
from versions.services.access import Actor, app_for
from versions.services.capture import resolve_app
from versions.services.deployments import (
    _clean_note,
    _compare,
    _earlier,
    _history_changes,
    check_share,
    end_watch,
    forget_visitors,
    promote,
)
from versions.services.engine import Move, MovePlan, Request, Subject
from versions.services.receipts import Finding, PromotionReceipt
from versions.terms import PROMOTE

ADVANCE, COMPLETE, ABORT, AUTO = "advance", "complete", "abort", "auto"
ACTIONS = (COMPLETE, ABORT)
# The watch judges a deployment on at least this many answers.
MIN_REQUESTS = 20
# A process adds its counts to the database every this many answers, or seconds.
FLUSH_EVERY = 10
FLUSH_SECONDS = 1.0
# Who an automatic rollback is recorded as.
WATCH_BY = "versions:watch"


@dataclass
class RolloutPlan(MovePlan):
    """One step of a running rollout (or the watch's automatic rollback) as a move plan."""

    app: App | str
    step: str
    share: int | None = None
    note: str = ""
    deployment: str | None = None  # AUTO: the watched deployment that failed
    cause: str = ""
    action: str = PROMOTE
    audit_kind: str = terms.PROMOTION_REFUSED

    def __post_init__(self) -> None:
        self.audit_action = {
            ADVANCE: terms.ROLLOUT_ADVANCED,
            COMPLETE: terms.ROLLOUT_COMPLETED,
            ABORT: terms.ROLLOUT_ABORTED,
            AUTO: terms.AUTO_ROLLED_BACK,
        }[self.step]
        # Advancing and completing ship the candidate further: a freeze stops them. Aborting
        # and rolling back are always allowed.
        self.rules = (self.rule_not_frozen,) if self.step in (ADVANCE, COMPLETE) else ()

    def lookup(self, request: Request) -> tuple[Subject, NotFound | None]:
        return Subject(resolve_app(self.app), self.deployment or ""), None

    def rule_not_frozen(self, move: Move, request: Request) -> list[Finding]:
        app = resolve_app(self.app)
        policy = gates.policy_of(app)
        if move.noop or not gates.frozen(policy):
            return []
        return [Finding(app.slug, gates.PRODUCTION_FINDING, gates.frozen_words(app, policy))]

    def move(self, subject: Subject, locked: App) -> Move:
        if self.step == AUTO:
            return self._auto(locked)
        candidate, production = locked.candidate_id, locked.production_id
        if candidate is None or production is None:
            raise Conflict(words.NO_ROLLOUT.format(slug=locked.slug))
        if self.step == ADVANCE:
            share = self.share
            return Move(
                DeploymentEvent.ADVANCE,
                candidate,
                candidate,
                candidate,
                changes=[],
                rollout=share,
                nothing_to_do=share == locked.rollout_share,
                message=words.ROLLOUT_ADVANCED_MESSAGE.format(
                    deployment="{deployment}", share=share
                ),
                pointers=lambda to: {"rollout_share": share},
            )
        if self.step == COMPLETE:
            changes, unchanged = _compare(locked, production, candidate)
            minutes = gates.policy_of(locked).watch_minutes
            return Move(
                DeploymentEvent.PROMOTION,
                candidate,
                production,
                candidate,
                changes=changes,
                unchanged=unchanged,
                nothing_to_do=False,
                message=words.ROLLOUT_COMPLETED_MESSAGE,
                pointers=lambda to: {
                    "production_id": to,
                    "candidate_id": None,
                    "rollout_share": 0,
                    "watch_until": timezone.now() + timedelta(minutes=minutes),
                },
                then=lambda to, now: forget_visitors(locked.pk),
            )
        changes, unchanged = _compare(locked, candidate, production)
        return Move(
            DeploymentEvent.ABORT,
            production,
            candidate,
            production,
            changes=changes,
            unchanged=unchanged,
            nothing_to_do=False,
            message=words.ROLLOUT_ABORTED_MESSAGE,
            pointers=lambda to: {"candidate_id": None, "rollout_share": 0},
            then=lambda to, now: end_watch(
                candidate, now, words.ROLLOUT_ABORTED_MESSAGE, forget=locked.pk
            ),
        )

    def _auto(self, locked: App) -> Move:
        """Roll the failing deployment back: a candidate is dropped (the rollout aborts),
        production goes back to the deployment it replaced. Anything else: it moved on
        already, nothing to do."""
        failing, cause = self.deployment, self.cause
        message = words.AUTO_ROLLED_BACK_MESSAGE.replace(
            "{cause}", cause.replace("{", "{{").replace("}", "}}")
        )
        if failing is not None and failing == locked.candidate_id:
            production = locked.production_id
            assert production is not None  # a rollout needs production
            changes, unchanged = _compare(locked, failing, production)
            return Move(
                DeploymentEvent.AUTO_ROLLBACK,
                production,
                failing,
                production,
                changes=changes,
                unchanged=unchanged,
                nothing_to_do=False,
                message=message,
                cause=cause,
                pointers=lambda to: {"candidate_id": None, "rollout_share": 0},
                then=lambda to, now: end_watch(failing, now, cause, forget=locked.pk),
            )
        if failing is not None and failing == locked.production_id:
            try:
                target, event_id, unchanged = _earlier(locked, failing)
            except Conflict:  # its first deployment: nothing earlier to go back to
                return Move(DeploymentEvent.AUTO_ROLLBACK, failing, failing, failing, changes=[])
            return Move(
                DeploymentEvent.AUTO_ROLLBACK,
                target,
                failing,
                target,
                unchanged=unchanged,
                load_changes=lambda: _history_changes(event_id, True),
                changes_of=(event_id, True),
                nothing_to_do=False,
                message=message,
                cause=cause,
                pointers=lambda to: {"production_id": to, "watch_until": None},
                then=lambda to, now: end_watch(failing, now, cause),
            )
        return Move(DeploymentEvent.AUTO_ROLLBACK, failing or "", failing, failing, changes=[])


def _step(
    app: App | str, step: str, *, actor: Actor | None, by: str | None, **fields: Any
) -> PromotionReceipt:
    request = engine.requested(by=by, actor=actor, dry_run=False, expected=None)
    return engine.execute(RolloutPlan(app, step, **fields), request)  # type: ignore[no-any-return]


def advance_rollout(
    app: App | str, *, to: object, actor: Actor | None = None, by: str | None = None, note: str = ""
) -> PromotionReceipt:
    """Serve the running rollout's candidate to ``to`` percent (1-99) of new visitors;
    visitors already pinned stay on their deployment."""
    share = check_share(to, field="to")
    return _step(app, ADVANCE, actor=actor, by=by, share=share, note=_clean_note(note))


def complete_rollout(
    app: App | str, *, actor: Actor | None = None, by: str | None = None, note: str = ""
) -> PromotionReceipt:
    """The candidate becomes production for everyone (a promotion in the history)."""
    return _step(app, COMPLETE, actor=actor, by=by, note=_clean_note(note))


def abort_rollout(
    app: App | str, *, actor: Actor | None = None, by: str | None = None, note: str = ""
) -> PromotionReceipt:
    """Everyone is served production again; one pointer moves, the candidate is kept."""
    return _step(app, ABORT, actor=actor, by=by, note=_clean_note(note))


def rollout_action(
    app: App | str,
    *,
    to: object = None,
    action: object = None,
    actor: Actor | None = None,
    note: str = "",
    ref: str = "draft",
) -> PromotionReceipt:
    """What the API's and MCP's one rollout door asks: ``{to}`` starts a rollout (none
    running) or advances it; ``{action: complete|abort}`` ends it."""
    if action is not None:
        if action == COMPLETE:
            return complete_rollout(app, actor=actor, note=note)
        if action == ABORT:
            return abort_rollout(app, actor=actor, note=note)
        raise InvalidInput(words.ROLLOUT_BAD_ACTION.format(action=str(action)[:40]), field="action")
    # Who may not see the app learns nothing of its rollout (docs/api.md#existence).
    app_obj = app_for(app, actor=actor) if actor is not None else resolve_app(app)
    if to is None:
        raise InvalidInput(words.ROLLOUT_NOTHING_ASKED, field="to")
    if app_obj.candidate_id is None:
        return promote(
            app_obj, actor=actor, ref=ref, note=note, rollout=check_share(to, field="to")
        )
    return advance_rollout(app_obj, to=to, actor=actor, note=note)


def auto_rollback(app: App | str, *, deployment: str, cause: str) -> PromotionReceipt:
    """Roll the watched ``deployment`` back by itself, naming the ``cause``; a no-op when it
    is neither the candidate nor production any more."""
    return _step(app, AUTO, actor=None, by=WATCH_BY, deployment=deployment, cause=cause)


def run_post_promotion_checks(deployment: Deployment | str) -> PromotionReceipt | None:
    """The app's HTTP checks against a deployment that was just promoted (or is a rollout's
    candidate); on the first failure, the automatic rollback's receipt (else None).

    A check that already failed when the deployment was promoted is not run again: an owner
    promoted past it on purpose (Promote anyway, with a reason), and the watch looks for what
    breaks after the promotion, never undoing that decision."""
    found = (
        deployment if isinstance(deployment, Deployment) else Deployment.objects.get(pk=deployment)
    )
    app = App.objects.get(pk=found.app_id)
    if found.pk not in (app.production_id, app.candidate_id):
        return None
    accepted = {c.get("name") for c in found.checks or [] if not c.get("ok")}
    for result in gates.run_http_checks(app, found.pk):
        if not result.ok and result.name not in accepted:
            cause = words.CAUSE_CHECK_FAILED.format(name=result.name, detail=result.detail)
            return auto_rollback(app, deployment=found.pk, cause=cause)
    return None


# --------------------------------------------------------------------------------------------
# The live app's count of a watched deployment's answers
# --------------------------------------------------------------------------------------------

_pending: dict[tuple[int, str], list[float]] = {}
_pending_lock = threading.Lock()


def count_answer(app_id: int, deployment_id: str, status: int) -> PromotionReceipt | None:
    """One answer of a watched deployment (the live app calls it): counted in this process
    and added to the deployment's watch every :data:`FLUSH_EVERY` answers or
    :data:`FLUSH_SECONDS`; the automatic rollback's receipt when the bound was passed."""
    error = status >= 500 or status == 404
    key = (app_id, deployment_id)
    now = time.monotonic()
    with _pending_lock:
        counts = _pending.setdefault(key, [0, 0, now])
        counts[0] += 1
        counts[1] += error
        if counts[0] < FLUSH_EVERY and now - counts[2] < FLUSH_SECONDS:
            return None
        requests, errors = int(counts[0]), int(counts[1])
        _pending[key] = [0, 0, now]
    return _judge(app_id, deployment_id, requests, errors)


def _judge(app_id: int, deployment_id: str, requests: int, errors: int) -> PromotionReceipt | None:
    watching = DeploymentWatch.objects.filter(pk=deployment_id, ended_on__isnull=True)
    if not watching.update(requests=F("requests") + requests, errors=F("errors") + errors):
        return None
    total, failed = watching.values_list("requests", "errors").get()
    rate = gates.policy_of(app_id).rollback_error_rate
    if total < MIN_REQUESTS or failed * 100 <= rate * total:
        return None
    cause = words.CAUSE_ERROR_RATE.format(errors=failed, requests=total, rate=rate)
    return auto_rollback(App.objects.get(pk=app_id), deployment=deployment_id, cause=cause)


# --------------------------------------------------------------------------------------------
# Which deployment a visitor without a pinning cookie is on
# --------------------------------------------------------------------------------------------


def pin_visitor(app_id: int, candidate: str, fingerprint: str, drawn: str) -> str:
    """The deployment the visitor with ``fingerprint`` was drawn onto in this rollout, else
    ``drawn`` (kept for their later requests without the cookie, such as the sandboxed page's
    own ``fetch``)."""
    found = (
        RolloutVisitor.objects.filter(app_id=app_id, candidate=candidate, fingerprint=fingerprint)
        .values_list("deployment", flat=True)
        .first()
    )
    if found is not None:
        return found
    try:
        with transaction.atomic():
            RolloutVisitor.objects.create(
                app_id=app_id, candidate=candidate, fingerprint=fingerprint, deployment=drawn
            )
    except IntegrityError:  # the same visitor's other request drew first: theirs stands
        return pin_visitor(app_id, candidate, fingerprint, drawn)
    return drawn
