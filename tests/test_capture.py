"""The capture service (docs/architecture.md#domain, docs/architecture.md#write-path,
docs/architecture.md#storage), through the public API of versions.services."""

from __future__ import annotations

import hashlib
import re
import time

import pytest
from django.db import DatabaseError
from django.test import override_settings
from fault_points import capture_sql as _sql

from versions import ids, messages, services
from versions.errors import (
    Conflict,
    InvalidInput,
    InvalidSpec,
    NotFound,
    StaleWrite,
    TooLarge,
    VersionsError,
)
from versions.models import App, Artifact, Blob, ChangeSet, RestorePoint

PAGE = "pltf_page"
CSS = "pltf_stylesheet"
ROUTE = "pltf_api_route"


def sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def write(app, name, source, collection=PAGE, **kw):
    kw.setdefault("requested_by", "rvaid")
    kw.setdefault("tool", "devzone-agent:write_page")
    return services.write_artifact(app, collection, name, source, **kw)


def nothing_written(app) -> None:
    assert not Artifact.objects.filter(app=app).exists()
    assert not RestorePoint.objects.filter(app=app).exists()
    assert not ChangeSet.objects.filter(app=app).exists()
    assert not Blob.objects.exists()


# --- the write path -------------------------------------------------------------------------


def test_first_write_creates_the_artifact_behind_a_point_of_absence(app):
    before_ms = ids.now_ms()
    receipt = write(app, "index", "<h1>Hello</h1>\n", turn_id="t1")

    artifact = Artifact.objects.get(app=app, collection=PAGE, name="index")
    assert artifact.source == "<h1>Hello</h1>\n"
    assert artifact.sha256 == sha("<h1>Hello</h1>\n")
    assert not artifact.deleted
    assert artifact.updated_by == "rvaid"
    point = RestorePoint.objects.get(id=receipt.restore_point_id)
    assert re.fullmatch(r"rp_[0-9a-z]+_[0-9a-z]{8}", point.id)
    ms = int(point.id.split("_")[1], 36)
    assert before_ms <= ms <= ids.now_ms()
    assert point.kind == "capture"
    assert point.previous_existed is False
    assert point.previous_source == ""
    assert point.previous_sha256 == ""
    assert point.new_sha256 == artifact.sha256
    assert point.tool == "devzone-agent:write_page"
    assert point.requested_by == "rvaid"
    assert point.turn_id == "t1"
    assert receipt.change_set_id == f"cs_{point.id}"
    assert receipt.as_dict() == {
        "artifact": {"app": "quotes", "collection": PAGE, "name": "index"},
        "previousSha256": "",
        "sha256": artifact.sha256,
        "restorePointId": point.id,
        "changeSetId": f"cs_{point.id}",
        "linesAdded": 1,
        "linesRemoved": 0,
        "unchanged": False,
    }


def test_a_write_records_the_full_previous_source_and_moved_lines(app):
    write(app, "index", "a\nb\nc\n")
    receipt = write(app, "index", "a\nB\nc\nd\n")
    point = RestorePoint.objects.get(id=receipt.restore_point_id)
    assert point.previous_source == "a\nb\nc\n"
    assert point.previous_sha256 == sha("a\nb\nc\n") == receipt.previous_sha256
    assert point.previous_existed
    assert point.source_stored
    assert point.previous_size == len(b"a\nb\nc\n")
    assert (point.lines_added, point.lines_removed) == (2, 1)
    assert (receipt.lines_added, receipt.lines_removed) == (2, 1)


def test_app_can_be_given_by_slug(app):
    receipt = services.write_artifact("quotes", CSS, "App", "body{}", requested_by="x", tool="api")
    assert receipt.app == "quotes"
    assert Artifact.objects.get(app=app).name == "App"


def test_capture_references_the_previous_blob_instead_of_copying_it(app):
    write(app, "index", "v1")
    artifact = Artifact.objects.get(app=app)
    old_blob = artifact.blob_id
    receipt = write(app, "index", "v2")
    point = RestorePoint.objects.get(id=receipt.restore_point_id)
    assert point.previous_blob_id == old_blob
    assert Blob.objects.count() == 2  # v1 and v2, each once


def test_identical_sources_share_one_blob(app):
    write(app, "a", "same text")
    write(app, "b", "same text")
    assert Blob.objects.count() == 1


def test_unicode_sources_hash_their_utf8_bytes(app):
    text = "naïve — 引用 🚀\r\n"
    receipt = write(app, "index", text)
    assert receipt.sha256 == sha(text)
    assert Artifact.objects.get(app=app).source == text


def test_unchanged_write_records_nothing(app):
    first = write(app, "index", "same")
    receipt = write(app, "index", "same")
    assert receipt.unchanged is True
    assert receipt.restore_point_id is None
    assert receipt.change_set_id is None
    assert receipt.previous_sha256 == receipt.sha256 == first.sha256
    assert receipt.as_dict()["unchanged"] is True
    assert RestorePoint.objects.filter(app=app).count() == 1


def test_large_sources_are_stored_compressed_and_read_back(app):
    text = "body { color: red; }\n" * 40_000  # 840 KB
    write(app, "App", text, collection=CSS)
    blob = Blob.objects.get(sha256=sha(text))
    assert blob.compressed
    assert len(bytes(blob.data)) < blob.size
    assert Artifact.objects.get(app=app).source == text


# --- stale writes -----------------------------------------------------------------------------


def test_stale_expected_sha256_is_refused_with_the_current_hash(app):
    write(app, "index", "v1")
    current = sha("v1")
    with pytest.raises(StaleWrite) as exc:
        write(app, "index", "v2", expected_sha256=sha("something else"))
    assert exc.value.current_sha256 == current
    assert "changed since you read it" in exc.value.message
    assert Artifact.objects.get(app=app).source == "v1"
    assert RestorePoint.objects.filter(app=app).count() == 1


def test_matching_expected_sha256_writes(app):
    write(app, "index", "v1")
    receipt = write(app, "index", "v2", expected_sha256=sha("v1"))
    assert receipt.sha256 == sha("v2")


def test_empty_marker_means_the_artifact_must_not_exist(app):
    write(app, "index", "v1", expected_sha256="")
    with pytest.raises(StaleWrite) as exc:
        write(app, "index", "v2", expected_sha256="")
    assert exc.value.current_sha256 == sha("v1")


def test_expecting_a_hash_of_a_missing_artifact_is_stale(app):
    with pytest.raises(StaleWrite) as exc:
        write(app, "index", "v1", expected_sha256=sha("v0"))
    assert exc.value.current_sha256 == ""
    nothing_written(app)


# --- deletes ----------------------------------------------------------------------------------


def test_delete_makes_a_tombstone_behind_a_point(app):
    write(app, "index", "v1")
    receipt = services.delete_artifact(app, PAGE, "index", requested_by="rvaid", tool="agent")
    artifact = Artifact.objects.get(app=app)
    assert artifact.deleted
    assert artifact.source == ""
    assert artifact.sha256 == ""
    assert receipt.sha256 == ""
    assert receipt.previous_sha256 == sha("v1")
    point = RestorePoint.objects.get(id=receipt.restore_point_id)
    assert point.previous_source == "v1"
    assert point.new_sha256 == ""
    assert (point.lines_added, point.lines_removed) == (0, 1)


def test_writing_a_tombstone_recreates_it_from_absence(app):
    write(app, "index", "v1")
    services.delete_artifact(app, PAGE, "index", requested_by="x", tool="t")
    receipt = write(app, "index", "v2", expected_sha256="")
    point = RestorePoint.objects.get(id=receipt.restore_point_id)
    assert point.previous_existed is False
    assert Artifact.objects.get(app=app).source == "v2"
    assert Artifact.objects.filter(app=app).count() == 1


def test_delete_of_missing_or_deleted_artifact_is_not_found(app):
    with pytest.raises(NotFound, match="There is no pltf_page “ghost” in app “quotes”"):
        services.delete_artifact(app, PAGE, "ghost", requested_by="x", tool="t")
    write(app, "index", "v1")
    services.delete_artifact(app, PAGE, "index", requested_by="x", tool="t")
    with pytest.raises(NotFound):
        services.delete_artifact(app, PAGE, "index", requested_by="x", tool="t")
    assert RestorePoint.objects.filter(app=app).count() == 2


def test_stale_delete_is_refused(app):
    write(app, "index", "v1")
    with pytest.raises(StaleWrite):
        services.delete_artifact(
            app, PAGE, "index", requested_by="x", tool="t", expected_sha256=sha("v0")
        )
    assert not Artifact.objects.get(app=app).deleted


# --- bad input: a clear error, nothing written --------------------------------------------------


@pytest.mark.parametrize(
    ("collection", "name", "source", "message"),
    [
        ("pltf_widget", "index", "x", "Unknown collection “pltf_widget”"),
        (PAGE, "a/b", "x", "cannot contain “/”"),
        (PAGE, "tab\there", "x", "cannot contain control characters"),
        (PAGE, "line\nbreak", "x", "cannot contain control characters"),
        (PAGE, "x" * 201, "x", "at most 200 characters; this one has 201"),
        (PAGE, "", "x", "The artifact name is empty"),
        (PAGE, "index", "nul\x00byte", "contains a NUL character at position 3"),
        (PAGE, "index", b"bytes are not text", "The source must be text, not bytes"),
        (PAGE, "index", None, "The source must be text, not NoneType"),
        (PAGE, "index", "lone \ud800 surrogate", "not valid UTF-8 text"),
    ],
)
def test_bad_input_is_refused_in_words_and_nothing_is_written(
    app, collection, name, source, message
):
    with pytest.raises(InvalidInput) as exc:
        services.write_artifact(app, collection, name, source, requested_by="x", tool="t")
    assert message in exc.value.message
    nothing_written(app)


def test_a_name_of_exactly_200_characters_is_fine(app):
    write(app, "x" * 200, "ok")
    assert Artifact.objects.get(app=app).name == "x" * 200


@override_settings(VERSIONS_MAX_WRITE_BYTES=1000)
def test_sources_over_the_write_limit_are_refused(app):
    with pytest.raises(InvalidInput) as exc:
        write(app, "index", "é" * 501)  # 1002 bytes in UTF-8
    assert exc.value.message == messages.SOURCE_TOO_LARGE.format(size=1002, limit=1000)
    assert isinstance(exc.value, TooLarge)
    nothing_written(app)
    write(app, "index", "é" * 500)  # exactly 1000 bytes is fine


def test_default_write_limit_is_ten_mebibytes(app):
    with pytest.raises(InvalidInput, match="10,485,760 bytes"):
        write(app, "index", "x" * (10 * 1024 * 1024 + 1))
    nothing_written(app)


def test_unknown_app_is_not_found(db):
    with pytest.raises(NotFound, match="There is no app “nope”"):
        services.write_artifact("nope", PAGE, "index", "x", requested_by="x", tool="t")
    assert not RestorePoint.objects.exists()


def test_all_errors_are_versions_errors(app):
    for exc in (InvalidInput("x"), NotFound("x"), StaleWrite("x", current_sha256="")):
        assert isinstance(exc, VersionsError)


def test_if_the_point_cannot_be_stored_the_write_does_not_land(app, monkeypatch):
    write(app, "index", "v1")

    def broken(*args, **kwargs):
        raise DatabaseError("disk full")

    monkeypatch.setattr(_sql, "insert_point", broken)
    with pytest.raises(DatabaseError):
        write(app, "index", "v2")
    assert Artifact.objects.get(app=app).source == "v1"
    assert RestorePoint.objects.filter(app=app).count() == 1
    assert not Blob.objects.filter(sha256=sha("v2")).exists()


# --- the stored-source cap ---------------------------------------------------------------------


@override_settings(VERSIONS_MAX_STORED_BYTES=10)
def test_previous_source_over_the_cap_records_the_change_but_not_the_source(
    app, django_capture_on_commit_callbacks
):
    big = "0123456789ABC"  # 13 bytes > 10
    write(app, "index", big)
    with django_capture_on_commit_callbacks(execute=True):
        receipt = write(app, "index", "small")
    point = RestorePoint.objects.get(id=receipt.restore_point_id)
    assert point.source_stored is False
    assert point.previous_source is None
    assert point.previous_sha256 == sha(big)
    assert point.previous_size == 13
    assert point.previous_existed
    # Nothing references the big blob any more: it is swept.
    assert not Blob.objects.filter(sha256=sha(big)).exists()


@override_settings(VERSIONS_MAX_STORED_BYTES=10)
def test_a_source_of_exactly_the_cap_is_stored(app):
    write(app, "index", "0123456789")
    receipt = write(app, "index", "x")
    assert RestorePoint.objects.get(id=receipt.restore_point_id).source_stored


def test_default_cap_is_one_and_a_half_mebibytes(app):
    at_cap = "x" * 1_572_864
    write(app, "App", at_cap, collection=CSS)
    stored = write(app, "App", at_cap + "y", collection=CSS)
    assert RestorePoint.objects.get(id=stored.restore_point_id).source_stored
    over = write(app, "App", "z", collection=CSS)
    assert not RestorePoint.objects.get(id=over.restore_point_id).source_stored


# --- grouping into change sets ----------------------------------------------------------------


class Clock:
    def __init__(self, start_ms: int) -> None:
        self.ms = start_ms

    def __call__(self) -> int:
        return self.ms


@pytest.fixture
def clock(monkeypatch):
    c = Clock(ids.now_ms())
    monkeypatch.setattr(ids, "now_ms", c)
    return c


def test_same_run_id_is_one_set_however_long_the_turn(app, clock):
    a = write(app, "index", "1", run_id="run-7")
    clock.ms += 3 * 3600 * 1000
    b = write(app, "App", "2", collection=CSS, run_id="run-7", turn_id="other")
    assert a.change_set_id == b.change_set_id == f"cs_{a.restore_point_id}"
    cs = ChangeSet.objects.get(id=a.change_set_id)
    assert cs.kind == "change"
    assert cs.created_by == "rvaid"
    assert cs.points.count() == 2


def test_run_ids_are_per_app(app):
    other = App.objects.create(slug="other", name="Other")
    a = write(app, "index", "1", run_id="run-1")
    b = write(other, "index", "1", run_id="run-1")
    assert a.change_set_id != b.change_set_id


def test_turn_id_joins_while_captures_are_within_the_gap(app, clock):
    a = write(app, "index", "1", turn_id="turn-1")
    clock.ms += 600 * 1000  # exactly the gap
    b = write(app, "App", "1", collection=CSS, turn_id="turn-1")
    clock.ms += 599 * 1000
    c = write(app, "index", "2", turn_id="turn-1")
    assert a.change_set_id == b.change_set_id == c.change_set_id
    clock.ms += 601 * 1000  # a longer pause splits the turn
    d = write(app, "index", "3", turn_id="turn-1")
    assert d.change_set_id == f"cs_{d.restore_point_id}"
    assert d.change_set_id != a.change_set_id


@override_settings(VERSIONS_TURN_GAP_SECONDS=5)
def test_turn_gap_is_a_setting(app, clock):
    a = write(app, "index", "1", turn_id="t")
    clock.ms += 6000
    b = write(app, "index", "2", turn_id="t")
    assert a.change_set_id != b.change_set_id


@pytest.fixture(params=["with the lock", "after the lock"])
def set_lookup(request, monkeypatch):
    """Both ways a capture finds the set it joins: read with the artifact's lock, or looked up
    again when the lock's view of the app was not current (a writer it waited for)."""
    if request.param == "after the lock":
        monkeypatch.setattr(_sql.ArtifactRow, "view_current", property(lambda row: False))
    return request.param


def test_after_a_restore_all_the_next_write_of_the_run_starts_a_new_set(app, set_lookup):
    turn = write(app, "index", "1", run_id="run-1")
    write(app, "App", "a", collection=CSS, run_id="run-1")
    restored = services.restore_change_set(turn.change_set_id, by="rvaid")
    nxt = write(app, "index", "2", run_id="run-1")
    after = write(app, "App", "b", collection=CSS, run_id="run-1")
    assert nxt.change_set_id not in (turn.change_set_id, restored.set_id)
    assert after.change_set_id == nxt.change_set_id  # the new set goes on
    assert ChangeSet.objects.get(id=turn.change_set_id).points.count() == 2
    assert ChangeSet.objects.get(id=nxt.change_set_id).run_id == "run-1"
    # Restoring the first set again takes back nothing the run wrote since the restore.
    again = services.restore_change_set(turn.change_set_id, by="rvaid")
    assert again.kind == "restore" and Artifact.objects.get(app=app, name="index").source == ""


def test_after_a_revert_the_next_write_of_the_turn_starts_a_new_set(app, set_lookup):
    write(app, "index", "base\n")
    turn = write(app, "index", "base\nturn\n", turn_id="turn-1")
    services.revert_change_set(turn.change_set_id, by="rvaid")
    nxt = write(app, "App", "a", collection=CSS, turn_id="turn-1")
    after = write(app, "App", "b", collection=CSS, turn_id="turn-1")
    assert nxt.change_set_id != turn.change_set_id
    assert after.change_set_id == nxt.change_set_id
    assert ChangeSet.objects.get(id=turn.change_set_id).points.count() == 1


def test_restoring_one_point_closes_its_set_and_a_dry_run_or_a_noop_closes_none(app):
    turn = write(app, "index", "1", run_id="run-1")
    services.restore_change_set(turn.change_set_id, by="rvaid", dry_run=True)
    assert write(app, "App", "a", collection=CSS, run_id="run-1").change_set_id == (
        turn.change_set_id
    )
    other = write(app, "other", "x", run_id="run-2")
    # Back as it was before run-2, by hand: restoring run-2's set writes nothing.
    services.delete_artifact(app, PAGE, "other", requested_by="rvaid", tool="t", run_id="run-3")
    assert services.restore_change_set(other.change_set_id, by="rvaid").kind == "noop"
    assert write(app, "more", "y", run_id="run-2").change_set_id == other.change_set_id
    services.restore_point(turn.restore_point_id, by="rvaid")
    assert write(app, "index", "2", run_id="run-1").change_set_id != turn.change_set_id


def test_without_run_or_turn_each_point_is_its_own_set(app):
    a = write(app, "index", "1")
    b = write(app, "index", "2")
    assert a.change_set_id != b.change_set_id
    assert ChangeSet.objects.filter(app=app).count() == 2


def test_points_of_one_artifact_are_strictly_ordered_even_in_the_same_millisecond(app, clock):
    receipts = [write(app, "index", str(i), run_id="r") for i in range(5)]
    times = [RestorePoint.objects.get(id=r.restore_point_id).created_on for r in receipts]
    assert times == sorted(times) and len(set(times)) == 5
    oldest = RestorePoint.objects.filter(change_set_id=receipts[0].change_set_id).order_by(
        "created_on"
    )[0]
    assert oldest.previous_existed is False


# --- retention ----------------------------------------------------------------------------------


@override_settings(VERSIONS_POINTS_PER_APP=5, VERSIONS_SWEEP_BATCH=1)
def test_only_the_newest_points_are_kept(app, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        receipts = [write(app, "index", f"v{i}") for i in range(8)]
    kept = set(RestorePoint.objects.filter(app=app).values_list("id", flat=True))
    assert kept == {r.restore_point_id for r in receipts[-5:]}
    # Each pruner settles what the one before it left (a batch of 1): the sets left with no
    # point are gone but the last one, listed as pruned; blobs no longer referenced are swept.
    assert ChangeSet.objects.filter(app=app, points__isnull=False).distinct().count() == 5
    lingering = ChangeSet.objects.get(app=app, points=None)
    assert lingering.id == receipts[2].change_set_id
    assert [e["pointId"] for e in lingering.pruned] == [receipts[2].restore_point_id]
    assert not Blob.objects.filter(sha256=sha("v0")).exists()
    assert not Blob.objects.filter(sha256=sha("v1")).exists()
    assert Blob.objects.filter(sha256=sha("v2")).exists()  # previous source of a kept point
    artifact = Artifact.objects.get(app=app)
    assert artifact.pruned_until is not None


@override_settings(VERSIONS_POINTS_PER_APP=3)
def test_retention_is_per_app(app):
    other = App.objects.create(slug="other", name="Other")
    for i in range(3):
        write(app, "index", f"v{i}")
    for i in range(5):
        write(other, "index", f"v{i}")
    assert RestorePoint.objects.filter(app=app).count() == 3
    assert RestorePoint.objects.filter(app=other).count() == 3


@override_settings(VERSIONS_POINTS_PER_APP=3)
def test_named_points_are_pinned_and_not_counted(app):
    first = write(app, "index", "v0")
    services.name_point(first.restore_point_id, "  before the redesign ", by="rvaid")
    for i in range(1, 8):
        write(app, "index", f"v{i}")
    point = RestorePoint.objects.get(id=first.restore_point_id)
    assert point.name == "before the redesign"
    assert point.pinned
    assert RestorePoint.objects.filter(app=app, pinned=False).count() == 3
    assert RestorePoint.objects.filter(app=app).count() == 4


@override_settings(VERSIONS_POINTS_PER_APP=3)
def test_points_of_named_sets_and_the_release_set_are_pinned(app):
    named = write(app, "index", "a", run_id="r1")
    write(app, "App", "a", collection=CSS, run_id="r1")
    released = write(app, "index", "b", run_id="r2")
    services.name_change_set(named.change_set_id, "Good state", by="rvaid")
    services.mark_release(released.change_set_id, by="rvaid")
    for i in range(6):
        write(app, "index", f"c{i}")
    assert RestorePoint.objects.filter(change_set_id=named.change_set_id).count() == 2
    assert RestorePoint.objects.filter(change_set_id=released.change_set_id).count() == 1
    assert App.objects.get(pk=app.pk).release_set_id == released.change_set_id

    # Unmarking unpins: the next capture prunes the old release set's point.
    services.unmark_release(app, by="rvaid")
    write(app, "index", "d")
    assert not RestorePoint.objects.filter(change_set_id=released.change_set_id).exists()
    # Naming a set "" unpins it as well.
    services.name_change_set(named.change_set_id, "", by="rvaid")
    write(app, "index", "e")
    assert not RestorePoint.objects.filter(change_set_id=named.change_set_id).exists()


@override_settings(VERSIONS_POINTS_PER_APP=2)
def test_a_partly_pruned_set_remembers_which_points_went(app):
    first = write(app, "index", "a", run_id="r")
    write(app, "App", "a", collection=CSS, run_id="r")
    write(app, "index", "b")
    cs = ChangeSet.objects.get(id=first.change_set_id)
    assert cs.pruned == [
        {"pointId": first.restore_point_id, "artifactId": Artifact.objects.get(name="index").pk}
    ]


def test_release_mark_moves_and_keeps_history(app):
    a = write(app, "index", "a")
    b = write(app, "index", "b")
    services.mark_release(a.change_set_id, by="ann")
    services.mark_release(b.change_set_id, by="bob")
    app.refresh_from_db()
    assert app.release_set_id == b.change_set_id
    assert not RestorePoint.objects.get(id=a.restore_point_id).pinned
    assert RestorePoint.objects.get(id=b.restore_point_id).pinned
    history = list(app.release_marks.values_list("change_set_ref", "action", "by"))
    assert history == [(b.change_set_id, "mark", "bob"), (a.change_set_id, "mark", "ann")]


def test_naming_unknown_things_is_not_found(app):
    with pytest.raises(NotFound):
        services.name_point("rp_nope_12345678", "x", by="x")
    with pytest.raises(NotFound):
        services.name_change_set("cs_nope", "x", by="x")
    with pytest.raises(NotFound):
        services.mark_release("cs_nope", by="x")


def test_names_longer_than_200_characters_are_refused(app):
    receipt = write(app, "index", "a")
    with pytest.raises(InvalidInput):
        services.name_point(receipt.restore_point_id, "n" * 201, by="x")


# --- API routes take the route-save path --------------------------------------------------------


ROUTE_SOURCE = '{"method": "GET", "path": "/quotes/{id}", "status": 200, "body": {"id": "{id}"}}'


def test_route_writes_validate_the_spec(app):
    with pytest.raises(InvalidInput, match="not valid JSON") as exc:
        write(app, "quote", "{not json", collection=ROUTE)
    assert isinstance(exc.value, InvalidSpec)
    with pytest.raises(InvalidInput, match="method must be one of"):
        write(app, "quote", '{"method": "BREW", "path": "/x"}', collection=ROUTE)
    with pytest.raises(InvalidInput, match="path must start with"):
        write(app, "quote", '{"method": "GET", "path": "x"}', collection=ROUTE)
    with pytest.raises(InvalidInput, match="status must be a whole number"):
        write(app, "quote", '{"method": "GET", "path": "/x", "status": 99}', collection=ROUTE)
    nothing_written(app)


def test_ambiguous_routes_are_refused(app):
    write(app, "quote", ROUTE_SOURCE, collection=ROUTE)
    with pytest.raises(InvalidInput, match="already answers GET /quotes/\\{\\}") as exc:
        write(app, "quote2", ROUTE_SOURCE.replace("{id}", "{qid}"), collection=ROUTE)
    assert isinstance(exc.value, Conflict)
    assert Artifact.objects.filter(app=app).count() == 1
    # A different method is a different route; deleting frees the path.
    write(app, "quote-post", ROUTE_SOURCE.replace("GET", "POST"), collection=ROUTE)
    services.delete_artifact(app, ROUTE, "quote", requested_by="x", tool="t")
    write(app, "quote2", ROUTE_SOURCE, collection=ROUTE)


def test_route_writes_bump_the_generation_after_commit(app, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        write(app, "quote", ROUTE_SOURCE, collection=ROUTE)
    assert App.objects.get(pk=app.pk).route_generation == 0  # not before commit
    for callback in callbacks:
        callback()
    assert App.objects.get(pk=app.pk).route_generation == 1
    with django_capture_on_commit_callbacks(execute=True):
        write(app, "page", "not a route")
    assert App.objects.get(pk=app.pk).route_generation == 1


# --- the demo app ---------------------------------------------------------------------------------


def test_demo_app_has_a_real_agent_turn(db):
    from versions.management.commands.load_demo import DEMO_SLUG, load_demo

    load_demo()
    load_demo()  # idempotent
    app = App.objects.get(slug=DEMO_SLUG)
    assert set(app.artifacts.values_list("collection", flat=True)) == {
        "pltf_page",
        "pltf_stylesheet",
        "pltf_frontend_module",
        "pltf_api_route",
        "pltf_server_script",
    }
    turn = ChangeSet.objects.get(app=app, run_id="demo-agent-turn-1")
    points = {p.artifact.name: p for p in turn.points.select_related("artifact", "previous_blob")}
    assert set(points) == {"index", "App"}
    assert len(points["index"].previous_source) == 514
    assert len(points["App"].previous_source) == 28_417
    assert points["index"].tool == "devzone-agent:write_page"


def test_ids_sort_by_time():
    a = ids.point_id(1_700_000_000_000)
    time.sleep(0.002)
    b = ids.point_id(1_700_000_000_001)
    assert a < b
    assert ids.base36(0) == "0" and ids.base36(35) == "z" and ids.base36(36) == "10"


@pytest.mark.parametrize("field", ["requested_by", "tool", "run_id", "turn_id"])
@pytest.mark.parametrize("bad", ["nul\x00", "lone \ud800", "bell\x07"])
def test_who_tool_run_and_turn_are_plain_text(app, field, bad):
    kwargs = {"requested_by": "x", "tool": "t", field: bad}
    with pytest.raises(InvalidInput, match=f"{field} cannot contain control characters"):
        services.write_artifact(app, PAGE, "index", "ok", **kwargs)
    nothing_written(app)


def test_names_with_control_characters_are_refused(app):
    receipt = write(app, "index", "a")
    with pytest.raises(InvalidInput, match="cannot contain control characters"):
        services.name_point(receipt.restore_point_id, "bad\x00name", by="x")
    with pytest.raises(InvalidInput, match="cannot contain control characters"):
        services.name_change_set(receipt.change_set_id, "bad\ud800", by="x")
