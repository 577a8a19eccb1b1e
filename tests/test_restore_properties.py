"""Property: Restore all returns a set's artifacts to their bytes before the turn, and its undo
returns them to their bytes just before the restore — for any history of agent turns."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from versions.models import PAGE, STYLESHEET, App, Artifact
from versions.services import (
    delete_artifact,
    restore_change_set,
    write_artifact,
)

ARTIFACTS = [(PAGE, "index"), (PAGE, "about"), (STYLESHEET, "App")]
_slugs = itertools.count()

sources = st.text(alphabet=st.sampled_from(list("ab \n{}é😀\r")), max_size=24) | st.sampled_from(
    ["", "a\n", "a\nb\n", "a\nb"]
)
operation = st.tuples(st.sampled_from(ARTIFACTS), st.none() | sources)
turns = st.lists(st.lists(operation, min_size=1, max_size=4), min_size=1, max_size=6)


def current(app) -> dict[tuple[str, str], str | None]:
    return {
        (a.collection, a.name): (None if a.deleted else a.source)
        for a in Artifact.objects.filter(app=app)
    }


@pytest.mark.django_db
@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(history=turns, pick=st.integers(min_value=0, max_value=100))
def test_restore_all_returns_any_set_to_before_its_turn_and_undo_returns_it_back(history, pick):
    app = App.objects.create(slug=f"prop-{next(_slugs)}", name="Property")
    sets: list[tuple[str, dict, set]] = []  # (set id, state before the turn, artifacts touched)
    for number, turn in enumerate(history):
        before = current(app)
        set_id, touched = None, set()
        for key, source in turn:
            collection, name = key
            if source is None:
                if current(app).get(key) is None:
                    continue  # nothing to delete
                receipt = delete_artifact(
                    app, collection, name, requested_by="agent", tool="t", run_id=f"r{number}"
                )
            else:
                receipt = write_artifact(
                    app,
                    collection,
                    name,
                    source,
                    requested_by="agent",
                    tool="t",
                    run_id=f"r{number}",
                )
            if not receipt.unchanged:
                set_id = receipt.change_set_id
                touched.add(key)
        if set_id:
            sets.append((set_id, before, touched))
    if not sets:
        return
    set_id, before_turn, touched = sets[pick % len(sets)]
    before_restore = current(app)

    receipt = restore_change_set(set_id, by="person")

    after = current(app)
    for key in touched:
        assert after.get(key) == before_turn.get(key), key
    untouched = set(before_restore) - touched
    assert {k: after[k] for k in untouched} == {k: before_restore[k] for k in untouched}
    if receipt.kind == "noop":
        assert after == before_restore
        return
    assert receipt.kind == "restore"

    restore_change_set(receipt.set_id, by="person")

    assert current(app) == before_restore
