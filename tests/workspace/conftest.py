"""Fixtures for the rollback tests: real git repositories in tmp_path, an outside folder."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from rollback_helpers import commit_all, git, write


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A real git repository with one commit, its own identity, and the rollback dirs ignored."""
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    git(root, "config", "user.email", "rollback-tests@example.com")
    git(root, "config", "user.name", "Rollback Tests")
    git(root, "config", "commit.gpgsign", "false")
    # The seed: backups live in .rollback/ (gitignored); logs are temporary files.
    exclude = root / ".git" / "info" / "exclude"
    exclude.parent.mkdir(parents=True, exist_ok=True)
    exclude.write_text(".rollback/\n.rollback-undo/\n.*-changes.json\n", encoding="utf-8")
    write(root, "README.md", "# Demo\n")
    commit_all(root, "initial")
    return root.resolve()


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A folder beside the workspace that no rollback may ever touch."""
    folder = tmp_path / "outside"
    folder.mkdir()
    write(folder, "victim.txt", "do not touch\n")
    write(folder, "secret.txt", "secret\n")
    return folder.resolve()


@pytest.fixture
def fake_pnpm(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A `pnpm` on PATH that only records its arguments (the real one is not needed)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    calls = tmp_path / "pnpm-calls.txt"
    script = bin_dir / "pnpm"
    script.write_text(f'#!/bin/sh\necho "$@" >> "{calls}"\n', encoding="utf-8")
    script.chmod(script.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")
    return calls
