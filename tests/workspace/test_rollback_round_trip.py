"""Track a phase, roll it back, roll the rollback back: byte-identical trees at every step."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from rollback_helpers import commit_all, git, snapshot, write

from versions.workspace import (
    ChangesLogError,
    ChangesTracker,
    UnsafePathError,
    load_changes_log,
    run_rollback,
)

LOG = ".bug-changes.json"


def clean(report: dict) -> None:
    assert report["errors"] == [] and report["warnings"] == [], report
    assert report["success"] is True


@pytest.fixture
def project(repo: Path) -> Path:
    write(repo, "src/app.ts", "export const limit = 1;\n")
    write(repo, "src/deep/util.ts", "export const util = 'u';\n")
    write(repo, "docs/notes.md", "notes\n")
    (repo / "bin.dat").write_bytes(bytes(range(256)) * 4)
    commit_all(repo, "project")
    return repo


def run_phase(root: Path, fake_pnpm: Path) -> ChangesTracker:
    """A worker's phase, tracked the way the seed's 'Integration with Workers' asks."""
    tracker = ChangesTracker(root / LOG, "bug-fixing")
    tracker.record_modify(root / "src/app.ts")
    write(root, "src/app.ts", "export const limit = 2;\n")
    tracker.record_modify(root / "src/deep/util.ts")
    write(root, "src/deep/util.ts", "export const util = 'v';\n")
    tracker.record_modify(root / "bin.dat")
    (root / "bin.dat").write_bytes(b"\x00\xff" * 10)
    tracker.record_create(root / "src/new-helper.ts")
    write(root, "src/new-helper.ts", "export const helper = 1;\n")
    tracker.record_create(root / "generated")
    write(root, "generated/a.txt", "a\n")
    write(root, "generated/nested/b.txt", "b\n")
    tracker.record_command("pnpm build")
    write(root, "dist/bundle.js", "bundle\n")
    write(root, "dist/assets/app.css", "css\n")
    tracker.record_command("./scripts/migrate.sh")  # logged, never run
    write(root, "docs/notes.md", "notes, fixed\n")
    git(root, "add", "docs/notes.md")
    git(root, "commit", "-q", "-m", "phase: notes")
    tracker.record_commit(git(root, "rev-parse", "HEAD"))
    tracker.add_plan_file(root / ".bug-fixing-plan.json")
    write(root, ".bug-fixing-plan.json", '{"plan": 1}\n')
    tracker.add_artifact(root / "tmp-report.txt")
    write(root, "tmp-report.txt", "report\n")
    return tracker


def test_track_roll_back_and_undo_the_rollback_byte_for_byte(
    project: Path, fake_pnpm: Path
) -> None:
    # .rollback/ gitignored first (docs/architecture.md#workspace-rollback)
    ChangesTracker(project / LOG, "bug-fixing")
    original = snapshot(project, ignore=(LOG,))
    run_phase(project, fake_pnpm)
    after_phase = snapshot(project, ignore=(LOG,))
    assert after_phase != original

    first = run_rollback(project / LOG, "bug-fixing", confirm=None)

    # The custom command is the one warning; everything else is back as it was.
    assert first.report["warnings"] == [
        "Cannot auto-revert: ./scripts/migrate.sh (manual intervention required)"
    ]
    assert first.report["errors"] == []
    assert snapshot(project, ignore=(LOG,)) == {
        **original,
        # Not everything succeeded (the warning), so the seed keeps the backups.
        **{k: v for k, v in after_phase.items() if k.startswith(".rollback/")},
    }
    undo_log = Path(first.report["undo_log"])
    assert undo_log.parent.parent == project / ".rollback-undo"

    second = run_rollback(undo_log, "bug-fixing", confirm=None)

    clean(second.report)
    assert snapshot(project, ignore=(LOG,)) == after_phase
    assert git(project, "log", "-1", "--format=%s").startswith('Revert "Revert "phase: notes""')

    third = run_rollback(second.report["undo_log"], "bug-fixing", confirm=None)

    clean(third.report)
    assert snapshot(project, ignore=(LOG,)) == {
        **original,
        **{k: v for k, v in after_phase.items() if k.startswith(".rollback/")},
    }


def test_a_fully_successful_rollback_and_its_undo_round_trip(project: Path) -> None:
    # .rollback/ gitignored (docs/architecture.md#workspace-rollback)
    tracker = ChangesTracker(project / LOG, "bug-fixing")
    original = snapshot(project, ignore=(LOG,))
    tracker.record_modify(project / "src/app.ts")
    write(project, "src/app.ts", "changed\n")
    tracker.record_create(project / "src/new.ts")
    write(project, "src/new.ts", "new\n")
    after_phase = snapshot(project, ignore=(LOG,))

    first = run_rollback(project / LOG, "bug-fixing", confirm=None)

    clean(first.report)
    assert snapshot(project, ignore=(LOG,)) == original  # .rollback/ removed as well
    second = run_rollback(first.report["undo_log"], "bug-fixing", confirm=None)
    clean(second.report)
    assert snapshot(project, ignore=(LOG,)) == after_phase  # .rollback/ is back too
    # ...so the original log works again.
    again = run_rollback(project / LOG, "bug-fixing", confirm=None)
    clean(again.report)
    assert snapshot(project, ignore=(LOG,)) == original


def test_the_counter_log_is_a_changes_log_the_same_command_reads(project: Path) -> None:
    tracker = ChangesTracker(project / LOG, "bug-fixing")
    tracker.record_modify(project / "src/app.ts")
    write(project, "src/app.ts", "changed\n")

    report = run_rollback(project / LOG, "bug-fixing", confirm=None).report
    counter = load_changes_log(report["undo_log"])

    assert counter.phase == "bug-fixing"
    assert [m.path for m in counter.files_modified] == ["src/app.ts", ".rollback/src-app.ts.backup"]
    assert all(m.backup.startswith(".rollback-undo/") for m in counter.files_modified)
    assert counter.metadata["rollback_of"] == str(project / LOG)


def test_undo_works_outside_git_too(tmp_path: Path) -> None:
    root = tmp_path / "plain"
    write(root, "a.txt", "before\n")
    tracker = ChangesTracker(root / LOG, "p")
    tracker.record_modify(root / "a.txt")
    write(root, "a.txt", "after\n")

    first = run_rollback(root / LOG, "p", confirm=None)
    assert (root / "a.txt").read_text() == "before\n"
    second = run_rollback(first.report["undo_log"], "p", confirm=None)

    clean(second.report)
    assert (root / "a.txt").read_text() == "after\n"


def test_the_tracker_writes_the_seeds_format_after_every_entry(project: Path) -> None:
    tracker = ChangesTracker(project / LOG, "bug-fixing")
    assert json.loads((project / LOG).read_text())["files_modified"] == []

    backup = tracker.record_modify(project / "src/deep/util.ts")

    assert backup == ".rollback/src-deep-util.ts.backup"
    data = json.loads((project / LOG).read_text())
    assert data["files_modified"] == [{"path": "src/deep/util.ts", "backup": backup}]
    assert (project / backup).read_bytes() == (project / "src/deep/util.ts").read_bytes()
    assert sorted(data) == sorted(
        [
            "phase",
            "timestamp",
            "files_modified",
            "files_created",
            "commands_executed",
            "git_commits",
        ]
    )
    assert not list(project.glob(f".{LOG}.*.tmp"))  # the temp file was renamed into place


def test_the_first_backup_wins(project: Path) -> None:
    tracker = ChangesTracker(project / LOG, "bug-fixing")
    tracker.record_modify(project / "src/app.ts")
    write(project, "src/app.ts", "second\n")

    backup = tracker.record_modify(project / "src/app.ts")

    assert (project / backup).read_text() == "export const limit = 1;\n"
    assert len(tracker.log.files_modified) == 1


def test_flattened_backup_names_never_collide(project: Path) -> None:
    write(project, "src-app.ts", "flat\n")
    tracker = ChangesTracker(project / LOG, "bug-fixing")

    first = tracker.record_modify(project / "src/app.ts")
    second = tracker.record_modify(project / "src-app.ts")

    assert first == ".rollback/src-app.ts.backup"
    assert second == ".rollback/src-app.ts.2.backup"
    assert (project / second).read_text() == "flat\n"


def test_a_created_file_needs_no_backup(project: Path) -> None:
    tracker = ChangesTracker(project / LOG, "bug-fixing")
    tracker.record_create(project / "src/new.ts")
    write(project, "src/new.ts", "new\n")

    assert tracker.record_modify(project / "src/new.ts") is None


def test_a_tracker_resumes_an_existing_log(project: Path) -> None:
    ChangesTracker(project / LOG, "bug-fixing").record_command("pnpm install")

    tracker = ChangesTracker(project / LOG, "bug-fixing")
    tracker.record_command("pnpm build")

    assert load_changes_log(project / LOG).commands_executed == ["pnpm install", "pnpm build"]
    with pytest.raises(ChangesLogError, match='phase "bug-fixing", not "other"'):
        ChangesTracker(project / LOG, "other")


def test_the_tracker_refuses_what_the_rollback_would(project: Path, outside: Path) -> None:
    tracker = ChangesTracker(project / LOG, "bug-fixing")

    with pytest.raises(UnsafePathError):
        tracker.record_modify(outside / "victim.txt")
    with pytest.raises(UnsafePathError):
        tracker.record_create(project / ".git" / "hooks" / "pre-commit")
    with pytest.raises(ValueError, match="Refused git commit id"):
        tracker.record_commit("--upload-pack=x")
    with pytest.raises(FileNotFoundError):
        tracker.record_modify(project / "missing.ts")
    assert load_changes_log(project / LOG).files_modified == []


def test_a_created_symlink_is_deleted_and_the_report_says_undo_cannot_bring_it_back(
    repo: Path,
) -> None:
    write(repo, "src/app.ts", "export const limit = 1;\n")
    commit_all(repo, "project")
    tracker = ChangesTracker(repo / LOG, "bug-fixing")
    tracker.record_create(repo / "src/current.ts")
    (repo / "src/current.ts").symlink_to("app.ts")  # inside the workspace

    report = run_rollback(repo / LOG, "bug-fixing", confirm=None).report

    assert not (repo / "src/current.ts").is_symlink()
    assert (repo / "src/app.ts").read_text() == "export const limit = 1;\n"  # never its target
    assert report["success"] is True
    assert report["warnings"] == [
        "Undo cannot bring back src/current.ts: a symlink or special file is not kept in the "
        "undo log"
    ]
    undo = load_changes_log(Path(report["undo_log"]))
    assert undo.metadata["not_restorable"] == ["src/current.ts"]
