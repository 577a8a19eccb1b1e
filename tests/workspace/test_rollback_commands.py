"""`manage.py rollback_changes` and `track_changes`: thin adapters, exit codes that tell apart."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from rollback_helpers import snapshot, write, write_log

from versions.workspace import load_changes_log

MANAGE = Path(__file__).resolve().parents[2] / "manage.py"


@pytest.fixture(autouse=True, scope="module")
def django_ready() -> None:
    """Set Django up when pytest-django has not (e.g. `-p no:django` for the engine tests)."""
    from django.conf import settings

    if not settings.configured:
        os.environ.setdefault("DJANGO_SETTINGS_MODULE", "versions_site.settings")
        import django

        django.setup()


def a_log(root: Path, **fields: Any) -> Path:
    data: dict[str, Any] = {
        "phase": "bug-fixing",
        "timestamp": "2025-10-18T14:30:00Z",
        "files_modified": [],
        "files_created": ["src/new.ts"],
        "commands_executed": [],
        "git_commits": [],
    }
    data.update(fields)
    write(root, "src/new.ts", "new\n")
    return write_log(root, ".bug-changes.json", data)


def rollback_command(*args: str) -> tuple[int, dict[str, Any], str]:
    out, err = io.StringIO(), io.StringIO()
    try:
        call_command("rollback_changes", *args, stdout=out, stderr=err)
        code = 0
    except CommandError as exc:
        code = exc.returncode
    return code, json.loads(out.getvalue()), err.getvalue()


class FakeTerminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_yes_rolls_back_and_exits_0(repo: Path) -> None:
    log = a_log(repo)

    code, report, _ = rollback_command(str(log), "--phase", "bug-fixing", "--yes")

    assert code == 0
    assert report["actions_taken"] == ["Deleted src/new.ts"]
    assert not (repo / "src/new.ts").exists()


def test_without_a_terminal_and_without_yes_it_is_declined_exit_3(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = a_log(repo)
    monkeypatch.setattr(sys, "stdin", io.StringIO("yes\n"))  # piped: not a terminal

    code, report, err = rollback_command(str(log), "--phase", "bug-fixing")

    assert code == 3
    assert report["user_declined"] is True and report["success"] is False
    assert "no --yes" in err
    assert (repo / "src/new.ts").exists()


@pytest.mark.parametrize(("answer", "code"), [("yes\n", 0), ("y\n", 0), ("no\n", 3), ("\n", 3)])
def test_the_terminal_answer_decides(
    repo: Path, monkeypatch: pytest.MonkeyPatch, answer: str, code: int
) -> None:
    log = a_log(repo)
    monkeypatch.setattr(sys, "stdin", FakeTerminal(answer))

    got, report, err = rollback_command(str(log), "--phase", "bug-fixing")

    assert got == code
    assert err.startswith('Rollback changes from phase "bug-fixing"?\n')
    assert "Proceed with rollback? (yes/no)" in err
    assert (repo / "src/new.ts").exists() == (code == 3)


def test_bad_input_exits_2(repo: Path) -> None:
    code, report, _ = rollback_command(str(repo / ".missing.json"), "--phase", "x", "--yes")

    assert code == 2
    assert report["errors"] == [f"Changes log not found at {repo / '.missing.json'}"]


def test_a_phase_mismatch_exits_2(repo: Path) -> None:
    log = a_log(repo)

    code, report, _ = rollback_command(str(log), "--phase", "refactoring", "--yes")

    assert code == 2
    assert report["errors"] == ['Changes log is for phase "bug-fixing", not "refactoring"']
    assert (repo / "src/new.ts").exists()


def test_a_failed_revert_exits_1(repo: Path) -> None:
    log = a_log(repo, files_created=[], git_commits=["abcdef0123"])

    code, report, _ = rollback_command(str(log), "--phase", "bug-fixing", "--yes")

    assert code == 1
    assert report["errors"] == ["Failed to revert commit abcdef0123: commit not found"]


def test_dry_run_changes_nothing_and_predicts_warnings(repo: Path) -> None:
    log = a_log(repo, commands_executed=["make deploy"], files_created=["src/new.ts", "gone.ts"])
    before = snapshot(repo)

    code, report, _ = rollback_command(str(log), "--phase", "bug-fixing", "--dry-run")

    assert code == 0
    assert report["actions_taken"] == [] and report["files_deleted"] == 0
    assert report["warnings"] == [
        "File not found (already deleted?): gone.ts",
        "Cannot auto-revert: make deploy (manual intervention required)",
    ]
    assert "user_declined" not in report and "undo_log" not in report
    assert snapshot(repo) == before


def test_report_file_and_workspace_options(repo: Path, tmp_path: Path) -> None:
    write(repo, "sub/new.ts", "x\n")
    log = write_log(
        tmp_path,
        "elsewhere-changes.json",
        {
            "phase": "p",
            "timestamp": "2025-10-18T14:30:00Z",
            "files_modified": [],
            "files_created": ["new.ts"],
            "commands_executed": [],
            "git_commits": [],
        },
    )
    report_file = tmp_path / "report.json"

    code, report, _ = rollback_command(
        str(log),
        "--phase",
        "p",
        "--yes",
        "--workspace",
        str(repo / "sub"),
        "--report",
        str(report_file),
    )

    assert code == 0
    assert json.loads(report_file.read_text()) == report
    assert not (repo / "sub/new.ts").exists()


def test_track_changes_records_a_phase_the_rollback_undoes(repo: Path) -> None:
    write(repo, "src/app.ts", "v1\n")
    log = repo / ".bug-changes.json"
    base = ["--log", str(log), "--phase", "bug-fixing"]
    out = io.StringIO()

    call_command("track_changes", *base, "init", stdout=out)
    call_command("track_changes", *base, "modify", str(repo / "src/app.ts"), stdout=out)
    write(repo, "src/app.ts", "v2\n")
    call_command("track_changes", *base, "create", str(repo / "src/new.ts"), stdout=out)
    write(repo, "src/new.ts", "new\n")
    call_command("track_changes", *base, "command", "pnpm install", stdout=out)
    call_command("track_changes", *base, "commit", "abc123", stdout=out)
    call_command("track_changes", *base, "artifact", str(repo / "tmp.txt"), stdout=out)
    call_command("track_changes", *base, "plan-file", str(repo / ".bug-plan.json"), stdout=out)

    assert ".rollback/src-app.ts.backup" in out.getvalue()
    assert load_changes_log(log).to_dict() | {"timestamp": "T"} == {
        "phase": "bug-fixing",
        "timestamp": "T",
        "files_modified": [{"path": "src/app.ts", "backup": ".rollback/src-app.ts.backup"}],
        "files_created": ["src/new.ts"],
        "commands_executed": ["pnpm install"],
        "git_commits": ["abc123"],
        "artifacts": ["tmp.txt"],
        "plan_files": [".bug-plan.json"],
    }


def test_track_changes_refuses_bad_input_with_exit_2(repo: Path, outside: Path) -> None:
    base = ["--log", str(repo / ".bug-changes.json"), "--phase", "bug-fixing"]

    with pytest.raises(CommandError) as escaped:
        call_command("track_changes", *base, "modify", str(outside / "victim.txt"))
    with pytest.raises(CommandError) as bad_sha:
        call_command("track_changes", *base, "commit", "--", "--upload-pack=x")

    assert escaped.value.returncode == 2 and "outside the workspace" in str(escaped.value)
    assert bad_sha.value.returncode == 2 and "Refused git commit id" in str(bad_sha.value)


def test_track_changes_puts_a_relative_log_inside_the_given_workspace(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    write(repo, "src/app.ts", "v1\n")
    base = ["--log", ".bug-changes.json", "--phase", "bug-fixing", "--workspace", str(repo)]
    out = io.StringIO()

    call_command("track_changes", *base, "init", stdout=out)
    call_command("track_changes", *base, "modify", str(repo / "src/app.ts"), stdout=out)

    assert out.getvalue().splitlines()[0] == str(repo / ".bug-changes.json")
    assert [e.path for e in load_changes_log(repo / ".bug-changes.json").files_modified] == [
        "src/app.ts"
    ]
    assert list(elsewhere.iterdir()) == []  # no stray log where the worker happened to be


def test_track_changes_without_workspace_keeps_a_relative_log_in_the_current_folder(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(repo / "..")
    folder = repo.parent / "phase"
    folder.mkdir()
    call_command("track_changes", "--log", "phase/.x-changes.json", "--phase", "x", "init")
    assert (folder / ".x-changes.json").is_file()


def test_track_changes_never_creates_a_mistyped_workspace(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-workspace"
    base = ["--log", ".bug-changes.json", "--phase", "bug-fixing", "--workspace", str(missing)]
    with pytest.raises(CommandError) as refused:
        call_command("track_changes", *base, "init")
    assert refused.value.returncode == 2 and "Workspace not found" in str(refused.value)
    assert not missing.exists()


def test_track_changes_help_says_where_a_relative_log_goes() -> None:
    from django.core.management import load_command_class

    command = load_command_class("versions", "track_changes")
    text = " ".join(command.create_parser("manage.py", "track_changes").format_help().split())
    assert "A relative path is taken inside --workspace when it is given" in text


def run_manage(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.setdefault("DJANGO_SETTINGS_MODULE", "versions_site.settings")
    return subprocess.run(
        [sys.executable, str(MANAGE), "rollback_changes", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        env=env,
        check=False,
        timeout=120,
    )


def test_manage_py_exit_codes_in_a_real_process(repo: Path) -> None:
    log = a_log(repo)

    declined = run_manage(".bug-changes.json", "--phase", "bug-fixing", cwd=repo)
    bad = run_manage(".nope.json", "--phase", "bug-fixing", "--yes", cwd=repo)
    done = run_manage(str(log), "--phase", "bug-fixing", "--yes", cwd=repo)

    assert declined.returncode == 3, declined.stderr
    assert json.loads(declined.stdout)["user_declined"] is True
    assert bad.returncode == 2
    assert json.loads(bad.stdout)["errors"] == ["Changes log not found at .nope.json"]
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["files_deleted"] == 1
