"""The workspace is written by the agent, so nothing in it may make the rollback run a command
(git hooks, git config that names programs, package scripts), and no path in it may lead a read
or a write outside it, even when it is swapped for a symlink after the rollback was planned."""

from __future__ import annotations

import importlib
import os
import stat
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse
from rollback_helpers import commit_all, git, phase_log, write

from versions.workspace import OutsideWorkspaceError, log_sets, open_for_reading, rollback

rollback_module = importlib.import_module("versions.workspace.rollback")
safeio = importlib.import_module("versions.workspace.safeio")

LOG = ".bug-changes.json"


def a_log(root: Path, **fields: Any) -> Path:
    return phase_log(root, LOG, **fields)


def run(root: Path) -> dict[str, Any]:
    return rollback(root / LOG, "bug-fixing", confirm=None, workspace=root)


def marker_script(folder: Path, marker: Path, name: str = "evil.sh") -> Path:
    """An executable that proves it ran by writing `marker` (and passes stdin through)."""
    script = folder / name
    script.write_text(f'#!/bin/sh\necho ran >> "{marker}"\ncat\n', encoding="utf-8")
    script.chmod(script.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return script


# --------------------------------------------------------------------------- git runs nothing


def test_git_hooks_of_the_workspace_never_run_but_the_revert_happens(
    repo: Path, tmp_path: Path
) -> None:
    write(repo, "src/app.ts", "v1\n")
    commit_all(repo, "v1")
    write(repo, "src/app.ts", "v2\n")
    sha = commit_all(repo, "v2")
    marker = tmp_path / "PWNED"
    hooks = repo / ".git" / "hooks"
    for hook in ("post-commit", "prepare-commit-msg", "pre-commit", "commit-msg"):
        marker_script(hooks, marker, hook)
    a_log(repo, git_commits=[sha])

    report = run(repo)

    assert not marker.exists(), "a hook of the workspace ran"
    assert report["errors"] == []
    assert report["git_commits_reverted"] == 1
    assert f"Reverted git commit {sha}" in report["actions_taken"]
    assert (repo / "src/app.ts").read_text() == "v1\n"


def test_core_fsmonitor_is_refused_in_words_and_never_runs(repo: Path, tmp_path: Path) -> None:
    marker = tmp_path / "PWNED"
    script = marker_script(tmp_path, marker)
    write(repo, "src/a.ts", "a\n")
    git(repo, "add", "src/a.ts")
    git(repo, "config", "core.fsmonitor", str(script))
    a_log(repo, commands_executed=["git add ."])

    report = run(repo)

    assert not marker.exists(), "core.fsmonitor ran"
    assert report["commands_reverted"] == 0
    assert report["errors"] == [
        "Failed to revert command git add .: the workspace's git config sets core.fsmonitor, "
        "which would make git run a program; git was not run"
    ]
    assert report["warnings"] == ["Cannot auto-revert: git add . (manual intervention required)"]


def test_a_filter_driver_is_refused_the_rest_continues(repo: Path, tmp_path: Path) -> None:
    marker = tmp_path / "PWNED"
    script = marker_script(tmp_path, marker)
    write(repo, ".gitattributes", "*.txt filter=x\n")
    write(repo, "notes.txt", "one\n")
    commit_all(repo, "notes")
    write(repo, "notes.txt", "two\n")
    sha = commit_all(repo, "notes two")
    git(repo, "config", "filter.x.smudge", str(script))
    git(repo, "config", "filter.x.clean", str(script))
    write(repo, "src/app.ts", "changed\n")
    write(repo, ".rollback/app.backup", "original\n")
    a_log(
        repo,
        files_modified=[{"path": "src/app.ts", "backup": ".rollback/app.backup"}],
        git_commits=[sha],
    )
    head = git(repo, "rev-parse", "HEAD")

    report = run(repo)

    assert not marker.exists(), "a filter driver ran"
    assert git(repo, "rev-parse", "HEAD") == head
    assert report["git_commits_reverted"] == 0
    assert report["errors"] == [
        "Cannot revert git commits: the workspace's git config sets filter.x.clean, "
        "filter.x.smudge, which would make git run a program; git was not run"
    ]
    assert report["warnings"] == [f"Manual resolution required for commit {sha}"]
    # The seed: a failed step is reported and the rest continues.
    assert report["files_restored"] == 1
    assert (repo / "src/app.ts").read_text() == "original\n"
    assert report["success"] is True


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("merge.evil.driver", "MARKER %O %A %B"),
        ("include.path", "../../evil.config"),
        ("includeIf.gitdir:/.path", "../../evil.config"),
        ("diff.external", "MARKER"),
        ("gpg.program", "MARKER"),
        ("gpg.ssh.program", "MARKER"),
        ("core.sshCommand", "MARKER"),
        ("core.hooksPath", "hooks-elsewhere"),
        ("core.worktree", "/"),
    ],
)
def test_config_keys_that_run_programs_refuse_git(
    repo: Path, tmp_path: Path, key: str, value: str
) -> None:
    marker = tmp_path / "PWNED"
    script = marker_script(tmp_path, marker)
    write(repo, "src/app.ts", "v2\n")
    sha = commit_all(repo, "v2")
    git(repo, "config", key, value.replace("MARKER", str(script)))
    a_log(repo, git_commits=[sha])

    report = run(repo)

    assert not marker.exists()
    assert report["git_commits_reverted"] == 0
    assert len(report["errors"]) == 1
    assert report["errors"][0].startswith("Cannot revert git commits: the workspace's git config")
    assert key.lower() in report["errors"][0]
    assert report["warnings"] == [f"Manual resolution required for commit {sha}"]


def test_git_never_sees_the_servers_global_config(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """HOME is an empty folder of the rollback's own: a global config cannot add hooks."""
    marker = tmp_path / "PWNED"
    hooks = tmp_path / "global-hooks"
    hooks.mkdir()
    marker_script(hooks, marker, "post-commit")
    home = tmp_path / "home"
    home.mkdir()
    (home / ".gitconfig").write_text(f"[core]\n\thooksPath = {hooks}\n", encoding="utf-8")
    write(repo, "src/app.ts", "v2\n")
    sha = commit_all(repo, "v2")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("GIT_CONFIG_PARAMETERS", f"'core.hooksPath'='{hooks}'")
    a_log(repo, git_commits=[sha])

    report = run(repo)

    assert report["errors"] == []
    assert report["git_commits_reverted"] == 1
    assert not marker.exists()


# --------------------------------------------------------------------------- no way outside


def test_a_backup_swapped_for_a_symlink_after_planning_is_refused(
    repo: Path, outside: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(repo, "src/app.ts", "current\n")
    write(repo, "src/utils.ts", "current utils\n")
    write(repo, ".rollback/app.backup", "benign\n")
    write(repo, ".rollback/utils.backup", "original utils\n")
    a_log(
        repo,
        files_modified=[
            {"path": "src/app.ts", "backup": ".rollback/app.backup"},
            {"path": "src/utils.ts", "backup": ".rollback/utils.backup"},
        ],
    )
    real_plan = rollback_module.plan_rollback

    def plan_then_swap(*args: Any, **kwargs: Any) -> Any:
        plan = real_plan(*args, **kwargs)
        backup = repo / ".rollback/app.backup"
        backup.unlink()
        backup.symlink_to(outside / "secret.txt")
        return plan

    monkeypatch.setattr(rollback_module, "plan_rollback", plan_then_swap)

    report = run(repo)

    assert "secret" not in (repo / "src/app.ts").read_text()
    assert (repo / "src/app.ts").read_text() == "current\n"
    assert report["errors"] == ["Failed to restore src/app.ts: it leads outside the workspace"]
    assert report["files_restored"] == 1  # the rest continues
    assert (repo / "src/utils.ts").read_text() == "original utils\n"
    # Nothing of the outside file reached the undo log either.
    for current, _dirs, files in os.walk(repo / ".rollback-undo"):
        for name in files:
            assert b"secret" not in (Path(current) / name).read_bytes()


def test_an_open_file_that_is_outside_is_refused_even_if_its_name_looked_inside(
    repo: Path, outside: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The check is on the opened file, not the name: a stale realpath cannot fool it."""
    (repo / "sub").symlink_to(outside)
    monkeypatch.setattr(safeio.os.path, "realpath", lambda p, **_: os.path.abspath(p))
    with pytest.raises(OutsideWorkspaceError):
        open_for_reading(repo, repo / "sub" / "secret.txt")


def test_without_proc_the_opened_file_is_compared_with_a_fresh_realpath(
    repo: Path, outside: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (repo / "sub").symlink_to(outside)
    write(repo, "inside.txt", "in\n")
    monkeypatch.setattr(safeio, "_HAS_PROC_FD", False)
    fd, _ = open_for_reading(repo, repo / "inside.txt")
    os.close(fd)
    with pytest.raises(OutsideWorkspaceError):
        open_for_reading(repo, repo / "sub" / "secret.txt")


@pytest.mark.parametrize("fifo", [True, False])
def test_a_backup_that_is_a_fifo_or_a_final_symlink_is_not_read(
    repo: Path, outside: Path, fifo: bool
) -> None:
    target = repo / "special"
    if fifo:
        os.mkfifo(target)
    else:
        target.symlink_to(outside / "secret.txt")
    with pytest.raises(OSError):
        fd, _ = open_for_reading(repo, target)
        os.close(fd)


def test_a_target_folder_swapped_for_a_symlink_before_the_rollback_is_refused(
    repo: Path, outside: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(repo, "src/app.ts", "current\n")
    write(repo, "gen/new.ts", "created\n")
    write(outside, "new.ts", "outside file of the same name\n")
    write(repo, ".rollback/app.backup", "original\n")
    a_log(
        repo,
        files_modified=[{"path": "src/app.ts", "backup": ".rollback/app.backup"}],
        files_created=["gen/new.ts"],
    )
    real_plan = rollback_module.plan_rollback

    def plan_then_swap(*args: Any, **kwargs: Any) -> Any:
        plan = real_plan(*args, **kwargs)
        for folder in ("src", "gen"):
            (repo / folder).rename(repo / f"{folder}-moved")
            (repo / folder).symlink_to(outside)
        return plan

    monkeypatch.setattr(rollback_module, "plan_rollback", plan_then_swap)

    report = run(repo)  # no exception

    assert not (outside / "app.ts").exists()
    assert (outside / "new.ts").read_text() == "outside file of the same name\n"
    assert (outside / "victim.txt").read_text() == "do not touch\n"
    assert sorted(p.name for p in outside.iterdir()) == ["new.ts", "secret.txt", "victim.txt"]
    assert report["errors"] == [
        "Failed to restore src/app.ts: it leads outside the workspace",
        "Failed to delete gen/new.ts: it leads outside the workspace",
    ]
    assert report["files_restored"] == 0 and report["files_deleted"] == 0


def test_a_target_folder_swapped_between_the_undo_copy_and_the_write_is_refused(
    repo: Path, outside: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(repo, "src/app.ts", "current\n")
    write(repo, ".rollback/app.backup", "original\n")
    a_log(repo, files_modified=[{"path": "src/app.ts", "backup": ".rollback/app.backup"}])
    real_keep = rollback_module._Engine._keep_before_restore

    def keep_then_swap(self: Any, target: Path) -> Any:
        destination = real_keep(self, target)
        (repo / "src").rename(repo / "src-moved")
        (repo / "src").symlink_to(outside)
        return destination

    monkeypatch.setattr(rollback_module._Engine, "_keep_before_restore", keep_then_swap)

    report = run(repo)

    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt", "victim.txt"]
    assert report["files_restored"] == 0
    assert report["errors"] == ["Failed to restore src/app.ts: it leads outside the workspace"]
    assert (repo / "src-moved/app.ts").read_text() == "current\n"


# --------------------------------------------------------------------------- the panel


@pytest.fixture
def panel_ws(tmp_path: Path, settings) -> Path:
    root = (tmp_path / "ws").resolve()
    root.mkdir()
    settings.VERSIONS_WORKSPACES = {"demo": str(root)}
    return root


def test_the_panel_answers_in_words_when_the_rollback_raises_value_error(
    panel_ws: Path, db, monkeypatch: pytest.MonkeyPatch
) -> None:
    import re

    client = Client()
    client.force_login(User.objects.create_superuser("reviewer"))
    write(panel_ws, "src/app.ts", "current\n")
    write(panel_ws, ".rollback/app.backup", "original\n")
    a_log(panel_ws, files_modified=[{"path": "src/app.ts", "backup": ".rollback/app.backup"}])
    url = reverse("versions:workspace_restore", args=["demo", "logs", LOG])
    dialog = client.get(url, headers={"HX-Request": "true"}).content.decode()
    sha = re.search(r'name="log_sha" value="([0-9a-f]{64})"', dialog)
    assert sha

    def boom(*args: Any, **kwargs: Any) -> Any:
        raise ValueError("'/elsewhere/app.ts' is not in the subpath of the workspace")

    monkeypatch.setattr(log_sets, "rollback", boom)
    response = client.post(url, {"log_sha": sha.group(1)}, headers={"HX-Request": "true"})

    assert response.status_code == 200
    assert "The rollback stopped with an error" in response.content.decode()


def test_the_panel_diff_does_not_show_an_outside_file_behind_a_symlink(
    panel_ws: Path, outside: Path
) -> None:
    (panel_ws / "link.txt").symlink_to(outside / "secret.txt")
    side = log_sets.read_side(path=panel_ws / "link.txt", root=panel_ws)
    assert side.state == "special"
    assert log_sets.content_digest(path=panel_ws / "link.txt", root=panel_ws) is None
