"""Restore and Restore all (docs/architecture.md#restore): receipts, skipping, noop, undo,
tombstones, dry runs."""

from __future__ import annotations

import json
import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from versions.errors import InvalidInput, NotFound, PreflightFailed
from versions.messages import (
    NOOP_MESSAGE,
    NOOP_POINT_MESSAGE,
)
from versions.models import (
    API_ROUTE,
    PAGE,
    STYLESHEET,
    Artifact,
    AuditEvent,
    ChangeSet,
    RestorePoint,
)
from versions.services import (
    RestoreReceipt,
    delete_artifact,
    restore_change_set,
    restore_point,
    write_artifact,
)

ISO_MS = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")


def text_of(length: int, seed: str) -> str:
    """A multi-line text of exactly ``length`` characters."""
    line = f"/* {seed} */ .rule-{seed} {{ color: #123456; }}\n"
    body = (line * (length // len(line) + 1))[:length]
    assert len(body) == length
    return body


def source_of(app, collection: str, name: str) -> str | None:
    artifact = Artifact.objects.get(app=app, collection=collection, name=name)
    return None if artifact.deleted else artifact.source


def agent_turn(app, changes: dict[tuple[str, str], str | None], run_id: str) -> str:
    """Write (or delete, for None) each artifact in one agent turn; returns the set id."""
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
        assert receipt.change_set_id == set_id
    assert set_id is not None
    return set_id


@pytest.fixture
def seeded(app):
    """The seed's staging app: page index (514 chars) and stylesheet App (28,417 chars), then
    one agent turn that changed both."""
    before = {
        (PAGE, "index"): text_of(514, "index-v1"),
        (STYLESHEET, "App"): text_of(28_417, "app-v1"),
    }
    agent_turn(app, before, run_id="setup")
    after = {
        (PAGE, "index"): text_of(600, "index-v2"),
        (STYLESHEET, "App"): text_of(30_000, "app-v2"),
    }
    set_id = agent_turn(app, after, run_id="turn-1")
    return app, set_id, before, after


def test_restore_all_of_the_seed_turn_writes_both_files_back_with_the_seed_receipt(seeded):
    app, set_id, before, _after = seeded
    points = {p.artifact.name: p for p in RestorePoint.objects.filter(change_set_id=set_id)}

    receipt = restore_change_set(set_id, by="rvaid")

    assert isinstance(receipt, RestoreReceipt)
    data = receipt.as_dict()
    assert list(data) == [
        "setId",
        "kind",
        "restoredFromSet",
        "items",
        "skipped",
        "created_by",
        "created_on",
    ]
    assert data["kind"] == "restore"
    assert re.match(r"^rs_[0-9a-z]+_[0-9a-z]{8}$", data["setId"])
    assert data["restoredFromSet"] == set_id
    assert data["created_by"] == "rvaid"
    assert ISO_MS.match(data["created_on"])
    assert data["skipped"] == []
    items = {item["name"]: item for item in data["items"]}
    assert {n: i["chars"] for n, i in items.items()} == {"index": 514, "App": 28_417}
    for name, collection in (("index", PAGE), ("App", STYLESHEET)):
        item = items[name]
        assert list(item) == ["name", "collection", "pointId", "counterPointId", "chars"]
        assert item["collection"] == collection
        assert item["pointId"] == points[name].id
        counter = RestorePoint.objects.get(id=item["counterPointId"])
        assert counter.kind == RestorePoint.COUNTER
        assert counter.change_set_id == data["setId"]
    for (collection, name), source in before.items():
        assert source_of(app, collection, name) == source
        artifact = Artifact.objects.get(app=app, collection=collection, name=name)
        assert artifact.size == len(source.encode())
        assert artifact.updated_by == "rvaid"
    stored = ChangeSet.objects.get(id=data["setId"])
    assert stored.kind == ChangeSet.RESTORE
    assert stored.restored_from_id == set_id
    assert stored.receipt == data
    json.dumps(data)  # JSON-ready as it is


def test_restore_all_again_answers_the_noop_sentence_and_writes_nothing(seeded):
    app, set_id, _before, _after = seeded
    restore_change_set(set_id, by="rvaid")
    points, sets = RestorePoint.objects.count(), ChangeSet.objects.count()

    again = restore_change_set(set_id, by="rvaid")

    assert again.kind == "noop"
    assert again.message == NOOP_MESSAGE
    data = again.as_dict()
    assert data == {
        "kind": "noop",
        "restoredFromSet": set_id,
        "written": 0,
        "message": "Every artifact already matched the state before this set — nothing was written.",
        "skipped": data["skipped"],
    }
    assert {s["name"] for s in data["skipped"]} == {"index", "App"}
    assert all(s["reason"] == "already matched" for s in data["skipped"])
    assert (RestorePoint.objects.count(), ChangeSet.objects.count()) == (points, sets)


def test_undo_this_restore_brings_back_the_agents_versions(seeded):
    app, set_id, _before, after = seeded
    restored = restore_change_set(set_id, by="rvaid")

    undo = restore_change_set(restored.set_id, by="rvaid")

    assert undo.kind == "restore"
    assert undo.restored_from == restored.set_id
    for (collection, name), source in after.items():
        assert source_of(app, collection, name) == source
    # The undo's points are the counter-points' counterparts: undoing the undo restores again.
    redo = restore_change_set(undo.set_id, by="rvaid")
    assert {i.name for i in redo.items} == {"index", "App"}


def test_an_artifact_already_matching_is_skipped_and_reported(seeded):
    app, set_id, before, _after = seeded
    write_artifact(app, PAGE, "index", before[(PAGE, "index")], requested_by="p", tool="t")

    receipt = restore_change_set(set_id, by="rvaid")

    assert [i.name for i in receipt.items] == ["App"]
    assert receipt.as_dict()["skipped"] == [
        {
            "name": "index",
            "collection": PAGE,
            "pointId": RestorePoint.objects.get(change_set_id=set_id, artifact__name="index").id,
            "reason": "already matched",
        }
    ]
    assert [(s.name, s.reason) for s in receipt.skipped] == [("index", "already matched")]


def test_the_oldest_point_of_each_artifact_in_the_set_is_restored(app):
    agent_turn(app, {(PAGE, "index"): "v1\n"}, run_id="a")
    set_id = agent_turn(app, {(PAGE, "index"): "v2\n"}, run_id="b")
    agent_turn(app, {(PAGE, "index"): "v3\n"}, run_id="b")
    agent_turn(app, {(PAGE, "index"): "v4\n"}, run_id="b")

    receipt = restore_change_set(set_id, by="p")

    oldest = RestorePoint.objects.filter(change_set_id=set_id).order_by("created_on").first()
    assert receipt.items[0].point_id == oldest.id
    assert source_of(app, PAGE, "index") == "v1\n"


def test_a_counter_point_records_the_state_it_overwrote_with_inverted_line_counts(seeded):
    app, set_id, _before, after = seeded
    page_point = RestorePoint.objects.get(change_set_id=set_id, artifact__name="index")

    receipt = restore_change_set(set_id, by="rvaid")

    counter = RestorePoint.objects.get(id=receipt.items[0].counter_point_id)
    assert counter.artifact.name == "index"
    assert counter.previous_source == after[(PAGE, "index")]
    assert counter.previous_existed is True
    assert counter.source_stored is True
    assert counter.new_sha256 == page_point.previous_sha256
    assert counter.requested_by == "rvaid"
    assert (counter.lines_added, counter.lines_removed) == (
        page_point.lines_removed,
        page_point.lines_added,
    )


def test_counter_point_line_counts_are_counted_when_the_artifact_drifted(app):
    agent_turn(app, {(PAGE, "index"): "a\nb\n"}, run_id="a")
    set_id = agent_turn(app, {(PAGE, "index"): "a\nb\nc\n"}, run_id="b")
    write_artifact(app, PAGE, "index", "x\n", requested_by="p", tool="t")

    receipt = restore_change_set(set_id, by="p")

    counter = RestorePoint.objects.get(id=receipt.items[0].counter_point_id)
    assert (counter.lines_added, counter.lines_removed) == (2, 1)


def test_restore_to_absence_makes_a_tombstone_and_recreation_brings_it_back(app):
    set_id = agent_turn(app, {(PAGE, "about"): "<p>about</p>\n"}, run_id="create")

    gone = restore_change_set(set_id, by="p")

    artifact = Artifact.objects.get(app=app, name="about")
    assert artifact.deleted and artifact.sha256 == "" and artifact.blob_id is None
    assert gone.items[0].chars == 0
    counter = RestorePoint.objects.get(id=gone.items[0].counter_point_id)
    assert counter.previous_source == "<p>about</p>\n" and counter.new_sha256 == ""

    back = restore_change_set(gone.set_id, by="p")

    assert back.kind == "restore"
    assert source_of(app, PAGE, "about") == "<p>about</p>\n"


def test_restoring_a_delete_recreates_the_artifact(app):
    agent_turn(app, {(PAGE, "index"): "hello\n"}, run_id="a")
    set_id = agent_turn(app, {(PAGE, "index"): None}, run_id="b")

    receipt = restore_change_set(set_id, by="p")

    assert receipt.items[0].chars == len("hello\n")
    assert source_of(app, PAGE, "index") == "hello\n"


def test_a_set_deleted_later_is_recreated_by_restoring_an_earlier_set(app):
    agent_turn(app, {(PAGE, "index"): "v1\n"}, run_id="a")
    set_id = agent_turn(app, {(PAGE, "index"): "v2\n"}, run_id="b")
    agent_turn(app, {(PAGE, "index"): None}, run_id="c")

    restore_change_set(set_id, by="p")

    assert source_of(app, PAGE, "index") == "v1\n"


def test_restore_point_restores_one_artifact_behind_a_counter_point(seeded):
    app, set_id, before, after = seeded
    point = RestorePoint.objects.get(change_set_id=set_id, artifact__name="App")

    receipt = restore_point(point.id, by="rvaid")

    assert receipt.kind == "restore"
    assert receipt.restored_from == set_id
    assert [i.point_id for i in receipt.items] == [point.id]
    assert source_of(app, STYLESHEET, "App") == before[(STYLESHEET, "App")]
    assert source_of(app, PAGE, "index") == after[(PAGE, "index")]
    again = restore_point(point.id, by="rvaid")
    assert again.kind == "noop" and again.message == NOOP_POINT_MESSAGE


def test_restore_point_refuses_when_the_artifact_changed_since_it_was_reviewed(seeded):
    app, set_id, _before, after = seeded
    point = RestorePoint.objects.get(change_set_id=set_id, artifact__name="App")
    write_artifact(app, STYLESHEET, "App", "body{}\n", requested_by="agent", tool="t")

    with pytest.raises(PreflightFailed) as caught:
        restore_point(point.id, by="rvaid", expected_sha256=point.new_sha256)

    assert "changed since you reviewed it" in caught.value.receipt.findings[0].reason
    assert source_of(app, STYLESHEET, "App") == "body{}\n"


def test_unknown_set_and_point_are_not_found(db):
    with pytest.raises(NotFound):
        restore_change_set("cs_rp_nope_nope", by="p")
    with pytest.raises(NotFound):
        restore_point("rp_nope_nope", by="p")


def test_expected_must_be_a_mapping_of_collection_slash_name(seeded):
    _app, set_id, _b, _a = seeded
    with pytest.raises(InvalidInput):
        restore_change_set(set_id, by="p", expected=["pltf_page/index"])  # type: ignore[arg-type]
    with pytest.raises(InvalidInput):
        restore_change_set(set_id, by="p", expected={"index": "abc"})


def test_expected_accepts_tuple_keys(seeded):
    app, set_id, _before, _after = seeded
    current = Artifact.objects.get(app=app, name="index").sha256
    with pytest.raises(PreflightFailed):
        restore_change_set(set_id, by="p", expected={(PAGE, "index"): "0" * 64})
    receipt = restore_change_set(set_id, by="p", expected={(PAGE, "index"): current})
    assert receipt.kind == "restore"


def test_a_dry_run_lists_what_would_be_written_and_writes_nothing(seeded):
    app, set_id, _before, after = seeded
    write_artifact(app, PAGE, "extra", "x\n", requested_by="agent", tool="t", run_id="turn-1")
    points, sets = RestorePoint.objects.count(), ChangeSet.objects.count()
    page_point = RestorePoint.objects.get(change_set_id=set_id, artifact__name="index")

    preview = restore_change_set(set_id, by="p", dry_run=True)

    data = preview.as_dict()
    assert list(data) == ["kind", "restoredFromSet", "items", "skipped", "findings"]
    assert data["kind"] == "dry_run" and data["findings"] == []
    items = {i["name"]: i for i in data["items"]}
    assert items["index"] == {
        "name": "index",
        "collection": PAGE,
        "pointId": page_point.id,
        "linesAdded": page_point.lines_removed,
        "linesRemoved": page_point.lines_added,
        "chars": 514,
        "action": "write",
    }
    assert items["extra"]["action"] == "delete"
    assert (RestorePoint.objects.count(), ChangeSet.objects.count()) == (points, sets)
    assert source_of(app, PAGE, "index") == after[(PAGE, "index")]


def test_a_dry_run_never_raises_it_lists_findings(seeded):
    app, set_id, _before, _after = seeded
    preview = restore_change_set(set_id, by="p", dry_run=True, expected={"pltf_page/index": "0"})
    assert preview.kind == "dry_run"
    assert [f.name for f in preview.findings] == ["index"]
    assert not AuditEvent.objects.filter(action="preflight_failed").exists()


def test_a_dry_run_of_a_recreation_says_recreate(app):
    agent_turn(app, {(PAGE, "index"): "hello\n"}, run_id="a")
    set_id = agent_turn(app, {(PAGE, "index"): None}, run_id="b")
    preview = restore_change_set(set_id, by="p", dry_run=True)
    assert preview.items[0].action == "recreate"
    assert preview.items[0].lines_added == 1


def test_restore_all_of_100_artifacts_takes_a_fixed_number_of_queries(app, settings):
    # Retention has its own cost when points go over the cap; this counts the restore's own.
    settings.VERSIONS_POINTS_PER_APP = 10_000
    agent_turn(app, {(PAGE, f"p{i}"): f"v1 {i}\n" for i in range(100)}, run_id="a")
    set_id = agent_turn(app, {(PAGE, f"p{i}"): f"v2 {i}\n" for i in range(100)}, run_id="b")
    small = agent_turn(app, {(PAGE, f"q{i}"): f"v1 {i}\n" for i in range(3)}, run_id="c")
    agent_turn(app, {(PAGE, f"q{i}"): f"v2 {i}\n" for i in range(3)}, run_id="d")
    small = ChangeSet.objects.filter(run_id="d").get().id

    with CaptureQueriesContext(connection) as few:
        restore_change_set(small, by="p")
    with CaptureQueriesContext(connection) as many:
        restore_change_set(set_id, by="p")

    assert len(many.captured_queries) <= len(few.captured_queries) + 2
    # 16, and the restore.completed event's insert (a row only when a webhook or an email
    # takes it: docs/architecture.md#notifications).
    assert len(many.captured_queries) <= 17
    assert all(source_of(app, PAGE, f"p{i}") == f"v1 {i}\n" for i in range(100))


def test_restore_reads_no_source_bytes_when_the_counts_can_be_inverted(seeded):
    _app, set_id, _before, _after = seeded
    with CaptureQueriesContext(connection) as queries:
        restore_change_set(set_id, by="p")
    blob_reads = [
        q["sql"] for q in queries.captured_queries if '"data"' in q["sql"] and "SELECT" in q["sql"]
    ]
    assert blob_reads == []


def test_routes_that_trade_paths_in_one_turn_are_restored_together(app):
    a = json.dumps({"method": "GET", "path": "/a", "body": "A"})
    b = json.dumps({"method": "GET", "path": "/b", "body": "B"})
    agent_turn(app, {(API_ROUTE, "one"): a, (API_ROUTE, "two"): b}, run_id="a")
    set_id = agent_turn(
        app,
        {
            (API_ROUTE, "one"): json.dumps({"method": "GET", "path": "/tmp", "body": "A"}),
            (API_ROUTE, "two"): a.replace('"A"', '"B"'),
        },
        run_id="b",
    )
    write_artifact(
        app, API_ROUTE, "one", b.replace('"B"', '"A"'), requested_by="a", tool="t", run_id="b"
    )

    receipt = restore_change_set(set_id, by="p")

    assert receipt.kind == "restore"
    assert source_of(app, API_ROUTE, "one") == a
    assert source_of(app, API_ROUTE, "two") == b
    keys = dict(Artifact.objects.filter(app=app).values_list("name", "route_key"))
    assert keys == {"one": "GET /a", "two": "GET /b"}
