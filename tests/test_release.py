"""Release review (docs/architecture.md#release-review): the state at the release, what changed
since, Restore to release."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.db import connection
from django.test import override_settings
from django.test.utils import CaptureQueriesContext

from versions.errors import Conflict, InvalidInput, PreflightFailed
from versions.messages import (
    NOOP_MESSAGE,
)
from versions.models import (
    API_ROUTE,
    FRONTEND_MODULE,
    PAGE,
    SERVER_SCRIPT,
    STYLESHEET,
    App,
    Artifact,
    AuditEvent,
    ChangeSet,
    RestorePoint,
)
from versions.selectors import (
    ADDED,
    CHANGED,
    CURRENT,
    NO_RELEASE,
    NOT_STORED,
    PRUNED,
    REMOVED,
    STATE_NOT_STORED,
    STATE_PRUNED,
    STORED,
    release_moment,
    since_release,
    state_at,
    states_at,
)
from versions.services import (
    delete_artifact,
    mark_release,
    restore_change_set,
    restore_to_release,
    unmark_release,
    write_artifact,
)
from versions.terms import (
    SCOPE,
)

Key = tuple[str, str]


def route(body: str, path: str = "/quotes/{id}") -> str:
    return json.dumps({"method": "GET", "path": path, "status": 200, "body": {"v": body}})


def turn(app: App, changes: dict[Key, str | None], run_id: str) -> str:
    """One agent turn: write (or delete, for None) each artifact; returns the set id."""
    set_id = None
    for (collection, name), source in changes.items():
        if source is None:
            receipt = delete_artifact(
                app, collection, name, requested_by="agent", tool="test", run_id=run_id
            )
        else:
            receipt = write_artifact(
                app, collection, name, source, requested_by="agent", tool="test", run_id=run_id
            )
        set_id = set_id or receipt.change_set_id
    assert set_id is not None
    return set_id


def snapshot(app: App) -> dict[Key, bytes | None]:
    """Every artifact's current bytes (None for a tombstone)."""
    out: dict[Key, bytes | None] = {}
    for artifact in Artifact.objects.filter(app=app).select_related("blob"):
        if not artifact.deleted:  # the recorded size is the size of the bytes
            assert artifact.size == len(artifact.blob.raw)  # type: ignore[union-attr]
        out[(artifact.collection, artifact.name)] = (
            None if artifact.deleted else artifact.blob.raw  # type: ignore[union-attr]
        )
    return out


def same_state(before: dict[Key, bytes | None], after: dict[Key, bytes | None]) -> None:
    """``after`` holds exactly ``before``; artifacts ``before`` lacks are tombstones."""
    for key in set(before) | set(after):
        assert after.get(key) == before.get(key), key


INDEX: Key = (PAGE, "index")
ABOUT: Key = (PAGE, "about")
CSS: Key = (STYLESHEET, "App")
HELPER: Key = (FRONTEND_MODULE, "helper")
OLD: Key = (SERVER_SCRIPT, "old")
ROUTE: Key = (API_ROUTE, "quote")


@pytest.fixture
def history(app):
    """A release, then three turns: changes, a creation, a deletion, a change and change back."""
    turn(app, {INDEX: "<h1>v0</h1>\n"}, "before")
    release = turn(
        app,
        {
            INDEX: "<h1>Quotes</h1>\n<p>v1</p>\n",
            ABOUT: "About us\n",
            CSS: "body { color: black; }\n",
            OLD: "print('old')\n",
            ROUTE: route("one"),
        },
        "release",
    )
    mark_release(release, by="rvaid")
    at_release = snapshot(app)
    t1 = turn(
        app,
        {
            INDEX: "<h1>Quotes</h1>\n<p>v2</p>\n",
            CSS: "body { color: red; }\n",
            HELPER: "export const x = 1;\n",
        },
        "t1",
    )
    t2 = turn(app, {INDEX: "<h1>Quotes!</h1>\n<p>v3</p>\n", OLD: None}, "t2")
    t3 = turn(app, {CSS: "body { color: black; }\n", ROUTE: route("two")}, "t3")
    return {"release": release, "at_release": at_release, "turns": [t1, t2, t3]}


def test_since_release_lists_exactly_the_artifacts_that_differ(app, history):
    review = since_release(app)
    assert review.release.id == history["release"]
    assert [s.id for s in review.sets] == list(reversed(history["turns"]))
    by_key = {(s.artifact.collection, s.artifact.name): s for s in review.changes}
    # about never changed, App changed and changed back: neither is listed.
    assert set(by_key) == {INDEX, HELPER, OLD, ROUTE}
    assert by_key[INDEX].change == CHANGED
    assert by_key[ROUTE].change == CHANGED
    assert by_key[HELPER].change == ADDED
    assert by_key[OLD].change == REMOVED
    assert [s.artifact.name for s in review.added] == ["helper"]
    assert [s.artifact.name for s in review.removed] == ["old"]
    assert review.unavailable == []
    # The cumulative "then" side is the release state, loaded.
    assert by_key[INDEX].source == "<h1>Quotes</h1>\n<p>v1</p>\n"
    assert by_key[HELPER].source == "" and by_key[HELPER].existed is False
    assert by_key[OLD].source == "print('old')\n" and by_key[OLD].artifact.deleted


def test_state_at_is_the_previous_source_of_the_first_point_after(app, history):
    moment = release_moment(app)
    index = Artifact.objects.get(app=app, collection=PAGE, name="index")
    state = state_at(index, moment, with_source=True)
    assert state.status == STORED
    assert state.source == "<h1>Quotes</h1>\n<p>v1</p>\n"
    assert state.point is not None and state.point.change_set_id == history["turns"][0]
    about = Artifact.objects.get(app=app, collection=PAGE, name="about")
    unchanged = state_at(about, moment, with_source=True)
    assert unchanged.status == CURRENT and unchanged.point is None
    assert unchanged.source == "About us\n" and not unchanged.differs
    # Just before the release set wrote it, index held v0.
    release_point = RestorePoint.objects.get(change_set_id=history["release"], artifact=index)
    earlier = state_at(
        index, release_point.created_on - timedelta(milliseconds=1), with_source=True
    )
    assert earlier.status == STORED and earlier.point == release_point
    assert earlier.source == "<h1>v0</h1>\n"


def test_restore_to_release_returns_every_artifact_to_its_release_bytes(app, history):
    before = snapshot(app)
    receipt = restore_to_release(app, by="rvaid")
    data = receipt.as_dict()
    assert data["kind"] == "restore"
    assert data["restoredFromSet"] == history["release"]
    assert data["scope"] == SCOPE == "since_release"
    assert data["setId"].startswith("rs_")
    assert {(i["collection"], i["name"]) for i in data["items"]} == {INDEX, HELPER, OLD, ROUTE}
    assert data["skipped"] == []
    same_state(history["at_release"], snapshot(app))
    # The restore set stores the same receipt and points back at the release set.
    rs = ChangeSet.objects.get(pk=data["setId"])
    assert rs.kind == ChangeSet.RESTORE and rs.restored_from_id == history["release"]
    assert rs.receipt == data
    # Every write has its counter-point in the restore set.
    counters = RestorePoint.objects.filter(change_set=rs)
    assert {p.id for p in counters} == {i["counterPointId"] for i in data["items"]}
    assert all(p.kind == RestorePoint.COUNTER for p in counters)
    # The route went back through the route-save path: its key is the release one again.
    quote = Artifact.objects.get(app=app, collection=API_ROUTE, name="quote")
    assert quote.route_key and quote.route_key.startswith("GET ")
    # Nothing differs any more.
    assert since_release(app).changes == []

    # A second click: the exact noop sentence, nothing written.
    points = RestorePoint.objects.count()
    again = restore_to_release(app, by="rvaid").as_dict()
    assert again["kind"] == "noop"
    assert again["message"] == NOOP_MESSAGE
    assert again["written"] == 0
    assert again["restoredFromSet"] == history["release"]
    assert again["scope"] == "since_release"
    assert RestorePoint.objects.count() == points

    # Undo: Restore all on the restore set returns to the state before the restore.
    undo = restore_change_set(data["setId"], by="rvaid").as_dict()
    assert undo["kind"] == "restore" and undo["restoredFromSet"] == data["setId"]
    same_state(before, snapshot(app))


def test_restore_to_release_dry_run_writes_nothing_and_lists_the_plan(app, history):
    points, sets = RestorePoint.objects.count(), ChangeSet.objects.count()
    data = restore_to_release(app, by="rvaid", dry_run=True).as_dict()
    assert data["kind"] == "dry_run" and data["scope"] == "since_release"
    actions = {i["name"]: i["action"] for i in data["items"]}
    assert actions == {"index": "write", "helper": "delete", "old": "recreate", "quote": "write"}
    assert data["findings"] == []
    assert (RestorePoint.objects.count(), ChangeSet.objects.count()) == (points, sets)


def test_restore_to_release_refuses_an_artifact_changed_since_it_was_reviewed(app, history):
    index = Artifact.objects.get(app=app, collection=PAGE, name="index")
    reviewed = index.sha256
    write_artifact(app, PAGE, "index", "sneaky\n", requested_by="agent", tool="test")
    before = snapshot(app)
    with pytest.raises(PreflightFailed) as caught:
        restore_to_release(app, by="rvaid", expected={"pltf_page/index": reviewed})
    findings = caught.value.receipt.as_dict()["findings"]
    assert [f["name"] for f in findings] == ["index"]
    assert "changed since you reviewed it" in findings[0]["reason"]
    same_state(before, snapshot(app))


@override_settings(VERSIONS_MAX_STORED_BYTES=1000)
def test_preflight_refuses_when_a_release_source_was_not_stored(app):
    big = "x" * 60 + "\n"
    release = turn(app, {INDEX: "v1\n", CSS: big * 30}, "release")
    mark_release(release, by="rvaid")
    turn(app, {INDEX: "v2\n", CSS: "small\n"}, "t1")
    review = since_release(app)
    css = next(s for s in review.changes if s.artifact.name == "App")
    assert css.status == NOT_STORED and css.source is None
    assert css.reason == STATE_NOT_STORED.format(size=len(big) * 30, cap=1000)
    before = snapshot(app)
    points, sets = RestorePoint.objects.count(), ChangeSet.objects.count()
    with pytest.raises(PreflightFailed) as caught:
        restore_to_release(app, by="rvaid")
    data = caught.value.receipt.as_dict()
    assert data["kind"] == "preflight_failed" and data["written"] == 0
    assert data["scope"] == "since_release" and data["restoredFromSet"] == release
    assert [(f["name"], f["reason"]) for f in data["findings"]] == [("App", css.reason)]
    # Nothing written, not even index, which alone would have been restorable.
    same_state(before, snapshot(app))
    assert (RestorePoint.objects.count(), ChangeSet.objects.count()) == (points, sets)
    event = AuditEvent.objects.get(app=app, action="preflight_failed")
    assert event.targets == [release] and event.details["scope"] == "since_release"


@override_settings(VERSIONS_MAX_STORED_BYTES=1000)
def test_an_unstored_release_source_that_matches_again_is_not_listed(app):
    big = "y" * 60 + "\n"
    release = turn(app, {CSS: big * 30}, "release")
    mark_release(release, by="rvaid")
    turn(app, {CSS: "small\n"}, "t1")
    turn(app, {CSS: big * 30}, "t2")  # changed back: same bytes as at the release
    assert since_release(app).changes == []
    assert restore_to_release(app, by="rvaid").kind == "noop"


@override_settings(VERSIONS_POINTS_PER_APP=3)
def test_preflight_refuses_when_a_point_after_the_release_was_pruned(app):
    release = turn(app, {INDEX: "v1\n", CSS: "c1\n"}, "release")
    mark_release(release, by="rvaid")  # pins the release set's points
    for n in range(2, 7):
        turn(app, {INDEX: f"v{n}\n"}, f"t{n}")
    turn(app, {CSS: "c2\n"}, "css")
    index = Artifact.objects.get(app=app, collection=PAGE, name="index")
    assert index.pruned_until is not None
    state = state_at(index, release_moment(app), with_source=True)
    assert state.status == PRUNED and state.sha256 is None and state.source is None
    assert state.reason == STATE_PRUNED.format(keep=3)
    before = snapshot(app)
    points = RestorePoint.objects.count()
    with pytest.raises(PreflightFailed) as caught:
        restore_to_release(app, by="rvaid")
    findings = caught.value.receipt.as_dict()["findings"]
    assert [(f["name"], f["reason"]) for f in findings] == [("index", state.reason)]
    same_state(before, snapshot(app))
    assert RestorePoint.objects.count() == points


def test_no_release_marked_is_a_clear_error(app):
    turn(app, {INDEX: "v1\n"}, "t1")
    message = NO_RELEASE.format(slug=app.slug)
    with pytest.raises(InvalidInput) as caught:
        restore_to_release(app, by="rvaid")
    assert caught.value.message == message and isinstance(caught.value, Conflict)
    with pytest.raises(InvalidInput):
        since_release(app)
    release = turn(app, {INDEX: "v2\n"}, "t2")
    mark_release(release, by="rvaid")
    unmark_release(app, by="rvaid")
    with pytest.raises(InvalidInput):
        restore_to_release(app.slug, by="rvaid")


def test_moving_the_release_mark_moves_the_review(app):
    first = turn(app, {INDEX: "v1\n"}, "t1")
    second = turn(app, {INDEX: "v2\n"}, "t2")
    turn(app, {INDEX: "v3\n"}, "t3")
    mark_release(first, by="rvaid")
    assert since_release(app).changes[0].source == "v1\n"
    mark_release(second, by="rvaid")
    review = since_release(app)
    assert review.changes[0].source == "v2\n" and len(review.sets) == 1
    restore_to_release(app, by="rvaid")
    assert Artifact.objects.get(app=app, name="index").source == "v2\n"


def test_a_restore_after_the_release_is_part_of_the_history(app, history):
    """Restore sets after the release are sets like any other; the release state is unmoved."""
    restore_change_set(history["turns"][1], by="rvaid")  # undo t2: index v2 back, old back
    review = since_release(app)
    assert review.sets[0].kind == ChangeSet.RESTORE
    restore_to_release(app, by="rvaid")
    same_state(history["at_release"], snapshot(app))


def test_states_at_runs_a_fixed_number_of_queries(db):
    def queries_for(count: int) -> int:
        app = App.objects.create(slug=f"many-{count}", name="Many")
        release = turn(app, {(PAGE, f"p{i}"): f"v1 {i}\n" for i in range(count)}, "r")
        mark_release(release, by="rvaid")
        turn(app, {(PAGE, f"p{i}"): f"v2 {i}\n" for i in range(0, count, 2)}, "t")
        moment = release_moment(app)
        with CaptureQueriesContext(connection) as ctx:
            states = states_at(app, moment, with_sources=True)
        assert len(states) == count
        assert sum(s.differs for s in states) == (count + 1) // 2
        with CaptureQueriesContext(connection) as ctx_review:
            review = since_release(app)
            for s in review.changes:  # everything the view reads
                assert s.point is not None and s.point.artifact.name and s.source
        return len(ctx.captured_queries) * 1000 + len(ctx_review.captured_queries)

    assert queries_for(3) == queries_for(30)
