"""Production (SPEC §13): promote a reviewed state to production, roll production back at once.

Agents write the draft; a promotion stores a :class:`~versions.models.Deployment` — per
artifact, the blob of its source in the promoted state — and points ``App.production`` at it.
Entries reference blobs that are already stored (no source bytes are copied) and the blob sweep
keeps every blob a deployment references. A rollback moves the pointer to an earlier
deployment and touches no artifact: its cost does not grow with the app.

Both take the app row's lock first, so promotions and rollbacks of one app queue. A promotion
reads the state it ships in one statement (the draft) or from points that no later write
changes, so a write racing it is in the deployment whole or not at all. Route tables follow
production: the app's ``route_generation`` moves with the pointer, in the same statement.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from django.db import IntegrityError, connection, transaction
from django.db.models import F

from versions import ids
from versions.errors import Conflict, InvalidInput, NotFound, PreflightFailed
from versions.models import (
    API_ROUTE,
    App,
    AuditEvent,
    Deployment,
    DeploymentEntry,
    DeploymentEvent,
)
from versions.services import refs as states
from versions.services.access import PROMOTE, Actor, app_for
from versions.services.capture import resolve_app
from versions.services.engine import iso_ms, normalise_expected
from versions.services.routes import parse_route_spec
from versions.services.validation import validate_optional_id

PROMOTION = DeploymentEvent.PROMOTION
ROLLBACK = DeploymentEvent.ROLLBACK
NOOP = "noop"
DRY_RUN = "dry_run"
PREFLIGHT_FAILED_KIND = "preflight_failed"

NOOP_MESSAGE = "Production already serves this state — nothing was promoted."
PROMOTED = "Promoted {ref} to production as {deployment}: {changed} artifact{s} changed."
ROLLED_BACK = "Production rolled back from {previous} to {deployment}."
DRY_RUN_MESSAGE = "A promotion would change {changed} artifact{s} in production."
PREFLIGHT_FAILED = "Nothing was promoted: the pre-flight check found {count} problem{s}. {details}"
NO_PRODUCTION_TO_ROLL_BACK = (
    "App “{app}” has no production deployment to roll back: /apps/{app}/ serves its draft. "
    "Promote a state to production first."
)
NO_EARLIER_DEPLOYMENT = (
    "Production of app “{app}” serves {current}, its first deployment: there is no earlier "
    "deployment to roll back to."
)
DEPLOYMENT_NOT_FOUND = "App “{app}” has no deployment “{id}”."
# What a restore, revert or write of an app with production says (SPEC §13): it changed the
# draft only.
PRODUCTION_STILL_SERVES = "Production still serves {deployment}; promote to ship this."
NOTE_NOT_TEXT = "A note must be text."
NOTE_TOO_LONG = "A note is at most 500 characters."
NOTE_HAS_CONTROL = "A note cannot contain control characters."

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

# The keys of a promotion's or rollback's receipt, in order (SPEC §13).
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
# How many entries one INSERT statement carries (3 parameters each).
_INSERT_CHUNK = 300
_RETRIES = 3


@dataclass
class PromotionReceipt:
    """What a promotion or rollback did (``promotion``, ``rollback``), did not need to do
    (``noop``), would do (``dry_run``) or refused (``preflight_failed``). ``.as_dict()`` is the
    JSON of SPEC §13.

    A rollback that reverses an earlier move does not copy that move's list of changes: it
    carries ``changes_of`` (the event's id, and whether to turn it around) and ``changed`` reads
    it from the history when first asked for.
    """

    kind: str
    ref: str
    deployment_id: str | None = None
    previous_deployment: str | None = None
    changes: list[dict[str, Any]] | None = None
    unchanged: int = 0
    created_by: str = ""
    created_on: str | None = None
    note: str = ""
    findings: list[dict[str, Any]] = field(default_factory=list)
    message: str = ""
    changes_of: tuple[int, bool] | None = None

    @property
    def changed(self) -> list[dict[str, Any]]:
        """Every artifact the move changes: name, collection, from and to (sha or None)."""
        if self.changes is None:
            self.changes = _history_changes(*self.changes_of) if self.changes_of else []
        return self.changes

    def as_dict(self, *, with_changes: bool = True) -> dict[str, Any]:
        """The receipt's JSON; ``with_changes=False`` leaves ``changed`` out (how a rollback
        that reuses an earlier move's list is stored)."""
        if self.kind == NOOP:
            return {"kind": NOOP, "message": self.message}
        if self.kind == PREFLIGHT_FAILED_KIND:
            return {
                "kind": PREFLIGHT_FAILED_KIND,
                "ref": self.ref,
                "findings": [dict(f) for f in self.findings],
                "message": self.message,
            }
        if self.kind == DRY_RUN:
            return {
                "kind": DRY_RUN,
                "ref": self.ref,
                "previousDeployment": self.previous_deployment,
                "changed": [dict(c) for c in self.changed],
                "unchanged": self.unchanged,
                "findings": [dict(f) for f in self.findings],
                "message": self.message,
            }
        data = {
            "deploymentId": self.deployment_id,
            "kind": self.kind,
            "ref": self.ref,
            "previousDeployment": self.previous_deployment,
            "changed": [dict(c) for c in self.changed] if with_changes else None,
            "unchanged": self.unchanged,
            "created_by": self.created_by,
            "created_on": self.created_on,
            "note": self.note,
        }
        if not with_changes:
            del data["changed"]
        return data


def _clean_note(note: object) -> str:
    if note is None:
        return ""
    if not isinstance(note, str):
        raise InvalidInput(NOTE_NOT_TEXT, field="note")
    note = " ".join(note.split())
    if any(unicodedata.category(char) in ("Cc", "Cs") for char in note):
        raise InvalidInput(NOTE_HAS_CONTROL, field="note")
    if len(note) > 500:
        raise InvalidInput(NOTE_TOO_LONG, field="note")
    return note


def _lock_app(app: App) -> App:
    """The app row, locked until the transaction ends: promotions and rollbacks queue on it.
    A no-key lock, so agent writes (which only reference the app) never wait for it."""
    return App.objects.select_for_update(no_key=True).get(pk=app.pk)


def _short(sha: str | None) -> str:
    return sha[:12] if sha else "“absent”"


def _finding(entry: states.StateEntry, reason: str) -> dict[str, Any]:
    return {"name": entry.name, "collection": entry.collection, "reason": reason}


def _preflight(
    state: states.AppState, expected: Mapping[tuple[str, str], str] | None
) -> list[dict[str, Any]]:
    """Every reason the state cannot go to production, one finding per artifact and reason."""
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


def _unreviewed(
    changed: list[dict[str, Any]], expected: Mapping[tuple[str, str], str] | None
) -> list[dict[str, Any]]:
    """With ``expected``: the changes the promotion would ship that the person did not review
    (an artifact an agent wrote or added after the review showed what would ship)."""
    if expected is None:
        return []
    return [
        {"name": c["name"], "collection": c["collection"], "reason": FINDING_NOT_REVIEWED}
        for c in changed
        if (c["collection"], c["name"]) not in expected
    ]


def _held(deployment_id: str | None) -> dict[int, str]:
    """{artifact pk: blob sha} of a deployment (one query)."""
    if deployment_id is None:
        return {}
    return dict(
        DeploymentEntry.objects.filter(deployment_id=deployment_id).values_list(
            "artifact_id", "blob_id"
        )
    )


def _diff(before: dict[int, str], state: states.AppState) -> tuple[list[dict[str, Any]], int]:
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
            changed.append(
                {"name": entry.name, "collection": entry.collection, "from": old, "to": new}
            )
    return changed, unchanged


def _insert_entries(deployment_id: str, entries: list[tuple[int, str]]) -> None:
    """The deployment's entries (artifact pk, blob sha), a few statements for any number."""
    qn = connection.ops.quote_name
    table = qn(DeploymentEntry._meta.db_table)
    with connection.cursor() as cursor:
        for start in range(0, len(entries), _INSERT_CHUNK):
            chunk = entries[start : start + _INSERT_CHUNK]
            sql = (
                f"INSERT INTO {table} ({qn('deployment_id')}, {qn('artifact_id')}, "  # noqa: S608
                f"{qn('blob_id')}) VALUES " + ", ".join(["(%s, %s, %s)"] * len(chunk))
            )
            cursor.execute(sql, [v for pk, sha in chunk for v in (deployment_id, pk, sha)])


def _move_production(app: App, deployment_id: str) -> None:
    """Point production at ``deployment_id``; every server's route table follows at its next
    request (the generation moves in the same statement as the pointer)."""
    App.objects.filter(pk=app.pk).update(
        production_id=deployment_id, route_generation=F("route_generation") + 1
    )


def _refused(app: App, ref: str, by: str, findings: list[dict[str, Any]]) -> PreflightFailed:
    details = " ".join(f"{f['name']}: {f['reason']}" for f in findings)
    receipt = PromotionReceipt(
        kind=PREFLIGHT_FAILED_KIND, ref=ref, findings=findings, created_by=by
    )
    receipt.message = PREFLIGHT_FAILED.format(
        count=len(findings), s="" if len(findings) == 1 else "s", details=details
    )
    return PreflightFailed(receipt.message, receipt=receipt)


def _plural(count: int) -> str:
    return "" if count == 1 else "s"


def promote(
    app: App | str,
    *,
    by: str | None = None,
    ref: str = states.DRAFT,
    note: str = "",
    expected: Mapping[Any, str] | None = None,
    dry_run: bool = False,
    actor: Actor | None = None,
) -> PromotionReceipt:
    """Ship the state ``ref`` names (default the draft) to production, or change nothing.

    Pre-flights every artifact of the state: its source is stored, route specs are valid, no
    two routes answer one method and path, and (``expected``: ``"collection/name"`` → the
    sha256 the person reviewed) nothing changed since it was reviewed. Any finding raises
    ``PreflightFailed`` listing all of them (a dry run returns them instead). A state equal to
    production answers the ``noop`` receipt. ``actor`` must may promote on the app (a token
    only when made ``--can-promote``).
    """
    app_obj = app_for(app, actor=actor, action=PROMOTE) if actor is not None else resolve_app(app)
    by = validate_optional_id(by or (actor.name if actor is not None else ""), "by")
    note = _clean_note(note)
    reviewed = normalise_expected(expected)
    ref = states.check_ref(ref)

    def attempt() -> PromotionReceipt:
        with transaction.atomic():
            locked = _lock_app(app_obj)
            state = states.resolve_state(locked, ref)
            previous = locked.production_id
            changed, unchanged = _diff(_held(previous), state)
            findings = _preflight(state, reviewed) + _unreviewed(changed, reviewed)
            if dry_run:
                return PromotionReceipt(
                    kind=DRY_RUN,
                    ref=ref,
                    previous_deployment=previous,
                    changes=changed,
                    unchanged=unchanged,
                    findings=findings,
                    message=NOOP_MESSAGE
                    if previous and not changed and not findings
                    else DRY_RUN_MESSAGE.format(changed=len(changed), s=_plural(len(changed))),
                )
            if findings:
                raise _refused(locked, ref, by, findings)
            if previous is not None and not changed:
                return PromotionReceipt(kind=NOOP, ref=ref, message=NOOP_MESSAGE)
            return _store(locked, state, previous, changed, unchanged, by=by, note=note)

    for attempt_no in range(_RETRIES):
        try:
            return attempt()
        except PreflightFailed as exc:
            AuditEvent.objects.create(
                app_id=app_obj.pk,
                kind="promotion_refused",
                by=by,
                change_set_ref=ref[:48],
                data=exc.receipt.as_dict(),
            )
            raise
        except IntegrityError:
            # A blob of the state was swept as its last point was pruned, between the read and
            # the commit: read the state again (it now says the source is gone).
            if attempt_no == _RETRIES - 1:
                raise
    raise AssertionError("unreachable")


def _store(
    app: App,
    state: states.AppState,
    previous: str | None,
    changed: list[dict[str, Any]],
    unchanged: int,
    *,
    by: str,
    note: str,
) -> PromotionReceipt:
    ms = ids.now_ms()
    now = ids.ms_to_datetime(ms)
    deployment_id = f"dp_{ids.base36(ms)}_{ids.random_suffix()}"
    present = [(e.artifact_id, e.sha256) for e in state.present if e.sha256]
    Deployment.objects.create(
        id=deployment_id,
        app=app,
        ref=state.ref,
        source_set=state.source_set,
        size=len(present),
        created_by=by,
        created_on=now,
        note=note,
    )
    _insert_entries(deployment_id, present)
    receipt = PromotionReceipt(
        kind=PROMOTION,
        ref=state.ref,
        deployment_id=deployment_id,
        previous_deployment=previous,
        changes=changed,
        unchanged=unchanged,
        created_by=by,
        created_on=iso_ms(now),
        note=note,
    )
    receipt.message = PROMOTED.format(
        ref=state.ref, deployment=deployment_id, changed=len(changed), s=_plural(len(changed))
    )
    DeploymentEvent.objects.create(
        app=app,
        kind=PROMOTION,
        from_deployment_id=previous,
        to_deployment_id=deployment_id,
        by=by,
        on=now,
        note=note,
        receipt=receipt.as_dict(),
        unchanged=unchanged,
    )
    _move_production(app, deployment_id)
    return receipt


def _earlier(app: App, current: str) -> tuple[str, int, int]:
    """The deployment production served before ``current`` was promoted (where its promotion
    came from), with that promotion's event and its unchanged count; ``Conflict`` in words
    when ``current`` was the app's first. Rolling back again goes further back, never forth."""
    found = (
        DeploymentEvent.objects.filter(app=app, kind=PROMOTION, to_deployment_id=current)
        .values_list("from_deployment_id", "pk", "unchanged")
        .first()
    )
    if found is None or found[0] is None:
        raise Conflict(NO_EARLIER_DEPLOYMENT.format(app=app.slug, current=current))
    return found[0], found[1], found[2]


def _history_changes(event_id: int, inverted: bool) -> list[dict[str, Any]]:
    """The changes of the move ``event_id`` (turned around when ``inverted``), following
    rollbacks that reuse an earlier move's list."""
    while True:
        receipt, changes_of, flip = (
            DeploymentEvent.objects.filter(pk=event_id)
            .values_list("receipt", "changes_of_id", "changes_inverted")
            .get()
        )
        if changes_of is None:
            changes = list(receipt.get("changed", []))
            break
        event_id, inverted = changes_of, inverted != flip
    if inverted:
        return [{**c, "from": c["to"], "to": c["from"]} for c in changes]
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


def _compare(app: App, current: str, target: str) -> tuple[list[dict[str, Any]], int]:
    """What moving production from ``current`` to ``target`` changes, from their entries, and
    how many artifacts stay the same (for a move production never made before)."""
    before, after = _held(current), _held(target)
    moved = [pk for pk in set(before) | set(after) if before.get(pk) != after.get(pk)]
    names = app.artifacts.filter(pk__in=moved).values_list("pk", "collection", "name")
    changes = [
        {"name": name, "collection": collection, "from": before.get(pk), "to": after.get(pk)}
        for pk, collection, name in names
    ]
    same = sum(1 for pk, blob in after.items() if before.get(pk) == blob)
    return sorted(changes, key=lambda c: (c["collection"], c["name"])), same


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
    app_obj = app_for(app, actor=actor, action=PROMOTE) if actor is not None else resolve_app(app)
    by = validate_optional_id(by or (actor.name if actor is not None else ""), "by")
    note = _clean_note(note)
    if to is not None and (not isinstance(to, str) or not to.startswith("dp_")):
        raise NotFound(DEPLOYMENT_NOT_FOUND.format(app=app_obj.slug, id=str(to)[:80]))
    with transaction.atomic():
        locked = _lock_app(app_obj)
        current = locked.production_id
        if current is None:
            raise Conflict(NO_PRODUCTION_TO_ROLL_BACK.format(app=locked.slug))
        changes: list[dict[str, Any]] | None = None
        if to is None:
            target, event_id, unchanged = _earlier(locked, current)
            changes_of: tuple[int, bool] | None = (event_id, True)
        else:
            target = to
            if not Deployment.objects.filter(pk=target, app=locked).exists():
                raise NotFound(DEPLOYMENT_NOT_FOUND.format(app=locked.slug, id=target))
            if target == current:
                return PromotionReceipt(kind=NOOP, ref=target, message=NOOP_MESSAGE)
            move = _move_between(locked, current, target)
            if move is not None:
                changes_of, unchanged = (move[0], move[1]), move[2]
            else:
                changes_of = None
                changes, unchanged = _compare(locked, current, target)
        ms = ids.now_ms()
        now = ids.ms_to_datetime(ms)
        receipt = PromotionReceipt(
            kind=ROLLBACK,
            ref=target,
            deployment_id=target,
            previous_deployment=current,
            changes=changes,
            unchanged=unchanged,
            created_by=by,
            created_on=iso_ms(now),
            note=note,
            changes_of=changes_of,
        )
        receipt.message = ROLLED_BACK.format(previous=current, deployment=target)
        stored = receipt.as_dict(with_changes=changes is not None)
        DeploymentEvent.objects.create(
            app=locked,
            kind=ROLLBACK,
            from_deployment_id=current,
            to_deployment_id=target,
            by=by,
            on=now,
            note=note,
            receipt=stored,
            unchanged=unchanged,
            changes_of_id=changes_of[0] if changes_of else None,
            changes_inverted=changes_of[1] if changes_of else False,
        )
        _move_production(locked, target)
        return receipt


def event_receipt(event: DeploymentEvent) -> dict[str, Any]:
    """The receipt of a promotion or rollback in the history, with what it changed."""
    receipt = dict(event.receipt)
    if "changed" not in receipt:
        receipt["changed"] = (
            _history_changes(event.changes_of_id, event.changes_inverted)
            if event.changes_of_id
            else []
        )
        receipt = {key: receipt[key] for key in _RECEIPT_KEYS if key in receipt}
    return receipt


def production_notice(app: App | str) -> str:
    """The words a restore, revert or write of the app shows beside its receipt: that it
    changed the draft and production still serves its deployment ("" without production)."""
    current = states.production_id(resolve_app(app))
    return PRODUCTION_STILL_SERVES.format(deployment=current) if current else ""


def deployments(app: App | str) -> list[Deployment]:
    """The app's deployments, newest first."""
    return list(Deployment.objects.filter(app=resolve_app(app)).order_by("-created_on", "-id"))


def deployment_history(app: App | str) -> list[DeploymentEvent]:
    """Every promotion and rollback of the app's production, newest first."""
    return list(DeploymentEvent.objects.filter(app=resolve_app(app)).order_by("-on", "-id"))
