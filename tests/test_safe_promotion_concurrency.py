"""Safe promotion under concurrency on PostgreSQL (docs/architecture.md#safe-promotion): rollouts
started at once leave exactly one running, and an automatic rollback racing a person's rollout
step moves the pointers once."""

from __future__ import annotations

import pytest
from thread_helpers import failures, run_in_threads

from versions.errors import PreflightFailed
from versions.models import PAGE, App, DeploymentEvent
from versions.services import promote, promotion, write_artifact

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def _app() -> App:
    app = App.objects.create(slug="race", name="Race")
    write_artifact(app, PAGE, "index", "<p>v1</p>", requested_by="a", tool="t")
    promote(app, by="setup")
    write_artifact(app, PAGE, "index", "<p>v2</p>", requested_by="a", tool="t")
    return app


def test_rollouts_started_at_once_leave_exactly_one_running():
    app = _app()
    results = run_in_threads(4, lambda i: promote("race", by=f"p{i}", rollout=10 + i).kind)
    started = [r for r in results if r == "rollout"]
    refused = [r for r in results if isinstance(r, PreflightFailed)]
    assert len(started) == 1 and len(refused) == 3, results
    assert all("already running" in str(r) for r in refused)
    assert App.objects.get(pk=app.pk).candidate_id is not None
    assert DeploymentEvent.objects.filter(kind="rollout").count() == 1


def test_an_automatic_rollback_racing_complete_moves_the_pointers_once():
    app = _app()
    candidate = promote(app, by="p", rollout=50).deployment_id

    def step(i: int) -> str:
        if i == 0:
            return promotion.complete_rollout("race", by="person").kind
        return promotion.auto_rollback("race", deployment=candidate, cause="errors").kind

    results = run_in_threads(2, step)
    # Completing after the watch aborted the rollout finds none running, and says so.
    assert [str(f) for f in failures(results)] in (
        [],
        ["App “race” has no rollout running: start one with Start rollout."],
    )
    after = App.objects.get(pk=app.pk)
    assert after.candidate_id is None and after.rollout_share == 0
    kinds = list(DeploymentEvent.objects.order_by("id").values_list("kind", flat=True))[2:]
    # Either the rollout completed and the watch then rolled production back, or the watch
    # aborted it first and completing found no rollout running: never both on a stale view.
    assert kinds in (["promotion", "auto_rollback"], ["auto_rollback"]), kinds
