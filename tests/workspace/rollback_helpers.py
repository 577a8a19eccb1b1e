"""Helpers for the rollback tests: git in tmp repositories, files, tree snapshots."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

# Bookkeeping that a rollback legitimately adds; trees are compared without it.
SKIP_DIRS = {".git", ".rollback-undo"}


def git(root: Path, *args: str) -> str:
    """Run git in `root` and return stdout (fails the test on a non-zero exit)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    result = subprocess.run(
        ["git", *args], cwd=root, capture_output=True, text=True, env=env, check=False
    )
    assert result.returncode == 0, f"git {' '.join(args)}: {result.stderr}"
    return result.stdout.strip()


def commit_all(root: Path, message: str) -> str:
    """Commit everything tracked-or-new except ignored files; return the full sha."""
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", message)
    return git(root, "rev-parse", "HEAD")


def write(root: Path, rel: str, text: str) -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def write_log(root: Path, name: str, data: dict[str, Any]) -> Path:
    path = root / name
    path.write_text(json.dumps(data, indent=2), encoding="utf-8")
    return path


def phase_log(root: Path, name: str = ".bug-changes.json", **fields: Any) -> Path:
    """A changes log of phase "bug-fixing" in ``root`` with ``fields`` over empty lists."""
    data: dict[str, Any] = {
        "phase": "bug-fixing",
        "timestamp": "2025-10-18T14:30:00Z",
        "files_modified": [],
        "files_created": [],
        "commands_executed": [],
        "git_commits": [],
        **fields,
    }
    return write_log(root, name, data)


def snapshot(root: Path, *, ignore: tuple[str, ...] = ()) -> dict[str, bytes]:
    """Every file under `root` (relative path → bytes), without .git, .rollback-undo, `ignore`."""
    files: dict[str, bytes] = {}
    for current, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d not in SKIP_DIRS]
        for name in filenames:
            path = Path(current) / name
            rel = path.relative_to(root).as_posix()
            if rel not in ignore:
                files[rel] = path.read_bytes()
    return files


def porcelain(root: Path) -> str:
    return git(root, "status", "--porcelain")
