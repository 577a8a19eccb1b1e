"""Property (docs/architecture.md#retention): for any history and any retention limits, Restore all
of any set the panel lists as restorable succeeds, and its undo succeeds and returns the app to
where it was."""

from __future__ import annotations

import itertools

import pytest
from django.test import override_settings
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from versions import selectors, services
from versions.errors import Conflict, PreflightFailed
from versions.models import PAGE, App, Artifact, ChangeSet

# As many artifacts as the smallest limits: a set, its restore and its undo can outgrow them.
NAMES = ["index", "about", "contact", "faq", "team", "jobs", "press", "legal", "help", "blog"]
_slugs = itertools.count()

write_op = st.tuples(st.just("write"), st.sampled_from(NAMES), st.none() | st.sampled_from("abc"))
restore_op = st.tuples(st.just("restore"), st.integers(0, 50), st.none())
undo_op = st.tuples(st.just("undo"), st.integers(0, 50), st.none())
name_op = st.tuples(st.just("name"), st.integers(0, 50), st.booleans())
# A turn is a few writes under one run, or one restore, undo or naming.
steps = st.lists(
    st.lists(write_op, min_size=1, max_size=12) | st.tuples(restore_op | undo_op | name_op),
    min_size=1,
    max_size=14,
)


def state(app) -> dict[str, str | None]:
    return {a.name: None if a.deleted else a.source for a in Artifact.objects.filter(app=app)}


def listed_sets(app) -> list[ChangeSet]:
    """Every set of the app's Change sets tab, page by page."""
    page = selectors.change_set_page(app, 1)
    sets = list(page.object_list)
    while page.has_next():
        page = selectors.change_set_page(app, page.next_page_number())
        sets += list(page.object_list)
    return sets


def restorable(cs: ChangeSet) -> bool:
    """Listed without pruned points (a set row says "(N pruned)" otherwise)."""
    return not cs.pruned and cs.point_count > 0  # type: ignore[attr-defined]


def run_history(app, history) -> None:
    version = itertools.count()
    for number, turn in enumerate(history):
        kind = turn[0][0]
        if kind == "write":
            for _, name, letter in turn:
                if letter is None:
                    if Artifact.objects.filter(app=app, name=name, deleted=False).exists():
                        services.delete_artifact(
                            app, PAGE, name, requested_by="a", tool="t", run_id=f"r{number}"
                        )
                    continue
                source = f"{letter} {next(version)}\n"
                services.write_artifact(
                    app, PAGE, name, source, requested_by="a", tool="t", run_id=f"r{number}"
                )
            continue
        _, pick, flag = turn[0]
        sets = list(ChangeSet.objects.filter(app=app).order_by("created_on", "id"))
        if kind == "undo":
            sets = [cs for cs in sets if cs.kind == ChangeSet.RESTORE]
        if not sets:
            continue
        target = sets[pick % len(sets)]
        if kind == "name":
            try:
                services.name_change_set(target.id, "kept" if flag else "", by="p")
            except Conflict:
                pass  # a set retention emptied, listed as pruned: refused in words
            continue
        try:
            services.restore_change_set(target.id, by="p")
        except PreflightFailed:
            pass  # a partly pruned set: refused in words, nothing written


@pytest.mark.django_db
@settings(
    max_examples=80,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    history=steps,
    keep=st.integers(min_value=5, max_value=12),
    restore_sets=st.integers(min_value=1, max_value=4),
    pick=st.integers(min_value=0, max_value=1000),
)
def test_restore_all_of_any_listed_restorable_set_succeeds_and_so_does_its_undo(
    history, keep, restore_sets, pick
):
    with override_settings(
        VERSIONS_POINTS_PER_APP=keep, VERSIONS_RESTORE_SETS_PER_APP=restore_sets
    ):
        app = App.objects.create(slug=f"ret-{next(_slugs)}", name="Retention")
        run_history(app, history)
        candidates = [cs for cs in listed_sets(app) if restorable(cs)]
        if not candidates:
            return
        chosen = candidates[pick % len(candidates)]
        before = state(app)

        receipt = services.restore_change_set(chosen.id, by="p")
        if receipt.kind == "noop":
            return
        assert receipt.kind == "restore" and receipt.set_id
        undo = services.restore_change_set(receipt.set_id, by="p")

        assert undo.kind == "restore"
        assert state(app) == before
        # Neither the restored set nor its restore lost a point: both can be restored again.
        for set_id, written in ((chosen.id, None), (receipt.set_id, receipt.written)):
            kept = ChangeSet.objects.filter(id=set_id).first()
            assert kept is not None and kept.pruned == []
            assert written is None or kept.points.count() == written
