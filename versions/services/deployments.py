"""Production: promote a reviewed state to production, roll production back at once — two
plans of the one engine (:mod:`.engine`).

Agents write the draft; a promotion stores a :class:`~versions.models.Deployment` — per
artifact, the blob of its source in the promoted state — and points ``App.production`` at it.
Entries reference blobs that are already stored (no source bytes are copied) and the blob sweep
keeps every blob a deployment references. A rollback moves the pointer to an earlier
deployment and touches no artifact: its cost does not grow with the app.

The engine takes the app row's lock first, so promotions and rollbacks of one app queue. A
promotion reads the state it ships in one statement (the draft) or from points that no later
write changes, so a write racing it is in the deployment whole or not at all. Route tables
follow production: the app's ``route_generation`` moves with the pointer, in the same statement.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.db.models import F
from django.utils import timezone

from versions import selectors, terms
from versions.errors import Conflict, Forbidden, InvalidInput, NotFound
from versions.messages import (
    FINDING_PROTECTED,
    OVERRIDE_NOT_OWNER,
    OVERRIDE_REASON_NEEDED,
    ROLLOUT_BAD_SHARE,
    ROLLOUT_NEEDS_PRODUCTION,
    ROLLOUT_STARTED_MESSAGE,
    SCHEDULE_WITH_ROLLOUT,
)
from versions.models import (
    API_ROUTE,
    App,
    AppCheck,
    Deployment,
    DeploymentEntry,
    DeploymentEvent,
    DeploymentWatch,
    RolloutVisitor,
)
from versions.services import _sql, engine, gates, schedules, validation
from versions.services import refs as states
from versions.services.access import (
    Actor,
)
from versions.services.audit import Command, record
from versions.services.capture import resolve_app
from versions.services.engine import Move, MovePlan, Request, Subject
from versions.services.receipts import (
    PROMOTION,
    ROLLBACK,
    Change,
    Finding,
    PromotionReceipt,
    change_from_json,
    change_json,
)
from versions.services.routes import parse_route_spec
from versions.terms import (
    MANAGE,
    PROMOTE,
    PROTECTION_OVERRIDDEN,
)

NO_PRODUCTION_TO_ROLL_BACK = (
    "App “{app}” has no production deployment to roll back: /apps/{app}/ serves its draft. "
    "Promote a state to production first."
)
NO_EARLIER_DEPLOYMENT = (
    "Production of app “{app}” serves {current}, its first deployment: there is no earlier "
    "deployment to roll back to."
)
DEPLOYMENT_NOT_FOUND = "App “{app}” has no deployment “{id}”."
ROLLBACK_TO_CANDIDATE = (
    "{id} is the candidate of the rollout running on app “{app}” ({share} % of visitors): "
    "Complete rollout serves it to everyone, Abort rollout takes it back. A rollback goes back "
    "to a deployment production served."
)
ROLLBACK_NEVER_SERVED = (
    "Production of app “{app}” never served {id} (a rollout's candidate that was not "
    "completed): a rollback goes back to a deployment production served. Promote its state to "
    "ship it, through the checks."
)
# A rollback while a rollout runs ends the rollout: everyone gets the deployment rolled back to.
ROLLED_BACK_ENDING_ROLLOUT = (
    "Production rolled back from {previous} to {deployment}; the rollout of {candidate} ended: "
    "every visitor is served {deployment}."
)
# A note's rules are shared with safe promotion's reasons (validation.clean_note).
NOTE_NOT_TEXT, NOTE_TOO_LONG, NOTE_HAS_CONTROL = (
    validation.NOTE_NOT_TEXT,
    validation.NOTE_TOO_LONG,
    validation.NOTE_HAS_CONTROL,
)

# Pre-flight findings, one reason in words per failing artifact.
FINDING_BAD_ROUTE = "Its route spec is not valid: {detail}"
FINDING_AMBIGUOUS = (
    "It and “{other}” would both answer {key} in production: two routes with the same method "
    "and path would be ambiguous."
)
FINDING_DRIFT = (
    "It changed since you reviewed it: you reviewed {expected}, it is now {current}. "
    "Review the promotion again."
)
FINDING_NOT_REVIEWED = (
    "It changed after you reviewed the promotion: it was not among what you reviewed. "
    "Review the promotion again."
)

# The keys of a promotion's or rollback's receipt, in order (docs/api.md#receipts).
_RECEIPT_KEYS = (
    "deploymentId",
    "kind",
    "ref",
    "previousDeployment",
    "changed",
    "unchanged",
    "created_by",
    "created_on",
    "note",
)


_clean_note = validation.clean_note


def _short(sha: str | None) -> str:
    return sha[:12] if sha else "“absent”"


def _finding(entry: states.StateEntry, reason: str) -> Finding:
    return Finding(entry.name, entry.collection, reason)


def rule_state_ships(move: Move, request: Request) -> list[Finding]:
    """Every reason the state cannot go to production, one finding per artifact and reason:
    sources stored, route specs valid, no two routes on one method and path, and (with
    ``expected``) nothing changed since the person reviewed it."""
    state, expected = move.state, request.expected
    findings = [_finding(e, e.reason or "") for e in state.missing]
    routes = [e for e in state.present if e.collection == API_ROUTE]
    texts = states.blob_texts({e.sha256 for e in routes if e.sha256})
    taken: dict[str, str] = {}
    for entry in routes:
        try:
            spec = parse_route_spec(texts.get(entry.sha256 or "", ""))
        except InvalidInput as exc:
            findings.append(_finding(entry, FINDING_BAD_ROUTE.format(detail=exc.message)))
            continue
        other = taken.get(spec.key)
        if other is not None:
            findings.append(_finding(entry, FINDING_AMBIGUOUS.format(key=spec.key, other=other)))
        else:
            taken[spec.key] = entry.name
    if expected:
        by_key = {(e.collection, e.name): e for e in state.entries}
        for (collection, name), reviewed in expected.items():
            found = by_key.get((collection, name))
            now = found.sha256 if found is not None else ""
            if found is not None and found.missing:
                continue  # already a finding
            if reviewed != (now or ""):
                target = found or states.StateEntry(0, collection, name, "")
                findings.append(
                    _finding(
                        target, FINDING_DRIFT.format(expected=_short(reviewed), current=_short(now))
                    )
                )
    return findings


def rule_all_reviewed(move: Move, request: Request) -> list[Finding]:
    """With ``expected``: the changes the promotion would ship that the person did not review
    (an artifact an agent wrote or added after the review showed what would ship)."""
    if request.expected is None:
        return []
    return [
        Finding(c.name, c.collection, FINDING_NOT_REVIEWED)
        for c in move.changes or []
        if (c.collection, c.name) not in request.expected
    ]


# The collection a set-level finding names (a change set is no artifact).
CHANGE_SET = "change set"
OVERRIDE_NOTE = "Promoted anyway: {reason}"


def _moment_of(move: Move) -> tuple[Any, bool] | None:
    """The moment the promoted state stands for, and whether points at it are included (None:
    the draft, which includes every write so far)."""
    state = move.state
    app, ref = state.app, state.ref
    if state.deployment_id is not None:
        found = Deployment.objects.filter(pk=state.deployment_id).values_list("created_on")
        return found.get()[0], True
    if ref.startswith("rp_"):
        return states._point_moment(app, ref)[0], True
    if ref.startswith(("cs_", "rs_")):
        return states._set_moment(app, ref), True
    return None


def sets_to_ship(move: Move) -> list[str]:
    """The change sets between production and the promoted state (``selectors.sets_between``):
    of the artifacts the promotion changes, up to the state's moment; oldest first."""
    state = move.state
    by_key = {(e.collection, e.name): e.artifact_id for e in state.entries}
    changed = [
        by_key[(c.collection, c.name)]
        for c in move.changes or []
        if (c.collection, c.name) in by_key
    ]
    until = _moment_of(move)
    return selectors.sets_between(
        state.app.pk, changed, since=move.previous, until=until[0] if until else None
    )


def _held(deployment_id: str | None) -> dict[int, str]:
    """{artifact pk: blob sha} of a deployment (one query)."""
    if deployment_id is None:
        return {}
    return dict(
        DeploymentEntry.objects.filter(deployment_id=deployment_id).values_list(
            "artifact_id", "blob_id"
        )
    )


def _diff(before: dict[int, str], state: states.AppState) -> tuple[list[Change], int]:
    """What moving production from ``before`` to ``state`` changes, and how many artifacts of
    ``state`` stay as they are."""
    changed = []
    unchanged = 0
    for entry in state.entries:
        if entry.missing:
            continue
        old, new = before.get(entry.artifact_id), entry.sha256 or None
        if old == new:
            unchanged += 1 if new else 0
        else:
            changed.append(Change(entry.name, entry.collection, old, new))
    return changed, unchanged


@dataclass
class PromotePlan(MovePlan):
    """Promote: production moves to a new deployment of the state ``ref`` names."""

    app: App | str
    ref: str
    note: str = ""
    action: str = PROMOTE
    audit_action: str = terms.PROMOTED
    audit_kind: str = "promotion_refused"
    rules: tuple[engine.MoveRule, ...] = ()
    # An owner's reason to promote past the app's protection ("Promote anyway").
    override_reason: str = ""
    # A gradual rollout (docs/architecture.md#safe-promotion): the state becomes a candidate
    # served to this share of visitors instead of production.
    rollout: int | None = None

    def __post_init__(self) -> None:
        self.rules = (
            rule_state_ships,
            rule_all_reviewed,
            self.rule_protected,
            gates.rule_not_frozen,
            gates.rule_no_rollout,
            self.rule_checks,
            *self.rules,
        )
        if self.rollout is not None:
            self.audit_action = terms.ROLLOUT_STARTED

    def rule_checks(self, move: Move, request: Request) -> list[Finding]:
        """The state's checks pass (built in and the app's HTTP checks), unless an owner
        promotes anyway with a reason."""
        return gates.rule_checks(move, request, override_reason=self.override_reason)

    def rule_protected(self, move: Move, request: Request) -> list[Finding]:
        """With required approvals on the app (docs/architecture.md#protection): every change
        set between production and the state has them, non-stale, from people other than its
        authors, and (``block_on_changes_requested``) no open change request. One finding per
        set lacking anything. An owner's ``override_reason`` promotes anyway, kept in the
        deployment's note and the audit trail."""
        app = move.state.app if move.state is not None else None
        if app is None or move.noop:
            return []
        protection = selectors.protection_of(app)
        if protection.required_approvals == 0:
            return []
        states_of = selectors.review_states(sets_to_ship(move), protection)
        findings = [
            Finding(set_id, CHANGE_SET, FINDING_PROTECTED.format(lacks="; ".join(lacks)))
            for set_id, state in states_of.items()
            if (lacks := state.lacks(subject="it"))  # the finding names the set
        ]
        if not findings or not self.override_reason:
            return findings
        actor = request.actor
        if actor is not None and (actor.token is not None or not actor.may(MANAGE, app)):
            raise Forbidden(OVERRIDE_NOT_OWNER.format(slug=app.slug))
        if not request.dry_run:
            record(
                PROTECTION_OVERRIDDEN,
                actor=actor if actor is not None else Command(request.by or "command"),
                app=app,
                targets=[f.name for f in findings],
                reason=self.override_reason,
                details={"findings": [f"{f.name}: {f.reason}" for f in findings]},
            )
        return []

    def lookup(self, request: Request) -> tuple[Subject, NotFound | None]:
        return Subject(resolve_app(self.app), self.ref), None

    def move(self, subject: Subject, locked: App) -> Move:
        state = states.resolve_state(locked, self.ref)
        changed, unchanged = _diff(_held(locked.production_id), state)
        move = Move(PROMOTION, state.ref, locked.production_id, None, state, changed, unchanged)
        minutes = gates.policy_of(locked).watch_minutes
        if self.rollout is None:
            # Production is watched for its first minutes (docs/architecture.md#safe-promotion).
            move.pointers = lambda to: {
                "production_id": to,
                "watch_until": timezone.now() + timedelta(minutes=minutes),
            }
        else:
            if locked.production_id is None:
                raise Conflict(ROLLOUT_NEEDS_PRODUCTION.format(slug=locked.slug))
            share = self.rollout
            move.kind, move.rollout = DeploymentEvent.ROLLOUT, share
            move.message = ROLLOUT_STARTED_MESSAGE.format(deployment="{deployment}", share=share)
            move.pointers = lambda to: {"candidate_id": to, "rollout_share": share}
        move.then = lambda to, now: watch_begins(locked, to, now)
        return move


def watch_begins(app: App, deployment_id: str, now: Any) -> None:
    """The live app counts the answers of ``deployment_id`` from now on (a promoted
    production for its first minutes, a rollout's candidate while it runs)."""
    DeploymentWatch.objects.update_or_create(
        deployment_id=deployment_id,
        defaults={"app": app, "started_on": now, "requests": 0, "errors": 0, "ended_on": None},
    )
    if AppCheck.objects.filter(app_id=app.pk).exists():
        # The app's HTTP checks run again against it, by the worker, once this commits.
        from versions import promotion_tasks, tasks  # the tasks import the services

        tasks.enqueue_on_commit(promotion_tasks.watch_promotion, deployment_id)


def check_share(share: object, *, field: str = "rollout") -> int:
    """A rollout's share of visitors, 1-99, or ``InvalidInput`` in words about ``field`` (the
    caller's name for it: promote's ``rollout``, the rollout door's ``to``)."""
    if isinstance(share, str) and share.strip().isdigit():
        share = int(share)
    if isinstance(share, bool) or not isinstance(share, int) or not 1 <= share <= 99:
        raise InvalidInput(ROLLOUT_BAD_SHARE.format(share=str(share)[:20]), field=field)
    return share


def promote(
    app: App | str,
    *,
    by: str | None = None,
    ref: str = states.DRAFT,
    note: str = "",
    expected: Mapping[Any, str] | None = None,
    dry_run: bool = False,
    actor: Actor | None = None,
    override_reason: str = "",
    rollout: object = None,
    at: Any = None,
) -> PromotionReceipt:
    """Ship the state ``ref`` names (default the draft) to production, or change nothing.

    Pre-flights every artifact of the state: its source is stored, route specs are valid, no
    two routes answer one method and path, and (``expected``: ``"collection/name"`` → the
    sha256 the person reviewed) nothing changed since it was reviewed. Any finding raises
    ``PreflightFailed`` listing all of them (a dry run returns them instead). A state equal to
    production answers the ``noop`` receipt. ``actor`` must may promote on the app (a token
    only when made ``--can-promote``). With the app's protection on, every change set it ships
    needs its approvals (a finding otherwise); an owner's ``override_reason`` promotes anyway,
    kept as the deployment's note and in the audit trail.

    Safe promotion (docs/architecture.md#safe-promotion): the state's checks run first (a
    failing one is a finding an owner's ``override_reason`` promotes past); nothing is
    promoted while production is frozen or a rollout runs. ``rollout`` (1-99) makes the state
    a candidate served to that share of visitors; ``at`` (a future moment) schedules the
    promotion of the state as it is now instead.
    """
    if at is not None:
        if rollout is not None:
            raise InvalidInput(SCHEDULE_WITH_ROLLOUT, field="rollout")
        return schedules.schedule_promotion(
            app, actor=actor, by=by, ref=ref, at=at, note=note, dry_run=dry_run
        )
    share = check_share(rollout) if rollout is not None else None
    request = engine.requested(by=by, actor=actor, dry_run=dry_run, expected=expected)
    reason = _clean_note(override_reason)
    if override_reason and not reason:
        raise InvalidInput(OVERRIDE_REASON_NEEDED, field="override_reason")
    note = _clean_note(note)
    if reason:
        note = _clean_note(" ".join(filter(None, [OVERRIDE_NOTE.format(reason=reason), note])))
    plan = PromotePlan(app, states.check_ref(ref), note, override_reason=reason, rollout=share)
    return engine.execute(plan, request)  # type: ignore[no-any-return]


def _earlier(app: App, current: str) -> tuple[str, int, int]:
    """The deployment production served before ``current`` was promoted (where its promotion
    came from), with that promotion's event and its unchanged count; ``Conflict`` in words
    when ``current`` was the app's first. Rolling back again goes further back, never forth."""
    found = _sql.promotion_of(app.pk, current)
    if found is None or found[0] is None:
        raise Conflict(NO_EARLIER_DEPLOYMENT.format(app=app.slug, current=current))
    return found[0], found[1], found[2]


def _history_changes(event_id: int, inverted: bool) -> list[Change]:
    """The changes of the move ``event_id`` (turned around when ``inverted``), following
    rollbacks that reuse an earlier move's list."""
    while True:
        receipt, changes_of, flip = (
            DeploymentEvent.objects.filter(pk=event_id)
            .values_list("receipt", "changes_of_id", "changes_inverted")
            .get()
        )
        if changes_of is None:
            changes = [change_from_json(c) for c in receipt.get("changed", [])]
            break
        event_id, inverted = changes_of, inverted != flip
    if inverted:
        return [Change(c.name, c.collection, c.to_sha, c.from_sha) for c in changes]
    return changes


def _move_between(app: App, current: str, target: str) -> tuple[int, bool, int] | None:
    """An earlier move between ``current`` and ``target`` (either way): its event, whether
    this move is its reverse, and its unchanged count; None when production never moved
    between them."""
    found = (
        DeploymentEvent.objects.filter(
            app=app,
            from_deployment_id__in=(current, target),
            to_deployment_id__in=(current, target),
        )
        .exclude(from_deployment_id=F("to_deployment_id"))
        .order_by("-on", "-id")
        .values_list("pk", "from_deployment_id", "unchanged")
        .first()
    )
    if found is None:
        return None
    return found[0], found[1] != current, found[2]


def _compare(app: App, current: str, target: str) -> tuple[list[Change], int]:
    """What moving production from ``current`` to ``target`` changes, from their entries, and
    how many artifacts stay the same (for a move production never made before)."""
    before, after = _held(current), _held(target)
    moved = [pk for pk in set(before) | set(after) if before.get(pk) != after.get(pk)]
    names = app.artifacts.filter(pk__in=moved).values_list("pk", "collection", "name")
    changes = [
        Change(name, collection, before.get(pk), after.get(pk)) for pk, collection, name in names
    ]
    same = sum(1 for pk, blob in after.items() if before.get(pk) == blob)
    return sorted(changes, key=lambda c: (c.collection, c.name)), same


@dataclass
class RollbackPlan(MovePlan):
    """Roll back production: the pointer moves to an earlier deployment, no artifact touched.
    What changes is the reverse of the move undone, read from the history when asked for."""

    app: App | str
    to: str | None
    note: str = ""
    action: str = PROMOTE
    audit_action: str = terms.ROLLED_BACK
    audit_kind: str = "promotion_refused"

    def lookup(self, request: Request) -> tuple[Subject, NotFound | None]:
        return Subject(resolve_app(self.app), self.to or ""), None

    def move(self, subject: Subject, locked: App) -> Move:
        current = locked.production_id
        if current is None:
            raise Conflict(NO_PRODUCTION_TO_ROLL_BACK.format(app=locked.slug))
        changes: list[Change] | None = None
        changes_of: tuple[int, bool] | None
        candidate = locked.candidate_id
        if self.to is None:
            target, event_id, unchanged = _earlier(locked, current)
            changes_of = (event_id, True)
        else:
            target = self.to
            if not Deployment.objects.filter(pk=target, app=locked).exists():
                raise NotFound(DEPLOYMENT_NOT_FOUND.format(app=locked.slug, id=target))
            if target == current:
                return Move(ROLLBACK, target, current, target)
            if target == candidate:
                raise Conflict(
                    ROLLBACK_TO_CANDIDATE.format(
                        id=target, app=locked.slug, share=locked.rollout_share
                    )
                )
            if target not in selectors.served_deployments(locked):
                raise Conflict(ROLLBACK_NEVER_SERVED.format(app=locked.slug, id=target))
            move = _move_between(locked, current, target)
            if move is not None:
                changes_of, unchanged = (move[0], move[1]), move[2]
            else:
                changes_of = None
                changes, unchanged = _compare(locked, current, target)
        load = (lambda: _history_changes(*changes_of)) if changes_of else None
        rollback = Move(
            ROLLBACK, target, current, target, None, changes, unchanged, load, changes_of
        )
        # The deployment rolled back to is not watched: the watch was its promotion's. A
        # running rollout ends with it, as when the watch rolls back: the candidate served a
        # share of visitors on top of the production now left behind.
        ends = {"candidate_id": None, "rollout_share": 0} if candidate is not None else {}
        rollback.pointers = lambda to: {"production_id": to, "watch_until": None, **ends}
        if candidate is not None:
            rollback.message = ROLLED_BACK_ENDING_ROLLOUT.replace("{candidate}", candidate)
            rollback.then = lambda to, now: end_watch(
                candidate,
                now,
                rollback.message.format(deployment=to, previous=current),
                forget=locked.pk,
            )
        return rollback


def end_watch(deployment_id: str, now: Any, outcome: str, *, forget: int | None = None) -> None:
    """The watch of ``deployment_id`` ends with ``outcome``; with ``forget`` (an app's pk) the
    app's rollout ended too, and its visitors' draws mean nothing any more."""
    DeploymentWatch.objects.filter(pk=deployment_id, ended_on__isnull=True).update(
        ended_on=now, outcome=outcome[:200]
    )
    if forget is not None:
        forget_visitors(forget)


def forget_visitors(app_id: int) -> None:
    """The rollout of app ``app_id`` ended: its visitors' draws are dropped."""
    RolloutVisitor.objects.filter(app_id=app_id).delete()


def rollback_production(
    app: App | str,
    *,
    by: str | None = None,
    to: str | None = None,
    note: str = "",
    actor: Actor | None = None,
) -> PromotionReceipt:
    """Point production at an earlier deployment (``to``; default the one production served
    before the current one was promoted). One pointer moves and no artifact is touched, so the
    cost does not grow with the app: what changed is the reverse of the move that is undone,
    kept in the history. Rolling forward again is a rollback ``to`` the deployment it replaced.
    ``actor`` must may promote on the app."""
    request = engine.requested(by=by, actor=actor, dry_run=False, expected=None)
    note = _clean_note(note)
    if to is not None and (not isinstance(to, str) or not to.startswith("dp_")):
        slug = app.slug if isinstance(app, App) else str(app)
        raise NotFound(DEPLOYMENT_NOT_FOUND.format(app=slug, id=str(to)[:80]))
    return engine.execute(RollbackPlan(app, to, note), request)  # type: ignore[no-any-return]


def event_receipt(event: DeploymentEvent) -> dict[str, Any]:
    """The receipt of a promotion or rollback in the history, with what it changed."""
    receipt = dict(event.receipt)
    if "changed" not in receipt:
        changes = (
            _history_changes(event.changes_of_id, event.changes_inverted)
            if event.changes_of_id
            else []
        )
        receipt["changed"] = [change_json(c) for c in changes]
        receipt = {key: receipt[key] for key in _RECEIPT_KEYS if key in receipt}
    return receipt
