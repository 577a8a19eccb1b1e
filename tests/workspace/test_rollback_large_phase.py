"""A phase that touched many files: the rollback keeps each one in its undo log before changing
it, and writes that log a number of times that grows with the logarithm of the files, not with
the files (a log rewritten per file made 2,000 files take 45 seconds)."""

from __future__ import annotations

import importlib
import json
import os
from pathlib import Path

import pytest
from rollback_helpers import snapshot, write

from versions.workspace import ChangesTracker, load_changes_log, rollback

rollback_module = importlib.import_module("versions.workspace.rollback")

LOG = ".big-changes.json"
MODIFIED, CREATED = 150, 70


@pytest.fixture
def big_phase(tmp_path: Path) -> tuple[Path, dict[str, bytes]]:
    root = tmp_path / "ws"
    for i in range(MODIFIED):
        write(root, f"src/m{i:03}.ts", f"before {i}\n")
    tracker = ChangesTracker(root / LOG, "big", workspace=root)
    # Taken after the tracker added .rollback/ to .gitignore
    # (docs/architecture.md#workspace-rollback), which stays.
    before = snapshot(root, ignore=(LOG,))
    for i in range(MODIFIED):
        tracker.record_modify(root / f"src/m{i:03}.ts")
        write(root, f"src/m{i:03}.ts", f"after {i}\n")
    for i in range(CREATED):
        write(root, f"new/c{i:03}.ts", "new\n")
        tracker.record_create(root / f"new/c{i:03}.ts")
    tracker.record_create(root / "new")
    return root, before


def test_every_file_is_in_the_undo_log_on_disk_before_it_changes(big_phase, monkeypatch):
    root, before = big_phase
    undo_root = root / ".rollback-undo"
    on_disk: set[str] = set()
    log_writes = 0
    changed: list[str] = []

    real_write = rollback_module.write_undo_log

    def write_log(log, path, workspace):
        nonlocal log_writes
        real_write(log, path, workspace)
        log_writes += 1
        on_disk.clear()
        on_disk.update(entry.path for entry in log.files_modified)
        on_disk.update(log.files_created)

    def check(path) -> None:
        target = Path(os.path.abspath(path))
        if target.is_relative_to(undo_root) or not target.is_relative_to(root):
            return
        rel = target.relative_to(root).as_posix()
        if rel == LOG or rel.startswith(".rollback/"):
            return  # the log itself and the seed's backups (cleaned up last, kept whole)
        assert rel in on_disk or any(p.as_posix() in on_disk for p in Path(rel).parents), rel
        changed.append(rel)

    # Every write and delete of the engine goes through these two (by fd, inside the
    # workspace); every file they change must be in the undo log on disk already.
    real_replace, real_remove = rollback_module.replace_file, rollback_module.remove_inside

    def replace(workspace, destination, *args, **kwargs):
        check(destination)
        return real_replace(workspace, destination, *args, **kwargs)

    def remove(workspace, path):
        if Path(path).is_dir() and not Path(path).is_symlink():  # every file in it is kept
            for current, _dirs, files in os.walk(path):
                for name in files:
                    check(Path(current) / name)
        else:
            check(path)
        return real_remove(workspace, path)

    monkeypatch.setattr(rollback_module, "write_undo_log", write_log)
    monkeypatch.setattr(rollback_module, "replace_file", replace)
    monkeypatch.setattr(rollback_module, "remove_inside", remove)

    report = rollback(root / LOG, "big", confirm=lambda prompt: True, workspace=root)
    monkeypatch.undo()

    assert report["success"], report
    assert report["files_restored"] == MODIFIED
    assert report["files_deleted"] == CREATED + 1
    assert len(changed) >= MODIFIED  # the check saw the changes
    assert snapshot(root, ignore=(LOG,)) == {**before}
    # Batches double: the log is written about log2(files) times per step, not per file.
    assert log_writes <= 20, log_writes

    # And the undo log undoes it all.
    undo_log = Path(report["undo_log"])
    kept = load_changes_log(undo_log)
    kept_paths = {entry.path for entry in kept.files_modified}
    assert {f"src/m{i:03}.ts" for i in range(MODIFIED)} <= kept_paths
    assert {f"new/c{i:03}.ts" for i in range(CREATED)} <= kept_paths
    assert json.loads(undo_log.read_text(encoding="utf-8"))["phase"] == "big"


def test_a_changes_log_is_written_readable_one_entry_per_line(big_phase):
    root, _ = big_phase
    text = (root / LOG).read_text(encoding="utf-8")
    data = json.loads(text)
    assert load_changes_log(root / LOG).to_dict() == data
    lines = text.splitlines()
    assert len(lines) > MODIFIED + CREATED  # not one long line
    first = data["files_modified"][0]
    assert f"    {json.dumps(first, ensure_ascii=False)}," in lines
    assert lines[0] == "{" and lines[-1] == "}" and lines[1].startswith('  "phase": ')
