"""Concurrent writers on PostgreSQL: the row lock makes expected_sha256 a real compare-and-set."""

from __future__ import annotations

import hashlib

import pytest
from thread_helpers import run_in_threads

from versions import services
from versions.errors import StaleWrite
from versions.models import App, Artifact, RestorePoint

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def test_twenty_writers_with_the_same_base_hash_exactly_one_lands():
    app = App.objects.create(slug="race", name="Race")
    base = services.write_artifact(app, "pltf_page", "index", "base\n", requested_by="x", tool="t")

    def write(i: int):
        return services.write_artifact(
            "race",
            "pltf_page",
            "index",
            f"writer {i}\n",
            requested_by=f"agent-{i}",
            tool="t",
            expected_sha256=base.sha256,
        )

    results = run_in_threads(20, write)
    wins = [r for r in results if not isinstance(r, Exception)]
    stale = [r for r in results if isinstance(r, StaleWrite)]
    assert len(wins) == 1, results
    assert len(stale) == 19, results
    winner = wins[0]
    assert all(r.current_sha256 == winner.sha256 for r in stale)
    artifact = Artifact.objects.get(app=app)
    assert artifact.sha256 == winner.sha256
    assert hashlib.sha256(artifact.source.encode()).hexdigest() == winner.sha256
    # The points are exactly the successful writes: the base creation and the winner.
    points = list(RestorePoint.objects.filter(app=app).order_by("created_on"))
    assert [p.id for p in points] == [base.restore_point_id, winner.restore_point_id]
    assert points[1].previous_source == "base\n"


def test_concurrent_creators_of_one_new_artifact_queue_on_one_row():
    App.objects.create(slug="create-race", name="Race")

    def create(i: int):
        return services.write_artifact(
            "create-race",
            "pltf_page",
            "new",
            f"v{i}",
            requested_by="x",
            tool="t",
            expected_sha256="",
        )

    results = run_in_threads(10, create)
    wins = [r for r in results if not isinstance(r, Exception)]
    assert len(wins) == 1, results
    assert all(isinstance(r, StaleWrite) for r in results if r not in wins)
    assert Artifact.objects.filter(app__slug="create-race").count() == 1


def test_writers_of_one_run_share_one_change_set():
    app = App.objects.create(slug="run-race", name="Race")

    def write(i: int):
        return services.write_artifact(
            app, "pltf_page", f"page-{i}", "x", requested_by="x", tool="t", run_id="run-1"
        )

    results = run_in_threads(8, write)
    assert not [r for r in results if isinstance(r, Exception)], results
    assert len({r.change_set_id for r in results}) == 1
    assert RestorePoint.objects.filter(app=app).count() == 8
