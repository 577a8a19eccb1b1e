"""Receipts are types: what the engine did, would do or refused, as dataclasses, and the one
serializer that turns them into JSON (and a stored receipt back into its dataclass).

The engine (:mod:`versions.services.engine`) returns these types; the API, MCP and the stored
receipt of a restore set get their JSON from :func:`to_json` only, with the keys of
docs/api.md (``setId``, ``restoredFromSet``, ``pointId``, ``deploymentId``, …). The panel renders
the dataclasses; a stored receipt (JSON on the restore set) comes back through
:func:`read_receipt`, the one reader.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

# Receipt kinds of a restore.
RESTORE = "restore"
REVERT = "revert"  # the receipt kind of a restore set written by Revert this set
NOOP = "noop"
DRY_RUN = "dry_run"
PREFLIGHT_FAILED = "preflight_failed"
ERROR = "error"  # only the panel's: the request itself was refused (e.g. invalid input)
# Receipt kinds of a move of production.
PROMOTION = "promotion"
ROLLBACK = "rollback"


@dataclass(frozen=True, slots=True)
class Finding:
    """One artifact the pre-flight refused (or skipped: ``reason`` "already matched"), the
    reason in words. ``point_id`` is the restore point its target state comes from, if any."""

    name: str
    collection: str
    reason: str
    point_id: str | None = None


# Not frozen, like the engine's targets: a restore builds one per artifact it writes, and
# frozen fields are set one object.__setattr__ at a time. Nothing changes an item once built.
@dataclass(slots=True)
class RestoredItem:
    """One artifact a restore wrote: the point its state comes from, the counter-point that
    holds what it overwrote, its length in characters and its sha256 afterwards ("" = absent,
    None when read back from a stored receipt, which does not keep it)."""

    name: str
    collection: str
    point_id: str | None
    counter_point_id: str
    chars: int
    sha256: str | None = None


@dataclass(frozen=True, slots=True)
class PlannedItem:
    """One artifact a dry run would write: lines it adds and removes, its length afterwards,
    what happens (``write``, ``recreate`` or ``delete``) and its sha256 afterwards."""

    name: str
    collection: str
    point_id: str | None
    lines_added: int
    lines_removed: int
    chars: int
    action: str
    sha256: str | None = None


@dataclass(frozen=True, slots=True)
class LaterChange:
    """An artifact a restore to "before" would take away later work from: the later sets."""

    name: str
    collection: str
    sets: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class LaterSet:
    """A later change set whose work a restore would undo: who and when."""

    set_id: str
    kind: str
    name: str
    created_by: str
    created_on: str


@dataclass
class RestoreReceipt:
    """What a restore did (``restore``), did not need to do (``noop``), would do (``dry_run``),
    or refused to do (``preflight_failed``). Restore all, Restore, Restore to release and
    Revert this set all answer one. ``outcome`` is the kind as shown: ``revert`` for a restore
    written by Revert this set."""

    kind: str
    restored_from: str
    set_id: str | None = None
    items: list[Any] = field(default_factory=list)  # RestoredItem, or PlannedItem (dry run)
    skipped: list[Finding] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    message: str = ""
    created_by: str = ""
    created_on: str | None = None
    scope: str | None = None
    reverted_set: str | None = None
    restored_point: str | None = None
    later_changes: list[LaterChange] = field(default_factory=list)
    later_sets: list[LaterSet] = field(default_factory=list)

    @property
    def written(self) -> int:
        return len(self.items) if self.kind == RESTORE else 0

    @property
    def outcome(self) -> str:
        return REVERT if self.kind == RESTORE and self.reverted_set else self.kind

    def as_dict(self) -> dict[str, Any]:
        return to_json(self)


@dataclass(frozen=True, slots=True)
class Change:
    """One artifact a move of production changes: its blob before and after (None = absent)."""

    name: str
    collection: str
    from_sha: str | None
    to_sha: str | None


@dataclass
class CheckResult:
    """One check run on a state before it is promoted (built in, or an app's HTTP check)."""

    name: str
    ok: bool
    detail: str

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "ok": self.ok, "detail": self.detail}


@dataclass
class PromotionReceipt:
    """What a promotion or rollback did (``promotion``, ``rollback``), did not need to do
    (``noop``), would do (``dry_run``) or refused (``preflight_failed``).

    A rollback that reverses an earlier move does not copy that move's list of changes: it
    carries ``load_changes``, which reads them from the history when first asked for.
    """

    kind: str
    ref: str
    deployment_id: str | None = None
    previous_deployment: str | None = None
    changes: list[Change] | None = None
    unchanged: int = 0
    created_by: str = ""
    created_on: str | None = None
    note: str = ""
    findings: list[Finding] = field(default_factory=list)
    message: str = ""
    load_changes: Callable[[], list[Change]] | None = None
    # Safe promotion (docs/api.md#safe-promotion): the checks run before it, the share of
    # visitors a rollout serves, and what made an automatic rollback roll back.
    checks: list[CheckResult] | None = None
    rollout: int | None = None
    cause: str = ""
    # A scheduled promotion (``kind: scheduled``): its id and when it runs.
    schedule_id: str | None = None
    at: str | None = None

    @property
    def changed(self) -> list[Change]:
        """Every artifact the move changes."""
        if self.changes is None:
            self.changes = self.load_changes() if self.load_changes else []
        return self.changes

    @property
    def outcome(self) -> str:
        return self.kind

    def as_dict(self, *, with_changes: bool = True) -> dict[str, Any]:
        return to_json(self, with_changes=with_changes)


# --------------------------------------------------------------------------------------------
# The serializer: dataclass → JSON, and a stored restore receipt → dataclass
# --------------------------------------------------------------------------------------------


def finding_json(finding: Finding, *, with_point: bool = True) -> dict[str, Any]:
    data: dict[str, Any] = {"name": finding.name, "collection": finding.collection}
    if with_point:
        data["pointId"] = finding.point_id
    data["reason"] = finding.reason
    return data


def _item_json(item: RestoredItem | PlannedItem) -> dict[str, Any]:
    if isinstance(item, PlannedItem):
        return {
            "name": item.name,
            "collection": item.collection,
            "pointId": item.point_id,
            "linesAdded": item.lines_added,
            "linesRemoved": item.lines_removed,
            "chars": item.chars,
            "action": item.action,
        }
    return {
        "name": item.name,
        "collection": item.collection,
        "pointId": item.point_id,
        "counterPointId": item.counter_point_id,
        "chars": item.chars,
    }


def change_json(change: Change) -> dict[str, Any]:
    return {
        "name": change.name,
        "collection": change.collection,
        "from": change.from_sha,
        "to": change.to_sha,
    }


def change_from_json(data: dict[str, Any]) -> Change:
    return Change(data["name"], data["collection"], data.get("from"), data.get("to"))


def _restore_json(receipt: RestoreReceipt) -> dict[str, Any]:
    items = [_item_json(i) for i in receipt.items]
    skipped = [finding_json(s) for s in receipt.skipped]
    findings = [finding_json(f) for f in receipt.findings]
    data: dict[str, Any]
    if receipt.kind == RESTORE:
        data = {
            "setId": receipt.set_id,
            "kind": receipt.outcome,
            "restoredFromSet": receipt.restored_from,
            "items": items,
            "skipped": skipped,
            "created_by": receipt.created_by,
            "created_on": receipt.created_on,
        }
    elif receipt.kind == NOOP:
        data = {
            "kind": NOOP,
            "restoredFromSet": receipt.restored_from,
            "written": 0,
            "message": receipt.message,
            "skipped": skipped,
        }
    elif receipt.kind == DRY_RUN:
        data = {
            "kind": DRY_RUN,
            "restoredFromSet": receipt.restored_from,
            "items": items,
            "skipped": skipped,
            "findings": findings,
        }
    else:
        data = {
            "kind": receipt.kind,
            "restoredFromSet": receipt.restored_from,
            "written": 0,
            "findings": findings,
            "skipped": skipped,
            "message": receipt.message,
        }
    if receipt.scope is not None:
        data["scope"] = receipt.scope
    if receipt.reverted_set is not None:
        data["revertedSet"] = receipt.reverted_set
    if receipt.restored_point is not None:
        data["restoredPoint"] = receipt.restored_point
    if receipt.later_changes:  # only when there is later work: a dry run's keys stay as they were
        data["laterChanges"] = [
            {"name": c.name, "collection": c.collection, "sets": list(c.sets)}
            for c in receipt.later_changes
        ]
        data["laterSets"] = [
            {
                "setId": s.set_id,
                "kind": s.kind,
                "name": s.name,
                "created_by": s.created_by,
                "created_on": s.created_on,
            }
            for s in receipt.later_sets
        ]
    return data


SCHEDULED = "scheduled"


def _promotion_json(receipt: PromotionReceipt, *, with_changes: bool) -> dict[str, Any]:
    if receipt.kind == SCHEDULED:
        return {
            "kind": SCHEDULED,
            "scheduleId": receipt.schedule_id,
            "ref": receipt.ref,
            "at": receipt.at,
            "created_by": receipt.created_by,
            "note": receipt.note,
            "message": receipt.message,
        }
    data = _promotion_keys(receipt, with_changes=with_changes)
    if receipt.checks is not None and receipt.kind != NOOP:
        data["checks"] = [c.as_dict() for c in receipt.checks]
    if receipt.rollout is not None:
        data["rollout"] = receipt.rollout
    if receipt.cause:
        data["cause"] = receipt.cause
    if receipt.kind not in (NOOP, PREFLIGHT_FAILED, DRY_RUN, PROMOTION, ROLLBACK):
        data["message"] = receipt.message
    return data


def _promotion_keys(receipt: PromotionReceipt, *, with_changes: bool) -> dict[str, Any]:
    findings = [finding_json(f, with_point=False) for f in receipt.findings]
    if receipt.kind == NOOP:
        return {"kind": NOOP, "message": receipt.message}
    if receipt.kind == PREFLIGHT_FAILED:
        return {
            "kind": PREFLIGHT_FAILED,
            "ref": receipt.ref,
            "findings": findings,
            "message": receipt.message,
        }
    changed = [change_json(c) for c in receipt.changed] if with_changes else None
    if receipt.kind == DRY_RUN:
        return {
            "kind": DRY_RUN,
            "ref": receipt.ref,
            "previousDeployment": receipt.previous_deployment,
            "changed": changed,
            "unchanged": receipt.unchanged,
            "findings": findings,
            "message": receipt.message,
        }
    data = {
        "deploymentId": receipt.deployment_id,
        "kind": receipt.kind,
        "ref": receipt.ref,
        "previousDeployment": receipt.previous_deployment,
        "changed": changed,
        "unchanged": receipt.unchanged,
        "created_by": receipt.created_by,
        "created_on": receipt.created_on,
        "note": receipt.note,
    }
    if not with_changes:
        del data["changed"]
    return data


def to_json(
    receipt: RestoreReceipt | PromotionReceipt, *, with_changes: bool = True
) -> dict[str, Any]:
    """The receipt's JSON, keys as docs/api.md gives them. ``with_changes=False`` leaves a
    promotion's ``changed`` out (how a rollback that reuses an earlier move's list is stored)."""
    if isinstance(receipt, PromotionReceipt):
        return _promotion_json(receipt, with_changes=with_changes)
    return _restore_json(receipt)


def _finding_from(data: dict[str, Any]) -> Finding:
    return Finding(
        str(data.get("name") or ""),
        str(data.get("collection") or ""),
        str(data.get("reason") or ""),
        data.get("pointId"),
    )


def read_receipt(data: dict[str, Any] | None) -> RestoreReceipt:
    """A stored restore receipt (the JSON of :func:`to_json`) as its dataclass."""
    data = data or {}
    kind = str(data.get("kind") or "")
    items: list[Any] = []
    for item in data.get("items") or []:
        if "counterPointId" in item:
            items.append(
                RestoredItem(
                    item.get("name", ""),
                    item.get("collection", ""),
                    item.get("pointId"),
                    item.get("counterPointId", ""),
                    int(item.get("chars") or 0),
                )
            )
        else:
            items.append(
                PlannedItem(
                    item.get("name", ""),
                    item.get("collection", ""),
                    item.get("pointId"),
                    int(item.get("linesAdded") or 0),
                    int(item.get("linesRemoved") or 0),
                    int(item.get("chars") or 0),
                    str(item.get("action") or ""),
                )
            )
    return RestoreReceipt(
        kind=RESTORE if kind == REVERT else kind,
        restored_from=str(data.get("restoredFromSet") or ""),
        set_id=data.get("setId"),
        items=items,
        skipped=[_finding_from(s) for s in data.get("skipped") or []],
        findings=[_finding_from(f) for f in data.get("findings") or []],
        message=str(data.get("message") or ""),
        created_by=str(data.get("created_by") or ""),
        created_on=data.get("created_on"),
        scope=data.get("scope"),
        reverted_set=data.get("revertedSet"),
        restored_point=data.get("restoredPoint"),
        later_changes=[
            LaterChange(c.get("name", ""), c.get("collection", ""), tuple(c.get("sets") or ()))
            for c in data.get("laterChanges") or []
        ],
        later_sets=[
            LaterSet(
                s.get("setId", ""),
                s.get("kind", ""),
                s.get("name", ""),
                s.get("created_by", ""),
                s.get("created_on", ""),
            )
            for s in data.get("laterSets") or []
        ],
    )
