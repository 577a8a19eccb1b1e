"""Roll back a failed workflow phase from its changes log (the rollback seed, steps 3 to 9).

Everything in the log is untrusted: paths are contained before anything happens, commands are
never run (only the seed's fixed revert mapping is, as argument lists), commit ids must be hex.
Every file the rollback overwrites or deletes is first saved under `.rollback-undo/<stamp>/`
with a counter changes log, so the rollback itself can be rolled back the same way.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from .changes_log import (
    ChangesLog,
    ChangesLogError,
    ModifiedFile,
    load_changes_log,
    render_changes_log,
    utc_timestamp,
)
from .paths import (
    BACKUP_DIR,
    UNDO_DIR,
    UnsafePathError,
    git_config_refusal,
    git_env,
    identity_env,
    relative_name,
    resolve_in_workspace,
    run_git,
    workspace_root,
)
from .safeio import (
    LEADS_OUTSIDE,
    OutsideWorkspaceError,
    copy_into,
    is_inside,
    lstat_inside,
    open_for_reading,
    open_parent,
    remove_inside,
    replace_file,
)

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_BAD_INPUT = 2
EXIT_DECLINED = 3

COMMIT_ID = re.compile(r"^[0-9a-fA-F]{4,64}$")
UNDO_LOG_NAME = "changes.json"
# Files kept for the undo before the counter log is written and the first of them is changed;
# each batch after the first is twice as big, up to the last size.
FIRST_BATCH = 16
MAX_BATCH = 4096

CONFIRMATION_PROMPT = """Rollback changes from phase "{phase}"?

Changes to revert:
- Files modified: {modified}
- Files created: {created}
- Commands executed: {commands}
- Git commits: {commits}

This action will:
1. Restore {modified} files from backups
2. Delete {created} created files
3. Revert {commands} commands
4. Revert {commits} git commits

Proceed with rollback? (yes/no)"""

# actions_taken, worded as the seed's Example 1.
RESTORED = "Restored {path} from {backup}"
DELETED = "Deleted {path}"
RERAN_PNPM_INSTALL = "Re-ran pnpm install to restore dependencies"
UNSTAGED = "Unstaged all files"
REMOVED_DIST = "Removed build artifacts (dist/)"
DIST_ALREADY_GONE = "Build artifacts already removed (dist/ not found)"
REVERTED_COMMIT = "Reverted git commit {sha}"
REMOVED_ARTIFACT = "Removed artifact {path}"
REMOVED_PLAN_FILE = "Removed plan file {path}"

# Warnings and errors: the seed's where it has one, ours in the same voice otherwise.
BACKUP_NOT_FOUND = "Backup not found: {backup} (file not restored)"
FILE_NOT_FOUND = "File not found (already deleted?): {file}"
CANNOT_AUTO_REVERT = "Cannot auto-revert: {command} (manual intervention required)"
REVERT_CONFLICT = "Failed to revert commit {sha}: Merge conflict in {files}"
REVERT_FAILED = "Failed to revert commit {sha}: {reason}"
MANUAL_RESOLUTION = "Manual resolution required for commit {sha}"
RESTORE_FAILED = "Failed to restore {path}: {reason}"
DELETE_FAILED = "Failed to delete {path}: {reason}"
REMOVE_FAILED = "Failed to remove {path}: {reason}"
COMMAND_FAILED = "Failed to revert command {command}: {reason}"
PNPM_MISSING = "pnpm is not installed (not found on PATH)"
GIT_UNAVAILABLE = "Cannot revert git commits: {root} is not a git repository"
GIT_DETACHED = "Cannot revert git commits: HEAD is detached"
PHASE_MISMATCH = 'Changes log is for phase "{log_phase}", not "{phase}"'
BAD_COMMIT_ID = 'Refused git commit id "{sha}": a commit id is 4 to 64 hexadecimal digits'
UNDO_DIR_UNSAFE = f"{UNDO_DIR}/ is not a plain folder, so counter-backups cannot be kept"
GIT_REFUSED = "Cannot revert git commits: {reason}"
# pnpm runs no lifecycle script of the workspace's package.json and loads no .pnpmfile.cjs.
PNPM_INSTALL_ARGS = ("install", "--ignore-scripts", "--ignore-pnpmfile")

GIT_TIMEOUT = 120
PNPM_TIMEOUT = 1800

Confirm = Callable[[str], bool]


class RollbackInputError(ValueError):
    """The log cannot be rolled back as given; `errors` lists every reason, nothing was done."""

    def __init__(self, errors: list[str]) -> None:
        super().__init__("; ".join(errors))
        self.errors = errors


@dataclass(frozen=True)
class RollbackResult:
    """The seed's report plus the exit code the command returns for it."""

    report: dict[str, Any]
    exit_code: int


@dataclass
class RollbackPlan:
    """A validated log with every path resolved inside its workspace."""

    log_path: Path
    log: ChangesLog
    root: Path
    modified: list[tuple[ModifiedFile, Path, Path]]  # entry, target, backup
    created: list[tuple[str, Path]]
    plan_files: list[tuple[str, Path]]
    artifacts: list[tuple[str, Path]]

    @property
    def is_counter_log(self) -> bool:
        """True for a log the rollback itself wrote (it lives in `.rollback-undo/<stamp>/`)."""
        return self.log_path.resolve().parent.parent == self.root / UNDO_DIR


# Beyond the seed's messages: what this rollback changes that its undo log cannot bring back.
UNDO_CANNOT_KEEP = (
    "Undo cannot bring back {paths}: a symlink or special file is not kept in the undo log"
)


def confirmation_prompt(log: ChangesLog) -> str:
    """The seed's confirmation prompt for `log`, with its counts."""
    return CONFIRMATION_PROMPT.format(
        phase=log.phase,
        modified=len(log.files_modified),
        created=len(log.files_created),
        commands=len(log.commands_executed),
        commits=len(log.git_commits),
    )


def is_commit_id(value: str) -> bool:
    """True for 4 to 64 hex digits: never an option, a range or a ref name git might parse."""
    return bool(COMMIT_ID.fullmatch(value))


def plan_rollback(
    log_path: str | os.PathLike[str],
    phase: str | None = None,
    *,
    workspace: str | os.PathLike[str] | None = None,
) -> RollbackPlan:
    """Load, validate and contain everything; raise RollbackInputError listing every problem."""
    try:
        log = load_changes_log(log_path)
    except ChangesLogError as exc:
        raise RollbackInputError([str(exc)])
    if phase is not None and log.phase != phase:
        raise RollbackInputError([PHASE_MISMATCH.format(log_phase=log.phase, phase=phase)])
    try:
        root = workspace_root(log_path, workspace)
    except UnsafePathError as exc:
        raise RollbackInputError([str(exc)])

    errors: list[str] = []

    def contained(raw: str, where: str, *, target: bool = True) -> Path:
        try:
            return resolve_in_workspace(root, raw, where=where, target=target)
        except UnsafePathError as exc:
            errors.append(str(exc))
            return root

    modified = [
        (
            entry,
            contained(entry.path, f"files_modified[{i}].path"),
            contained(entry.backup, f"files_modified[{i}].backup", target=False),
        )
        for i, entry in enumerate(log.files_modified)
    ]
    created = [(p, contained(p, f"files_created[{i}]")) for i, p in enumerate(log.files_created)]
    plan_files = [(p, contained(p, f"plan_files[{i}]")) for i, p in enumerate(log.plan_files)]
    artifacts = [(p, contained(p, f"artifacts[{i}]")) for i, p in enumerate(log.artifacts)]
    step8 = _step8_plan_file(log, root, Path(log_path), modified, created, plan_files, artifacts)
    if step8 is not None:
        artifacts.append(step8)
    errors.extend(BAD_COMMIT_ID.format(sha=sha) for sha in log.git_commits if not is_commit_id(sha))
    undo_dir = root / UNDO_DIR
    if undo_dir.is_symlink() or (undo_dir.exists() and not undo_dir.is_dir()):
        # Counter-backups written through a link could land anywhere.
        errors.append(UNDO_DIR_UNSAFE)
    if errors:
        raise RollbackInputError(errors)
    return RollbackPlan(
        log_path=Path(log_path),
        log=log,
        root=root,
        modified=modified,
        created=created,
        plan_files=plan_files,
        artifacts=artifacts,
    )


def _step8_plan_file(
    log: ChangesLog,
    root: Path,
    log_path: Path,
    modified: list[tuple[ModifiedFile, Path, Path]],
    created: list[tuple[str, Path]],
    plan_files: list[tuple[str, Path]],
    artifacts: list[tuple[str, Path]],
) -> tuple[str, Path] | None:
    """The seed's step 8 removes `.{phase}-plan.json` whether or not the log lists it: that file,
    when it is there, as one more artifact, unless the log already names it (or its phase could
    not name a file at the workspace root). A counter log's rollback leaves it: it has just put
    it back."""
    if log_path.resolve().parent.parent == root / UNDO_DIR:
        return None
    if any(c in log.phase for c in "/\\\0") or log.phase in (".", ".."):
        return None
    name = f".{log.phase}-plan.json"
    try:
        path = resolve_in_workspace(root, name, where="plan file")
    except UnsafePathError:
        return None
    listed = {p for _, p in (*created, *plan_files, *artifacts)}
    listed.update(target for _, target, _ in modified)
    return None if path in listed or not _exists(path) else (name, path)


def summary(
    log_path: str | os.PathLike[str],
    *,
    phase: str | None = None,
    workspace: str | os.PathLike[str] | None = None,
) -> dict[str, Any]:
    """What a rollback of `log_path` would do, for a panel: entries, on-disk state, the prompt.

    Raises RollbackInputError (with `.errors`) when the log would be refused.
    """
    plan = plan_rollback(log_path, phase, workspace=workspace)
    log = plan.log
    return {
        "phase": log.phase,
        "timestamp": log.timestamp,
        "log_path": os.fspath(Path(log_path).resolve()),
        "workspace": os.fspath(plan.root),
        "prompt": confirmation_prompt(log),
        "files_modified": [
            {
                "path": entry.path,
                "backup": entry.backup,
                "target": os.fspath(target),
                "backup_path": os.fspath(backup),
                "exists": target.is_file(),
                "backup_exists": backup.is_file(),
            }
            for entry, target, backup in plan.modified
        ],
        "files_created": [
            {"path": raw, "target": os.fspath(path), "exists": _exists(path)}
            for raw, path in plan.created
        ],
        "commands_executed": [
            {"command": command, "revert": _revert_description(command)}
            for command in log.commands_executed
        ],
        "git_commits": list(log.git_commits),
        "artifacts": [raw for raw, _ in plan.artifacts],
        "plan_files": [raw for raw, _ in plan.plan_files],
        "metadata": dict(log.metadata),
        "warnings": _predicted_warnings(plan) + plan.log.warnings,
    }


def rollback(
    log_path: str | os.PathLike[str],
    phase: str,
    *,
    confirm: Confirm | None,
    workspace: str | os.PathLike[str] | None = None,
    dry_run: bool = False,
    by: str = "",
) -> dict[str, Any]:
    """Roll back `log_path` and return the seed's report.

    `confirm` receives the seed's prompt and says yes or no; None means no confirmation is
    required. A dry run validates and predicts warnings but changes nothing. `by` (who asked)
    is kept in the undo log's metadata.
    """
    return run_rollback(
        log_path, phase, confirm=confirm, workspace=workspace, dry_run=dry_run, by=by
    ).report


def run_rollback(
    log_path: str | os.PathLike[str],
    phase: str,
    *,
    confirm: Confirm | None,
    workspace: str | os.PathLike[str] | None = None,
    dry_run: bool = False,
    by: str = "",
) -> RollbackResult:
    """Like `rollback()`, also telling success (0), failure (1), bad input (2), declined (3)."""
    started = time.monotonic()
    report = _Report(phase)
    try:
        plan = plan_rollback(log_path, phase, workspace=workspace)
    except RollbackInputError as exc:
        report.errors.extend(exc.errors)
        return RollbackResult(report.finish(started, success=False), EXIT_BAD_INPUT)

    if dry_run:
        report.warnings.extend(_predicted_warnings(plan))
        report.warnings.extend(plan.log.warnings)
        return RollbackResult(report.finish(started, success=True), EXIT_OK)

    if confirm is not None:
        waited = time.monotonic()
        agreed = confirm(confirmation_prompt(plan.log))
        # The seed's declined result reports no work; time spent waiting for a person is not it.
        started += time.monotonic() - waited
        if not agreed:
            report.user_declined = True
            return RollbackResult(report.finish(started, success=False), EXIT_DECLINED)

    undo = _UndoRecorder(plan.root, plan.log.phase, plan.log_path, by=by)
    engine = _Engine(plan, report, undo)
    engine.run()
    if undo.unsaved:
        report.warnings.append(UNDO_CANNOT_KEEP.format(paths=", ".join(undo.unsaved)))
    # After the work: an odd timestamp says nothing about how the rollback went, so it does not
    # keep `.rollback/` as a real warning of step 4 to 8 does.
    report.warnings.extend(plan.log.warnings)
    # The seed: partial rollbacks are a success with warnings; only nothing done is a failure.
    success = not report.errors or report.did_something
    result = report.finish(started, success=success, undo_log=undo.log_path)
    code = EXIT_OK if success and not report.errors else EXIT_FAILED
    return RollbackResult(result, code)


# --------------------------------------------------------------------------- internals


@dataclass
class _Report:
    phase: str
    actions_taken: list[str] = field(default_factory=list)
    files_restored: int = 0
    files_deleted: int = 0
    commands_reverted: int = 0
    git_commits_reverted: int = 0
    artifacts_cleaned: int = 0
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    user_declined: bool = False

    @property
    def did_something(self) -> bool:
        return bool(self.actions_taken)

    def finish(
        self, started: float, *, success: bool, undo_log: Path | None = None
    ) -> dict[str, Any]:
        report: dict[str, Any] = {"success": success, "phase": self.phase}
        if self.user_declined:
            report["user_declined"] = True
        report.update(
            actions_taken=self.actions_taken,
            files_restored=self.files_restored,
            files_deleted=self.files_deleted,
            commands_reverted=self.commands_reverted,
            git_commits_reverted=self.git_commits_reverted,
            artifacts_cleaned=self.artifacts_cleaned,
            errors=self.errors,
            warnings=self.warnings,
            timestamp=utc_timestamp(),
            duration_ms=max(0, int((time.monotonic() - started) * 1000)),
        )
        if undo_log is not None:
            report["undo_log"] = os.fspath(undo_log)
        return report


class _UndoRecorder:
    """Saves what the rollback is about to overwrite or delete, and the counter changes log."""

    def __init__(self, root: Path, phase: str, source: Path, *, by: str = "") -> None:
        self.root = root
        self.phase = phase
        self.source = source
        self.by = by
        self.dir: Path | None = None
        self.log: ChangesLog | None = None
        self._seen: set[str] = set()
        self._created: set[str] = set()
        self.unsaved: list[str] = []  # removed or overwritten, but not kept for the undo
        self._dirty = False  # kept or noted, not yet in the log on disk

    @property
    def log_path(self) -> Path | None:
        return None if self.dir is None else self.dir / UNDO_LOG_NAME

    # Keeping and noting only record; `flush` writes the counter log. The engine flushes before
    # every change it makes, so whatever it changes is in the log on disk first (a crash leaves
    # a log that undoes all it did), while a batch of files costs one write of the log.

    def save_file(self, path: Path) -> None:
        """Keep `path`'s current content; the first save of a path wins (the pre-rollback state)."""
        rel = relative_name(self.root, path)
        if rel in self._seen:
            return
        try:
            # Only sorts files from links; copy_into below checks where the file really is.
            st = os.lstat(path)
        except FileNotFoundError:
            st = None
        if st is None or not stat.S_ISREG(st.st_mode):
            # A symlink or special file cannot be expressed in a changes log; say so in it,
            # and in the report's warnings.
            self._ensure().metadata.setdefault("not_restorable", []).append(rel)
            self.unsaved.append(rel)
            self._seen.add(rel)
            self._dirty = True
            return
        log = self._ensure()
        assert self.dir is not None
        backup = self.dir / "files" / rel
        # Read by fd, checked inside the workspace once open; written inside `.rollback-undo/`
        # through its checked folder: a symlink swapped in meanwhile leads nowhere.
        copy_into(self.root, path, backup, keep_times=True, undo_ok=True, fresh=True)
        log.files_modified.append(ModifiedFile(path=rel, backup=relative_name(self.root, backup)))
        self._seen.add(rel)
        self._dirty = True

    def save_tree(self, folder: Path) -> None:
        """Keep every file under `folder` (not following symlinks)."""
        for current, dirnames, filenames in os.walk(folder, followlinks=False):
            base = Path(current)
            for name in sorted(filenames):
                self.save_file(base / name)
            for name in sorted(dirnames):
                if (base / name).is_symlink():
                    self.save_file(base / name)

    def note_created(self, path: Path) -> None:
        """`path` did not exist before the rollback made it; undoing deletes it."""
        rel = relative_name(self.root, path)
        if rel in self._seen or any(
            parent.as_posix() in self._created for parent in Path(rel).parents
        ):
            return  # deleting the folder it went into undoes it already
        self._seen.add(rel)
        self._created.add(rel)
        self._ensure().files_created.append(rel)
        self._dirty = True

    def flush(self) -> None:
        """Write the counter log if anything was kept or noted since it was last written."""
        if self._dirty:
            self._write()
            self._dirty = False

    def note_commit(self, sha: str) -> None:
        """A revert commit the rollback made; undoing reverts it."""
        self._ensure().git_commits.append(sha)
        self._dirty = True
        self.flush()

    def _ensure(self) -> ChangesLog:
        if self.log is None:
            stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")
            base = self.root / UNDO_DIR
            folder = base / stamp
            suffix = 1
            while folder.exists():
                suffix += 1
                folder = base / f"{stamp}-{suffix}"
            # Made from the root one folder at a time, never through a symlink.
            made, _ = open_parent(self.root, folder / UNDO_LOG_NAME, undo_ok=True, create=True)
            os.close(made)
            self.dir = folder
            self.log = ChangesLog.new(self.phase)
            self.log.metadata = {
                "rollback_of": os.fspath(self.source.resolve()),
                "created_by": "versions rollback_changes",
                **({"requested_by": self.by} if self.by else {}),
            }
        return self.log

    def _write(self) -> None:
        assert self.log is not None and self.log_path is not None
        write_undo_log(self.log, self.log_path, self.root)


def write_undo_log(log: ChangesLog, path: Path, root: Path) -> None:
    """Write the counter log atomically, inside `.rollback-undo/` through its checked folder."""
    data = render_changes_log(log).encode("utf-8")
    replace_file(root, path, data=data, undo_ok=True, fsync=True)


class _Engine:
    """Steps 4 to 8 of the seed, each continuing past the failures it reports."""

    def __init__(self, plan: RollbackPlan, report: _Report, undo: _UndoRecorder) -> None:
        self.plan = plan
        self.root = plan.root
        self.report = report
        self.undo = undo
        self._git_home: str | None = None
        self._git_extra_env: dict[str, str] = {}

    def run(self) -> None:
        # git gets an empty HOME of its own, never the server user's.
        with tempfile.TemporaryDirectory(prefix="versions-git-home-") as home:
            self._git_home = home
            try:
                self.restore_modified_files()
                self.delete_created_files()
                self.revert_commands()
                self.revert_git_commits()
                self.clean_up()
            finally:
                self._git_home = None
        self.undo.flush()  # what was kept for a change that then failed is in the log too

    # Step 4
    def restore_modified_files(self) -> None:
        todo = []
        for entry, target, backup in self.plan.modified:
            if not backup.is_file():
                self.report.warnings.append(BACKUP_NOT_FOUND.format(backup=entry.backup))
                continue
            todo.append((entry, target, backup))

        def failed(item: tuple[ModifiedFile, Path, Path], exc: OSError) -> None:
            self.report.errors.append(RESTORE_FAILED.format(path=item[0].path, reason=_why(exc)))

        def done(item: tuple[ModifiedFile, Path, Path]) -> None:
            self.report.files_restored += 1
            self.report.actions_taken.append(
                RESTORED.format(path=item[0].path, backup=item[0].backup)
            )

        self._in_batches(
            todo,
            keep=lambda item: self._keep_before_restore(item[1]),
            change=lambda item, destination: self._restore(destination, item[2]),
            failed=failed,
            done=done,
        )

    def _keep_before_restore(self, target: Path) -> Path:
        """Keep what restoring `target` will overwrite (or note what it will create); returns
        where the restore writes."""
        # Write where a symlink points (as cp would), if that is still inside the workspace.
        destination = Path(os.path.realpath(target))
        if not is_inside(destination, self.root):
            raise OutsideWorkspaceError(target, LEADS_OUTSIDE)
        if destination.is_dir():
            raise IsADirectoryError(21, "is a directory")
        if destination.exists():
            self.undo.save_file(destination)
        else:
            missing = destination
            while not missing.parent.exists():
                missing = missing.parent
            self.undo.note_created(missing)
        return destination

    def _restore(self, destination: Path, backup: Path) -> None:
        # The backup is read from an fd opened without following a final symlink and checked to
        # be inside the workspace once open; the target is written as a temp file in its checked
        # parent folder and renamed over its name: atomic, never through a symlink or hard link.
        fd, _ = open_for_reading(self.root, backup)
        try:
            replace_file(self.root, destination, source_fd=fd)
        finally:
            os.close(fd)

    # Step 5
    def delete_created_files(self) -> None:
        todo = []
        for raw, path in self.plan.created:
            if not _exists(path):
                self.report.warnings.append(FILE_NOT_FOUND.format(file=raw))
                continue
            todo.append((raw, path))

        def failed(item: tuple[str, Path], exc: OSError) -> None:
            self.report.errors.append(DELETE_FAILED.format(path=item[0], reason=_why(exc)))

        def done(item: tuple[str, Path]) -> None:
            self.report.files_deleted += 1
            self.report.actions_taken.append(DELETED.format(path=item[0]))

        self._in_batches(
            todo,
            keep=lambda item: self._keep_before_remove(item[1]),
            change=lambda item, _kept: self._delete(item[1]),
            failed=failed,
            done=done,
        )

    def _remove(self, path: Path) -> None:
        """Counter-backup, then delete a file, a symlink (never its target) or a folder."""
        self._keep_before_remove(path)
        self.undo.flush()
        self._delete(path)

    def _keep_before_remove(self, path: Path) -> None:
        if stat.S_ISDIR(lstat_inside(self.root, path).st_mode):
            self.undo.save_tree(path)
        else:
            self.undo.save_file(path)

    def _delete(self, path: Path) -> None:
        # By name inside its checked parent folder: a folder swapped for a symlink meanwhile
        # cannot lead the delete outside the workspace.
        remove_inside(self.root, path)

    def _in_batches(
        self,
        items: list[Any],
        *,
        keep: Callable[[Any], Any],
        change: Callable[[Any, Any], None],
        failed: Callable[[Any, OSError], None],
        done: Callable[[Any], None],
    ) -> None:
        """For each batch of `items`: `keep` what each will change, write the counter log once,
        then `change` each. Batches double in size (the log grows with them), so the log is
        written a logarithmic number of times, not once per file."""
        start, size = 0, FIRST_BATCH
        while start < len(items):
            batch = items[start : start + size]
            start, size = start + len(batch), min(size * 2, MAX_BATCH)
            kept = []
            for item in batch:
                try:
                    kept.append((item, keep(item)))
                except OSError as exc:
                    failed(item, exc)
            self.undo.flush()
            for item, what in kept:
                try:
                    change(item, what)
                except OSError as exc:
                    failed(item, exc)
                    continue
                done(item)

    # Step 6
    def revert_commands(self) -> None:
        for command in self.plan.log.commands_executed:
            words = command.split()
            if words == ["pnpm", "install"]:
                self._rerun_pnpm_install(command)
            elif words[:2] == ["git", "add"]:
                self._unstage(command)
            elif words == ["pnpm", "build"]:
                self._remove_dist(command)
            elif words[:2] == ["git", "commit"]:
                continue  # the seed: commits are reverted in step 7, from git_commits
            else:
                self.report.warnings.append(CANNOT_AUTO_REVERT.format(command=command))

    def _rerun_pnpm_install(self, command: str) -> None:
        pnpm = shutil.which("pnpm")
        if pnpm is None:
            self.report.errors.append(COMMAND_FAILED.format(command=command, reason=PNPM_MISSING))
            return
        lockfile = self.root / "pnpm-lock.yaml"
        if lockfile.is_file():
            self.undo.save_file(lockfile)  # pnpm may rewrite it; node_modules is rebuilt anyway
            self.undo.flush()
        if self._run([pnpm, *PNPM_INSTALL_ARGS], command, timeout=PNPM_TIMEOUT):
            self._command_reverted(RERAN_PNPM_INSTALL)

    def _unstage(self, command: str) -> None:
        refusal = self._git_refusal()
        if refusal is not None:
            self.report.errors.append(COMMAND_FAILED.format(command=command, reason=refusal))
            self.report.warnings.append(CANNOT_AUTO_REVERT.format(command=command))
            return
        result = self._git("restore", "--staged", "--", ".")
        if result.returncode != 0:
            reason = _last_line(result.stderr or result.stdout) or f"exit {result.returncode}"
            self.report.errors.append(COMMAND_FAILED.format(command=command, reason=reason))
            return
        self._command_reverted(UNSTAGED)

    def _remove_dist(self, command: str) -> None:
        dist = self.root / "dist"
        if dist.is_symlink():
            reason = "dist/ is a symlink; it was left alone"
            self.report.errors.append(COMMAND_FAILED.format(command=command, reason=reason))
            return
        if not dist.exists():
            self._command_reverted(DIST_ALREADY_GONE)
            return
        try:
            self._remove(dist)
        except OSError as exc:
            self.report.errors.append(COMMAND_FAILED.format(command=command, reason=_why(exc)))
            return
        self._command_reverted(REMOVED_DIST)

    def _command_reverted(self, action: str) -> None:
        self.report.commands_reverted += 1
        self.report.actions_taken.append(action)

    def _run(self, argv: list[str], command: str, *, timeout: int) -> bool:
        # Argument lists only, never a shell: nothing from the log reaches an interpreter.
        env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
        try:
            result = subprocess.run(
                argv,
                cwd=self.root,
                capture_output=True,
                text=True,
                env=env,
                stdin=subprocess.DEVNULL,
                timeout=timeout,
                check=False,
            )
        except (OSError, subprocess.SubprocessError) as exc:
            self.report.errors.append(COMMAND_FAILED.format(command=command, reason=_why(exc)))
            return False
        if result.returncode != 0:
            reason = _last_line(result.stderr or result.stdout) or f"exit {result.returncode}"
            self.report.errors.append(COMMAND_FAILED.format(command=command, reason=reason))
            return False
        return True

    # Step 7
    def revert_git_commits(self) -> None:
        commits = self.plan.log.git_commits
        if not commits:
            return
        refusal = self._git_refusal()
        if refusal is not None:
            self.report.errors.append(GIT_REFUSED.format(reason=refusal))
            self.report.warnings.extend(
                MANUAL_RESOLUTION.format(sha=sha) for sha in reversed(commits)
            )
            return
        if self._git("rev-parse", "--is-inside-work-tree").returncode != 0:
            self.report.errors.append(GIT_UNAVAILABLE.format(root=self.root))
            return
        if self._git("symbolic-ref", "-q", "HEAD").returncode != 0:
            self.report.errors.append(GIT_DETACHED)
            return
        for sha in reversed(commits):  # newest first, as the seed says
            self._revert(sha)

    def _revert(self, sha: str) -> None:
        if self._git("rev-parse", "--quiet", "--verify", f"{sha}^{{commit}}").returncode != 0:
            self.report.errors.append(REVERT_FAILED.format(sha=sha, reason="commit not found"))
            return
        result = self._git("revert", "--no-edit", sha)
        if result.returncode == 0:
            head = self._git("rev-parse", "HEAD").stdout.strip()
            if head:
                self.undo.note_commit(head)
            self.report.git_commits_reverted += 1
            self.report.actions_taken.append(REVERTED_COMMIT.format(sha=sha))
            return
        conflicted = [
            name
            for name in self._git("diff", "--name-only", "--diff-filter=U", "-z").stdout.split("\0")
            if name
        ]
        if self._git("rev-parse", "--quiet", "--verify", "REVERT_HEAD").returncode == 0:
            # Leave the tree as it was before this revert, so the next steps work on a clean tree.
            self._git("revert", "--abort")
        if conflicted:
            self.report.errors.append(REVERT_CONFLICT.format(sha=sha, files=", ".join(conflicted)))
            self.report.warnings.append(MANUAL_RESOLUTION.format(sha=sha))
        else:
            reason = _last_line(result.stderr or result.stdout) or f"exit {result.returncode}"
            self.report.errors.append(REVERT_FAILED.format(sha=sha, reason=reason))

    def _git_refusal(self) -> str | None:
        """Read the workspace's own git config before running git there: why git may not run
        (it would run a program the workspace names), or None. Run before each git step."""
        assert self._git_home is not None
        refusal, config = git_config_refusal(self.root, self._git_home)
        self._git_extra_env = identity_env(config) if refusal is None else {}
        return refusal

    def _git(self, *args: str) -> subprocess.CompletedProcess[str]:
        """git with hooks, fsmonitor and signing off, no system or global config, an empty HOME.
        Only called after `_git_refusal()` found nothing in the workspace's config."""
        assert self._git_home is not None
        env = {**git_env(self._git_home), **self._git_extra_env}
        return run_git(self.root, self._git_home, *args, env=env, timeout=GIT_TIMEOUT)

    # Step 8
    def clean_up(self) -> None:
        for wording, entries in (
            (REMOVED_PLAN_FILE, self.plan.plan_files),
            (REMOVED_ARTIFACT, self.plan.artifacts),
        ):
            for raw, path in entries:
                if not _exists(path):
                    continue  # rm -f: an artifact already gone is what we wanted
                try:
                    self._remove(path)
                except OSError as exc:
                    self.report.errors.append(REMOVE_FAILED.format(path=raw, reason=_why(exc)))
                    continue
                self.report.artifacts_cleaned += 1
                self.report.actions_taken.append(wording.format(path=raw))
        self._remove_backups()

    def _remove_backups(self) -> None:
        # The seed keeps the backups unless everything succeeded. A counter log's own rollback
        # leaves `.rollback/` alone: it has just put that folder back.
        if self.report.errors or self.report.warnings or self.plan.is_counter_log:
            return
        backups = self.root / BACKUP_DIR
        if backups.is_dir() and not backups.is_symlink():
            try:
                self._remove(backups)
            except OSError as exc:
                self.report.warnings.append(
                    REMOVE_FAILED.format(path=f"{BACKUP_DIR}/", reason=_why(exc))
                )


def _predicted_warnings(plan: RollbackPlan) -> list[str]:
    warnings = [
        BACKUP_NOT_FOUND.format(backup=entry.backup)
        for entry, _, backup in plan.modified
        if not backup.is_file()
    ]
    warnings.extend(
        FILE_NOT_FOUND.format(file=raw) for raw, path in plan.created if not _exists(path)
    )
    warnings.extend(
        CANNOT_AUTO_REVERT.format(command=command)
        for command in plan.log.commands_executed
        if _revert_description(command) is None
    )
    return warnings


def _revert_description(command: str) -> str | None:
    words = command.split()
    if words == ["pnpm", "install"]:
        return "pnpm install"
    if words[:2] == ["git", "add"]:
        return "git restore --staged ."
    if words == ["pnpm", "build"]:
        return "remove dist/"
    if words[:2] == ["git", "commit"]:
        return "reverted with git_commits"
    return None


def _exists(path: Path) -> bool:
    return path.exists() or path.is_symlink()


def _why(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return str(exc) or type(exc).__name__


def _last_line(text: str) -> str:
    """The line of a tool's output that says why: git's ``error:`` line, else the last line."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    for line in lines:
        if line.startswith("error: "):
            return line.removeprefix("error: ")
    return lines[-1] if lines else ""
