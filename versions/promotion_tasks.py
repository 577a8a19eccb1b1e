"""Safe promotion's background work as tasks of the worker (docs/operations.md#safe-promotion):
run the scheduled promotions that are due, and watch a deployment just promoted by running
the app's HTTP checks against it (a failure rolls it back by itself).

Tasks of the worker's ``versions.tasks.task`` decorator (Django's tasks API). Scheduling a
promotion enqueues :func:`run_due_promotions` to run at its moment; a promotion or a rollout's
start in an app with HTTP checks enqueues :func:`watch_promotion` once it commits. Each task
is a thin adapter over one service of ``services.promotion``.
"""

from __future__ import annotations

from versions import services
from versions.tasks import task


@task()
def run_due_promotions() -> list[str]:
    """Promote every scheduled promotion that is due now; the ids that ran."""
    return [schedule_id for schedule_id, _ in services.promotion.run_due_schedules()]


@task()
def watch_promotion(deployment_id: str) -> str:
    """The app's HTTP checks against a deployment just promoted (or a rollout's candidate);
    the automatic rollback's kind when one failed, else ``"ok"``."""
    receipt = services.promotion.run_post_promotion_checks(deployment_id)
    return receipt.kind if receipt is not None else "ok"
