"""Keep every path a changes log names inside its workspace.

A changes log is data written by an agent; nothing in it is trusted. Each path is checked
lexically (absolute paths, `..`) and then on disk (symlinks), and `.git` is off limits, all
before the engine touches anything.
"""

from __future__ import annotations

import functools
import os
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path

from .safeio import OutsideWorkspaceError

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

# Options on every git call: nothing the workspace configures may run a program (hooks, an
# fsmonitor, a signing program); the config is checked for the rest before git runs at all.
GIT_SAFE_OPTIONS = (
    "-c",
    "core.hooksPath=/dev/null",
    "-c",
    "core.fsmonitor=false",
    "-c",
    "commit.gpgSign=false",
)
# Local config keys that make git run a program (or work outside the workspace) while it
# reverts, restores, diffs or commits: git is not run in a workspace whose config sets one.
_RISKY_KEYS = frozenset(
    {
        "include.path",
        "core.fsmonitor",
        "core.hookspath",
        "core.sshcommand",
        "core.gitproxy",
        "core.askpass",
        "core.worktree",
        "diff.external",
        "gpg.program",
    }
)
_RISKY_SECTIONS = frozenset({"filter", "includeif"})
GIT_RUNS_PROGRAM = (
    "the workspace's git config sets {keys}, which would make git run a program; git was not run"
)
GIT_CONFIG_UNREADABLE = "the workspace's git config cannot be read ({reason}); git was not run"
FALLBACK_IDENTITY = ("Versions rollback", "versions-rollback@localhost")


class UnsafePathError(ValueError):
    """A path from a changes log would leave the workspace or touch `.git`."""


def git_env(home: str | os.PathLike[str]) -> dict[str, str]:
    """The environment for git in an untrusted workspace: no GIT_* variable from ours (nothing
    redirects git elsewhere or adds config), no system or global config, no prompts, editors,
    pagers or askpass programs, and `home` (an empty folder) as HOME."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.pop("SSH_ASKPASS", None)
    env.update(
        GIT_CONFIG_NOSYSTEM="1",
        GIT_CONFIG_GLOBAL=os.devnull,
        GIT_ATTR_NOSYSTEM="1",
        GIT_TERMINAL_PROMPT="0",
        GIT_EDITOR="true",
        GIT_SEQUENCE_EDITOR="true",
        GIT_PAGER="cat",
        GIT_ASKPASS="",
        HOME=os.fspath(home),
        XDG_CONFIG_HOME=os.fspath(home),
    )
    return env


def git_argv(*args: str) -> list[str]:
    """`git` with the options that keep the workspace's hooks and fsmonitor from running."""
    return ["git", *GIT_SAFE_OPTIONS, *args]


def run_git(
    folder: str | os.PathLike[str],
    home: str | os.PathLike[str],
    *args: str,
    env: dict[str, str] | None = None,
    timeout: int = 120,
    options: bool = True,
) -> subprocess.CompletedProcess[str]:
    """Run git with the safe options and environment in `folder`; never raises for a failure.

    `options=False` leaves out the `-c` options, for `git config --list`, which runs nothing
    and would otherwise list them as if the workspace had set them."""
    argv = git_argv(*args) if options else ["git", *args]
    try:
        return subprocess.run(
            argv,
            cwd=os.fspath(folder),
            capture_output=True,
            text=True,
            env=env if env is not None else git_env(home),
            stdin=subprocess.DEVNULL,
            timeout=timeout,
            check=False,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return subprocess.CompletedProcess(argv, 1, "", str(exc) or type(exc).__name__)


def risky_git_key(key: str, value: str = "") -> bool:
    """True for a config key that makes git run a program (or leave the workspace)."""
    key = key.lower()
    section, _, rest = key.partition(".")
    name = key.rsplit(".", 1)[-1]
    has_subsection = "." in rest
    if key == "core.fsmonitor" and value.strip().lower() in ("false", "no", "off", "0"):
        return False
    if key in _RISKY_KEYS or section in _RISKY_SECTIONS:
        return True
    if section == "merge" and has_subsection and name == "driver":
        return True
    if section == "gpg" and name == "program":
        return True
    return section == "diff" and has_subsection and name in ("command", "textconv")


def local_git_config(
    folder: str | os.PathLike[str], home: str | os.PathLike[str]
) -> tuple[dict[str, str] | None, str | None]:
    """The workspace's own git config (key → last value), read without following includes;
    or (None, why) when it cannot be read."""
    result = run_git(folder, home, "config", "--list", "--no-includes", "-z", options=False)
    if result.returncode != 0:
        if "not in a git directory" in result.stderr or not result.stderr.strip():
            return {}, None  # no repository: nothing configured (the step says so itself)
        lines = [line for line in result.stderr.strip().splitlines() if line.strip()]
        return None, (lines[-1] if lines else f"exit {result.returncode}")
    config: dict[str, str] = {}
    for entry in result.stdout.split("\0"):
        if entry:
            key, _, value = entry.partition("\n")
            config[key.lower()] = value
    return config, None


def git_config_refusal(
    folder: str | os.PathLike[str], home: str | os.PathLike[str]
) -> tuple[str | None, dict[str, str]]:
    """Why git may not run in `folder` (in words), or None; and the config that was read."""
    config, unreadable = local_git_config(folder, home)
    if config is None:
        return GIT_CONFIG_UNREADABLE.format(reason=unreadable), {}
    risky = sorted(key for key, value in config.items() if risky_git_key(key, value))
    if risky:
        return GIT_RUNS_PROGRAM.format(keys=", ".join(risky)), config
    return None, config


def identity_env(config: dict[str, str]) -> dict[str, str]:
    """Author and committer for a revert when the workspace's config names none (the global
    config is not read): the server user's own git identity, else a fixed one."""
    if config.get("user.name") and config.get("user.email"):
        return {}
    name, email = _server_identity()
    name = config.get("user.name") or name
    email = config.get("user.email") or email
    return {
        "GIT_AUTHOR_NAME": name,
        "GIT_AUTHOR_EMAIL": email,
        "GIT_COMMITTER_NAME": name,
        "GIT_COMMITTER_EMAIL": email,
    }


@functools.cache
def _server_identity() -> tuple[str, str]:
    # Read outside any workspace, from the server user's own (trusted) global config.
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env["GIT_CONFIG_NOSYSTEM"] = "1"
    found = []
    for key, fallback in zip(("user.name", "user.email"), FALLBACK_IDENTITY, strict=True):
        try:
            result = subprocess.run(
                ["git", "config", "--global", "--get", key],
                cwd=os.path.abspath(os.sep),
                capture_output=True,
                text=True,
                env=env,
                stdin=subprocess.DEVNULL,
                timeout=30,
                check=False,
            )
            value = result.stdout.strip() if result.returncode == 0 else ""
        except (OSError, subprocess.SubprocessError):
            value = ""
        found.append(value or fallback)
    return found[0], found[1]


def git_toplevel(folder: Path) -> Path | None:
    """The top level of the git work tree containing `folder`, or None outside git."""
    if not os.path.isdir(folder):
        return None
    with tempfile.TemporaryDirectory(prefix="versions-git-home-") as home:
        result = run_git(folder, home, "rev-parse", "--show-toplevel", timeout=30)
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
    """`path` relative to `root`, with forward slashes, for logs and messages.

    A path outside `root` (a symlink swapped in since the plan) raises OutsideWorkspaceError,
    an OSError, which the engine reports for that one file."""
    try:
        return path.relative_to(root.resolve()).as_posix()
    except ValueError:
        raise OutsideWorkspaceError(path) from None


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
