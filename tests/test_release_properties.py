"""Property: for any history and any release mark, the state at the release is what a replay
of the writes says it was, and Restore to release brings exactly that state back."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from versions import ids
from versions.errors import PreflightFailed
from versions.models import App, Artifact
from versions.selectors import release_moment, states_at
from versions.services import (
    delete_artifact,
    mark_release,
    restore_change_set,
    restore_to_release,
    write_artifact,
)

KEYS = [
    ("pltf_page", "index"),
    ("pltf_page", "about"),
    ("pltf_stylesheet", "App"),
    ("pltf_frontend_module", "main"),
]
SOURCES = ["a\n", "a\nb\n", "a\nB\n", "", "é🚀\r\n", "x" * 30]
_apps = itertools.count()

Key = tuple[str, str]
State = dict[Key, str | None]  # None: does not exist

# One operation of a turn: (key index, source index or None to delete).
op = st.tuples(st.integers(0, len(KEYS) - 1), st.one_of(st.none(), st.integers(0, 5)))
# A turn is either writes/deletes, or a restore of an earlier set (by index).
step = st.one_of(
    st.tuples(st.just("turn"), st.lists(op, min_size=1, max_size=5)),
    st.tuples(st.just("restore"), st.integers(0, 50)),
)


@pytest.fixture
def ticking_clock(monkeypatch):
    """Every clock read is 1 ms later, so consecutive turns never share a millisecond."""
    clock = itertools.count(ids.now_ms())
    monkeypatch.setattr(ids, "now_ms", lambda: next(clock))


def _replay_turn(app: App, ops: list, run_id: str, model: State) -> tuple[str | None, State]:
    """Apply one turn to the app and to the model; returns its set id and, per artifact it
    wrote, the model state before the turn's first write of it."""
    set_id = None
    before: State = {}
    for key_index, source_index in ops:
        key = KEYS[key_index]
        if source_index is None:
            if model.get(key) is None:
                continue
            receipt = delete_artifact(app, *key, requested_by="agent", tool="p", run_id=run_id)
            new = None
        else:
            new = SOURCES[source_index]
            receipt = write_artifact(app, *key, new, requested_by="agent", tool="p", run_id=run_id)
        if not receipt.unchanged:
            set_id = set_id or receipt.change_set_id
            before.setdefault(key, model.get(key))
        model[key] = new
    return set_id, before


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(steps=st.lists(step, min_size=1, max_size=8), pick=st.integers(0, 1000))
def test_state_at_the_release_agrees_with_a_replay_of_the_writes(db, ticking_clock, steps, pick):
    app = App.objects.create(slug=f"rel-prop-{next(_apps)}", name="Property")
    model: State = {}
    sets: list[tuple[str, State, State]] = []  # (set id, state before per key, model after)
    for kind, arg in steps:
        if kind == "turn":
            set_id, before = _replay_turn(app, arg, f"run-{len(sets)}", model)
        else:
            if not sets:
                continue
            target_id, before_target, _ = sets[arg % len(sets)]
            try:
                receipt = restore_change_set(target_id, by="p")
            except PreflightFailed:  # e.g. the set's artifact was deleted meanwhile: no write
                continue
            before = {}
            set_id = receipt.set_id
            for key, state in before_target.items():
                if model.get(key) != state:
                    before[key] = model.get(key)
                    model[key] = state
            assert (set_id is None) == (before == {})
        if set_id is not None:
            sets.append((set_id, before, dict(model)))
    if not sets:
        return

    release_id, _, at_release = sets[pick % len(sets)]
    mark_release(release_id, by="p")
    states = {
        (s.artifact.collection, s.artifact.name): s
        for s in states_at(app, release_moment(app), with_sources=True)
    }
    for key in KEYS:
        expected = at_release.get(key)
        if key not in states:
            assert expected is None
            continue
        state = states[key]
        assert state.existed == (expected is not None), key
        assert state.source == ("" if expected is None else expected), key
        current = None if state.artifact.deleted else state.artifact.source
        assert state.differs == (current != expected), key

    restore_to_release(app, by="p")
    for artifact in Artifact.objects.filter(app=app):
        key = (artifact.collection, artifact.name)
        assert (None if artifact.deleted else artifact.source) == at_release.get(key), key
