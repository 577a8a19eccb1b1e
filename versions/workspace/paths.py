"""Keep every path a changes log names inside its workspace.

A changes log is data written by an agent; nothing in it is trusted. Each path is checked
lexically (absolute paths, `..`) and then on disk (symlinks), and `.git` is off limits, all
before the engine touches anything.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from pathlib import Path

UNDO_DIR = ".rollback-undo"
BACKUP_DIR = ".rollback"

REFUSED = 'Refused path "{path}" in {where}: {reason}'
WORKSPACE_NOT_FOUND = "Workspace not found: {path}"

OUTSIDE = "absolute path outside the workspace {root}"
DOTDOT = "'..' escapes the workspace"
SYMLINK = "a symlink leads outside the workspace"
INSIDE_GIT = "paths inside .git are never touched"
INSIDE_UNDO = f"{UNDO_DIR}/ holds the counter-backups and is never a target"
IS_ROOT = "names the workspace root itself"
EMPTY = "empty path"
NUL = "contains a NUL byte"

# Git variables that would point our git calls at some other repository than the workspace's.
_GIT_LOCATION_VARS = ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY")


class UnsafePathError(ValueError):
    """A path from a changes log would leave the workspace or touch `.git`."""


def git_env() -> dict[str, str]:
    """The environment for git subprocesses, without variables that redirect git elsewhere."""
    env = {k: v for k, v in os.environ.items() if k not in _GIT_LOCATION_VARS}
    env["GIT_TERMINAL_PROMPT"] = "0"
    return env


def git_toplevel(folder: Path) -> Path | None:
    """The top level of the git work tree containing `folder`, or None outside git."""
    try:
        result = subprocess.run(
            ["git", "-C", os.fspath(folder), "rev-parse", "--show-toplevel"],
            capture_output=True,
            text=True,
            env=git_env(),
            stdin=subprocess.DEVNULL,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if result.returncode != 0 or not result.stdout.strip():
        return None
    return Path(result.stdout.strip()).resolve()


def workspace_root(
    log_path: str | os.PathLike[str], workspace: str | os.PathLike[str] | None = None
) -> Path:
    """`workspace` if given, else the git top level of the log's folder, else that folder."""
    if workspace is not None:
        root = Path(workspace).resolve()
        if not root.is_dir():
            raise UnsafePathError(WORKSPACE_NOT_FOUND.format(path=os.fspath(workspace)))
        return root
    folder = Path(log_path).resolve().parent
    top = git_toplevel(folder)
    if top is not None:
        return top
    # A counter changes log lives in <root>/.rollback-undo/<stamp>/; its paths are relative
    # to <root>, so rolling a rollback back works outside git too.
    if folder.parent.name == UNDO_DIR:
        return folder.parent.parent
    return folder


def resolve_in_workspace(root: Path, raw: str, *, where: str, target: bool = True) -> Path:
    """The absolute path `raw` names inside `root`, or UnsafePathError saying why not.

    Relative paths are taken from the workspace root. `target` marks paths the engine writes or
    deletes; those may not be the root itself nor inside `.rollback-undo/`.
    """

    def refuse(reason: str) -> UnsafePathError:
        return UnsafePathError(REFUSED.format(path=raw, where=where, reason=reason))

    if not raw or not raw.strip():
        raise refuse(EMPTY)
    if "\x00" in raw:
        raise refuse(NUL)
    root = root.resolve()
    given = Path(raw)
    lexical = Path(os.path.normpath(given if given.is_absolute() else root / given))
    if not _within(lexical, root):
        raise refuse(OUTSIDE.format(root=root) if given.is_absolute() else DOTDOT)
    _check_parts(lexical.relative_to(root), refuse, target=target)
    # realpath follows every symlink on the way, the last component included: writing through a
    # link (or deleting under a linked folder) must land inside the workspace too.
    real = Path(os.path.realpath(lexical))
    if not _within(real, root):
        raise refuse(SYMLINK)
    _check_parts(real.relative_to(root), refuse, target=target)
    if target and real == root:
        raise refuse(IS_ROOT)
    return lexical


def relative_name(root: Path, path: Path) -> str:
    """`path` relative to `root`, with forward slashes, for logs and messages."""
    return path.relative_to(root.resolve()).as_posix()


def _within(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


def _check_parts(relative: Path, refuse: Callable[[str], UnsafePathError], *, target: bool) -> None:
    parts = [part.lower() for part in relative.parts]
    if ".git" in parts:
        raise refuse(INSIDE_GIT)
    if target and parts and parts[0] == UNDO_DIR:
        raise refuse(INSIDE_UNDO)
    if target and not parts:
        raise refuse(IS_ROOT)
