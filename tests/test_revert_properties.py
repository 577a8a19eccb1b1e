"""Property: Revert this set (docs/architecture.md#revert) takes back exactly what one set did, for
any history of three agents editing shared files — or refuses, writing nothing.

Agents replace lines at even positions only, so two different changed lines are always apart by
an unchanged one: a later set either changed one of the reverted set's lines (an overlap, which
must be refused) or left all of them alone (then the revert must equal the set's inverse).
"""

from __future__ import annotations

import itertools

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from versions.errors import PreflightFailed
from versions.models import PAGE, STYLESHEET, App, Artifact, ChangeSet, RestorePoint
from versions.services import (
    restore_change_set,
    revert_change_set,
    write_artifact,
)

FILES = [(PAGE, "index"), (PAGE, "about"), (STYLESHEET, "App")]
AGENTS = ["ada", "bob", "cyd"]
LINES = 12
_slugs = itertools.count()

edit = st.tuples(st.sampled_from(range(len(FILES))), st.sampled_from(range(0, LINES, 2)))
turn = st.tuples(st.sampled_from(AGENTS), st.lists(edit, min_size=1, max_size=4))
histories = st.lists(turn, min_size=1, max_size=6)


def text(lines: list[str]) -> str:
    return "".join(f"{line}\n" for line in lines)


def snapshot(app) -> dict:
    return {
        (a.collection, a.name): (a.deleted, a.sha256, a.source)
        for a in Artifact.objects.filter(app=app)
    }


def play(app, history):
    """Write the initial files, then every turn; returns the model: per set, per file, the
    lines before and after the set, and which line positions each set changed."""
    files = {f: [f"{f[1]} line {i}" for i in range(LINES)] for f in FILES}
    for collection, name in FILES:
        write_artifact(
            app, collection, name, text(files[(collection, name)]), requested_by="seed", tool="t"
        )
    sets = []  # (set id, {file: (lines before, lines after)}, {file: changed positions})
    for number, (agent, edits) in enumerate(history):
        before = {f: list(lines) for f, lines in files.items()}
        changed: dict = {}
        set_id = None
        for index, position in edits:
            f = FILES[index]
            files[f][position] = f"{agent} turn {number} line {position}"
            changed.setdefault(f, set()).add(position)
            receipt = write_artifact(
                app, f[0], f[1], text(files[f]), requested_by=agent, tool="t", run_id=f"t{number}"
            )
            set_id = set_id or receipt.change_set_id
        sets.append((set_id, {f: (before[f], list(files[f])) for f in changed}, changed))
    return files, sets


@pytest.mark.django_db
@settings(
    max_examples=50,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(history=histories, pick=st.integers(min_value=0, max_value=100))
def test_revert_takes_back_exactly_the_sets_lines_or_refuses_and_writes_nothing(history, pick):
    app = App.objects.create(slug=f"revert-prop-{next(_slugs)}", name="Property")
    files, sets = play(app, history)
    chosen = pick % len(sets)
    set_id, around, changed = sets[chosen]
    later = sets[chosen + 1 :]
    overlap = any(
        changed[f] & other_changed.get(f, set()) for _, _, other_changed in later for f in changed
    )
    state = snapshot(app)
    points, set_count = RestorePoint.objects.count(), ChangeSet.objects.count()

    event("overlap" if overlap else "clean")
    if overlap:
        with pytest.raises(PreflightFailed) as refused:
            revert_change_set(set_id, by="person")
        assert refused.value.receipt.findings
        assert snapshot(app) == state  # a conflict never writes
        assert (RestorePoint.objects.count(), ChangeSet.objects.count()) == (points, set_count)
        return

    receipt = revert_change_set(set_id, by="person")
    # The inverse of the set: its lines back to their state before it, every other line as now.
    expected = {f: list(lines) for f, lines in files.items()}
    for f, positions in changed.items():
        for position in positions:
            expected[f][position] = around[f][0][position]
    for (collection, name), lines in expected.items():
        assert Artifact.objects.get(app=app, collection=collection, name=name).source == text(lines)
    if receipt.kind == "noop":
        return
    assert receipt.as_dict()["kind"] == "revert"
    assert receipt.as_dict()["revertedSet"] == set_id
    # Undo: Restore all of the restore set gives back the exact bytes from before the revert.
    restore_change_set(receipt.set_id, by="person")
    assert snapshot(app) == state
