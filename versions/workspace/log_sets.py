"""Workspace review (docs/architecture.md#workspace-rollback, docs/architecture.md#layers): the
changes logs of the registered workspaces, each read as a change set with its backup→current file
sides, the later phases that changed its files again, and `Restore all` rolling it back through the
engine under a lock, with the report.

Everything a log names is untrusted. A log is only ever found by looking its name up in the
listing of the registered folder (never by joining caller text onto a path), the paths inside it
are contained by the engine's own `summary()`, and files are read only through
`open_for_reading` (no symlink out of the workspace, no FIFO or device).

Errors are `versions.errors` classes carrying the messages below; each door words them.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import stat
from dataclasses import dataclass, field
from datetime import UTC, datetime
from fnmatch import fnmatch
from pathlib import Path
from typing import Any

from versions import conf, diffing, services
from versions.errors import InvalidInput, NotFound, StaleWrite
from versions.formatting import kb

from .changes_log import ChangesLogError, load_changes_log
from .lock import changes_log_lock
from .rollback import RollbackInputError, plan_rollback, rollback, summary
from .safeio import NotRegularFileError, OutsideWorkspaceError, open_for_reading

logger = logging.getLogger(__name__)

# Logs the panel lists: at the workspace root, named like the seed's `.{domain}-changes.json`.
LOG_PATTERN = "*changes*.json"
UNDO_DIR = ".rollback-undo"
UNDO_LOG_NAME = "changes.json"
LOGS = "logs"
UNDO = "undo"
KINDS = (LOGS, UNDO)
MAX_LOGS = 200
# A diff reads both sides whole; past this the file is described, not shown.
MAX_SHOWN_BYTES = 2 * 1024 * 1024
MAX_LOG_BYTES = 5 * 1024 * 1024
HUNKS_PER_PAGE = 20
# Files diffed per page of a changes log: a phase may touch thousands.
FILES_PER_PAGE = 50
GAP_CHUNK = 200
# Files compared by content to tell whether a later phase's change is still on disk; past this,
# a file counts as changed (the warning errs on the side of saying so).
MAX_COMPARED_BYTES = 64 * 1024 * 1024
_FILE_ID = re.compile(r"^([mc])(\d{1,6})$")
_USABLE_NAME = re.compile(r"^[^/\\\x00]{1,200}$")

NO_WORKSPACE = "There is no such workspace."
NO_LOG = "There is no such changes log in this workspace."
NO_FILE = "There is no such file in this changes log."
NO_FOLDER = "The folder {folder} does not exist (or is not a folder), so it has no changes logs."
REFUSED = "This changes log would be refused, so it cannot be rolled back. Nothing was done."
STALE_LOG = (
    "The changes log changed after the confirmation summary was shown, so nothing was done. "
    "Review it again, then confirm."
)
STOPPED = "The rollback stopped with an error: {error}. Steps before it may have run; see {undo}."
CHANGED_SINCE = "This file changed since the diff was shown. Reload to see the current diff."

NO_BACKUP = "Backup not found: {backup}. Rolling back cannot restore this file; it stays as it is."
GONE_NOW = "The file no longer exists. Rolling back recreates it from the backup."
SAME_AS_BACKUP = (
    "Its current content matches the backup byte for byte. Rolling back rewrites it as is."
)
CREATED = "Created by this phase: it did not exist before. Rolling back deletes it."
CREATED_GONE = "Created by this phase, but it no longer exists: there is nothing to delete."
CREATED_FOLDER = "A folder created by this phase. Rolling back deletes it with everything in it."
TOO_BIG = "{side} is {size}, over the {limit} shown in the panel, so the diff is not shown."
BINARY = (
    "{side} is binary ({size}), so it is not shown as text. Rolling back still works byte for byte."
)
UNREADABLE = "{side} cannot be read: {reason}."
NOT_REGULAR = "{side} is not a regular file, so it is not shown."

# A file this phase changed that a later log changed again: the diff runs backup → now, so it
# shows both phases' changes, and rolling back this phase takes the later ones away too.
CHANGED_LATER = (
    "Changed again after this phase by {later}. This diff includes those later changes, and "
    "rolling back restores the backup, so it removes them too."
)
CHANGED_LATER_CREATED = (
    "Changed again after this phase by {later}. This diff includes those later changes, and "
    "rolling back deletes the file, so it removes them too."
)
LATER_PHASE = "phase “{phase}” ({label})"
LATER_ROLLBACK = "the rollback of phase “{phase}” ({label})"
# What a rollback does for a command the seed's mapping reverts, said for a person.
REVERT_WORDS = {
    "pnpm install": "runs pnpm install again to restore the dependencies",
    "git restore --staged .": "unstages all files (git restore --staged .)",
    "remove dist/": "removes the build artifacts (dist/)",
}
BY_COMMITS = "reverted with git_commits"
# What `content_digest` answers for a file that is not there.
MISSING = "missing"


# ------------------------------------------------------------------------------------------
# Workspaces and their logs
# ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Workspace:
    """A registered workspace: its name and folder (resolved when it exists)."""

    name: str
    folder: str

    @property
    def root(self) -> Path:
        """The folder, user-expanded and resolved."""
        return Path(self.folder).expanduser().resolve()

    @property
    def exists(self) -> bool:
        """Whether the folder is there (and is a folder)."""
        return self.root.is_dir()

    @property
    def usable(self) -> bool:
        """A name a URL segment can carry."""
        return bool(_USABLE_NAME.match(self.name))


@dataclass
class LogRef:
    """One changes log found in a workspace's listing."""

    workspace: Workspace
    kind: str  # LOGS (at the root) or UNDO (a counter log in .rollback-undo/<stamp>/)
    name: str  # the file name, or the stamp folder of a counter log
    path: Path
    mtime: float
    size: int
    rolled_back_by: list[LogRef] = field(default_factory=list)
    # For a counter log: who asked for the rollback that wrote it (its metadata), if known.
    requested_by: str = ""

    @property
    def label(self) -> str:
        """The log as a person finds it in the folder."""
        return self.name if self.kind == LOGS else f"{UNDO_DIR}/{self.name}/{UNDO_LOG_NAME}"

    @property
    def dom_id(self) -> str:
        """A stable id for the log's row on a page."""
        digest = hashlib.sha1(f"{self.kind}/{self.name}".encode(), usedforsecurity=False)
        return "log-" + digest.hexdigest()[:12]


@dataclass(frozen=True)
class WorkspaceCard:
    """A registered workspace with how many changes logs it holds, for the home page."""

    ws: Workspace
    log_count: int
    undo_count: int
    last: float | None


def registered_workspaces() -> list[Workspace]:
    """The workspaces of `VERSIONS_WORKSPACES`, by name."""
    return [Workspace(str(n), str(f)) for n, f in sorted(conf.workspaces().items())]


def get_workspace(*, name: str) -> Workspace:
    """The registered workspace called ``name``; ``NotFound`` when there is none."""
    for ws in registered_workspaces():
        if ws.name == name and ws.usable:
            return ws
    raise NotFound(NO_WORKSPACE)


def _regular(path: Path) -> os.stat_result | None:
    """lstat of a plain file (no symlink, no device, no FIFO), else None."""
    try:
        st = path.lstat()
    except OSError:
        return None
    return st if stat.S_ISREG(st.st_mode) else None


def list_logs(*, workspace: Workspace) -> list[LogRef]:
    """Changes logs at the workspace root and the rollback's counter logs, newest first."""
    if not workspace.exists:
        return []
    root = workspace.root
    refs: list[LogRef] = []
    try:
        with os.scandir(root) as entries:
            for entry in entries:
                path = Path(entry.path)
                if fnmatch(entry.name, LOG_PATTERN) and (st := _regular(path)):
                    refs.append(LogRef(workspace, LOGS, entry.name, path, st.st_mtime, st.st_size))
    except OSError:
        return []
    undo = root / UNDO_DIR
    undo_st = None
    try:
        undo_st = undo.lstat()
    except OSError:
        pass
    if undo_st is not None and stat.S_ISDIR(undo_st.st_mode):  # never through a symlink
        try:
            with os.scandir(undo) as entries:
                for entry in entries:
                    usable = _USABLE_NAME.match(entry.name)
                    if not usable or not entry.is_dir(follow_symlinks=False):
                        continue
                    log = Path(entry.path) / UNDO_LOG_NAME
                    if st := _regular(log):
                        refs.append(
                            LogRef(workspace, UNDO, entry.name, log, st.st_mtime, st.st_size)
                        )
        except OSError:
            pass
    refs.sort(key=lambda r: (-r.mtime, r.kind, r.name))
    return refs[:MAX_LOGS]


def link_rollbacks(*, logs: list[LogRef]) -> None:
    """Attach to each log the counter logs whose rollback it was (their metadata says so)."""
    by_path = {str(r.path.resolve()): r for r in logs}
    for ref in logs:
        if ref.kind != UNDO:
            continue
        try:
            metadata = load_changes_log(ref.path).metadata
        except ChangesLogError:
            continue
        source = metadata.get("rollback_of")
        who = metadata.get("requested_by")
        ref.requested_by = who if isinstance(who, str) else ""
        target = by_path.get(str(source)) if isinstance(source, str) else None
        if target is not None:
            target.rolled_back_by.append(ref)


def _listed_logs(workspace: Workspace) -> list[LogRef]:
    refs = list_logs(workspace=workspace)
    link_rollbacks(logs=refs)
    return refs


def workspace_cards() -> list[WorkspaceCard]:
    """The registered workspaces with how many changes logs each holds, for the home page."""
    cards = []
    for ws in registered_workspaces():
        logs = list_logs(workspace=ws) if ws.usable else []
        cards.append(
            WorkspaceCard(
                ws=ws,
                log_count=sum(1 for r in logs if r.kind == LOGS),
                undo_count=sum(1 for r in logs if r.kind == UNDO),
                last=max((r.mtime for r in logs), default=None),
            )
        )
    return cards


# ------------------------------------------------------------------------------------------
# One log as it is now
# ------------------------------------------------------------------------------------------


def _parse_moment(text: str) -> datetime | None:
    """A log's ISO-8601 timestamp as an aware datetime (UTC when it names no zone), else None."""
    try:
        moment = datetime.fromisoformat(text)
    except (TypeError, ValueError):
        return None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


@dataclass
class LogState:
    """A log as it is now: its bytes' sha256, and the engine's summary or its refusal."""

    ref: LogRef
    sha256: str
    data: dict[str, Any] | None
    errors: list[str]
    # Every log of the workspace (this one included), to find later logs touching its files.
    logs: list[LogRef] = field(default_factory=list)

    @property
    def refused(self) -> bool:
        """The engine would refuse this log: it cannot be rolled back."""
        return self.data is None

    @property
    def is_undo(self) -> bool:
        """A counter log a rollback wrote: rolling it back undoes that rollback."""
        return self.ref.kind == UNDO

    @property
    def logged_at(self) -> datetime | None:
        """When the log says its phase ran."""
        return _parse_moment(self.data["timestamp"]) if self.data else None

    @property
    def metadata_json(self) -> str:
        """The log's metadata as indented JSON; empty when it has none."""
        if not self.data or not self.data["metadata"]:
            return ""
        return json.dumps(self.data["metadata"], indent=2, ensure_ascii=False)


@dataclass(frozen=True)
class WorkspaceListing:
    """A workspace's page: its logs as rows, newest first, or why its folder has none."""

    ws: Workspace
    rows: list[LogState]
    missing: str


def read_state(*, ref: LogRef, logs: list[LogRef] | None = None) -> LogState:
    """Hash the log's bytes and read it through the engine's `summary()` (or its refusal)."""
    try:
        with open(ref.path, "rb") as handle:
            sha = hashlib.sha256(handle.read(MAX_LOG_BYTES + 1)).hexdigest()
    except OSError:
        sha = ""
    try:
        data = summary(ref.path, workspace=ref.workspace.root)
    except RollbackInputError as exc:
        return LogState(ref, sha, None, list(exc.errors), logs or [])
    return LogState(ref, sha, data, [], logs or [])


def workspace_listing(*, name: str) -> WorkspaceListing:
    """The workspace called ``name`` with each of its logs read; ``NotFound`` without one."""
    ws = get_workspace(name=name)
    rows = [read_state(ref=ref) for ref in _listed_logs(ws)]
    missing = "" if ws.exists else NO_FOLDER.format(folder=ws.folder)
    return WorkspaceListing(ws=ws, rows=rows, missing=missing)


def open_log(*, workspace: str, kind: str, log: str) -> LogState:
    """The log listed as ``kind``/``log`` in the named workspace, read; else ``NotFound``."""
    refs = _listed_logs(get_workspace(name=workspace))
    for ref in refs:
        if ref.kind == kind and ref.name == log:
            return read_state(ref=ref, logs=refs)
    raise NotFound(NO_LOG)


def log_for_rollback(*, workspace: str, kind: str, log: str, actor: services.Actor) -> LogState:
    """The log as `open_log` reads it, for an actor who may roll workspaces back (else
    ``Forbidden``, before the log is even looked up)."""
    services.require_workspace_rollback(actor)
    return open_log(workspace=workspace, kind=kind, log=log)


# ------------------------------------------------------------------------------------------
# Later-change detection
# ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LaterLog:
    """A log written after the one shown that changed one of its files again."""

    ref: LogRef
    phase: str

    @property
    def description(self) -> str:
        """The later log in words, for the notes and the dialog."""
        wording = LATER_ROLLBACK if self.ref.kind == UNDO else LATER_PHASE
        return wording.format(phase=self.phase, label=self.ref.label)


def _describe(later: list[LaterLog]) -> str:
    names = [item.description for item in later]
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def content_digest(*, path: Path, root: Path) -> str | None:
    """sha256 of a regular file inside ``root``; `MISSING` when there is none; None if unknown."""
    try:
        # Opened without following a final symlink, checked inside the workspace once open.
        fd, st = open_for_reading(root, path)
    except FileNotFoundError:
        return MISSING
    except OSError:
        return None
    digest = hashlib.sha256()
    try:
        with os.fdopen(fd, "rb") as handle:
            if st.st_size > MAX_COMPARED_BYTES:
                return None
            while chunk := handle.read(1024 * 1024):
                digest.update(chunk)
    except OSError:
        return None
    return digest.hexdigest()


def _same(a: str | None, b: str | None) -> bool:
    return a is not None and a == b


def later_changes(*, state: LogState) -> dict[str, list[LaterLog]]:
    """This log's files that later logs changed again and that are not as this phase left them.

    Keyed by the file's resolved path; the later logs oldest first. "Later" is a later log
    timestamp (the file's modification time breaks a tie). What this phase left is the backup
    the first later log took of the file; without one, a later change counts as still there.
    Rollbacks of this very log are not later changes: they put this log's backups back.
    """
    if state.data is None or not state.logs:
        return {}
    root = state.ref.workspace.root
    own_backups = {e["target"]: e["backup_path"] for e in state.data["files_modified"]}
    created = {e["target"] for e in state.data["files_created"]}
    own_moment = _parse_moment(state.data["timestamp"])
    if own_moment is None:
        return {}
    own = (own_moment, state.ref.mtime)
    own_rollbacks = {(r.kind, r.name) for r in state.ref.rolled_back_by}

    later_logs = []
    for ref in state.logs:
        if (ref.kind, ref.name) == (state.ref.kind, state.ref.name):
            continue
        if (ref.kind, ref.name) in own_rollbacks:
            continue
        try:
            log = load_changes_log(ref.path)
        except ChangesLogError:
            continue
        moment = _parse_moment(log.timestamp)
        if moment is not None and (moment, ref.mtime) > own:
            later_logs.append(((moment, ref.mtime), ref))
    later_logs.sort(key=lambda item: item[0])

    touched: dict[str, list[tuple[LaterLog, Path | None]]] = {}
    for _, ref in later_logs:
        try:
            plan = plan_rollback(ref.path, workspace=root)
        except RollbackInputError:
            continue
        later = LaterLog(ref, plan.log.phase)
        hits: list[tuple[Path, Path | None]] = [(t, backup) for _, t, backup in plan.modified]
        hits += [(t, None) for _, t in plan.created]
        for target, backup in hits:
            key = os.fspath(target)
            if key in own_backups or key in created:
                seen = touched.setdefault(key, [])
                if all(item.ref is not ref for item, _ in seen):
                    seen.append((later, backup))

    out = {}
    for key, seen in touched.items():
        now = content_digest(path=Path(key), root=root)
        if key in own_backups:
            before = content_digest(path=Path(own_backups[key]), root=root)
            if before == MISSING:
                continue  # rolling back cannot restore it, so it removes nothing (said apart)
            if _same(now, before):
                continue  # rolling back rewrites it as it is: no later change is lost
        elif now == MISSING:
            continue  # a created file that is gone: rolling back deletes nothing
        left_backup = seen[0][1]
        left = content_digest(path=left_backup, root=root) if left_backup is not None else None
        if left != MISSING and _same(now, left):
            continue  # as this phase left it: the later changes are no longer there
        out[key] = [item for item, _ in seen]
    return out


# ------------------------------------------------------------------------------------------
# The confirmation summary
# ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RollbackOutline:
    """The seed's confirmation summary, told for a person: what Confirm restore will do."""

    restore: list[str]  # modified files restored from their backups
    no_backup: list[str]  # modified files whose backup is missing: left as they are
    delete: list[str]  # created files deleted
    already_gone: list[str]  # created files no longer there
    commands_reverted: list[tuple[str, str]]  # (command, what the rollback does)
    commands_by_commits: list[str]  # `git commit …`: undone by reverting git_commits
    commands_manual: list[str]  # cannot be reverted automatically
    commits: list[str]
    artifacts: list[str]
    plan_files: list[str]
    changed_later: list[tuple[str, str]]  # (file, the later logs that changed it, in words)

    @property
    def nothing(self) -> bool:
        """No file, command or commit a rollback can revert."""
        return not (
            self.restore
            or self.delete
            or self.commands_reverted
            or self.commands_by_commits
            or self.commits
            or self.artifacts
            or self.plan_files
        )


def rollback_outline(*, state: LogState) -> RollbackOutline | None:
    """What rolling back ``state``'s log does, grouped for the confirmation dialog."""
    data = state.data
    if data is None:
        return None
    later = later_changes(state=state)
    paths = {e["target"]: e["path"] for e in data["files_modified"] + data["files_created"]}
    commands = data["commands_executed"]
    return RollbackOutline(
        restore=[e["path"] for e in data["files_modified"] if e["backup_exists"]],
        no_backup=[e["path"] for e in data["files_modified"] if not e["backup_exists"]],
        delete=[e["path"] for e in data["files_created"] if e["exists"]],
        already_gone=[e["path"] for e in data["files_created"] if not e["exists"]],
        commands_reverted=[
            (c["command"], REVERT_WORDS.get(c["revert"], c["revert"]))
            for c in commands
            if c["revert"] and c["revert"] != BY_COMMITS
        ],
        commands_by_commits=[c["command"] for c in commands if c["revert"] == BY_COMMITS],
        commands_manual=[c["command"] for c in commands if not c["revert"]],
        commits=list(data["git_commits"]),
        artifacts=list(data["artifacts"]),
        plan_files=list(data["plan_files"]),
        changed_later=[(paths[key], _describe(logs)) for key, logs in later.items()],
    )


# ------------------------------------------------------------------------------------------
# File sides and their diffs
# ------------------------------------------------------------------------------------------


@dataclass
class FileSide:
    """One side of a diff read from disk: text, or why there is none."""

    state: str  # text | missing | folder | too_big | binary | unreadable | special
    text: str | None = None
    size: int = 0
    reason: str = ""
    digest: bytes = b""


def read_side(*, path: Path, root: Path) -> FileSide:
    """Read a file the engine already contained: containment re-checked on the open file (as
    the rollback's reads do), the size capped, no FIFOs or devices."""
    try:
        fd, st = open_for_reading(root, path)
    except FileNotFoundError:
        return FileSide("missing")
    except IsADirectoryError:
        return FileSide("folder")
    except (OutsideWorkspaceError, NotRegularFileError):
        return FileSide("special")
    except OSError as exc:
        return FileSide("unreadable", reason=exc.strerror or str(exc))
    try:
        with os.fdopen(fd, "rb") as handle:
            if st.st_size > MAX_SHOWN_BYTES:
                return FileSide("too_big", size=st.st_size)
            raw = handle.read(MAX_SHOWN_BYTES + 1)
    except OSError as exc:
        return FileSide("unreadable", reason=exc.strerror or str(exc))
    digest = hashlib.sha256(raw).digest()
    if len(raw) > MAX_SHOWN_BYTES:
        return FileSide("too_big", size=len(raw))
    if b"\x00" in raw:
        return FileSide("binary", size=len(raw), digest=digest)
    try:
        return FileSide("text", raw.decode("utf-8"), len(raw), digest=digest)
    except UnicodeDecodeError:
        return FileSide("binary", size=len(raw), digest=digest)


@dataclass
class FileDiff:
    """What the panel shows for one modified or created file of a log."""

    ref: LogRef
    file_id: str  # m<index> (files_modified) or c<index> (files_created)
    path: str
    backup: str | None
    status: str  # changed | added | removed | identical | absent | no_backup | folder | unshown
    message: str
    old: str | None = None
    new: str | None = None
    key: str = ""
    result: diffing.DiffResult | None = None
    page: diffing.DiffPage | None = None
    # Later logs that changed this file again (see `later_changes`).
    later: list[LaterLog] = field(default_factory=list)

    @property
    def dom_id(self) -> str:
        """A stable id for the diff on a page."""
        return f"{self.ref.dom_id}-{self.file_id}"

    @property
    def later_note(self) -> str:
        """The later phases that changed the file again, in words; empty when none did."""
        if not self.later:
            return ""
        wording = CHANGED_LATER if self.backup else CHANGED_LATER_CREATED
        return wording.format(later=_describe(self.later))

    @property
    def lines_added(self) -> int:
        """Lines added from the backup to now."""
        return self.result.lines_added if self.result else 0

    @property
    def lines_removed(self) -> int:
        """Lines removed from the backup to now."""
        return self.result.lines_removed if self.result else 0


@dataclass(frozen=True)
class FilesPage:
    """One page of a log's file diffs, and where the next one starts (None: it was the last)."""

    diffs: list[FileDiff]
    total: int
    shown: int
    next_start: int | None
    next_count: int


@dataclass(frozen=True)
class DiffContext:
    """Unchanged lines behind a diff's "N unchanged lines" expander, and the gap left after."""

    diff: FileDiff
    rows: list[diffing.DiffLine]
    rest: diffing.Gap | None


def _side_problem(side: FileSide, label: str) -> str | None:
    if side.state == "too_big":
        return TOO_BIG.format(side=label, size=kb(side.size), limit=kb(MAX_SHOWN_BYTES))
    if side.state == "binary":
        return BINARY.format(side=label, size=kb(side.size))
    if side.state == "unreadable":
        return UNREADABLE.format(side=label, reason=side.reason)
    if side.state in ("special", "folder"):
        return NOT_REGULAR.format(side=label)
    return None


def _key(old: FileSide, new: FileSide) -> str:
    """Identifies both sides as read, so a later page of a diff can tell they changed since."""
    return hashlib.sha256(
        f"{old.state}:{new.state}:".encode() + old.digest + b":" + new.digest
    ).hexdigest()[:32]


def _with_result(diff: FileDiff, page: int = 1) -> FileDiff:
    diff.result = diffing.cached_diff(diff.old, diff.new)
    if diff.result.hunk_count:
        number = min(max(1, page), diff.result.num_pages(HUNKS_PER_PAGE))
        diff.page = diff.result.page(number, HUNKS_PER_PAGE)
    return diff


def _modified_diff(ref: LogRef, index: int, entry: dict[str, Any], page: int = 1) -> FileDiff:
    root = ref.workspace.root
    fid = f"m{index}"
    if not entry["backup_exists"]:
        msg = NO_BACKUP.format(backup=entry["backup"])
        return FileDiff(ref, fid, entry["path"], entry["backup"], "no_backup", msg)
    old = read_side(path=Path(entry["backup_path"]), root=root)
    new = read_side(path=Path(entry["target"]), root=root)
    diff = FileDiff(ref, fid, entry["path"], entry["backup"], "unshown", "", key=_key(old, new))
    problem = _side_problem(old, "The backup") or (
        _side_problem(new, "The current file") if new.state != "missing" else None
    )
    if problem:
        if old.digest and old.digest == new.digest:
            problem += " " + SAME_AS_BACKUP
        diff.message = problem
        return diff
    diff.old = old.text
    diff.new = None if new.state == "missing" else new.text
    _with_result(diff, page)
    assert diff.result is not None
    if diff.result.is_removed:
        diff.status, diff.message = "removed", GONE_NOW
    elif diff.result.identical:
        diff.status, diff.message = "identical", SAME_AS_BACKUP
    else:
        diff.status = "changed"
    return diff


def _created_diff(ref: LogRef, index: int, entry: dict[str, Any], page: int = 1) -> FileDiff:
    root = ref.workspace.root
    fid = f"c{index}"
    new = read_side(path=Path(entry["target"]), root=root)
    missing = FileSide("missing")
    diff = FileDiff(ref, fid, entry["path"], None, "added", CREATED, key=_key(missing, new))
    if new.state == "missing":
        diff.status, diff.message = "absent", CREATED_GONE
        return diff
    if new.state == "folder":
        diff.status, diff.message = "folder", CREATED_FOLDER
        return diff
    problem = _side_problem(new, "The file")
    if problem:
        diff.message = f"{CREATED} {problem}"
        return diff
    diff.new = new.text
    return _with_result(diff, page)


def _file_count(state: LogState) -> int:
    if state.data is None:
        return 0
    return len(state.data["files_modified"]) + len(state.data["files_created"])


def file_diffs(*, state: LogState, start: int, count: int) -> list[FileDiff]:
    """The diffs of the log's files ``start`` to ``start + count`` (modified files first, then
    created ones): only those files are read and diffed."""
    if state.data is None:
        return []
    modified, created = state.data["files_modified"], state.data["files_created"]
    later = later_changes(state=state)
    out = []
    for position in range(max(0, start), min(start + count, len(modified) + len(created))):
        if position < len(modified):
            entry = modified[position]
            diff = _modified_diff(state.ref, position, entry)
        else:
            index = position - len(modified)
            entry = created[index]
            diff = _created_diff(state.ref, index, entry)
        diff.later = later.get(entry["target"], [])
        out.append(diff)
    return out


def files_page(*, state: LogState, start: int = 0) -> FilesPage:
    """The page of `FILES_PER_PAGE` file diffs from ``start`` (clamped to the log's files)."""
    total = _file_count(state)
    start = min(max(0, start), total)
    end = min(start + FILES_PER_PAGE, total)
    return FilesPage(
        diffs=file_diffs(state=state, start=start, count=end - start),
        total=total,
        shown=end,
        next_start=end if end < total else None,
        next_count=min(FILES_PER_PAGE, total - end),
    )


def file_diff(*, state: LogState, file_id: str, page: int = 1) -> FileDiff:
    """The diff of one file (``m<index>`` or ``c<index>``) at a page of hunks; else NotFound."""
    match = _FILE_ID.match(file_id)
    if state.data is None or match is None:
        raise NotFound(NO_FILE)
    group, index = match.group(1), int(match.group(2))
    entries = state.data["files_modified" if group == "m" else "files_created"]
    if index >= len(entries):
        raise NotFound(NO_FILE)
    build = _modified_diff if group == "m" else _created_diff
    return build(state.ref, index, entries[index], page)


def _check_seen(diff: FileDiff, seen_key: str | None) -> None:
    if seen_key is not None and seen_key != diff.key:
        raise StaleWrite(CHANGED_SINCE, current_sha256=diff.key)


def diff_page(*, state: LogState, file_id: str, page: int, seen_key: str | None) -> FileDiff:
    """A later page of one file's hunks; ``StaleWrite(CHANGED_SINCE)`` when the file changed
    since ``seen_key`` was shown (None: not checked) or has no such page any more."""
    diff = file_diff(state=state, file_id=file_id, page=page)
    _check_seen(diff, seen_key)
    if diff.page is None:
        raise StaleWrite(CHANGED_SINCE, current_sha256=diff.key)
    return diff


def diff_context(
    *,
    state: LogState,
    file_id: str,
    seen_key: str | None,
    old_start: int,
    new_start: int,
    count: int,
) -> DiffContext:
    """Up to `GAP_CHUNK` unchanged lines of a collapsed gap, and what stays collapsed after;
    ``StaleWrite(CHANGED_SINCE)`` when the file changed since the diff was shown."""
    diff = file_diff(state=state, file_id=file_id)
    _check_seen(diff, seen_key)
    if diff.result is None:
        raise StaleWrite(CHANGED_SINCE, current_sha256=diff.key)
    take = max(0, min(count, GAP_CHUNK))
    try:
        rows = diffing.context_lines(diff.old, diff.new, old_start, new_start, take)
    except (diffing.StaleContext, ValueError, IndexError):
        raise StaleWrite(CHANGED_SINCE, current_sha256=diff.key) from None
    rest = diffing.Gap(old_start + take, new_start + take, count - take) if count > take else None
    return DiffContext(diff=diff, rows=rows, rest=rest)


# ------------------------------------------------------------------------------------------
# Restore all: the rollback and its report
# ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RollbackOutcome:
    """What `Restore all` did: the report and the log as it is now, or where the engine stopped.

    ``error`` is set when the rollback stopped partway (steps before it may have run); the
    ``state`` is then the log as it was read before the rollback.
    """

    state: LogState
    report: dict[str, Any] | None = None
    report_json: str = ""
    # The counter log the report names, when the workspace lists it (to roll the rollback back).
    undo_ref: LogRef | None = None
    error: str = ""


def rollback_log(*, state: LogState, log_sha: str | None, actor: services.Actor) -> RollbackOutcome:
    """Roll ``state``'s log back for ``actor`` as confirmed, under the log's lock, and read it
    again after.

    Refused with nothing done: ``Forbidden`` for an actor who may not roll workspaces back,
    ``InvalidInput(REFUSED)`` for a log the engine refuses,
    ``StaleWrite(STALE_LOG)`` when ``log_sha`` is not the log's sha256 now, ``Conflict(lock.BUSY)``
    while another rollback of the log runs.
    """
    services.require_workspace_rollback(actor)
    if state.data is None:
        raise InvalidInput(REFUSED)
    if log_sha != state.sha256:
        raise StaleWrite(STALE_LOG, current_sha256=state.sha256)
    ref, by = state.ref, actor.name
    try:
        with changes_log_lock(path=ref.path):
            # The person confirmed the summary (the seed's prompt): no second confirmation here.
            report = rollback(
                ref.path, state.data["phase"], confirm=None, workspace=ref.workspace.root, by=by
            )
    except OSError as exc:
        error = STOPPED.format(error=exc.strerror or exc, undo=f"{UNDO_DIR}/")
        return RollbackOutcome(state=state, error=error)
    except ValueError as exc:
        # A path that left the workspace while the rollback ran: said in words, never a crash.
        logger.warning("workspace rollback of %s stopped: %s", ref.label, exc)
        return RollbackOutcome(state=state, error=STOPPED.format(error=exc, undo=f"{UNDO_DIR}/"))
    logger.info(
        "workspace rollback of %s/%s (phase %s) by %s: %s; undo log %s",
        ref.workspace.name,
        ref.label,
        state.data["phase"],
        by,
        "success" if report.get("success") else "failed",
        report.get("undo_log", "none"),
    )
    refs = _listed_logs(ref.workspace)
    after = next((r for r in refs if r.kind == ref.kind and r.name == ref.name), None)
    undo_ref = None
    undo_log = report.get("undo_log")
    if isinstance(undo_log, str):
        wanted = str(Path(undo_log).resolve())
        undo_ref = next((r for r in refs if str(r.path.resolve()) == wanted), None)
    return RollbackOutcome(
        state=read_state(ref=after, logs=refs) if after is not None else state,
        report=report,
        report_json=json.dumps(report, indent=2, ensure_ascii=False),
        undo_ref=undo_ref,
    )
