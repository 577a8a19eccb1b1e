"""Revert this set (docs/architecture.md#revert): take back one set's own change, keep the later
work; later work named in Restore all and Restore dry runs; a set's own diff."""

from __future__ import annotations

import pytest
from thread_helpers import run_in_threads

from versions.errors import InvalidInput, NotFound, PreflightFailed
from versions.merging import merge_texts
from versions.messages import (
    REVERT_CHANGED_DELETED,
    REVERT_CONFLICT,
    REVERT_CREATED_CHANGED,
    REVERT_DELETED_RECREATED,
    REVERT_NOOP_MESSAGE,
    REVERT_NOT_STORED,
    REVERT_OF_RESTORE_SET,
    REVERT_PRUNED,
    REVERT_SET_NOT_FOUND,
)
from versions.models import PAGE, STYLESHEET, App, Artifact, AuditEvent, ChangeSet, RestorePoint
from versions.selectors import set_states
from versions.services import (
    delete_artifact,
    restore_change_set,
    restore_point,
    revert_change_set,
    write_artifact,
)

BASE = "".join(f"line {i}\n" for i in range(1, 11))


def edit(source: str, number: int, value: str) -> str:
    lines = source.splitlines(keepends=True)
    lines[number - 1] = value + "\n"
    return "".join(lines)


def write(app, name, source, run, by="ada", collection=PAGE):
    return write_artifact(app, collection, name, source, requested_by=by, tool="t", run_id=run)


def source(app, name, collection=PAGE):
    artifact = Artifact.objects.get(app=app, collection=collection, name=name)
    return None if artifact.deleted else artifact.source


def counts():
    return RestorePoint.objects.count(), ChangeSet.objects.count()


@pytest.fixture
def history(app):
    """index: line 2 changed by set A (ada), then line 9 changed by a later set B (bob)."""
    write(app, "index", BASE, "seed", by="seed")
    set_a = write(app, "index", edit(BASE, 2, "ada two"), "a").change_set_id
    now = edit(edit(BASE, 2, "ada two"), 9, "bob nine")
    set_b = write(app, "index", now, "b", by="bob").change_set_id
    return app, set_a, set_b


def test_revert_takes_back_the_sets_lines_and_keeps_later_lines(history):
    app, set_a, _ = history
    receipt = revert_change_set(set_a, by="person")
    assert source(app, "index") == edit(BASE, 9, "bob nine")
    data = receipt.as_dict()
    assert data["kind"] == "revert" and data["revertedSet"] == set_a
    assert data["restoredFromSet"] == set_a
    assert list(data) == [
        "setId",
        "kind",
        "restoredFromSet",
        "items",
        "skipped",
        "created_by",
        "created_on",
        "revertedSet",
    ]
    [item] = data["items"]
    assert item["name"] == "index" and item["chars"] == len(edit(BASE, 9, "bob nine"))
    counter = RestorePoint.objects.get(id=item["counterPointId"])
    assert counter.kind == RestorePoint.COUNTER and counter.previous_source.endswith(
        "bob nine\nline 10\n"
    )
    assert (counter.lines_added, counter.lines_removed) == (1, 1)
    assert ChangeSet.objects.get(id=data["setId"]).receipt["kind"] == "revert"


def test_undo_of_a_revert_is_restore_all_of_its_restore_set_and_gives_back_the_bytes(history):
    app, set_a, _ = history
    before = source(app, "index")
    receipt = revert_change_set(set_a, by="person")
    undo = restore_change_set(receipt.set_id, by="person")
    assert undo.kind == "restore" and undo.restored_from == receipt.set_id
    assert source(app, "index") == before


def test_a_second_revert_of_the_same_set_writes_nothing_and_says_so(history):
    app, set_a, _ = history
    revert_change_set(set_a, by="person")
    points = counts()
    again = revert_change_set(set_a, by="person")
    assert again.kind == "noop" and again.message == REVERT_NOOP_MESSAGE
    assert again.as_dict()["revertedSet"] == set_a
    assert counts() == points


def test_overlapping_later_change_is_a_conflict_naming_the_later_set_and_writes_nothing(app):
    write(app, "index", BASE, "seed", by="seed")
    set_a = write(app, "index", edit(BASE, 2, "ada two"), "a").change_set_id
    set_b = write(app, "index", edit(BASE, 2, "bob two"), "b", by="bob").change_set_id
    points = counts()
    with pytest.raises(PreflightFailed) as refused:
        revert_change_set(set_a, by="person")
    [finding] = refused.value.receipt.findings
    assert finding.reason == REVERT_CONFLICT.format(sets=f"{set_b} by bob")
    assert refused.value.receipt.as_dict()["revertedSet"] == set_a
    assert source(app, "index") == edit(BASE, 2, "bob two")
    assert counts() == points
    assert AuditEvent.objects.filter(action="preflight_failed", targets=[set_a]).exists()


def test_a_conflict_in_one_artifact_of_five_writes_nothing(app):
    names = [f"page{i}" for i in range(5)]
    for name in names:
        write(app, name, BASE, "seed", by="seed")
    for name in names:
        set_a = write(app, name, edit(BASE, 2, "ada two"), "a").change_set_id
    write(app, "page3", edit(BASE, 2, "bob two"), "b", by="bob")
    points = counts()
    with pytest.raises(PreflightFailed) as refused:
        revert_change_set(set_a, by="person")
    assert [f.name for f in refused.value.receipt.findings] == ["page3"]
    assert counts() == points
    assert [source(app, n) for n in names] == [edit(BASE, 2, "ada two")] * 3 + [
        edit(BASE, 2, "bob two"),
        edit(BASE, 2, "ada two"),
    ]


def test_an_artifact_the_set_created_and_nobody_touched_since_becomes_a_tombstone(app):
    set_a = write(app, "new", "fresh\n", "a").change_set_id
    revert_change_set(set_a, by="person")
    assert source(app, "new") is None


def test_an_artifact_the_set_created_and_a_later_set_changed_is_refused(app):
    set_a = write(app, "new", "fresh\n", "a").change_set_id
    set_b = write(app, "new", "fresh\nmore\n", "b", by="bob").change_set_id
    with pytest.raises(PreflightFailed) as refused:
        revert_change_set(set_a, by="person")
    assert refused.value.receipt.findings[0].reason == REVERT_CREATED_CHANGED.format(
        sets=f"{set_b} by bob"
    )
    assert source(app, "new") == "fresh\nmore\n"


def test_an_artifact_the_set_deleted_is_recreated_when_nobody_touched_it_since(app):
    write(app, "old", BASE, "seed", by="seed")
    set_a = delete_artifact(
        app, PAGE, "old", requested_by="ada", tool="t", run_id="a"
    ).change_set_id
    receipt = revert_change_set(set_a, by="person")
    assert source(app, "old") == BASE
    assert receipt.kind == "restore"


def test_an_artifact_the_set_deleted_and_a_later_set_recreated_is_refused(app):
    write(app, "old", BASE, "seed", by="seed")
    set_a = delete_artifact(
        app, PAGE, "old", requested_by="ada", tool="t", run_id="a"
    ).change_set_id
    set_b = write(app, "old", "again\n", "b", by="bob").change_set_id
    with pytest.raises(PreflightFailed) as refused:
        revert_change_set(set_a, by="person")
    assert refused.value.receipt.findings[0].reason == REVERT_DELETED_RECREATED.format(
        sets=f"{set_b} by bob"
    )


def test_an_artifact_the_set_changed_and_a_later_set_deleted_is_refused(history):
    app, set_a, _ = history
    set_c = delete_artifact(
        app, PAGE, "index", requested_by="cyd", tool="t", run_id="c"
    ).change_set_id
    with pytest.raises(PreflightFailed) as refused:
        revert_change_set(set_a, by="person")
    assert refused.value.receipt.findings[0].reason == REVERT_CHANGED_DELETED.format(
        sets=f"{_b(history)} by bob, {set_c} by cyd"
    )


def _b(history):
    return history[2]


def test_a_set_changed_again_after_other_sets_wrote_in_between_keeps_their_work(app):
    write(app, "index", BASE, "seed", by="seed")
    set_a = write(app, "index", edit(BASE, 2, "ada two"), "a").change_set_id
    between = edit(edit(BASE, 2, "ada two"), 5, "bob five")
    write(app, "index", between, "b", by="bob")
    write(app, "index", edit(between, 8, "ada eight"), "a")  # the same run: set A again
    revert_change_set(set_a, by="person")
    assert source(app, "index") == edit(BASE, 5, "bob five")


def test_a_revert_of_a_restore_set_is_refused_in_words(history):
    app, set_a, _ = history
    restore = restore_change_set(set_a, by="person")
    with pytest.raises(InvalidInput) as refused:
        revert_change_set(restore.set_id, by="person")
    assert str(refused.value) == REVERT_OF_RESTORE_SET.format(id=restore.set_id)


def test_an_unknown_set_is_not_found(db):
    with pytest.raises(NotFound) as missing:
        revert_change_set("cs_nope", by="person")
    assert str(missing.value) == REVERT_SET_NOT_FOUND.format(id="cs_nope")


def test_a_set_whose_state_was_not_stored_is_refused_and_writes_nothing(app, settings):
    settings.VERSIONS_MAX_STORED_BYTES = 50
    write(app, "index", BASE, "seed", by="seed")  # 80 bytes: the set's "before" is not kept
    set_a = write(app, "index", edit(BASE, 2, "ada two"), "a").change_set_id
    points = counts()
    with pytest.raises(PreflightFailed) as refused:
        revert_change_set(set_a, by="person")
    assert refused.value.receipt.findings[0].reason == REVERT_NOT_STORED.format(
        when="before", size=len(BASE), cap=50
    )
    assert counts() == points


def test_a_set_whose_points_were_pruned_is_refused(app, settings):
    settings.VERSIONS_POINTS_PER_APP = 3
    write(app, "index", BASE, "seed", by="seed")
    set_a = write(app, "index", edit(BASE, 2, "ada two"), "a").change_set_id
    write(app, "about", "about\n", "a")  # set A's newest point: kept
    for number in range(2):
        write(app, "other", f"other {number}\n", f"b{number}", by="bob")
    assert not RestorePoint.objects.filter(change_set_id=set_a, artifact__name="index").exists()
    points = counts()
    with pytest.raises(PreflightFailed) as refused:
        revert_change_set(set_a, by="person")
    assert [(f.name, f.reason) for f in refused.value.receipt.findings] == [
        ("index", REVERT_PRUNED.format(keep=3))
    ]
    assert counts() == points


def test_a_stale_expected_is_refused_and_a_current_one_accepted(history):
    app, set_a, _ = history
    with pytest.raises(PreflightFailed):
        revert_change_set(set_a, by="person", expected={"pltf_page/index": "0" * 64})
    assert source(app, "index") == edit(edit(BASE, 2, "ada two"), 9, "bob nine")
    current = Artifact.objects.get(app=app, name="index").sha256
    receipt = revert_change_set(set_a, by="person", expected={"pltf_page/index": current})
    assert receipt.as_dict()["kind"] == "revert"


def test_a_revert_dry_run_writes_nothing_and_names_the_later_sets_it_keeps(history):
    app, set_a, set_b = history
    points = counts()
    preview = revert_change_set(set_a, by="person", dry_run=True, actor=None).as_dict()
    assert counts() == points
    assert preview["kind"] == "dry_run" and preview["revertedSet"] == set_a
    assert preview["items"][0]["linesAdded"] == 1 and preview["items"][0]["linesRemoved"] == 1
    assert preview["laterChanges"] == [{"name": "index", "collection": PAGE, "sets": [set_b]}]
    assert [(s["setId"], s["created_by"]) for s in preview["laterSets"]] == [(set_b, "bob")]


def test_a_revert_dry_run_lists_a_conflict_as_a_finding(app):
    write(app, "index", BASE, "seed", by="seed")
    set_a = write(app, "index", edit(BASE, 2, "ada two"), "a").change_set_id
    write(app, "index", edit(BASE, 2, "bob two"), "b", by="bob")
    preview = revert_change_set(set_a, by="person", dry_run=True)
    assert preview.kind == "dry_run" and [f.name for f in preview.findings] == ["index"]


def test_a_route_revert_goes_through_the_route_save_path(app):
    spec = '{"method": "GET", "path": "/quotes", "status": 200, "body": {"n": 1}}\n'
    write(app, "quotes", spec, "seed", by="seed", collection="pltf_api_route")
    set_a = write(
        app, "quotes", spec.replace('"n": 1', '"n": 2'), "a", collection="pltf_api_route"
    ).change_set_id
    revert_change_set(set_a, by="person")
    assert source(app, "quotes", collection="pltf_api_route") == spec


# --- later work named in Restore all and Restore dry runs -------------------------------------


def test_restore_all_dry_run_names_the_later_sets_it_would_also_undo(history):
    app, set_a, set_b = history
    write(app, "App", "body {}\n", "a", collection=STYLESHEET)  # set A, no later set
    preview = restore_change_set(set_a, by="person", dry_run=True).as_dict()
    assert preview["laterChanges"] == [{"name": "index", "collection": PAGE, "sets": [set_b]}]
    [later] = preview["laterSets"]
    assert later["setId"] == set_b and later["created_by"] == "bob" and later["kind"] == "change"
    assert later["created_on"].endswith("Z")


def test_restore_dry_run_of_a_point_names_the_later_sets(history):
    app, set_a, set_b = history
    point = RestorePoint.objects.get(change_set_id=set_a)
    preview = restore_point(point.id, by="person", dry_run=True).as_dict()
    assert preview["laterChanges"] == [{"name": "index", "collection": PAGE, "sets": [set_b]}]


def test_a_dry_run_without_later_work_keeps_its_keys(history):
    app, _, set_b = history
    preview = restore_change_set(set_b, by="person", dry_run=True).as_dict()
    assert "laterChanges" not in preview and "laterSets" not in preview


# --- the set's own diff ---------------------------------------------------------------------


def test_a_sets_own_diff_is_before_the_set_to_right_after_it_with_matching_counts(history):
    app, set_a, _ = history
    states = set_states(set_a)
    [index] = states.artifacts
    assert index.before.source == BASE and index.after.source == edit(BASE, 2, "ada two")
    assert (index.lines_added, index.lines_removed) == (1, 1)
    assert (states.lines_added, states.lines_removed) == (1, 1)
    assert index.change == "changed" and index.available


def test_a_sets_own_diff_says_why_a_side_is_not_available(app, settings):
    settings.VERSIONS_MAX_STORED_BYTES = 50
    write(app, "index", BASE, "seed", by="seed")
    set_a = write(app, "index", edit(BASE, 2, "ada two"), "a").change_set_id
    [index] = set_states(set_a).artifacts
    assert not index.available and index.change == "unknown" and index.reason
    assert index.before.source is None and index.lines_added == 0


def test_a_sets_own_diff_shows_created_and_deleted_artifacts(app):
    write(app, "old", BASE, "seed", by="seed")
    write(app, "new", "fresh\n", "a")
    set_a = delete_artifact(app, PAGE, "old", requested_by="ada", tool="t", run_id="a")
    changes = {a.artifact.name: a.change for a in set_states(set_a.change_set_id).artifacts}
    assert changes == {"new": "added", "old": "removed"}


# --- the merge library ----------------------------------------------------------------------


def test_merge_texts_keeps_both_sides_and_returns_none_on_a_conflict():
    base = "a\nb\nc\nd\ne\n"
    assert merge_texts(base, "A\nb\nc\nd\ne\n", "a\nb\nc\nd\nE\n") == "A\nb\nc\nd\nE\n"
    assert merge_texts(base, "X\nb\nc\nd\ne\n", "Y\nb\nc\nd\ne\n") is None


# --- a revert racing an agent write (PostgreSQL: real row locks between threads) -----------


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("reviewed", [False, True])
def test_a_revert_racing_an_agent_write_sees_it_or_refuses_never_half(reviewed):
    big = "".join(f"rule {i} {{ color: #{i:06x}; }}\n" for i in range(4000))
    for round_ in range(4):
        app = App.objects.create(slug=f"race-{reviewed:d}-{round_}", name="Race")
        names = ["a1", "a2", "a3"]
        for name in names:
            write(app, name, big, "seed", by="seed")
        for name in names:
            set_a = write(app, name, edit(big, 2, "ada two"), "a").change_set_id
        now = {n: Artifact.objects.get(app=app, name=n).sha256 for n in names}
        agent_source = edit(edit(big, 2, "ada two"), 3000, "agent 3000")
        expected = {f"{PAGE}/{n}": sha for n, sha in now.items()} if reviewed else None

        def act(i, set_a=set_a, app=app, expected=expected, agent_source=agent_source):
            if i == 0:
                return revert_change_set(set_a, by="person", expected=expected)
            return write(app, "a2", agent_source, f"agent-{i}", by="agent")

        revert, agent = run_in_threads(2, act)
        assert not isinstance(agent, BaseException), agent
        final = {n: source(app, n) for n in names}
        assert "agent 3000" in final["a2"]  # the agent's write is never lost
        if isinstance(revert, PreflightFailed):  # refused (drift): nothing of it written
            assert reviewed
            assert all(final[n] == edit(big, 2, "ada two") for n in ("a1", "a3"))
        else:
            assert not isinstance(revert, BaseException), revert
            assert revert.as_dict()["kind"] == "revert" and len(revert.items) == 3
            assert final["a1"] == final["a3"] == big
            # It saw the agent's write (merged it) or came first (the agent then overwrote).
            assert final["a2"] in (edit(big, 3000, "agent 3000"), agent_source)
