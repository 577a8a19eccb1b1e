"""The capture hot path: line counts on bytes, ordering within one millisecond, pins at capture,
and statement counts that do not grow with what an app keeps."""

from __future__ import annotations

import pytest
from django.db import connection
from hypothesis import given, settings
from hypothesis import strategies as st

from versions import ids, services
from versions.diffing import count_line_changes
from versions.models import Artifact, ChangeSet, RestorePoint

PAGE = "pltf_page"

# Lines that collide, differ only at their end, lack a final newline, or are not ASCII.
LINES = st.sampled_from(
    ["a\n", "b\n", "a", "b", "\n", "", "é€\n", "x\r\n", "ab\n", "a b\n", "  }\n", "😀\n"]
)
TEXTS = st.lists(LINES, max_size=30).map("".join)


@settings(max_examples=400, deadline=None)
@given(TEXTS, TEXTS)
def test_line_changes_on_bytes_equal_the_diff_counts(old, new):
    assert count_line_changes(old.encode(), new.encode()) == count_line_changes(old, new)


@settings(max_examples=200, deadline=None)
@given(TEXTS, st.integers(min_value=0, max_value=29), TEXTS, TEXTS)
def test_line_changes_of_a_region_edit_in_a_big_file(body, at, region_old, region_new):
    # The shape of an agent's edit: a long file, one region replaced.
    lines = [f".rule-{i} {{ padding: {i}px; }}\n" for i in range(300)]
    head, tail = "".join(lines[: at * 10]), "".join(lines[at * 10 :])
    old = head + body + region_old + tail
    new = head + body + region_new + tail
    assert count_line_changes(old.encode(), new.encode()) == count_line_changes(old, new)


def write(app, name, source, **kw):
    kw.setdefault("requested_by", "agent")
    kw.setdefault("tool", "t")
    return services.write_artifact(app, PAGE, name, source, **kw)


def test_writes_in_one_millisecond_keep_their_order_and_retention_keeps_the_last_written(
    app, monkeypatch, settings
):
    settings.VERSIONS_POINTS_PER_APP = 5
    frozen = ids.now_ms()
    monkeypatch.setattr(ids, "now_ms", lambda: frozen)
    written = [write(app, f"page-{i % 4}", f"v{i}\n").restore_point_id for i in range(12)]

    kept = list(RestorePoint.objects.filter(app=app).order_by("created_on"))
    times = [p.created_on for p in kept]
    assert times == sorted(set(times)), "no two points of the app share a capture time"
    assert [p.id for p in kept] == written[-5:]


def test_a_point_that_joins_a_named_set_is_pinned_and_never_pruned(app, settings):
    settings.VERSIONS_POINTS_PER_APP = 2
    first = write(app, "index", "v1\n", run_id="run-1")
    services.name_change_set(first.change_set_id, "Before the launch", by="person")
    joined = write(app, "about", "a1\n", run_id="run-1")
    assert joined.change_set_id == first.change_set_id
    for i in range(6):
        write(app, "other", f"o{i}\n")

    point = RestorePoint.objects.get(id=joined.restore_point_id)
    assert point.pinned
    assert RestorePoint.objects.filter(app=app, pinned=False).count() == 2


def test_a_point_that_joins_the_release_set_by_turn_is_pinned(app, settings):
    settings.VERSIONS_POINTS_PER_APP = 2
    first = write(app, "index", "v1\n", turn_id="turn-1")
    services.mark_release(first.change_set_id, by="person")
    joined = write(app, "about", "a1\n", turn_id="turn-1")
    assert joined.change_set_id == first.change_set_id
    for i in range(6):
        write(app, "other", f"o{i}\n")

    assert RestorePoint.objects.get(id=joined.restore_point_id).pinned
    assert ChangeSet.objects.get(id=first.change_set_id).points.count() == 2


def queries_of_one_write(app, name, source, django_assert_max_num_queries, **kw) -> int:
    with django_assert_max_num_queries(40) as captured:
        write(app, name, source, **kw)
    return len(captured.captured_queries)


@pytest.mark.parametrize("grouping", [{"turn_id": "turn-1"}, {"run_id": "run-1"}])
def test_a_write_joining_its_turn_or_run_runs_one_statement_fewer_than_a_lone_write(
    app, grouping, django_assert_max_num_queries
):
    # The set to join is found with the lock; only a new set is two more statements: the set,
    # and its change_set.created event (inserted only when a webhook or an email takes it,
    # docs/architecture.md#notifications).
    write(app, "index", "v0\n", **grouping)
    write(app, "lone", "v0\n")
    lone = queries_of_one_write(app, "lone", "v1\n", django_assert_max_num_queries)
    joining = queries_of_one_write(app, "index", "v1\n", django_assert_max_num_queries, **grouping)
    assert joining == lone - 2
    points = RestorePoint.objects.filter(app=app, artifact__name="index")
    assert points.values("change_set_id").distinct().count() == 1


@pytest.mark.parametrize("keep", [5, 60])
def test_a_capture_runs_few_statements_and_their_number_does_not_grow_with_the_points_kept(
    app, settings, keep, django_assert_max_num_queries
):
    settings.VERSIONS_POINTS_PER_APP = keep
    write(app, "index", "v0\n")
    # Below the limit: the lock (with the source and the count), blob, set, its event (stored
    # only when something takes it), point, artifact.
    below = queries_of_one_write(app, "index", "v1\n", django_assert_max_num_queries)
    for i in range(keep + 3):
        write(app, "index", f"w{i}\n")
    # At the limit every capture prunes one point: a bounded number of statements more.
    steady = queries_of_one_write(app, "index", "v2\n", django_assert_max_num_queries)
    extra = 1 if connection.vendor == "postgresql" else 0  # the count, after the insert
    assert below <= 6 + extra + 2  # + BEGIN and COMMIT (a savepoint and its release in a test)
    assert steady <= below + 10
    assert RestorePoint.objects.filter(app=app).count() == keep
    assert Artifact.objects.get(app=app, name="index").source == "v2\n"


def test_statement_counts_at_the_limit_are_the_same_for_a_small_and_a_large_limit(
    app, settings, django_assert_max_num_queries
):
    counts = []
    for keep, name in ((5, "small"), (80, "large")):
        settings.VERSIONS_POINTS_PER_APP = keep
        for i in range(keep + 3):
            write(app, name, f"{name} {i}\n")
        counts.append(queries_of_one_write(app, name, "last\n", django_assert_max_num_queries))
    assert counts[0] == counts[1]


def test_retention_that_prunes_many_points_of_one_set_at_once_lists_them_all(app, settings):
    settings.VERSIONS_POINTS_PER_APP = 400
    receipts = [write(app, f"page-{i}", f"v{i}\n", run_id="big-turn") for i in range(150)]
    set_id = receipts[0].change_set_id
    settings.VERSIONS_POINTS_PER_APP = 10
    write(app, "other", "x\n")  # one capture prunes 141 points of the big set

    pruned = ChangeSet.objects.get(id=set_id).pruned
    assert sorted(p["pointId"] for p in pruned) == sorted(
        r.restore_point_id for r in receipts[:141]
    )
    assert RestorePoint.objects.filter(app=app).count() == 10


def test_retention_with_capture_times_shared_by_a_restore_keeps_exactly_the_newest(app, settings):
    # A restore's counter-points share one capture time and are not counted
    # (docs/architecture.md#retention): the cut keeps exactly the newest N captures by (time, id),
    # and the restore set whole.
    for i in range(6):
        write(app, f"page-{i}", "v1\n", run_id="setup")
    turn = [write(app, f"page-{i}", "v2\n", run_id="turn") for i in range(6)]
    restore = services.restore_change_set(turn[0].change_set_id, by="person")
    order = list(RestorePoint.objects.filter(app=app).order_by("-created_on", "-id"))
    assert order[1].created_on == order[2].created_on  # counter-points newer than the cut tie
    captures = [p.id for p in order if p.kind == RestorePoint.CAPTURE]

    settings.VERSIONS_POINTS_PER_APP = 3
    last = write(app, "page-9", "new\n")

    kept = set(RestorePoint.objects.filter(app=app).values_list("id", flat=True))
    counters = {item.counter_point_id for item in restore.items}
    assert kept == {last.restore_point_id, captures[0], captures[1], *counters}


def test_a_write_in_a_transaction_already_broken_is_refused_like_any_query(app):
    from django.db import IntegrityError, transaction
    from django.db.transaction import TransactionManagementError

    write(app, "index", "v1\n")
    with transaction.atomic():
        try:
            with transaction.atomic(savepoint=False):  # fails, and its error is swallowed
                raise IntegrityError("a failed statement")
        except IntegrityError:
            pass
        with pytest.raises(TransactionManagementError):
            write(app, "index", "v2\n")
    assert Artifact.objects.get(app=app, name="index").source == "v1\n"


@pytest.mark.postgres
def test_the_tables_a_capture_writes_carry_no_index_it_never_uses(db):
    """Each index is one more entry per row a capture writes: no pattern ("_like") indexes, no
    index of an artifact's app beside the unique one that leads with it, and the index of a
    set's ``restored_from`` only for restore sets."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT tablename, indexname, indexdef FROM pg_indexes WHERE tablename IN "
            "('versions_artifact', 'versions_blob', 'versions_changeset', 'versions_restorepoint')"
        )
        indexes = cursor.fetchall()
    assert not [name for _, name, _ in indexes if name.endswith("_like")]
    artifact_app = [
        name
        for table, name, definition in indexes
        if table == "versions_artifact" and definition.endswith("(app_id)")
    ]
    assert artifact_app == []
    restored_from = [d for _, _, d in indexes if "(restored_from_id)" in d]
    assert len(restored_from) == 1 and "WHERE (restored_from_id IS NOT NULL)" in restored_from[0]
