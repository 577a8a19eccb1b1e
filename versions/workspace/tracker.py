"""The worker side: record what a workflow phase changes, so `rollback()` can undo it.

Call `record_modify()` before changing a file (it keeps a backup under `.rollback/`), and the
other `record_*`/`add_*` methods as things happen. The log is rewritten atomically after each
entry, so a worker that dies mid-phase still leaves a log that rolls back what it did.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from .changes_log import (
    ChangesLog,
    ChangesLogError,
    ModifiedFile,
    load_changes_log,
    write_changes_log,
)
from .paths import BACKUP_DIR, UNDO_DIR, relative_name, resolve_in_workspace, workspace_root
from .rollback import BAD_COMMIT_ID, PHASE_MISMATCH, is_commit_id
from .safeio import read_bytes, replace_file

NOT_A_FILE = "Cannot back up {path}: not an existing file (record_create is for new files)"
# The seed keeps backups in `.rollback/` "(gitignored)": a worker's `git add -A` must not commit
# them, nor the rollback's own counter-backups.
GITIGNORED = (f"{BACKUP_DIR}/", f"{UNDO_DIR}/")
GITIGNORE_NOTE = "# Rollback backups (Versions track_changes): never committed"
MAX_GITIGNORE_BYTES = 1 << 20


class ChangesTracker:
    """Records one phase's changes into the changes log at `log_path`."""

    def __init__(
        self,
        log_path: str | os.PathLike[str],
        phase: str,
        *,
        workspace: str | os.PathLike[str] | None = None,
    ) -> None:
        self.log_path = Path(log_path)
        # The workspace is checked first: a log path inside a mistyped one must not create it.
        self.root = workspace_root(self.log_path, workspace)
        ignore_rollback_folders(self.root)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        if self.log_path.exists():
            self.log = load_changes_log(self.log_path)
            if self.log.phase != phase:
                raise ChangesLogError(PHASE_MISMATCH.format(log_phase=self.log.phase, phase=phase))
        else:
            self.log = ChangesLog.new(phase)
            self._write()

    def record_modify(self, path: str | os.PathLike[str]) -> str | None:
        """Back up `path` to `.rollback/` before the caller changes it; return the backup's name.

        The first backup of a file wins (it holds the content from before the phase). Files this
        phase created need none, since rolling back deletes them: None is returned.
        """
        rel, absolute = self._contain(path, "files_modified")
        if rel in self.log.files_created:
            return None
        for entry in self.log.files_modified:
            if entry.path == rel:
                return entry.backup
        if not absolute.is_file():
            raise FileNotFoundError(NOT_A_FILE.format(path=rel))
        backup = self._backup_name(rel)
        target = self.root / backup
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(absolute, target)
        self.log.files_modified.append(ModifiedFile(path=rel, backup=backup))
        self._write()
        return backup

    def record_create(self, path: str | os.PathLike[str]) -> None:
        """Note a file or folder this phase created (rolling back deletes it)."""
        rel, _ = self._contain(path, "files_created")
        if rel not in self.log.files_created and not self._is_modified(rel):
            self.log.files_created.append(rel)
            self._write()

    def record_command(self, command: str) -> None:
        """Note a command the worker ran (only the seed's mapping is ever reverted)."""
        if not command.strip():
            raise ValueError("Cannot record an empty command")
        self.log.commands_executed.append(command)
        self._write()

    def record_commit(self, sha: str) -> None:
        """Note a commit the worker made; rolling back reverts it."""
        if not is_commit_id(sha):
            raise ValueError(BAD_COMMIT_ID.format(sha=sha))
        if sha not in self.log.git_commits:
            self.log.git_commits.append(sha)
            self._write()

    def add_artifact(self, path: str | os.PathLike[str]) -> None:
        """Note a temporary file to remove when rolling back."""
        rel, _ = self._contain(path, "artifacts")
        if rel not in self.log.artifacts:
            self.log.artifacts.append(rel)
            self._write()

    def add_plan_file(self, path: str | os.PathLike[str]) -> None:
        """Note a plan file to remove when rolling back."""
        rel, _ = self._contain(path, "plan_files")
        if rel not in self.log.plan_files:
            self.log.plan_files.append(rel)
            self._write()

    def _contain(self, path: str | os.PathLike[str], where: str) -> tuple[str, Path]:
        # Relative paths are the caller's (cwd), as for any file API; the log stores them
        # relative to the workspace root, where the rollback will look for them.
        given = Path(os.path.abspath(path))
        # Canonical folder (the root is canonical too), but the name itself is kept: a symlink
        # the worker created is recorded as the link, not as whatever it points to.
        absolute = Path(os.path.realpath(given.parent)) / given.name
        resolve_in_workspace(self.root, os.fspath(absolute), where=where)
        return relative_name(self.root, absolute), absolute

    def _is_modified(self, rel: str) -> bool:
        return any(entry.path == rel for entry in self.log.files_modified)

    def _backup_name(self, rel: str) -> str:
        # The seed flattens src/app.ts to .rollback/src-app.ts.backup; a counter keeps
        # src/app.ts and src-app.ts from sharing one backup.
        flat = rel.replace("/", "-")
        taken = {entry.backup for entry in self.log.files_modified}
        candidate = f"{BACKUP_DIR}/{flat}.backup"
        counter = 1
        while candidate in taken or (self.root / candidate).exists():
            counter += 1
            candidate = f"{BACKUP_DIR}/{flat}.{counter}.backup"
        return candidate

    def _write(self) -> None:
        write_changes_log(self.log, self.log_path)


def ignore_rollback_folders(root: Path) -> bool:
    """Add `.rollback/` and `.rollback-undo/` to the workspace's `.gitignore` unless it already
    ignores them; True when it was changed. The file is read and replaced inside the workspace
    only (a `.gitignore` that leads outside is refused, never written through)."""
    path = root / ".gitignore"
    try:
        text, _ = read_bytes(root, path, limit=MAX_GITIGNORE_BYTES)
    except FileNotFoundError:
        text = b""
    if len(text) > MAX_GITIGNORE_BYTES:
        return False  # not a .gitignore a person keeps: leave it be
    present = {line.strip().strip("/") for line in text.decode("utf-8", "replace").splitlines()}
    missing = [entry for entry in GITIGNORED if entry.strip("/") not in present]
    if not missing:
        return False
    lines = "\n".join([GITIGNORE_NOTE, *missing]) + "\n"
    if text and not text.endswith(b"\n"):
        lines = "\n" + lines
    replace_file(root, path, data=text + lines.encode("utf-8"))
    return True
