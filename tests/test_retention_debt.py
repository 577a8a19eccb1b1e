"""What a pruning leaves is owed, and settled a batch at a time, on both databases.

Every pruner (a write's, a restore's; on SQLite or PostgreSQL, at the top level or inside a
larger transaction) lists the points it removes in their sets and owes what each leaves to
the app's debt (``SweepDebt``: the blob it held, its set). The pruner that makes a batch of
``VERSIONS_SWEEP_BATCH`` rows settles them: it sweeps the blobs nothing references any more
and removes the sets left with no point, clearing what named them. These run outside the
test's transaction (``transaction=True``), so on PostgreSQL a write's pruner is its one
statement after the write's COMMIT; on SQLite it runs inside the write.
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.db import connection
from django.test.utils import CaptureQueriesContext

from versions import conf, services
from versions.models import (
    App,
    Artifact,
    Blob,
    ChangeSet,
    DeploymentEntry,
    ReleaseMark,
    RestorePoint,
    SweepDebt,
)

pytestmark = pytest.mark.django_db(transaction=True)

PAGE = "pltf_page"
# A statement that takes the app's debt to settle it (PostgreSQL: inside the pruner's one
# statement; SQLite: a statement of its own).
_SETTLES = re.compile(r'DELETE FROM "?versions_sweepdebt"?', re.IGNORECASE)


def write(app, name, source, **kw):
    kw.setdefault("requested_by", "agent")
    kw.setdefault("tool", "test")
    return services.write_artifact(app, PAGE, name, source, **kw)


@pytest.fixture
def top_app() -> App:
    return App.objects.create(slug="top", name="Top level")


def debt(app) -> set[tuple[str, str]]:
    return set(SweepDebt.objects.filter(app=app).values_list("blob_id", "change_set_id"))


def _unreferenced_blobs() -> set[str]:
    """The blobs no artifact, point or deployment references (nor a delta as its base)."""
    held = set(Artifact.objects.exclude(blob=None).values_list("blob_id", flat=True))
    held |= set(
        RestorePoint.objects.exclude(previous_blob=None).values_list("previous_blob_id", flat=True)
    )
    held |= set(DeploymentEntry.objects.exclude(blob=None).values_list("blob_id", flat=True))
    held |= set(
        Blob.objects.filter(sha256__in=held).exclude(base=None).values_list("base_id", flat=True)
    )
    return set(Blob.objects.values_list("sha256", flat=True)) - held


def _emptied_sets(app) -> set[str]:
    """The app's sets left with no point."""
    return set(ChangeSet.objects.filter(app=app, points=None).values_list("id", flat=True))


def test_the_pruner_owes_what_it_leaves_and_the_batch_settles_it(top_app, settings):
    """The points beyond the limit go, their artifacts' pruned_until moves, every set they
    were in lists them, and what they leave is owed (the blob each held, its set); the pruner
    that makes a batch settles it: the blobs nothing needs go, a set left with no point goes
    with the release mark history that named it (unlinked), another app is untouched."""
    settings.VERSIONS_POINTS_PER_APP = 3
    settings.VERSIONS_SWEEP_BATCH = 3
    other = App.objects.create(slug="other", name="Other")
    write(other, "index", "o1\n")
    first = write(top_app, "index", "x\n")  # creates the page: its point holds no blob
    second = write(top_app, "index", "y\n")  # its point holds "x"; its set will be emptied
    services.mark_release(second.change_set_id, by="person")
    services.unmark_release(top_app, by="person")  # the history still names the set
    pair = [write(top_app, f"page-{i}", "p\n", run_id="pair") for i in range(2)]  # at 4: -1
    x_blob = RestorePoint.objects.get(id=second.restore_point_id).previous_blob_id
    assert x_blob
    assert debt(top_app) == {("", first.change_set_id)}  # the first point held nothing

    with CaptureQueriesContext(connection) as owing:
        write(top_app, "index", "v3\n")  # prunes second's point, emptying its set
    assert not RestorePoint.objects.filter(id=second.restore_point_id).exists()
    assert Artifact.objects.get(app=top_app, name="index").pruned_until is not None
    # The emptied set lingers until the batch, listed as pruned: its point is named.
    emptied = ChangeSet.objects.get(id=second.change_set_id)
    assert [e["pointId"] for e in emptied.pruned] == [second.restore_point_id]
    assert not RestorePoint.objects.filter(change_set_id=emptied.id).exists()
    # Nothing needs "x" any more: it is owed to a sweep with the set.
    assert Blob.objects.filter(sha256=x_blob).exists()
    assert debt(top_app) == {("", first.change_set_id), (x_blob, second.change_set_id)}
    assert not any(_SETTLES.search(q["sql"]) for q in owing.captured_queries)

    with CaptureQueriesContext(connection) as settling:
        write(top_app, "index", "v4\n")  # prunes one point of the pair's set: a batch of three
    assert any(_SETTLES.search(q["sql"]) for q in settling.captured_queries)
    assert not ChangeSet.objects.filter(id__in=[first.change_set_id, second.change_set_id])
    assert not ReleaseMark.objects.filter(change_set_id=second.change_set_id).exists()
    assert ReleaseMark.objects.filter(app=top_app).count() == 2  # the history stays, unlinked
    pair_set = ChangeSet.objects.get(id=pair[0].change_set_id)
    assert [e["pointId"] for e in pair_set.pruned] == [pair[0].restore_point_id]
    assert not Blob.objects.filter(sha256=x_blob).exists()  # swept with the batch
    assert debt(top_app) == {("", pair_set.id)}  # the settling pruner's own set waits
    assert RestorePoint.objects.filter(app=top_app).count() == 3
    assert RestorePoint.objects.filter(app=other).count() == 1  # another app untouched


def test_what_retention_leaves_is_settled_a_batch_at_a_time_and_never_more_waits(top_app, settings):
    """No app leaves more than a batch unsettled, nothing is lost to the store, and another
    app's debt is never touched."""
    settings.VERSIONS_POINTS_PER_APP = 2
    settings.VERSIONS_SWEEP_BATCH = 4
    other = App.objects.create(slug="other", name="Other")
    for i in range(4):  # two prunes; the first point held no blob (it created the page)
        write(other, "index", f"o{i}\n")
    other_debt = debt(other)
    assert len(other_debt) == 2
    owed_by_other = {blob for blob, _set in other_debt if blob}
    assert len(owed_by_other) == 1  # o0 is held by nothing now
    assert _emptied_sets(other) == {set_id for _blob, set_id in other_debt}

    seen = []
    for i in range(12):
        write(top_app, "index", f"v{i}\n")
        rows = list(SweepDebt.objects.filter(app=top_app).values_list("blob_id", "change_set_id"))
        seen.append(len(rows))
        assert len(rows) < 4
        # Every blob nothing needs any more is owed by some app: none is lost to the store ...
        assert _unreferenced_blobs() == {blob for blob, _set in rows if blob} | owed_by_other
        # ... and every set retention emptied is owed, so the next batch removes it.
        assert _emptied_sets(top_app) <= {set_id for _blob, set_id in rows}
        assert RestorePoint.objects.filter(app=top_app).count() == min(i + 1, 2)
    # Every write from the third prunes a point: owed one by one, settled four at a time (the
    # settling pruner's own point is owed to the next batch).
    assert seen == [0, 0, 1, 2, 3, 1, 2, 3, 1, 2, 3, 1]
    assert debt(other) == other_debt
    assert Blob.objects.filter(sha256__in=owed_by_other).count() == len(owed_by_other)


def test_a_blob_owed_to_a_sweep_and_written_again_is_kept(top_app, settings):
    """Content-addressed: a source written again re-references its blob; the sweep that pays
    the blob's debt leaves it, and it reads back."""
    settings.VERSIONS_POINTS_PER_APP = 2
    settings.VERSIONS_SWEEP_BATCH = 4
    for source in ("a\n", "b\n", "c\n", "d\n", "e\n"):  # a and b owed
        write(top_app, "index", source)
    a_blob = hashlib.sha256(b"a\n").hexdigest()
    assert SweepDebt.objects.filter(app=top_app, blob_id=a_blob).exists()
    write(top_app, "index", "a\n")  # "a" is the artifact's source again; a batch is settled
    assert not SweepDebt.objects.filter(app=top_app).exclude(blob_id="").exists()
    assert Blob.objects.filter(sha256=a_blob).exists()
    for gone in (b"b\n", b"c\n"):
        assert not Blob.objects.filter(sha256=hashlib.sha256(gone).hexdigest()).exists()
    assert Artifact.objects.get(app=top_app, name="index").source == "a\n"


def test_a_restores_pruner_owes_and_settles_as_a_writes_does(top_app, settings):
    """Retention after a restore (its counter-points) follows the same rules: the restore
    sets it empties are owed and listed as pruned, and a batch removes them."""
    settings.VERSIONS_RESTORE_SETS_PER_APP = 1
    settings.VERSIONS_SWEEP_BATCH = 2
    first = write(top_app, "index", "v0\n")
    write(top_app, "index", "v1\n")
    restored = services.restore_change_set(first.change_set_id, by="person").set_id
    write(top_app, "index", "v2\n")
    services.restore_change_set(first.change_set_id, by="person")  # prunes `restored`
    assert debt(top_app) == {(hashlib.sha256(b"v1\n").hexdigest(), restored)}
    assert ChangeSet.objects.get(id=restored).pruned  # lingers, listed as pruned
    write(top_app, "index", "v3\n")
    services.restore_change_set(first.change_set_id, by="person")  # a batch of two: settles
    assert not ChangeSet.objects.filter(id=restored).exists()
    assert len(debt(top_app)) == 1


# --- VERSIONS_SWEEP_BATCH from the environment -------------------------------------------------


def test_the_batch_is_read_from_the_environment(top_app, settings, monkeypatch):
    """A deployment sets VERSIONS_SWEEP_BATCH in the environment, as it does every limit: with
    3, the third write that prunes settles what the app owes."""
    del settings.VERSIONS_SWEEP_BATCH  # no setting: the environment decides
    monkeypatch.setenv("VERSIONS_SWEEP_BATCH", "3")
    settings.VERSIONS_POINTS_PER_APP = 1
    write(top_app, "index", "v0\n")
    seen = []
    for i in range(1, 8):
        write(top_app, "index", f"v{i}\n")  # each prunes the point before it
        seen.append(SweepDebt.objects.filter(app=top_app).count())
    assert seen == [1, 2, 1, 2, 1, 2, 1]


@pytest.mark.parametrize("value", ["0", "-2", "sixteen", "1.5"])
def test_a_batch_that_is_not_a_positive_whole_number_is_refused_in_words(
    settings, monkeypatch, value
):
    del settings.VERSIONS_SWEEP_BATCH
    monkeypatch.setenv("VERSIONS_SWEEP_BATCH", value)
    with pytest.raises(ImproperlyConfigured, match="VERSIONS_SWEEP_BATCH must be a positive"):
        conf.sweep_batch()
    monkeypatch.delenv("VERSIONS_SWEEP_BATCH")
    assert conf.sweep_batch() == 16
    settings.VERSIONS_SWEEP_BATCH = 0
    with pytest.raises(ImproperlyConfigured, match=r"not “0”"):
        conf.sweep_batch()


def test_the_server_does_not_start_on_a_batch_that_is_not_a_positive_whole_number():
    root = Path(__file__).resolve().parents[1]
    env = {**os.environ, "VERSIONS_SWEEP_BATCH": "none"}
    done = subprocess.run(
        [sys.executable, "manage.py", "check"], cwd=root, env=env, capture_output=True, text=True
    )
    assert done.returncode != 0
    assert "VERSIONS_SWEEP_BATCH must be a positive whole number" in done.stderr
    assert "not “none”" in done.stderr
