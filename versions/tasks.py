"""Background work on Django's tasks API (docs/operations.md#worker): ``django.tasks`` on
Django 6, the ``django-tasks`` backport on 5.2 — one import for the whole project.

A module registers a task with :func:`task` and enqueues it (``my_task.enqueue(...)``,
``my_task.using(run_after=…).enqueue(...)``), usually from ``transaction.on_commit`` so a
worker never sees work its transaction did not commit. ``manage.py db_worker`` runs them.
"""

from __future__ import annotations

from importlib.util import find_spec
from typing import Any

from django.db import transaction

if find_spec("django.tasks"):  # Django 6
    from django.tasks import task
else:  # Django 5.2: the backport
    from django_tasks import task  # type: ignore[no-redef]

__all__ = ["task", "enqueue_on_commit"]


def enqueue_on_commit(work: Any, *args: Any, **kwargs: Any) -> None:
    """Enqueue task ``work`` with ``args`` once the current transaction commits (at once
    outside one); a queue that cannot be reached then is logged, never raised into a write
    that already committed."""
    transaction.on_commit(lambda: work.enqueue(*args, **kwargs), robust=True)
