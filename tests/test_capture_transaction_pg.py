"""A write at the top level on PostgreSQL: BEGIN travels with the lock, COMMIT with the writes.

These run outside the test's own transaction (``transaction=True``), so a write here is the
connection's outermost transaction, as it is in a request: the path that counts round trips.
"""

from __future__ import annotations

import threading

import psycopg
import pytest
from django.db import DatabaseError, connection, transaction
from django.test.utils import CaptureQueriesContext
from pg_helpers import assert_connection_clean, committed_source, round_trips
from thread_helpers import failures, run_in_threads

from versions import services
from versions.models import App, Artifact, Blob, RestorePoint

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

PAGE = "pltf_page"


def write(app, name, source, **kw):
    kw.setdefault("requested_by", "agent")
    kw.setdefault("tool", "test")
    return services.write_artifact(app, PAGE, name, source, **kw)


@pytest.fixture
def top_app() -> App:
    return App.objects.create(slug="top", name="Top level")


def test_a_write_takes_two_round_trips_and_commits(top_app):
    write(top_app, "index", "v1\n")
    write(top_app, "index", "v2\n")  # statements prepared from here on

    trips = round_trips(lambda: write(top_app, "index", "v3\n"))

    assert trips == 2  # BEGIN + lock + read; writes + COMMIT
    assert committed_source("index") == "v3\n"
    assert_connection_clean()
    assert write(top_app, "index", "v4\n").restore_point_id  # the next write is unaffected
    assert committed_source("index") == "v4\n"


@pytest.mark.parametrize("grouping", [{"turn_id": "turn-1"}, {"run_id": "run-1"}])
def test_a_write_joining_its_turn_or_run_also_takes_two_round_trips(top_app, grouping):
    first = write(top_app, "index", "v1\n", **grouping)
    write(top_app, "other", "v1\n", **grouping)

    joined = []
    trips = round_trips(lambda: joined.append(write(top_app, "index", "v2\n", **grouping)))

    assert trips == 2  # the set it joins was found with the lock
    assert joined[0].change_set_id == first.change_set_id


def test_writers_of_one_turn_that_waited_for_each_other_share_one_set(top_app):
    """A writer that waited for the lock sees the row as the writer before it left it, but the
    lock statement's lookups see the app as it was: the set is looked up again."""
    n, turns = 6, 10
    each_turn = threading.Barrier(n)

    def writer(i: int) -> list:
        receipts = []
        for turn in range(turns):
            each_turn.wait()  # every writer starts the turn at once
            receipts.append(
                (turn, write("top", "index", f"writer {i} {turn}\n", turn_id=f"turn-{turn}"))
            )
        return receipts

    outcomes = run_in_threads(n, writer)
    assert failures(outcomes) == []
    results = [pair for receipts in outcomes for pair in receipts]
    sets: dict[int, set[str]] = {}
    for turn, receipt in results:
        sets.setdefault(turn, set()).add(receipt.change_set_id)
    assert {turn: len(ids) for turn, ids in sets.items()} == dict.fromkeys(range(turns), 1)


def test_a_write_inside_an_outer_transaction_commits_with_it_or_not_at_all(top_app):
    write(top_app, "index", "v1\n")

    class Undo(Exception):
        pass

    with pytest.raises(Undo), transaction.atomic():
        write(top_app, "index", "v2\n")
        write(top_app, "other", "new\n")
        raise Undo

    assert committed_source("index") == "v1\n"
    assert not Artifact.objects.filter(name="other").exists()
    assert RestorePoint.objects.filter(app=top_app).count() == 1
    with transaction.atomic():
        write(top_app, "index", "v3\n")
        assert committed_source("index") == "v1\n"  # not yet: the outer block commits
    assert committed_source("index") == "v3\n"


def test_a_write_in_a_transaction_begun_by_hand_is_left_to_its_owner(top_app):
    transaction.set_autocommit(False)
    try:
        write(top_app, "index", "v1\n")
        transaction.rollback()  # the owner decides: nothing was committed for it
    finally:
        transaction.set_autocommit(True)
    assert not Artifact.objects.filter(name="index").exists()
    assert not RestorePoint.objects.exists()


@pytest.fixture
def refusing_points():
    """The database refuses the next restore points: at insert, or (deferred) at COMMIT."""
    created: list[str] = []

    def install(when: str) -> None:
        with connection.cursor() as cursor:
            cursor.execute(
                "CREATE OR REPLACE FUNCTION versions_test_refuse() RETURNS trigger "
                "LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'disk full'; END $$"
            )
            if when == "insert":
                cursor.execute(
                    "CREATE TRIGGER versions_test_refuse BEFORE INSERT ON versions_restorepoint "
                    "FOR EACH ROW EXECUTE FUNCTION versions_test_refuse()"
                )
            else:
                cursor.execute(
                    "CREATE CONSTRAINT TRIGGER versions_test_refuse AFTER INSERT ON "
                    "versions_restorepoint DEFERRABLE INITIALLY DEFERRED "
                    "FOR EACH ROW EXECUTE FUNCTION versions_test_refuse()"
                )
        created.append(when)

    def remove() -> None:
        with connection.cursor() as cursor:
            cursor.execute("DROP TRIGGER IF EXISTS versions_test_refuse ON versions_restorepoint")

    yield install, remove
    remove()


@pytest.mark.parametrize("when", ["insert", "commit"])
def test_a_point_the_database_refuses_leaves_nothing_written(top_app, refusing_points, when):
    install, remove = refusing_points
    write(top_app, "index", "v1\n")
    write(top_app, "index", "v2\n")
    install(when)

    with pytest.raises(DatabaseError, match="disk full"):
        write(top_app, "index", "v3 never lands\n")

    assert_connection_clean()
    assert committed_source("index") == "v2\n"
    assert RestorePoint.objects.filter(app=top_app).count() == 2
    assert not Blob.objects.filter(size=len(b"v3 never lands\n")).exists()
    remove()
    assert write(top_app, "index", "v4\n").restore_point_id
    assert committed_source("index") == "v4\n"


def test_a_write_at_the_limit_refused_at_commit_leaves_nothing_and_prunes_nothing(
    top_app, refusing_points, settings
):
    """The pruner's transaction follows the write's COMMIT in the same round trip: when that
    COMMIT fails, the pruner never runs, and the connection is clean for the next write."""
    settings.VERSIONS_POINTS_PER_APP = 2
    install, remove = refusing_points
    for i in range(3):
        write(top_app, "index", f"v{i}\n")  # at the limit
    kept = set(RestorePoint.objects.filter(app=top_app).values_list("id", flat=True))
    install("commit")

    with pytest.raises(DatabaseError, match="disk full"):
        write(top_app, "index", "never lands\n")

    assert_connection_clean()
    assert committed_source("index") == "v2\n"
    assert set(RestorePoint.objects.filter(app=top_app).values_list("id", flat=True)) == kept
    remove()
    latest = write(top_app, "index", "v3\n")
    assert committed_source("index") == "v3\n"
    assert RestorePoint.objects.filter(app=top_app).count() == 2
    assert RestorePoint.objects.filter(id=latest.restore_point_id).exists()


def test_each_write_returns_with_the_app_back_at_its_limit(top_app, settings):
    settings.VERSIONS_POINTS_PER_APP = 3
    receipts = []
    for i in range(7):
        receipts.append(write(top_app, f"page-{i % 2}", f"v{i}\n"))
        kept = set(RestorePoint.objects.filter(app=top_app).values_list("id", flat=True))
        assert kept == {r.restore_point_id for r in receipts[-3:]}
    assert_connection_clean()


def test_a_write_at_the_limit_prunes_in_the_same_round_trips(top_app, settings):
    """The write counts the app's points with its lock; its pruner is one transaction of its
    own that travels after the write's COMMIT (docs/architecture.md#scale: prune_vs_write)."""
    settings.VERSIONS_POINTS_PER_APP = 3
    for i in range(4):
        write(top_app, "index", f"v{i}\n")  # at the limit, statements prepared

    trips = round_trips(lambda: write(top_app, "index", "v4\n"))

    assert trips == 2  # the write's two, its pruner's transaction in the second
    assert RestorePoint.objects.filter(app=top_app).count() == 3
    assert committed_source("index") == "v4\n"
    assert_connection_clean()


def test_the_pruner_of_a_top_level_write_is_bounded_by_the_app(top_app, settings):
    """The one-statement pruner, owing and settling (what it does: test_retention_debt):
    every statement is bounded by the app, and PostgreSQL's own plans agree that none reads a
    whole table of every app's rows (the sweep's "does a delta still need it?" check once
    hashed every artifact)."""
    from test_retention import _unbounded
    from test_scale_plans import whole_table_reads

    settings.VERSIONS_POINTS_PER_APP = 3
    settings.VERSIONS_SWEEP_BATCH = 3
    other = App.objects.create(slug="other", name="Other")
    write(other, "index", "o1\n")
    for i in range(4):
        write(top_app, "index", f"v{i}\n")  # over the limit: one row owed

    with CaptureQueriesContext(connection) as captured:
        write(top_app, "index", "v4\n")  # owes a second row
        write(top_app, "index", "v5\n")  # its row makes a batch of three: settles

    statements = [q["sql"] for q in captured.captured_queries]
    assert any("WITH cut" in s and "settled AS" in s for s in statements)
    assert any("WITH cut" in s and "settled AS" not in s for s in statements)
    unbounded = _unbounded(statements, top_app.pk)
    assert not unbounded, "\n".join(unbounded)
    whole = [
        f"{read} in {sql[:200]}"
        for sql in statements
        if sql.lstrip().upper().startswith(("SELECT", "WITH", "DELETE", "UPDATE"))
        for read in whole_table_reads(sql)
    ]
    assert not whole, "\n".join(whole)
    assert RestorePoint.objects.filter(app=other).count() == 1
    assert_connection_clean()


def test_the_pruners_statements_run_one_generic_plan_each_bounded_by_the_app(top_app, settings):
    """PostgreSQL plans a prepared statement afresh for its first five runs and then keeps
    doing so whenever it guesses a custom plan is cheaper: for the pruner's statement, with
    statistics of many apps, that planning cost more than the statement itself. Its
    transaction asks for the generic plan, the same for every write: bounded by the app."""
    from test_scale_plans import generic_whole_table_reads

    settings.VERSIONS_POINTS_PER_APP = 2
    settings.VERSIONS_SWEEP_BATCH = 3
    for i in range(14):  # twelve writes at the limit, one in three settling the app's debt
        write(top_app, "index", f"v{i}\n")
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT name, statement, parameter_types::text[], generic_plans, custom_plans "
            "FROM pg_prepared_statements WHERE statement LIKE 'WITH cut AS%%'"
        )
        prepared = cursor.fetchall()
    assert len(prepared) == 2, "the owing and the settling statement are prepared"
    assert any("settled AS" in row[1] for row in prepared)
    for _name, sql, types, generic, custom in prepared:
        assert custom == 0 and generic > 0, (generic, custom, sql[:200])
        # The generic plan does not depend on the values: any of the right types will do.
        values = [
            []
            if kind.endswith("[]")
            else top_app.pk
            if "int" in kind
            else None
            if kind.startswith(("timestamp", "boolean"))
            else ""
            for kind in types
        ]
        reads = generic_whole_table_reads(sql, types, values)
        assert not reads, f"{reads} in the generic plan of {sql[:200]}"


def test_a_pruning_that_fails_after_the_write_leaves_the_write_and_is_redone_next_time(
    top_app, settings, caplog
):
    settings.VERSIONS_POINTS_PER_APP = 2
    write(top_app, "index", "v1\n")
    write(top_app, "index", "v2\n")
    with connection.cursor() as cursor:
        cursor.execute(
            "CREATE OR REPLACE FUNCTION versions_test_refuse() RETURNS trigger "
            "LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'no deleting today'; END $$"
        )
        cursor.execute(
            "CREATE TRIGGER versions_test_refuse BEFORE DELETE ON versions_restorepoint "
            "FOR EACH ROW EXECUTE FUNCTION versions_test_refuse()"
        )
    try:
        with caplog.at_level("WARNING", logger="versions.services.retention"):
            third = write(top_app, "index", "v3\n")  # over the limit: its pruning fails
        assert "retention of app top left for the next write" in caplog.text
        assert committed_source("index") == "v3\n"
        assert RestorePoint.objects.filter(app=top_app).count() == 3
        assert_connection_clean()
    finally:
        with connection.cursor() as cursor:
            cursor.execute("DROP TRIGGER IF EXISTS versions_test_refuse ON versions_restorepoint")
    fourth = write(top_app, "index", "v4\n")
    kept = set(RestorePoint.objects.filter(app=top_app).values_list("id", flat=True))
    assert kept == {third.restore_point_id, fourth.restore_point_id}


def test_writers_that_waited_for_the_lock_still_leave_the_app_at_its_limit(top_app, settings):
    """Each writer counts the app's points in its last round trip, after its lock was granted
    (so the writers it waited for are counted), and prunes once it committed."""
    settings.VERSIONS_POINTS_PER_APP = 4
    write(top_app, "index", "v0\n")
    write(top_app, "index", "v1\n")
    outcomes = run_in_threads(8, lambda i: write("top", "index", f"writer {i}\n"))

    assert failures(outcomes) == []
    assert RestorePoint.objects.filter(app=top_app, pinned=False).count() == 4
    newest = list(
        RestorePoint.objects.filter(app=top_app)
        .order_by("-created_on")
        .values_list("new_sha256", flat=True)
    )
    assert Artifact.objects.get(app=top_app).sha256 == newest[0]


def _pruner_waiting(app: App) -> bool:
    """Whether a pruner of ``app`` waits for its lock (held by the test)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND NOT granted AND objid = %s",
            [app.pk],
        )
        return cursor.fetchone() is not None


@pytest.mark.parametrize("name_meanwhile", [True, False])
def test_a_set_named_while_a_writes_pruner_waits_keeps_the_newest_n_unpinned(
    top_app, settings, name_meanwhile
):
    """A write's pruner takes the cut its lock read saw as its bound. A set named between the
    two pins points newer than that cut: the app's newest N unpinned points then reach further
    back, and the pruner must keep them (it reads the cut again). Nothing named meanwhile: the
    bound holds and the point beyond it goes."""
    settings.VERSIONS_POINTS_PER_APP = 4
    receipts = [write(top_app, "index", f"v{i}\n", run_id=f"run-{i}") for i in range(5)]
    # At the limit: the newest four unpinned (runs 1-4); run 0's point is gone.
    points = [r.restore_point_id for r in receipts]
    assert set(RestorePoint.objects.filter(app=top_app).values_list("id", flat=True)) == set(
        points[1:]
    )

    outcome: list = []

    def writer() -> None:
        try:
            outcome.append(write("top", "index", "v5\n", run_id="run-5"))
        except Exception as exc:  # noqa: BLE001 - asserted on
            outcome.append(exc)
        finally:
            connection.close()

    with psycopg.connect(**connection.get_connection_params()) as holder:
        # The app's pruner lock, held: the next write commits, then its pruner waits.
        holder.execute("SELECT pg_advisory_xact_lock(%s, %s)", [0x7665_7273, top_app.pk])
        thread = threading.Thread(target=writer)
        thread.start()
        for _ in range(1000):
            if _pruner_waiting(top_app):
                break
            threading.Event().wait(0.01)
        else:
            raise AssertionError("the write's pruner never waited for its lock")
        if name_meanwhile:
            # Run 3's set, newer than the cut (run 1's point), is named while the pruner waits.
            services.name_change_set(receipts[3].change_set_id, "kept", by="person")
        holder.rollback()  # the lock goes: the pruner runs
    thread.join(60)

    assert not thread.is_alive() and failures(outcome) == []
    newest = outcome[0].restore_point_id
    unpinned = set(
        RestorePoint.objects.filter(app=top_app, pinned=False).values_list("id", flat=True)
    )
    if name_meanwhile:
        # Runs 1, 2, 4 and 5 are the newest four unpinned: run 1's point stays.
        assert unpinned == {points[1], points[2], points[4], newest}
        assert RestorePoint.objects.filter(id=points[3], pinned=True).exists()
    else:
        assert unpinned == {points[2], points[3], points[4], newest}


def test_writers_of_different_artifacts_at_the_limit_never_fail_each_other(top_app, settings):
    """Retention moves other artifacts' pruned_until: pruning inside the writes could make two
    writers wait for each other. Writers prune after they committed, one pruner at a time."""
    settings.VERSIONS_POINTS_PER_APP = 3
    for i in range(6):
        write(top_app, f"page-{i}", "v0\n")
    n = 6

    def writer(i: int) -> None:
        for round_ in range(3):
            write("top", f"page-{i}", f"round {round_}\n")

    outcomes = run_in_threads(n, writer)

    assert failures(outcomes) == []
    assert Artifact.objects.filter(app=top_app, sha256__isnull=False).count() == n
    # Writers racing in one app may each count before the others commit; the next write
    # counts them all.
    last = write(top_app, "page-0", "after\n")
    kept = set(RestorePoint.objects.filter(app=top_app).values_list("id", flat=True))
    assert len(kept) == 3 and last.restore_point_id in kept


def test_the_trace_counts_round_trips():
    # The helper itself: a plain query outside a transaction is one round trip.
    with connection.cursor() as cursor:
        assert round_trips(lambda: cursor.execute("SELECT 1")) == 1
