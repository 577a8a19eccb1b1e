"""Revert this set (docs/architecture.md#revert) of a 1.5 MB stylesheet vs ``git merge-file`` of the
same texts.

Run: ``.venv/bin/python tests/perf/bench_revert.py`` (DATABASE_URL selects PostgreSQL).
A set changed 2 % of the lines of a stylesheet just under the 1.5 MiB stored-source cap (spread
over its first half); a later set edited 1 % of the lines elsewhere (its second half). Ours is
the whole ``revert_change_set`` (states read, three-way merge, pre-flight, counter-point, new
blob, re-point, restore set, one transaction); theirs is ``git merge-file -p`` of the same three
texts (ours = now, base = right after the set, theirs = before it), interleaved in one run. The
revert is undone (Restore all of its restore set, not timed) before the next round. Also the
merge library alone. Prints its figures last as one line of JSON with ``vs_git_merge_file``
(ours / git; lower is better).
"""

from __future__ import annotations

import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from versions.merging import merge_texts

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _setup import setup_django  # noqa: E402
from bench_diff import make_stylesheet  # noqa: E402

REPEAT = 9
CAP = 1_572_864


def edit_lines(text: str, indexes: list[int], mark: str) -> str:
    lines = text.split("\n")
    for idx in indexes:
        lines[idx] = lines[idx].replace(":", f": /* {mark} */", 1) if ":" in lines[idx] else mark
    return "\n".join(lines)


def timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1000


def main() -> None:
    vendor = setup_django()
    from versions import services
    from versions.models import App

    # Just under the cap, with room for the edits: every state must stay stored.
    before = make_stylesheet(CAP - 32_768)
    count = before.count("\n")
    rnd = random.Random(3)
    set_lines = rnd.sample(range(count // 2), count // 50)
    later_lines = rnd.sample(range(count // 2, count), count // 100)
    after = edit_lines(before, set_lines, "set")
    now = edit_lines(after, later_lines, "later")
    expected = edit_lines(before, later_lines, "later")
    assert max(len(t.encode()) for t in (before, after, now)) < CAP

    app = App.objects.create(slug="bench", name="Bench")
    write = services.write_artifact
    write(app, "pltf_stylesheet", "Big", before, requested_by="seed", tool="t")
    set_id = write(
        app, "pltf_stylesheet", "Big", after, requested_by="ada", tool="t", run_id="set"
    ).change_set_id
    write(app, "pltf_stylesheet", "Big", now, requested_by="bob", tool="t", run_id="later")

    folder = Path(tempfile.mkdtemp(prefix="bench-revert-"))
    for name, text in (("ours", now), ("base", after), ("theirs", before)):
        (folder / name).write_text(text)
    git_args = ["git", "merge-file", "-p", *(str(folder / n) for n in ("ours", "base", "theirs"))]

    def git() -> None:
        done = subprocess.run(git_args, capture_output=True, check=True)
        assert done.stdout.decode() == expected

    def ours() -> None:
        receipt = services.revert_change_set(set_id, by="bench")
        assert receipt.kind == "restore"
        ours.receipt = receipt  # type: ignore[attr-defined]

    def undo() -> None:
        services.restore_change_set(ours.receipt.set_id, by="bench")  # type: ignore[attr-defined]

    ours_ms, git_ms, merge_ms = [], [], []
    for round_ in range(REPEAT + 1):
        o = timed(ours)
        from versions.models import Artifact

        assert Artifact.objects.get(app=app, name="Big").source == expected
        undo()
        g = timed(git)
        m = timed(lambda: merge_texts(after, now, before))
        if round_:  # the first round warms up
            ours_ms.append(o)
            git_ms.append(g)
            merge_ms.append(m)

    ms, gms, mms = (statistics.median(x) for x in (ours_ms, git_ms, merge_ms))
    print(f"database: {vendor}")
    print(
        f"stylesheet {len(before.encode()):,} bytes, {count:,} lines; the set changed "
        f"{len(set_lines):,} lines, a later set {len(later_lines):,} others"
    )
    print(
        f"revert_change_set {ms:.1f} ms, git merge-file {gms:.1f} ms, libgit2 merge alone "
        f"{mms:.1f} ms (medians of {REPEAT})"
    )
    print(
        json.dumps(
            {
                "bench": "revert",
                "db": vendor,
                "n": REPEAT,
                "bytes": len(before.encode()),
                "ms": round(ms, 2),
                "git_merge_file_ms": round(gms, 2),
                "merge_ms": round(mms, 2),
                "vs_git_merge_file": round(ms / gms, 2),
            }
        )
    )


if __name__ == "__main__":
    main()
