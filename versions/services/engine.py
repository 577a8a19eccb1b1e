"""One engine puts states back or ships them: the executor every restore, promotion and
rollback runs on (docs/architecture.md).

Restore all, Restore (a point), Restore to release and Revert this set are each a *plan*
(:class:`Plan`): it looks its subject up and says, per artifact, which state it goes to
(:class:`RestoreTarget`: "this artifact goes to this sha256"). The executor, :func:`execute`,
does everything else, once, whatever the plan:

1. looks the subject up (the plan's ``lookup``) and checks the actor on its app;
2. in one transaction: locks the artifacts (one query, primary-key order), asks the plan for
   its targets, and pre-flights all of them before the first write — the rules of
   :data:`TARGET_RULES` per artifact (the target is stored and not pruned, it did not drift
   from what the person reviewed) and of :data:`PLAN_RULES` over the whole plan (routes), plus
   any rules the plan adds;
3. writes behind counter-points, in bulk (one restore set, one batch of counter-points, one
   re-pointing statement batch), then runs :func:`after_write` in the same transaction;
4. answers a typed receipt (:mod:`versions.services.receipts`); a refusal is kept in the app's
   audit trail after the transaction rolled back.

Promote and Roll back production are plans too (:class:`MovePlan`): they say where the
production pointer moves ("this pointer moves here", :class:`Move`). The same executor looks
the app up, checks the actor, locks the app row once, runs the plan's pre-flight rules, stores
the deployment a promotion ships, records the move in the history and moves the pointer.
Safe promotion's steps (docs/architecture.md#safe-promotion) are move plans too: a rollout's
start, Advance, Complete rollout, Abort rollout and the watch's automatic rollback say which
pointers they set (``Move.pointers``: the candidate and its share, or production) and what
follows in the same transaction (``Move.then``: a watch begins or ends); checks and a freeze
are their pre-flight rules.

A restore *re-points*: artifacts move to blobs that are already stored and counter-points
reference the blobs they replace; no source bytes are copied or re-read, except where a route
spec must be validated or a line count cannot be derived from the restored point.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol, TypeVar

from django.db import IntegrityError, connection, transaction
from django.db.models import F

from versions import conf, ids, rawsql, terms
from versions.diffing import count_line_changes
from versions.errors import InvalidInput, NotFound, PreflightFailed
from versions.messages import (
    APP_NOT_FOUND,
    NOOP_MESSAGE,
)
from versions.models import (
    API_ROUTE,
    App,
    Artifact,
    Blob,
    ChangeSet,
    Deployment,
    DeploymentEntry,
    DeploymentEvent,
    RestorePoint,
    blob_key,
)
from versions.services import _restore_sql, _sql, locks, retention, routes, webhooks
from versions.services._store import repoint_many
from versions.services.access import (
    Actor,
    principal,
)
from versions.services.audit import Command, record
from versions.services.receipts import (
    DRY_RUN as DRY_RUN_KIND,
)
from versions.services.receipts import (
    NOOP,
    Change,
    Finding,
    LaterChange,
    LaterSet,
    PlannedItem,
    PromotionReceipt,
    RestoredItem,
    RestoreReceipt,
)
from versions.services.receipts import (
    ROLLBACK as ROLLBACK_KIND,
)
from versions.services.validation import (
    validate_collection,
    validate_name,
    validate_optional_id,
)
from versions.terms import (
    PREFLIGHT_FAILED as PREFLIGHT_FAILED_KIND,
)
from versions.terms import (
    RESTORE,
)

PREFLIGHT_FAILED = "Nothing was written: the pre-flight check found {count} problem{s}. {details}"
RESTORED = "Restored {written} artifact{s} from {source}; {skipped} already matched."
DRY_RUN = "A restore would write {written} artifact{s}; {skipped} already match."
EXPECTED_NOT_MAPPING = (
    "expected must map “collection/name” to the sha256 you reviewed as now, "
    'e.g. {"pltf_page/index": "<sha256>"}.'
)
EXPECTED_BAD_KEY = (
    "expected has a key “{key}” that is not of the form “collection/name” (a known collection "
    "and an artifact name), so it can name no artifact."
)
EXPECTED_BAD_VALUE = 'expected[“{key}”] must be a sha256 in hex ("" for absent).'
_HEX = "0123456789abcdefABCDEF"

# Pre-flight findings, one reason in words per failing artifact.
FINDING_NOT_STORED = (
    "Its source before this change was {size:,} bytes, over the {cap:,}-byte limit for stored "
    "sources, so it was not kept and cannot be restored."
)
FINDING_PRUNED = (
    "Its restore point from this set was pruned by retention (only the newest {keep} "
    "unpinned points of an app are kept), so its state before this set is gone."
)
FINDING_GONE = "The artifact no longer exists in this app, so there is nothing to restore onto."
FINDING_AMBIGUOUS = (
    "Restoring it would make two live routes answer {key}: it and “{other}”. "
    "Change or restore the other route first."
)
FINDING_BAD_ROUTE = "The route-save path does not accept its stored route spec: {detail}"
FINDING_DRIFT = (
    "It changed since you reviewed it: you reviewed {expected}, it is now {current}. "
    "Review the change again before restoring."
)
ALREADY_MATCHED = "already matched"

# The tool recorded on counter-points.
RESTORE_TOOL = "versions:restore"


def iso_ms(moment: datetime) -> str:
    """``2026-09-05T17:31:54.724Z``: UTC, milliseconds, Z."""
    moment = moment.astimezone(UTC)
    return f"{moment:%Y-%m-%dT%H:%M:%S}.{moment.microsecond // 1000:03d}Z"


# --------------------------------------------------------------------------------------------
# What a plan says: per artifact, the state it goes to
# --------------------------------------------------------------------------------------------


# Not frozen: a Restore all builds one target per artifact, and a frozen dataclass sets each
# field through object.__setattr__ (a few µs a target, a measured share of a restore of 100).
# Nothing changes a target once built: ``replace`` makes a new one.
@dataclass(slots=True)
class RestoreTarget:
    """One artifact and the state a restore returns it to.

    ``sha256`` is the target's hash ("" = absence: the artifact becomes a tombstone; None =
    unknown, e.g. its point was pruned). ``blob_id`` is the stored blob of that state (None for
    absence, or when the state is not available, in which case ``unavailable`` says why in
    words). ``point_*`` describe the restore point the state comes from, when there is one: its
    id goes on the receipt, and its line counts give the counter-point's counts for free when
    the artifact still holds that point's result. ``since`` is the moment after which other
    sets' writes to the artifact are later work this restore takes away (a dry run names them).
    """

    artifact_id: int
    sha256: str | None
    blob_id: str | None
    point_id: str | None = None
    size: int = 0
    unavailable: str | None = None
    point_new_sha256: str | None = None
    point_lines_added: int = 0
    point_lines_removed: int = 0
    # A state that is not stored yet (a revert's merge result): its source, which the engine
    # stores as a blob (keyed by ``sha256``) just before re-pointing, and its (added, removed)
    # line counts from the live source, already known to whoever computed it.
    text: str | None = None
    lines: tuple[int, int] | None = None
    since: Any = None  # a datetime, or the database's raw value of one (read when needed)
    # The target blob's length in characters, when the query that found the target read it
    # (with ``size`` then the blob's own): the write needs no second read of the blobs.
    chars: int | None = None

    @property
    def absent(self) -> bool:
        return self.sha256 == ""

    @property
    def sha(self) -> str:
        """The known target hash ("" for absence); only for targets that passed pre-flight."""
        return self.sha256 or ""


def target_for_point(
    *,
    artifact_id: int,
    point_id: str,
    previous_existed: bool,
    previous_blob_id: str | None,
    previous_sha256: str,
    previous_size: int,
    new_sha256: str,
    lines_added: int,
    lines_removed: int,
    since: Any = None,
) -> RestoreTarget:
    """The target "state before this point" of a restore point's fields."""
    if not previous_existed:
        return RestoreTarget(
            artifact_id, "", None, point_id, 0, None, new_sha256, lines_added, lines_removed,
            since=since,
        )  # fmt: skip
    unavailable = None
    if previous_blob_id is None:
        unavailable = FINDING_NOT_STORED.format(size=previous_size, cap=conf.max_stored_bytes())
    return RestoreTarget(
        artifact_id, previous_sha256, previous_blob_id, point_id, previous_size, unavailable,
        new_sha256, lines_added, lines_removed, since=since,
    )  # fmt: skip


def pruned_points(entries: Iterable[Mapping[str, Any]]) -> dict[int, str]:
    """{artifact id: its oldest pruned point} of a set's ``pruned`` list. Retention prunes a
    set's oldest points first, so an artifact that lost any point of the set lost its state
    before the set (and around it)."""
    pruned: dict[int, str] = {}
    for entry in entries:
        artifact_id, point_id = entry.get("artifactId"), str(entry.get("pointId"))
        if isinstance(artifact_id, int) and (
            artifact_id not in pruned or point_id < pruned[artifact_id]
        ):
            pruned[artifact_id] = point_id
    return pruned


def refused_target(artifact_id: int, point_id: str | None, reason: str | None) -> RestoreTarget:
    """A target the pre-flight refuses with ``reason`` (None: the artifact is gone)."""
    return RestoreTarget(artifact_id, None, None, point_id, unavailable=reason)


# --------------------------------------------------------------------------------------------
# The live artifacts, locked once
# --------------------------------------------------------------------------------------------


@dataclass(slots=True)
class LiveArtifact:
    """The live state of an artifact row, as locked: no source, no model instance."""

    pk: int
    app_id: int
    collection: str
    name: str
    blob_id: str | None
    sha256: str
    size: int
    deleted: bool
    route_key: str | None
    updated: Any  # updated_on as the database returned it (read only when needed)

    @property
    def updated_on(self) -> datetime:
        return _restore_sql.read_moment(self.updated)

    def as_model(self) -> Artifact:
        return Artifact(
            id=self.pk,
            app_id=self.app_id,
            collection=self.collection,
            name=self.name,
            blob_id=self.blob_id,
            sha256=self.sha256,
            size=self.size,
            deleted=self.deleted,
            route_key=self.route_key,
            updated_on=self.updated_on,
        )


def lock_artifacts(artifact_ids: Iterable[int], *, lock: bool) -> dict[int, LiveArtifact]:
    """The artifact rows, locked in primary-key order in one query (no source bytes loaded).

    One consistent lock order makes concurrent restores of overlapping sets queue, never
    deadlock; a second Restore all of the same set then sees the first one's result.
    """
    pks = sorted(set(artifact_ids))
    if not pks:
        return {}
    return {
        pk: LiveArtifact(
            pk, app_id, collection, name, blob_id, sha, size, bool(deleted), route_key, updated
        )
        for pk, app_id, collection, name, blob_id, sha, size, deleted, route_key, updated in (
            _restore_sql.lock_artifacts(pks, lock=lock)
        )
    }  # fmt: skip


class Locker:
    """The executor's one lock: the first call locks the artifacts asked for; a later call
    only reads rows not locked yet (none, for every plan here). A plan that must read under
    the lock (Revert this set merges the live sources) calls it itself."""

    def __init__(self, *, lock: bool) -> None:
        self.lock = lock
        self.rows: dict[int, LiveArtifact] = {}
        self._asked: set[int] = set()

    def __call__(self, artifact_ids: Iterable[int]) -> dict[int, LiveArtifact]:
        wanted = set(artifact_ids)
        missing = wanted - self._asked
        if missing:
            self.rows.update(lock_artifacts(missing, lock=self.lock))
            self._asked |= missing
        return {pk: self.rows[pk] for pk in wanted if pk in self.rows}


# --------------------------------------------------------------------------------------------
# Reviewed hashes ("expected")
# --------------------------------------------------------------------------------------------


def _expected_key(key: object) -> tuple[str, str]:
    """``(collection, name)`` of an ``expected`` key: a known collection and a name artifacts
    may have, else a key that can name no artifact, refused in words."""
    parts: tuple[object, ...] = ()
    if isinstance(key, tuple) and len(key) == 2:
        parts = key
    elif isinstance(key, str) and "/" in key:
        parts = tuple(key.split("/", 1))
    try:
        collection, name = parts
        return validate_collection(collection), validate_name(name)
    except (ValueError, InvalidInput):
        raise InvalidInput(EXPECTED_BAD_KEY.format(key=key), field="expected") from None


def checked_sha(value: object, key: object) -> str:
    """A reviewed sha256 (lower case; "" = absent), or ``InvalidInput`` in words."""
    if not isinstance(value, str) or len(value) > 64 or value.strip(_HEX):
        raise InvalidInput(EXPECTED_BAD_VALUE.format(key=key), field="expected")
    # Hashes are compared case-insensitively, as a write's expected_sha256 is.
    return value.lower()


def normalise_expected(expected: object) -> dict[tuple[str, str], str] | None:
    """``expected`` as {(collection, name): sha256}.

    Keys are ``"collection/name"`` (names never contain "/") or ``(collection, name)`` tuples;
    values the sha256 the person reviewed as "now", ``""`` for an absent artifact.
    """
    if expected is None:
        return None
    if not isinstance(expected, Mapping):
        raise InvalidInput(EXPECTED_NOT_MAPPING, field="expected")
    return {_expected_key(key): checked_sha(value, key) for key, value in expected.items()}


def _short(sha: str) -> str:
    return sha[:12] if sha else "“absent”"


# --------------------------------------------------------------------------------------------
# Plans
# --------------------------------------------------------------------------------------------


@dataclass
class Subject:
    """What a plan acts on, looked up once: the owner app, the id that goes on the receipt as
    ``restoredFromSet``, and whatever the plan needs to compute its targets (``data``).
    ``emptied``: retention pruned every point the subject had, so nothing of it can be
    restored — a dry run says so exactly as the restore would (the same refusal)."""

    app: App
    ref: str
    data: Any = None
    emptied: bool = False
    # Why the subject cannot be acted on at all, told once the caller may see it.
    refusal: Exception | None = None


@dataclass
class Request:
    """What the caller asked, as the executor reads it."""

    by: str
    actor: Actor | None
    dry_run: bool
    expected: dict[tuple[str, str], str] | None
    addressed: App | None = None  # the app the caller named: a subject of another is missing


class Plan(Protocol):
    """A restore as a plan: the executor runs it (see the module's docstring)."""

    #: Put on the receipt: ``"scope"`` (Restore to release), ``"revertedSet"`` (a revert) and
    #: ``"restoredPoint"`` (Restore of one point).
    scope: str | None
    reverts: bool

    @property
    def restored_point(self) -> str | None: ...

    #: The sentence of a restore that had nothing to write.
    noop_message: str
    #: Extra pre-flight rules of this plan, run after :data:`TARGET_RULES`.
    rules: tuple[TargetRule, ...]
    #: What the actor must may do, the audit trail's action once it is done, and the audit
    #: kind of a refused pre-flight.
    action: str
    audit_action: str
    audit_kind: str

    def lookup(self, request: Request) -> tuple[Subject, NotFound | None]:
        """The subject (``NotFound`` when there is none), and what a caller who may not see it
        is told (None: the app's own ``NotFound``)."""
        ...

    def targets(self, subject: Subject, lock: Locker) -> list[RestoreTarget]:
        """Per artifact, the state it goes to, in the order the person reviews them. Runs in
        the transaction; ``lock`` locks artifacts (the executor locks the targets' anyway)."""
        ...


class RestorePlan:
    """What the plans that put artifacts back share, as class defaults a plan overrides (its
    own fields are only what the request names: a set, a point, an app)."""

    scope: str | None = None
    reverts: bool = False
    restored_point: str | None = None
    noop_message: str = NOOP_MESSAGE
    rules: tuple[TargetRule, ...] = ()
    action: str = RESTORE
    audit_action: str = terms.RESTORED
    audit_kind: str = PREFLIGHT_FAILED_KIND


@dataclass(slots=True)
class Check:
    """One target against its live artifact, as a pre-flight rule sees it."""

    target: RestoreTarget
    live: LiveArtifact
    request: Request


# A pre-flight rule: the reason in words the target cannot be written, or None.
TargetRule = Callable[[Check], str | None]
# A rule over the whole plan: findings it adds, given every (target, live) that passed so far.
PlanRule = Callable[[App, list[tuple[RestoreTarget, LiveArtifact]], list[Finding]], Any]


def rule_available(check: Check) -> str | None:
    """The target state is stored (not over the cap, not pruned), and a plan could compute it."""
    return check.target.unavailable


def rule_not_drifted(check: Check) -> str | None:
    """With ``expected``: the artifact has not changed since the person reviewed it."""
    expected = check.request.expected
    if expected is None:
        return None
    live = check.live
    reviewed = expected.get((live.collection, live.name))
    if reviewed is None or reviewed == live.sha256:
        return None
    return FINDING_DRIFT.format(expected=_short(reviewed), current=_short(live.sha256))


TARGET_RULES: tuple[TargetRule, ...] = (rule_available, rule_not_drifted)


def lock_rules(app: App, request: Request) -> tuple[TargetRule, ...]:
    """An agent's restore does not write a locked artifact (docs/architecture.md#safe-promotion):
    each one it would write is a finding. A person's restore still puts it back."""
    locked = locks.locked_findings(app, request.actor)
    if not locked:
        return ()

    def rule_unlocked(check: Check) -> str | None:
        return locked.get((check.live.collection, check.live.name))

    return (rule_unlocked,)


def _finding(artifact: LiveArtifact | None, target: RestoreTarget, reason: str) -> Finding:
    return Finding(
        artifact.name if artifact else "",
        artifact.collection if artifact else "",
        reason,
        target.point_id,
    )


def _texts(shas: Iterable[str]) -> dict[str, str]:
    """Texts of the given blobs, one query; only for routes to validate and uncounted lines."""
    wanted = {s for s in shas if s}
    if not wanted:
        return {}
    return {blob.sha256: blob.text for blob in Blob.objects.filter(sha256__in=wanted)}


def rule_routes(
    app: App, plan: list[tuple[RestoreTarget, LiveArtifact]], findings: list[Finding]
) -> dict[int, tuple[str, str]]:
    """The routes a restore writes: the spec parses and, in the state after the whole restore,
    no two live routes answer the same method and path.

    Returns {artifact pk: (route source, route key)} for the routes that will hold a spec.
    """
    writes = [(t, a) for t, a in plan if a.collection == API_ROUTE]
    if not writes:
        return {}
    texts = _texts(t.sha for t, _ in writes if not t.absent)
    accepted: dict[int, tuple[str, str]] = {}
    for target, artifact in writes:
        if target.absent:
            continue
        source = target.text if target.text is not None else texts.get(target.sha, "")
        try:
            spec = routes.parse_route_spec(source)
        except InvalidInput as exc:
            findings.append(_finding(artifact, target, FINDING_BAD_ROUTE.format(detail=exc)))
            continue
        accepted[artifact.pk] = (source, spec.key)
    # The other live routes keep their keys; the written ones take their targets' keys.
    written_pks = [a.pk for _, a in writes]
    taken: dict[str, str] = {
        key: name
        for key, name in Artifact.objects.live()
        .filter(app=app, route_key__isnull=False)
        .exclude(pk__in=written_pks)
        .values_list("route_key", "name")
        if key
    }
    for target, artifact in writes:
        if artifact.pk not in accepted:
            continue
        key = accepted[artifact.pk][1]
        other = taken.get(key)
        if other is not None:
            findings.append(
                _finding(artifact, target, FINDING_AMBIGUOUS.format(key=key, other=other))
            )
        else:
            taken[key] = artifact.name
    return accepted


# The rules over the whole plan; the first (routes) also hands the write the accepted sources.
PLAN_RULES: tuple[PlanRule, ...] = (rule_routes,)


# --------------------------------------------------------------------------------------------
# The executor
# --------------------------------------------------------------------------------------------


def requested(
    *,
    by: str | None,
    actor: Actor | None,
    dry_run: bool,
    expected: object,
    addressed: App | None = None,
) -> Request:
    """The request, validated: who is recorded (``by``, else the actor's name) and the
    reviewed hashes."""
    name = by if by else (actor.name if actor is not None else "")
    return Request(
        by=validate_optional_id(name, "by"),
        actor=actor,
        dry_run=dry_run,
        expected=normalise_expected(expected),
        addressed=addressed,
    )


def execute(plan: Plan | MovePlan, request: Request) -> Any:
    """Run ``plan``: look up once, check the actor once, then in one transaction lock once,
    pre-flight all, write all (or nothing) — artifacts behind counter-points, or the
    production pointer. Raises ``NotFound``, ``Forbidden`` or ``PreflightFailed`` (nothing
    written; kept in the audit trail)."""
    subject, missing = plan.lookup(request)
    app = subject.app
    if request.addressed is not None and request.addressed.pk != app.pk:
        raise missing or NotFound(APP_NOT_FOUND.format(slug=request.addressed.slug))
    if request.actor is not None:
        request.actor.check(plan.action, app, missing=missing)
    if subject.refusal is not None:
        raise subject.refusal
    run = _move if isinstance(plan, MovePlan) else _run

    def finish(receipt: Any) -> None:
        """The outcome of a plan that ran (not a dry run), in its transaction (both or
        neither): in the audit trail and as its event. The transaction's last statements."""
        _audit(plan.audit_action, app, subject, request, receipt)
        webhooks.engine_outcome(plan.audit_action, app, subject.ref, request.by, receipt)

    for attempt in range(_RETRIES):
        try:
            with transaction.atomic():
                return run(plan, subject, request, finish)  # type: ignore[arg-type]
        except PreflightFailed as exc:
            if not request.dry_run:  # after the rollback, on purpose: the refusal is kept
                _audit(plan.audit_kind, app, subject, request, exc.receipt)
            raise
        except IntegrityError:
            # A blob the plan reads was swept as its last point was pruned, between the read
            # and the commit: plan again (the state now says the source is gone).
            if attempt == _RETRIES - 1 or not isinstance(plan, MovePlan):
                raise
    raise AssertionError("unreachable")


_RETRIES = 3


def _audit(
    action: str,
    app: App,
    subject: Subject,
    request: Request,
    receipt: RestoreReceipt | PromotionReceipt,
) -> None:
    """The plan's outcome in the audit trail: who, what it acted on, what it made; a refusal's
    whole receipt, a done action's outcome in words."""
    made = receipt.set_id if isinstance(receipt, RestoreReceipt) else receipt.deployment_id
    actor = request.actor if request.actor is not None else Command(request.by or "command")
    details: dict[str, Any]
    if receipt.kind == PREFLIGHT_FAILED_KIND:  # kept nowhere else: the whole refused receipt
        details = receipt.as_dict()
    else:  # the receipt itself stays with the restore set or the deployment
        details = {"outcome": receipt.kind, "message": receipt.message}
    record(
        action,
        actor=actor,
        app=app,
        targets=[ref for ref in (subject.ref, made) if ref],
        reason=getattr(receipt, "note", "") or "",
        details=details,
    )


# The outcome of a plan that ran, the last statements of its transaction (execute's finish).
Finish = Callable[[Any], None]
_Receipt = TypeVar("_Receipt", RestoreReceipt, PromotionReceipt)


def _finished(receipt: _Receipt, finish: Finish) -> _Receipt:
    """``finish`` ``receipt``: on PostgreSQL its statements travel with the COMMIT, one round
    trip (a top-level transaction; inside a larger one, they are sent together)."""
    with rawsql.batch(commit=True):
        finish(receipt)
    return receipt


def _run(plan: Plan, subject: Subject, request: Request, finish: Finish) -> RestoreReceipt:
    app = subject.app
    lock = Locker(lock=not request.dry_run)
    targets = plan.targets(subject, lock)
    live = lock(t.artifact_id for t in targets)
    rules = TARGET_RULES + tuple(plan.rules) + lock_rules(app, request)
    findings: list[Finding] = []
    skipped: list[Finding] = []
    writes: list[tuple[RestoreTarget, LiveArtifact]] = []
    for target in targets:  # the plan's order, as the person reviewed it (locks: id order)
        artifact = live.get(target.artifact_id)
        if artifact is None or artifact.app_id != app.pk:
            findings.append(_finding(None, target, FINDING_GONE))
            continue
        # Strict byte comparison: blobs are keyed by the sha256 of their bytes, so the same
        # hash is the same stored row, hence the same bytes (even when the target's own copy
        # was not kept: the live blob is that very content).
        if target.sha256 is not None and (
            artifact.deleted if target.absent else artifact.blob_id == target.sha256
        ):
            skipped.append(_finding(artifact, target, ALREADY_MATCHED))
            continue
        check = Check(target, artifact, request)
        for rule in rules:
            reason = rule(check)
            if reason is not None:
                findings.append(_finding(artifact, target, reason))
                break
        else:
            writes.append((target, artifact))
    route_sources: dict[int, tuple[str, str]] = {}
    for plan_rule in PLAN_RULES:
        accepted = plan_rule(app, writes, findings)
        if plan_rule is rule_routes:
            route_sources = accepted

    base = RestoreReceipt(
        kind=DRY_RUN_KIND,
        restored_from=subject.ref,
        skipped=skipped,
        findings=findings,
        created_by=request.by,
        scope=plan.scope,
        reverted_set=subject.ref if plan.reverts else None,
        restored_point=plan.restored_point,
    )
    if findings and (not request.dry_run or subject.emptied):
        # A subject retention emptied is refused alike by a dry run: nothing of it is left.
        base.kind = PREFLIGHT_FAILED_KIND
        details = " ".join(f"{f.name or f.point_id}: {f.reason}" for f in findings)
        base.message = PREFLIGHT_FAILED.format(
            count=len(findings), s="" if len(findings) == 1 else "s", details=details
        )
        raise PreflightFailed(base.message, receipt=base)
    if request.dry_run:
        return _dry_run(base, writes, plan.noop_message)
    if not writes:
        base.kind, base.message = NOOP, plan.noop_message
        return _finished(base, finish)
    receipt = _write(
        app, writes, route_sources, base, written_by=principal(request.actor, base.created_by)
    )
    after_write(app, subject, receipt)
    return _finished(receipt, finish)


def after_write(app: App, subject: Subject, receipt: RestoreReceipt) -> None:
    """What follows a restore's writes, in the same transaction: retention (it never prunes the
    new restore set, nor the set restored), and the set acted on closes: later writes of its
    run or turn start a new set, so a second Restore all does not take them back with it."""
    assert receipt.set_id is not None
    _restore_sql.close_set(app.pk, subject.ref)
    retention.prune_after_restore(app, receipt.set_id, subject.ref)


def _dry_run(
    receipt: RestoreReceipt,
    writes: list[tuple[RestoreTarget, LiveArtifact]],
    noop_message: str,
) -> RestoreReceipt:
    """What a restore would write, and the later work it would take away: only that of the
    artifacts it writes (one already matching loses nothing)."""
    counts = _line_counts(writes)
    meta = _blob_meta(t.sha for t, _ in writes if t.chars is None)
    receipt.items = [
        PlannedItem(
            artifact.name,
            artifact.collection,
            target.point_id,
            counts[artifact.pk][0],
            counts[artifact.pk][1],
            _chars(target, meta),
            "delete" if target.absent else ("recreate" if artifact.deleted else "write"),
            target.sha,
        )
        for target, artifact in writes
    ]
    if not writes and not receipt.findings:
        receipt.message = noop_message
    else:
        receipt.message = DRY_RUN.format(
            written=len(writes), s="" if len(writes) == 1 else "s", skipped=len(receipt.skipped)
        )
    # An artifact that still holds exactly what the restored point wrote loses nothing of later
    # sets: whatever they wrote there is gone already (reverted, restored or written back), so
    # they are not named as work this restore undoes.
    since = {
        t.artifact_id: _restore_sql.read_moment(t.since)
        for t, live in writes
        if t.since is not None and not _holds_point_result(t, live)
    }
    receipt.later_changes, receipt.later_sets = later_changes(
        since, exclude_set=receipt.reverted_set or receipt.restored_from
    )
    return receipt


def _blob_meta(shas: Iterable[str]) -> dict[str, tuple[int, int]]:
    """{sha256: (bytes, chars)} of the given blobs, one query, without their data."""
    wanted = sorted({s for s in shas if s})
    if not wanted:
        return {}
    if connection.vendor == "sqlite":
        # SQLite would pick the primary-key index and then walk each row's overflow pages
        # (the bytes) to reach size and chars; the covering index answers from the index alone.
        qn = connection.ops.quote_name
        rows = []
        with connection.cursor() as cursor:
            for start in range(0, len(wanted), 900):
                chunk = wanted[start : start + 900]
                sql = (
                    f"SELECT sha256, size, chars FROM {qn(Blob._meta.db_table)} "  # noqa: S608
                    f"INDEXED BY blob_meta WHERE sha256 IN ({', '.join(['%s'] * len(chunk))})"
                )
                cursor.execute(sql, chunk)
                rows.extend(cursor.fetchall())
    else:
        rows = list(Blob.objects.filter(sha256__in=wanted).values_list("sha256", "size", "chars"))
    return {sha: (size, chars) for sha, size, chars in rows}


def _chars(target: RestoreTarget, meta: Mapping[str, tuple[int, int]]) -> int:
    """The target's length in characters: its blob's, or its text's when not stored yet."""
    if target.text is not None:
        return len(target.text)
    if target.chars is not None:
        return target.chars
    return meta.get(target.sha, (0, 0))[1]


def _size(target: RestoreTarget, meta: Mapping[str, tuple[int, int]]) -> int:
    """The target blob's size in bytes: the blob's own (authoritative), else the target's; a
    target built without one (size 0) still re-points correctly."""
    if target.chars is not None:
        return target.size
    return meta.get(target.sha, (target.size, 0))[0]


def _holds_point_result(target: RestoreTarget, live: LiveArtifact) -> bool:
    """The artifact holds exactly what the target's restore point wrote ("" = deleted)."""
    return target.point_new_sha256 is not None and live.sha256 == target.point_new_sha256


def _line_counts(
    plan: list[tuple[RestoreTarget, LiveArtifact]],
) -> dict[int, tuple[int, int]]:
    """(added, removed) going from each live artifact to its target.

    When the artifact still holds exactly what the restored point wrote, the counts are that
    point's counts inverted; only otherwise are the two texts read and counted.
    """
    counts: dict[int, tuple[int, int]] = {}
    uncounted: list[tuple[RestoreTarget, LiveArtifact]] = []
    for target, live in plan:
        if target.lines is not None:
            counts[live.pk] = target.lines
        elif _holds_point_result(target, live):
            counts[live.pk] = (target.point_lines_removed, target.point_lines_added)
        else:
            uncounted.append((target, live))
    if uncounted:
        texts = _texts([t.sha for t, _ in uncounted] + [a.sha256 for _, a in uncounted])
        for target, live in uncounted:
            old = texts.get(live.sha256, "") if not live.deleted else ""
            new = texts.get(target.sha, "") if not target.absent else ""
            counts[live.pk] = count_line_changes(old, new)
    return counts


def _insert_counter_points(points: list[tuple[Any, ...]]) -> None:
    """Store the counter-points of a restore: rows of ``_restore_sql.COUNTER_COLUMNS`` values
    (``created_on`` adapted for the database); other fields take their defaults.

    The values are plain text, numbers, booleans and one moment, so they are passed as they
    are instead of through the ORM's per-value preparation (which would cost more than the
    writes themselves).
    """
    _restore_sql.insert_counter_points(points)


def _write(
    app: App,
    plan: list[tuple[RestoreTarget, LiveArtifact]],
    route_sources: dict[int, tuple[str, str]],
    receipt: RestoreReceipt,
    *,
    written_by: str,
) -> RestoreReceipt:
    """The writes of a pre-flighted restore: set, counter-points, re-pointing. ``written_by``:
    the authenticated principal, recorded on every counter-point."""
    # One moment for the whole restore, strictly after every artifact's last write, so each
    # counter-point is its artifact's newest point.
    # The database's own values (datetimes, or SQLite's ISO text) sort as the moments do, so
    # only the latest is read.
    latest = _restore_sql.read_moment(max(artifact.updated for _, artifact in plan))
    ms = max(ids.now_ms(), ids.datetime_to_ms(latest) + 1)
    now = ids.ms_to_datetime(ms)
    set_id = ids.restore_set_id(ms)
    counts = _line_counts(plan)
    meta = _blob_meta(t.sha for t, _ in plan if t.chars is None)
    by = receipt.created_by

    points: list[tuple[Any, ...]] = []
    items: list[RestoredItem] = []
    stamp = f"rp_{ids.base36(ms)}_"
    moment = connection.ops.adapt_datetimefield_value(now)
    app_id = app.pk
    for (target, artifact), suffix in zip(
        plan, _restore_sql.random_suffixes(len(plan)), strict=True
    ):
        counter_id = stamp + suffix
        added, removed = counts[artifact.pk]
        # Counter-points are exempt from the size cap: the blob exists already.
        points.append(
            (
                counter_id, app_id, artifact.pk, artifact.blob_id, artifact.sha256,
                artifact.size if not artifact.deleted else 0, not artifact.deleted, target.sha,
                by, written_by, RESTORE_TOOL, moment, added, removed, set_id,
            )
        )  # fmt: skip
        items.append(
            RestoredItem(
                artifact.name,
                artifact.collection,
                target.point_id,
                counter_id,
                _chars(target, meta),
                target.sha,
            )
        )
    receipt.kind, receipt.set_id, receipt.items = RESTORE, set_id, items
    receipt.created_on = iso_ms(now)
    receipt.message = RESTORED.format(
        written=len(items),
        s="" if len(items) == 1 else "s",
        source=receipt.restored_from,
        skipped=len(receipt.skipped),
    )
    _restore_sql.insert_restore_set(
        set_id, app_id, now, by, receipt.restored_from, receipt.as_dict()
    )
    _insert_counter_points(points)
    for target, _ in plan:
        if target.text is not None:  # a merge result: stored now, inside the transaction
            _sql.insert_blob(target.text.encode(), target.sha, len(target.text), moment)

    repoint_many(
        [(a.pk, t.blob_id, _size(t, meta)) for t, a in plan if a.collection != API_ROUTE],
        by=by,
        now=now,
    )
    route_writes = [(t, a) for t, a in plan if a.collection == API_ROUTE]
    if route_writes:
        # Every written route gives up its key first, so routes that trade paths within one
        # restore (pre-flight checked the end state) can be saved in any order.
        Artifact.objects.filter(pk__in=[a.pk for _, a in route_writes]).update(route_key=None)
        for target, live in route_writes:
            live.route_key = None
            source = route_sources.get(live.pk, (None, None))[0]
            routes.save_route(
                live.as_model(),
                sha=target.blob_id,
                source=source,
                size=_size(target, meta),
                by=by,
                now=now,
            )
    return receipt


def later_changes(
    since: Mapping[int, datetime], *, exclude_set: str
) -> tuple[list[LaterChange], list[LaterSet]]:
    """The later work a restore to "before" overrides: for each artifact id in ``since``, the
    sets other than ``exclude_set`` with a point on it after its moment.

    Returns the artifacts with later sets (sets oldest first; artifacts without any are left
    out) and each of those sets once, oldest first, with its author and time — what a dialog
    needs to say "also undoes cs_… by <who>, 2 h later". Three queries at most.
    """
    if not since:
        return [], []
    rows = (
        RestorePoint.objects.filter(artifact_id__in=list(since), created_on__gt=min(since.values()))
        .exclude(change_set_id=exclude_set)
        .order_by("created_on", "id")
        .values_list("artifact_id", "change_set_id", "created_on")
    )
    per_artifact: dict[int, list[str]] = {}
    for artifact_id, set_id, created_on in rows:
        if created_on > since[artifact_id]:
            sets = per_artifact.setdefault(artifact_id, [])
            if set_id not in sets:
                sets.append(set_id)
    if not per_artifact:
        return [], []
    changes = [
        LaterChange(name, collection, tuple(per_artifact[pk]))
        for pk, collection, name in Artifact.objects.filter(pk__in=list(per_artifact))
        .order_by("collection", "name")
        .values_list("pk", "collection", "name")
    ]
    wanted = {set_id for sets in per_artifact.values() for set_id in sets}
    later_sets = [
        LaterSet(set_id, kind, name, created_by, iso_ms(created_on))
        for set_id, kind, name, created_by, created_on in ChangeSet.objects.filter(pk__in=wanted)
        .order_by("created_on", "id")
        .values_list("id", "kind", "name", "created_by", "created_on")
    ]
    return changes, later_sets


# --------------------------------------------------------------------------------------------
# Moving production: promote and roll back
# --------------------------------------------------------------------------------------------

PROMOTED = "Promoted {ref} to production as {deployment}: {changed} artifact{s} changed."
ROLLED_BACK = "Production rolled back from {previous} to {deployment}."
MOVE_NOOP_MESSAGE = "Production already serves this state — nothing was promoted."
MOVE_DRY_RUN = "A promotion would change {changed} artifact{s} in production."
MOVE_PREFLIGHT_FAILED = (
    "Nothing was promoted: the pre-flight check found {count} problem{s}. {details}"
)
# How many deployment entries one INSERT statement carries (3 parameters each).
_INSERT_CHUNK = 300


@dataclass
class Move:
    """Where a plan moves production: to ``to`` (an existing deployment), or to a new
    deployment of ``state`` (a promotion); what that changes, as the receipt says it."""

    kind: str  # receipts.PROMOTION or receipts.ROLLBACK
    ref: str
    previous: str | None
    to: str | None = None
    state: Any = None  # a refs.AppState: the state a promotion ships
    changes: list[Change] | None = None
    unchanged: int = 0
    load_changes: Callable[[], list[Change]] | None = None
    changes_of: tuple[int, bool] | None = None  # a rollback reusing an earlier move's list
    # Safe promotion (docs/architecture.md#safe-promotion): the checks the state passed (kept
    # on its deployment and receipt), the pointers the move sets (default: production), what
    # it says and what follows it in the same transaction (a watch begins).
    checks: list[Any] | None = None
    pointers: Callable[[str], dict[str, Any]] | None = None
    message: str = ""
    rollout: int | None = None
    cause: str = ""
    then: Callable[[str, datetime], None] | None = None
    nothing_to_do: bool | None = None

    @property
    def noop(self) -> bool:
        if self.nothing_to_do is not None:
            return self.nothing_to_do
        if self.kind == ROLLBACK_KIND:
            return self.to == self.previous
        return self.previous is not None and not self.changes


# A rule over a move: findings (artifact and reason in words) that refuse it.
MoveRule = Callable[[Move, Request], list[Finding]]


class MovePlan:
    """A move of production as a plan: subclasses say where it goes (``move``) and what to
    check first (``rules``); the executor locks, checks, stores and moves."""

    action: str
    audit_action: str
    audit_kind: str
    rules: tuple[MoveRule, ...] = ()
    note: str = ""

    def lookup(self, request: Request) -> tuple[Subject, NotFound | None]:
        raise NotImplementedError

    def move(self, subject: Subject, locked: App) -> Move:
        raise NotImplementedError


def _move(plan: MovePlan, subject: Subject, request: Request, finish: Finish) -> PromotionReceipt:
    # One lock: the app row, until the transaction ends — moves of one app's production queue.
    # A no-key lock, so agent writes (which only reference the app) never wait for it.
    # The transaction's first statement: on PostgreSQL its BEGIN travels with it.
    locked = rawsql.first_of(App.objects.select_for_update(no_key=True).filter(pk=subject.app.pk))
    if locked is None:  # deleted since it was looked up
        raise App.DoesNotExist("App matching query does not exist.")
    move = plan.move(subject, locked)
    findings = [finding for rule in plan.rules for finding in rule(move, request)]
    if request.dry_run:
        changed = move.changes or []
        return PromotionReceipt(
            kind=DRY_RUN_KIND,
            ref=move.ref,
            previous_deployment=move.previous,
            changes=changed,
            unchanged=move.unchanged,
            findings=findings,
            checks=move.checks,
            rollout=move.rollout,
            message=MOVE_NOOP_MESSAGE
            if move.noop and not findings
            else MOVE_DRY_RUN.format(changed=len(changed), s="" if len(changed) == 1 else "s"),
        )
    if findings:
        details = " ".join(f"{f.name}: {f.reason}" for f in findings)
        refused = PromotionReceipt(
            kind=PREFLIGHT_FAILED_KIND,
            ref=move.ref,
            findings=findings,
            created_by=request.by,
            checks=move.checks,
        )
        refused.message = MOVE_PREFLIGHT_FAILED.format(
            count=len(findings), s="" if len(findings) == 1 else "s", details=details
        )
        raise PreflightFailed(refused.message, receipt=refused)
    if move.noop:
        noop = PromotionReceipt(kind=NOOP, ref=move.ref, message=MOVE_NOOP_MESSAGE)
        return _finished(noop, finish)
    now = ids.ms_to_datetime(ids.now_ms())
    to = move.to or _store_deployment(
        locked, move.state, by=request.by, note=plan.note, now=now, checks=move.checks
    )
    receipt = PromotionReceipt(
        kind=move.kind,
        ref=to if move.kind == ROLLBACK_KIND else move.ref,
        deployment_id=to,
        previous_deployment=move.previous,
        changes=move.changes,
        unchanged=move.unchanged,
        created_by=request.by,
        created_on=iso_ms(now),
        note=plan.note,
        load_changes=move.load_changes,
        checks=move.checks,
        rollout=move.rollout,
        cause=move.cause,
    )
    if move.message:
        receipt.message = move.message.format(deployment=to, previous=move.previous)
    elif move.kind == ROLLBACK_KIND:
        receipt.message = ROLLED_BACK.format(previous=move.previous, deployment=to)
    else:
        count = len(receipt.changed)
        receipt.message = PROMOTED.format(
            ref=move.ref, deployment=to, changed=count, s="" if count == 1 else "s"
        )
    if move.then is not None:
        move.then(to, now)
    event = DeploymentEvent(
        app=locked,
        kind=move.kind,
        from_deployment_id=move.previous,
        to_deployment_id=to,
        by=request.by,
        on=now,
        note=plan.note,
        # A rollback reusing an earlier move's list is stored without it (read on demand).
        receipt=receipt.as_dict(with_changes=move.changes is not None),
        unchanged=move.unchanged,
        changes_of_id=move.changes_of[0] if move.changes_of else None,
        changes_inverted=move.changes_of[1] if move.changes_of else False,
    )
    pointers = move.pointers(to) if move.pointers is not None else {"production_id": to}
    # The move's last statements await no reply: on PostgreSQL they travel with the
    # outcome's and the COMMIT.
    with rawsql.batch(commit=True):
        rawsql.insert_rows(DeploymentEvent, [event])
        # Every server's route table follows at its next request: the generation moves in
        # the same statement as the pointer.
        App.objects.filter(pk=locked.pk).update(
            **pointers, route_generation=F("route_generation") + 1
        )
        finish(receipt)
    return receipt


def _store_deployment(
    locked: App, state: Any, *, by: str, note: str, now: datetime, checks: list[Any] | None = None
) -> str:
    """A new deployment of ``state``: per artifact, the blob of its source (no bytes copied),
    a few statements for any number of entries."""
    deployment_id = f"dp_{ids.base36(ids.datetime_to_ms(now))}_{ids.random_suffix()}"
    present = [(e.artifact_id, e.sha256) for e in state.present if e.sha256]
    Deployment.objects.create(
        id=deployment_id,
        app=locked,
        ref=state.ref,
        source_set=state.source_set,
        size=len(present),
        created_by=by,
        created_on=now,
        note=note,
        checks=[c.as_dict() for c in checks or []],
    )
    qn = connection.ops.quote_name
    table = qn(DeploymentEntry._meta.db_table)
    postgresql = connection.vendor == "postgresql"
    with connection.cursor() as cursor:
        if postgresql and present:
            # The key checks of the entries would lock these artifacts in the entries' order
            # (at the latest at COMMIT); a restore locks artifacts in id order. Taking the
            # checks' locks first, in id order too, lets the two queue and never deadlock.
            cursor.execute(
                f"SELECT 1 FROM {qn(Artifact._meta.db_table)} WHERE id = ANY(%s) "  # noqa: S608
                "ORDER BY id FOR KEY SHARE",
                [sorted(pk for pk, _ in present)],
            )
        for start in range(0, len(present), _INSERT_CHUNK):
            chunk = present[start : start + _INSERT_CHUNK]
            sql = (
                f"INSERT INTO {table} ({qn('deployment_id')}, {qn('artifact_id')}, "  # noqa: S608
                f"{qn('blob_id')}) VALUES " + ", ".join(["(%s, %s, %s)"] * len(chunk))
            )
            # Blob keys are stored as bytes on PostgreSQL.
            keys = [blob_key(sha) if postgresql else sha for _, sha in chunk]
            cursor.execute(
                sql,
                [
                    v
                    for (pk, _), key in zip(chunk, keys, strict=True)
                    for v in (deployment_id, pk, key)
                ],
            )
    return deployment_id
