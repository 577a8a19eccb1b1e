"""Safe promotion's background work run by a real worker process (docs/operations.md#worker):
a scheduled promotion is promoted by ``manage.py db_worker`` at its moment, and an app's HTTP
check that fails after a promotion rolls production back by itself.

The worker and its database are the webhook worker tests' (a file database on SQLite).
"""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
from django.db import transaction
from django.utils import timezone
from django_tasks_db.models import DBTaskResult

# The worker fixtures: a database the worker process can open, and the process itself.
from test_webhook_worker import database_url, migrated_sqlite, workers  # noqa: F401

from versions import services
from versions.models import PAGE, App, AppCheck, Deployment, DeploymentEvent

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


def _wait_for(condition, seconds: float = 30.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.1)
    return False


def test_a_scheduled_promotion_is_promoted_by_the_worker_at_its_moment(workers):  # noqa: F811
    app = App.objects.create(slug="sched", name="Scheduled")
    services.write_artifact(app, PAGE, "index", "<p>first</p>\n", requested_by="agent", tool="t")
    at = timezone.now() + timedelta(seconds=2)
    receipt = services.promote(app, by="olga", note="at its moment", at=at)
    assert receipt.kind == "scheduled"
    workers()
    assert _wait_for(lambda: App.objects.get(pk=app.pk).production_id is not None)
    deployment = Deployment.objects.get(pk=App.objects.get(pk=app.pk).production_id)
    assert deployment.created_on >= at  # not before its moment
    event = DeploymentEvent.objects.filter(app=app).latest("on")
    assert event.kind == "promotion" and "at its moment" in event.note
    assert deployment.ref == receipt.ref and deployment.note.endswith("at its moment")


def test_a_check_failing_after_a_promotion_rolls_production_back_by_the_worker(workers):  # noqa: F811
    app = App.objects.create(slug="watched", name="Watched")
    services.write_artifact(
        app, PAGE, "index", "<p>All good.</p>\n", requested_by="agent", tool="t"
    )
    services.promote(app, by="olga", note="good")
    AppCheck.objects.create(app=app, name="home says ok", path="/", expect_text="All good.")
    # The page no longer says it: the check fails, and an owner promotes anyway, on purpose ...
    services.write_artifact(app, PAGE, "index", "<p>Gone.</p>\n", requested_by="agent", tool="t")
    second = services.promote(app, by="olga", note="bad", override_reason="ship it").deployment_id
    # ... so the worker's watch leaves that promotion be: it runs the check it went past no more.
    workers()
    assert _wait_for(lambda: _watched(second) == "ok")
    assert App.objects.get(pk=app.pk).production_id == second
    # A check that passed when the state was promoted, failing after, rolls production back.
    services.write_artifact(app, PAGE, "index", "<p>Back.</p>\n", requested_by="agent", tool="t")
    AppCheck.objects.create(app=app, name="home answers", path="/", expect_text="Back.")
    with transaction.atomic():  # the watch is queued once this commits: the check changed
        third = services.promote(app, by="olga", note="back", override_reason="ship it")
        AppCheck.objects.filter(app=app, name="home answers").update(expect_text="Back again.")
    assert _wait_for(lambda: App.objects.get(pk=app.pk).production_id == second)
    assert _wait_for(lambda: _watched(third.deployment_id) == "auto_rollback")
    event = DeploymentEvent.objects.filter(app=app).latest("on")
    assert event.kind == "auto_rollback" and "home answers" in event.receipt["cause"]


def _watched(deployment_id: str) -> str | None:
    """What the worker's watch of ``deployment_id`` returned (None: not run yet)."""
    done = DBTaskResult.objects.filter(
        task_path__endswith="watch_promotion", status="SUCCESSFUL"
    ).filter(args_kwargs__args=[deployment_id])
    return done.values_list("return_value", flat=True).first()
