"""Workspace rollback of a big phase: its time over the bare file operations it must do.

Run: ``.venv/bin/python tests/perf/bench_rollback.py`` (no database). A phase modified 2,000
files and created 1,000; rolling it back restores the 2,000 from their backups and deletes the
1,000, keeping a counter-backup of everything first. The baseline, measured in the same run on an
identical tree, is the floor of that work done by hand: copy each file aside, copy each backup
back, delete each created file. ``vs_floor`` is ours over it (lower is better); the figure grew
with the square of the files before the undo log was written per batch (2,000 files: 45 s).
Prints one line of JSON last.
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from versions.workspace import ChangesTracker, rollback  # noqa: E402

MODIFIED, CREATED = 2000, 1000
LOG = ".big-changes.json"


def phase(root: Path) -> None:
    """A tracked phase: every file modified after its backup, and new files created."""
    for i in range(MODIFIED):
        path = root / "src" / f"m{i:04}.ts"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(f"const line{j} = {i};\n" for j in range(20)))
    tracker = ChangesTracker(root / LOG, "big", workspace=root)
    for i in range(MODIFIED):
        path = root / "src" / f"m{i:04}.ts"
        tracker.record_modify(path)
        path.write_text(path.read_text().replace("line3 ", "line3_changed "))
    for i in range(CREATED):
        path = root / "new" / f"c{i:04}.ts"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("export {};\n")
        tracker.record_create(path)


def floor(root: Path) -> float:
    """The same file work without bookkeeping: keep each file, put its backup back, delete."""
    log = json.loads((root / LOG).read_text())
    aside = root / ".aside"
    start = time.perf_counter()
    for entry in log["files_modified"]:
        target = root / entry["path"]
        kept = aside / entry["path"]
        kept.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(target, kept)
        shutil.copyfile(root / entry["backup"], target)
    for rel in log["files_created"]:
        kept = aside / rel
        kept.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(root / rel, kept)
        (root / rel).unlink()
    return time.perf_counter() - start


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="versions-bench-rollback-") as folder:
        ours_root, floor_root = Path(folder) / "ours", Path(folder) / "floor"
        for root in (ours_root, floor_root):
            root.mkdir()
            phase(root)
        floor_s = floor(floor_root)
        start = time.perf_counter()
        report = rollback(ours_root / LOG, "big", confirm=lambda prompt: True, workspace=ours_root)
        ours_s = time.perf_counter() - start
        assert report["success"], report["errors"]
        assert report["files_restored"] == MODIFIED and report["files_deleted"] == CREATED
    print(f"rollback of {MODIFIED} modified + {CREATED} created files: {ours_s:.2f} s")
    print(f"the same file work by hand: {floor_s:.2f} s")
    print(
        json.dumps(
            {
                "bench": "rollback",
                "files": MODIFIED + CREATED,
                "ms": round(ours_s * 1000, 1),
                "floor_ms": round(floor_s * 1000, 1),
                "vs_floor": round(ours_s / floor_s, 2),
            }
        )
    )


if __name__ == "__main__":
    main()
