"""Reading the changes log: the seed's errors for bad logs, and nothing touched on any of them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from rollback_helpers import snapshot, write, write_log

from versions.workspace import EXIT_BAD_INPUT, ChangesLogError, load_changes_log, run_rollback
from versions.workspace.changes_log import MAX_ENTRIES, MAX_LOG_BYTES, REQUIRED_FIELDS


def valid_log(**overrides: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "phase": "bug-fixing",
        "timestamp": "2025-10-18T14:30:00Z",
        "files_modified": [{"path": "src/app.ts", "backup": ".rollback/src-app.ts.backup"}],
        "files_created": ["src/new.ts"],
        "commands_executed": [],
        "git_commits": [],
    }
    data.update(overrides)
    return data


@pytest.fixture
def workspace(repo: Path) -> Path:
    """A repo mid-phase: a rollback of it would change files, so 'nothing touched' means it."""
    write(repo, ".rollback/src-app.ts.backup", "old\n")
    write(repo, "src/app.ts", "new\n")
    write(repo, "src/new.ts", "created\n")
    return repo


def roll_back_expecting_error(workspace: Path, text: str, error: str) -> None:
    log = workspace / ".bug-changes.json"
    log.write_text(text, encoding="utf-8")
    before = snapshot(workspace)

    result = run_rollback(log, "bug-fixing", confirm=None)

    assert result.report["errors"] == [error]
    assert result.report["success"] is False
    assert result.report["actions_taken"] == []
    assert result.exit_code == EXIT_BAD_INPUT
    assert snapshot(workspace) == before
    assert not (workspace / ".rollback-undo").exists()


def test_a_valid_log_loads_with_optional_fields(tmp_path: Path) -> None:
    path = write_log(
        tmp_path,
        "log.json",
        valid_log(artifacts=["a"], plan_files=[".bug-fixing-plan.json"], metadata={"by": "w"}),
    )

    log = load_changes_log(path)

    assert log.phase == "bug-fixing"
    assert log.files_modified[0].backup == ".rollback/src-app.ts.backup"
    assert log.artifacts == ["a"] and log.plan_files == [".bug-fixing-plan.json"]
    assert log.metadata == {"by": "w"}
    assert log.to_dict()["artifacts"] == ["a"]


def test_optional_fields_default_to_empty(tmp_path: Path) -> None:
    log = load_changes_log(write_log(tmp_path, "log.json", valid_log()))

    assert log.artifacts == [] and log.plan_files == [] and log.metadata == {}


def test_invalid_json_is_the_seeds_error_and_touches_nothing(workspace: Path) -> None:
    roll_back_expecting_error(
        workspace,
        '{"phase": "bug-fixing",',
        "Invalid JSON in changes log: Expecting property name enclosed in double quotes: "
        "line 1 column 24 (char 23)",
    )


def test_a_json_array_is_not_a_changes_log(workspace: Path) -> None:
    roll_back_expecting_error(
        workspace, "[]", "Invalid JSON in changes log: top level must be an object"
    )


def test_bytes_that_are_not_utf8_are_invalid_json(workspace: Path) -> None:
    log = workspace / ".bug-changes.json"
    log.write_bytes(b'{"phase": "\xff"}')

    with pytest.raises(ChangesLogError, match=r"^Invalid JSON in changes log: not UTF-8"):
        load_changes_log(log)


@pytest.mark.parametrize("field", REQUIRED_FIELDS)
def test_each_missing_required_field_is_named(workspace: Path, field: str) -> None:
    data = valid_log()
    del data[field]

    roll_back_expecting_error(
        workspace, json.dumps(data), f"Changes log missing required field: {field}"
    )


@pytest.mark.parametrize(
    ("overrides", "error"),
    [
        ({"phase": 7}, "Changes log field phase must be a non-empty string"),
        ({"phase": ""}, "Changes log field phase must be a non-empty string"),
        ({"files_modified": {}}, "Changes log field files_modified must be an array"),
        (
            {"files_modified": ["src/app.ts"]},
            "Changes log field files_modified[0] must be an object with path and backup",
        ),
        (
            {"files_modified": [{"path": "src/app.ts"}]},
            "Changes log field files_modified[0].backup must be a non-empty string",
        ),
        (
            {"files_modified": [{"path": 1, "backup": "b"}]},
            "Changes log field files_modified[0].path must be a non-empty string",
        ),
        ({"files_created": "src/new.ts"}, "Changes log field files_created must be an array"),
        (
            {"files_created": [None]},
            "Changes log field files_created[0] must be a non-empty string",
        ),
        (
            {"commands_executed": [["rm", "-rf"]]},
            "Changes log field commands_executed[0] must be a non-empty string",
        ),
        ({"git_commits": [123456]}, "Changes log field git_commits[0] must be a non-empty string"),
        ({"artifacts": "tmp"}, "Changes log field artifacts must be an array"),
        ({"plan_files": [1]}, "Changes log field plan_files[0] must be a non-empty string"),
        ({"metadata": []}, "Changes log field metadata must be an object"),
    ],
)
def test_wrong_types_are_refused_before_anything_is_done(
    workspace: Path, overrides: dict[str, Any], error: str
) -> None:
    roll_back_expecting_error(workspace, json.dumps(valid_log(**overrides)), error)


def test_a_huge_log_is_refused_without_reading_it_whole(workspace: Path) -> None:
    padding = "x" * (MAX_LOG_BYTES + 10)
    text = json.dumps(valid_log(metadata={"padding": padding}))

    roll_back_expecting_error(
        workspace,
        text,
        f"Changes log too large: {len(text)} bytes (limit {MAX_LOG_BYTES} bytes)",
    )


def test_a_log_with_too_many_entries_is_refused(workspace: Path) -> None:
    created = [f"f{i}" for i in range(MAX_ENTRIES + 1)]

    roll_back_expecting_error(
        workspace,
        json.dumps(valid_log(files_created=created)),
        f"Changes log field files_created has too many entries: {MAX_ENTRIES + 1} "
        f"(limit {MAX_ENTRIES})",
    )


def test_deeply_nested_json_is_invalid_not_a_crash(workspace: Path) -> None:
    text = '{"metadata": ' + "[" * 100_000 + "]" * 100_000 + "}"

    log = workspace / ".bug-changes.json"
    log.write_text(text, encoding="utf-8")
    result = run_rollback(log, "bug-fixing", confirm=None)

    assert result.exit_code == EXIT_BAD_INPUT
    assert result.report["errors"][0].startswith("Invalid JSON in changes log:")


def test_a_phase_other_than_the_logs_is_refused(workspace: Path) -> None:
    log = write_log(workspace, ".bug-changes.json", valid_log())
    before = snapshot(workspace)

    result = run_rollback(log, "security-remediation", confirm=None)

    assert result.report["phase"] == "security-remediation"
    assert result.report["errors"] == [
        'Changes log is for phase "bug-fixing", not "security-remediation"'
    ]
    assert result.exit_code == EXIT_BAD_INPUT
    assert snapshot(workspace) == before


def test_a_folder_is_not_a_changes_log(workspace: Path) -> None:
    folder = workspace / "logs"
    folder.mkdir()

    result = run_rollback(folder, "bug-fixing", confirm=None)

    assert result.report["errors"] == [f"Changes log not found at {folder}"]
