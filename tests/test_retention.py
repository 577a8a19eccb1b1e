"""Retention never breaks a restore and costs only one app (docs/architecture.md#retention)."""

from __future__ import annotations

import hashlib
import json
import re

import pytest
from django.db import connection, transaction
from django.test import override_settings
from django.test.utils import CaptureQueriesContext

from versions import conf, selectors, services
from versions.errors import NotFound, PreflightFailed
from versions.models import (
    PAGE,
    App,
    Artifact,
    Blob,
    ChangeSet,
    ReleaseMark,
    RestorePoint,
    SweepDebt,
)


def write(app, name, source, **kw):
    kw.setdefault("requested_by", "agent")
    kw.setdefault("tool", "t")
    return services.write_artifact(app, PAGE, name, source, **kw)


def turn(app, run_id, count, version="v1"):
    """One agent turn writing ``count`` pages; returns its change set id."""
    receipts = [write(app, f"page-{i}", f"{version} {i}\n", run_id=run_id) for i in range(count)]
    assert len({r.change_set_id for r in receipts}) == 1
    return receipts[0].change_set_id


def points_of(set_id: str) -> int:
    return RestorePoint.objects.filter(change_set_id=set_id).count()


def sources(app) -> dict[str, str]:
    return {a.name: a.source for a in Artifact.objects.filter(app=app, deleted=False)}


# --- #18 item 1: a restore and its undo prune none of their own points -----------------------


def test_restore_all_and_its_undo_at_the_default_limit_prune_none_of_their_sets_points(app):
    # The app is at its limit: 50 lone writes, then an unnamed 150-artifact turn = 200 points.
    for i in range(50):
        write(app, "lone", f"lone {i}\n")
    turn(app, "setup", 150, "v0")
    set_id = turn(app, "turn", 150, "v1")
    assert RestorePoint.objects.filter(app=app).count() == 200
    before_turn = {f"page-{i}": f"v0 {i}\n" for i in range(150)}

    restore = services.restore_change_set(set_id, by="person")
    undo = services.restore_change_set(restore.set_id, by="person")

    # 300 counter-points later, the turn and the restore are whole ...
    assert points_of(set_id) == 150
    assert points_of(restore.set_id) == 150
    assert points_of(undo.set_id) == 150
    assert ChangeSet.objects.get(id=set_id).pruned == []
    # ... so the turn can be restored again (it answered 404 when it was pruned away) ...
    again = services.restore_change_set(set_id, by="person")
    assert again.kind == "restore" and again.written == 150
    assert {k: v for k, v in sources(app).items() if k != "lone"} == before_turn
    # ... and the first restore can still be undone, in full.
    redo = services.restore_change_set(restore.set_id, by="person")
    assert redo.written == 150 and not redo.findings


def test_counter_points_do_not_count_against_the_limit_of_captures(app, settings):
    settings.VERSIONS_POINTS_PER_APP = 5
    receipts = [write(app, "index", f"v{i}\n") for i in range(5)]
    services.restore_change_set(receipts[2].change_set_id, by="person")
    services.restore_change_set(receipts[4].change_set_id, by="person")

    captures = RestorePoint.objects.filter(app=app, kind=RestorePoint.CAPTURE)
    assert set(captures.values_list("id", flat=True)) == {r.restore_point_id for r in receipts}
    assert RestorePoint.objects.filter(app=app, kind=RestorePoint.COUNTER).count() == 2
    assert not over_limit(app)


@override_settings(VERSIONS_RESTORE_SETS_PER_APP=3, VERSIONS_SWEEP_BATCH=1)
def test_counter_points_live_while_their_restore_set_is_one_of_the_newest_or_pinned(app):
    first = write(app, "index", "v0\n")
    restores = []
    for i in range(1, 7):
        write(app, "index", f"v{i}\n")
        restores.append(services.restore_change_set(first.change_set_id, by="person").set_id)
        if i == 1:
            services.name_change_set(restores[0], "Kept on purpose", by="person")

    restore_sets = ChangeSet.objects.filter(app=app, kind="restore")
    kept = set(restore_sets.filter(points__isnull=False).values_list("id", flat=True))
    # The named one is pinned; of the others only the newest three keep their counter-points.
    assert kept == {restores[0], *restores[-3:]}
    for set_id in kept:
        assert points_of(set_id) == 1
    # A restore set with none left is never listed as restorable: the last restore's pruner
    # settled the one before it left (a batch of 1), which is gone; its own lingers, pruned.
    assert set(restore_sets.values_list("id", flat=True)) == kept | {restores[2]}
    listed = {cs.id: cs for cs in selectors.change_set_page(app, 1).object_list}
    assert restores[1] not in listed
    with pytest.raises(NotFound):
        services.restore_change_set(restores[1], by="person")
    assert listed[restores[2]].point_count == 0 and len(listed[restores[2]].pruned) == 1
    with pytest.raises(PreflightFailed):
        services.restore_change_set(restores[2], by="person")


@override_settings(VERSIONS_RESTORE_SETS_PER_APP=2, VERSIONS_POINTS_PER_APP=3)
def test_undoing_an_old_restore_set_keeps_its_counter_points_and_the_undo_can_be_undone(app):
    base = write(app, "index", "v0\n")
    oldest = None
    for i in range(1, 3):
        write(app, "index", f"v{i}\n")
        restored = services.restore_change_set(base.change_set_id, by="person").set_id
        oldest = oldest or restored
    write(app, "index", "v9\n")  # so undoing the oldest restore writes something

    undo = services.restore_change_set(oldest, by="person")  # the oldest falls out of the newest 2
    assert points_of(oldest) == 1
    # Undoing the undo restores the oldest restore set's state: its points are still there.
    redo = services.restore_change_set(undo.set_id, by="person")
    assert redo.written == 1 and points_of(oldest) == 1


def test_a_restore_set_emptied_by_retention_is_removed_and_what_pointed_at_it_is_cleared(
    app, settings
):
    settings.VERSIONS_RESTORE_SETS_PER_APP = 1
    settings.VERSIONS_SWEEP_BATCH = 2
    first = write(app, "index", "v0\n")
    write(app, "index", "v1\n")
    restore = services.restore_change_set(first.change_set_id, by="person")
    undo = services.restore_change_set(restore.set_id, by="person")
    services.mark_release(restore.set_id, by="person")
    services.unmark_release(app, by="person")
    write(app, "index", "v2\n")
    services.restore_change_set(first.change_set_id, by="person")  # a third restore set

    # The third restore's pruner emptied both: they linger, listed as pruned, owed to a batch.
    for gone in (restore.set_id, undo.set_id):
        assert points_of(gone) == 0 and ChangeSet.objects.get(id=gone).pruned
    write(app, "index", "v3\n")
    services.restore_change_set(first.change_set_id, by="person")  # prunes third: settles

    assert not ChangeSet.objects.filter(id__in=[restore.set_id, undo.set_id]).exists()
    assert not ReleaseMark.objects.filter(change_set_id=restore.set_id).exists()
    assert ReleaseMark.objects.filter(change_set_ref=restore.set_id).count() == 2


def test_a_set_emptied_by_pruning_goes_and_what_named_it_is_cleared(app, settings):
    """A capture set pruned empty goes when the pruner after it settles (a batch of 1): a
    restore set that restored it and the release history that named it stay, unlinked; a set
    that only lost some points lists them."""
    settings.VERSIONS_POINTS_PER_APP = 3
    settings.VERSIONS_SWEEP_BATCH = 1
    gone = write(app, "index", "v0\n")
    restore = services.restore_change_set(gone.change_set_id, by="person")
    services.mark_release(gone.change_set_id, by="person")
    services.unmark_release(app, by="person")
    pair = [write(app, f"page-{i}", "p\n", run_id="pair") for i in range(2)]
    write(app, "index", "v1\n")
    write(app, "index", "v2\n")  # prunes the first set's only point, then one of the pair's

    assert not ChangeSet.objects.filter(id=gone.change_set_id).exists()
    assert ChangeSet.objects.get(id=restore.set_id).restored_from_id is None
    assert not ReleaseMark.objects.filter(change_set_id=gone.change_set_id).exists()
    assert ReleaseMark.objects.filter(change_set_ref=gone.change_set_id).count() == 2
    listed = ChangeSet.objects.get(id=pair[0].change_set_id).pruned
    assert [entry["pointId"] for entry in listed] == [pair[0].restore_point_id]


@pytest.mark.skipif(connection.vendor != "sqlite", reason="SQLite's write path")
def test_a_write_that_prunes_on_sqlite_runs_four_statements_more_than_one_below(app, settings):
    """The points beyond the limit and the rows the app owes come with the write's lock: the
    pruning itself deletes the point, moves pruned_until, lists it in its set and owes the
    blob it held and its set to the app's debt (swept and removed with a batch)."""
    settings.VERSIONS_POINTS_PER_APP = 3
    settings.VERSIONS_SWEEP_BATCH = 16
    below = App.objects.create(slug="below", name="Below")
    for i in range(4):  # at the limit; the oldest point now holds "v0"
        write(app, "index", f"v{i}\n")
    write(below, "index", "b0\n")
    with CaptureQueriesContext(connection) as under:
        write(below, "index", "b1\n")
    with CaptureQueriesContext(connection) as at_limit:
        write(app, "index", "v4\n")

    extra = [q["sql"].split(" ", 3)[:3] for q in at_limit.captured_queries[-5:-1]]
    assert len(at_limit.captured_queries) == len(under.captured_queries) + 4
    assert [words[0] for words in extra] == ["DELETE", "UPDATE", "UPDATE", "INSERT"]
    assert RestorePoint.objects.filter(app=app).count() == 3
    v0 = hashlib.sha256(b"v0\n").hexdigest()
    assert Blob.objects.filter(sha256=v0).exists()
    assert SweepDebt.objects.filter(app=app, blob_id=v0).exists()


# --- #19: a turn or a restore larger than the limit keeps all its points ----------------------


def test_a_turn_larger_than_the_limit_keeps_all_its_points_and_prunes_other_sets(app):
    older = write(app, "older", "o\n").change_set_id
    set_id = turn(app, "big", 300)

    assert points_of(set_id) == 300
    assert points_of(older) == 0  # older points of other sets go
    assert len(ChangeSet.objects.get(id=older).pruned) == 1  # listed as pruned until settled
    assert over_limit(app)  # until the next write, which the panel can say
    assert ChangeSet.objects.get(id=set_id).pruned == []

    write(app, "after", "a\n")  # the next write brings the app back to its limit
    assert not over_limit(app)
    assert RestorePoint.objects.filter(app=app).count() == 200


def test_a_restore_all_of_300_keeps_all_its_counter_points_and_its_undo_works(app):
    set_id = turn(app, "big", 300)
    before = sources(app)

    restore = services.restore_change_set(set_id, by="person")
    assert points_of(restore.set_id) == 300
    assert points_of(set_id) == 300  # the restored turn too, though the app is over its limit

    undo = services.restore_change_set(restore.set_id, by="person")
    assert undo.written == 300 and not undo.findings
    assert sources(app) == before
    assert points_of(restore.set_id) == 300 and points_of(set_id) == 300


# --- #19: every query of the prune is bounded by the app -------------------------------------

_NO_ROWS_READ = re.compile(
    r"^(\d+ times: )?((begin|commit|rollback|savepoint|release|set local|set constraints|insert"
    r"|select pg_advisory_xact_lock)\b|select set_config\('synchronous_commit')"
)
# Given rows by their key (a blob's is its sha256: blobs are shared by every app), or one set's.
_BY_KEY = re.compile(
    r"\bwhere \(?(\w+\.)?(id|sha256|change_set_id|release_set_id|restored_from_id) (= |in \()"
)


def _unbounded(statements: list[str], app_id: int) -> list[str]:
    """The statements not restricted to the app ``app_id`` nor to given rows by key, and any
    subquery over a whole table or count beyond the app."""
    found = []
    of_app = re.compile(rf"\b(app_id|a\.id|ap\.id) = {app_id}\b|\bwhere id = {app_id}\b")
    for sql in statements:
        text = " ".join(sql.replace('"', "").replace("versions_", "").lower().split())
        whole_table = "not in (select" in text or ("count(" in text and not of_app.search(text))
        bounded = _NO_ROWS_READ.search(text) or of_app.search(text) or _BY_KEY.search(text)
        if whole_table or not bounded:
            found.append(sql)
    return found


def test_every_statement_of_a_write_and_a_restore_that_prune_is_bounded_by_the_app(app, settings):
    settings.VERSIONS_POINTS_PER_APP = 3
    settings.VERSIONS_RESTORE_SETS_PER_APP = 1
    settings.VERSIONS_SWEEP_BATCH = 1  # every pruner settles: its statements are read too
    other = App.objects.create(slug="other", name="Other")
    for target in (other, app):  # another app, with sets of its own, in the same tables
        base = write(target, "index", "v0\n", run_id="r0")
        services.name_change_set(base.change_set_id, "Start", by="person")  # pinned
        for i in range(1, 5):
            write(target, "index", f"v{i}\n")

    with CaptureQueriesContext(connection) as write_at_limit:
        write(app, "index", "v5\n")  # prunes a capture point, empties its set
    services.restore_change_set(base.change_set_id, by="person")
    write(app, "index", "v6\n")
    with CaptureQueriesContext(connection) as restore_over_kept_sets:
        services.restore_change_set(base.change_set_id, by="person")  # prunes a restore set

    statements = [q["sql"] for q in write_at_limit.captured_queries]
    statements += [q["sql"] for q in restore_over_kept_sets.captured_queries]
    assert any("DELETE FROM" in s and "restorepoint" in s for s in statements)
    assert any("sweepdebt" in s.lower() and "RETURNING" in s for s in statements)
    restore_sets = ChangeSet.objects.filter(app=app, kind="restore")
    assert restore_sets.filter(points__isnull=False).distinct().count() == 1
    unbounded = _unbounded(statements, app.pk)
    assert not unbounded, "\n".join(unbounded)


def _rows_read_and_thrown_away(sql: str, table: str) -> tuple[int, int]:
    """(rows read, rows thrown away by a filter) of ``table``'s scans in the plan of ``sql``,
    run (PostgreSQL's EXPLAIN ANALYZE, in a transaction rolled back: the query only reads)."""
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + sql)
        plan = cursor.fetchone()[0]
        transaction.set_rollback(True)
    read = removed = 0
    nodes = [(json.loads(plan) if isinstance(plan, str) else plan)[0]["Plan"]]
    while nodes:
        node = nodes.pop()
        nodes.extend(node.get("Plans", []))
        if node.get("Relation Name") == table:
            loops = node.get("Actual Loops", 1)
            read += node.get("Actual Rows", 0) * loops
            removed += node.get("Rows Removed by Filter", 0) * loops
    return read, removed


@pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's own plan, run")
def test_retention_reads_only_the_unnamed_restore_sets_it_keeps(app, settings):
    """After a restore, retention keeps the counter-points of the app's newest N unnamed
    restore sets: it reads those N sets and no other (not the app's change sets, not its named
    restore sets), however many of them there are."""
    settings.VERSIONS_RESTORE_SETS_PER_APP = 2
    set_id = turn(app, "turn", 3)
    for i in range(8):  # named restores and undos, with agent turns between them
        restore = services.restore_change_set(set_id, by="person")
        undo = services.restore_change_set(restore.set_id, by="person")
        services.name_change_set(restore.set_id, f"Tried {i}", by="person")
        services.name_change_set(undo.set_id, f"Back {i}", by="person")
        turn(app, f"later-{i}", 2, f"v{i + 2}")
    for i in range(3):  # three unnamed restore sets: two are kept
        services.restore_change_set(set_id, by="person")
        turn(app, f"again-{i}", 2, f"w{i}")
    with CaptureQueriesContext(connection) as restore:
        services.restore_change_set(set_id, by="person")
    kept = [q["sql"] for q in restore.captured_queries if q["sql"].startswith("WITH kept AS")]
    assert len(kept) == 1

    read, thrown_away = _rows_read_and_thrown_away(kept[0], "versions_changeset")
    assert ChangeSet.objects.filter(app=app).count() > 25
    assert (read, thrown_away) == (2, 0)


def test_naming_a_set_and_marking_a_release_read_no_other_apps_rows(app):
    other = App.objects.create(slug="other", name="Other")
    services.mark_release(write(other, "index", "o\n").change_set_id, by="person")
    set_id = write(app, "index", "v1\n").change_set_id

    with CaptureQueriesContext(connection) as captured:
        services.name_change_set(set_id, "Launch", by="person")
        services.mark_release(set_id, by="person")
        services.unmark_release(app, by="person")

    unbounded = _unbounded([q["sql"] for q in captured.captured_queries], app.pk)
    assert not unbounded, "\n".join(unbounded)
    assert RestorePoint.objects.get(change_set_id=set_id).pinned  # named: still pinned


def over_limit(app):
    """Whether the app keeps more unpinned capture points than its retention limit."""
    kept = RestorePoint.objects.filter(app=app, kind=RestorePoint.CAPTURE, pinned=False)
    return kept.count() > conf.points_per_app()
