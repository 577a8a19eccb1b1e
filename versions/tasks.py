"""Background work on Django's tasks API (docs/operations.md#worker): ``django.tasks`` on
Django 6, the ``django-tasks`` backport on 5.2 — one import for the whole project.

A module registers a task with :func:`task` and enqueues it (``my_task.enqueue(...)``,
``my_task.using(run_after=…).enqueue(...)``) so that a worker never sees work its
transaction did not commit: :func:`enqueue_in_transaction` where the queue is a table of the
same database (the default, django-tasks-db), so the task commits with the work or not at all,
in the transaction already paid for; :func:`enqueue_on_commit` otherwise. ``manage.py
db_worker`` runs them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from importlib.util import find_spec
from typing import Any

from django.db import DEFAULT_DB_ALIAS, connections, router, transaction
from django.utils import timezone

from versions import rawsql

if find_spec("django.tasks"):  # Django 6
    from django.tasks import task
else:  # Django 5.2: the backport
    from django_tasks import task  # type: ignore[no-redef]

__all__ = [
    "task",
    "enqueue_on_commit",
    "enqueue_in_transaction",
    "in_database",
    "queue_row",
    "withdraw",
]


def enqueue_on_commit(work: Any, *args: Any, **kwargs: Any) -> None:
    """Enqueue task ``work`` with ``args`` once the current transaction commits (at once
    outside one); a queue that cannot be reached then is logged, never raised into a write
    that already committed."""
    transaction.on_commit(lambda: work.enqueue(*args, **kwargs), robust=True)


@dataclass(frozen=True)
class QueueRow:
    """The row that enqueues a task on the database queue, as SQL to send in the caller's
    transaction: ``INSERT INTO {table} {columns} VALUES ({values})`` with ``params`` (or
    ``SELECT {values} FROM …`` to insert it only where a row was made)."""

    id: str  # the task's id, as its result reports it
    table: str
    columns: str
    values: str
    params: list[Any]


@dataclass(frozen=True)
class _Shape:
    """What every row of one task on one database shares: its SQL and the values that do not
    change, with where the changing ones go."""

    table: str
    columns: str
    values: str
    fixed: list[Any]
    at: dict[str, int]  # field name → its place in the row
    new_id: Callable[[], Any]  # a new primary key
    prep_id: Callable[[Any, Any], Any]  # a primary key as the database takes it


# {(backend, task path, priority, queue, using): its shape, or None: not the database queue
# on that database}. Keyed by the backend object, so a new TASKS setting (tests) is a new key.
_shapes: dict[tuple[Any, str, int, str, str], _Shape | None] = {}


def _shape(work: Any, using: str) -> _Shape | None:
    backend = work.get_backend()
    key = (backend, work.module_path, work.priority, work.queue_name, using)
    try:
        return _shapes[key]
    except KeyError:
        shape = _shapes[key] = _shape_of(backend, work, using)
        return shape


def in_database(work: Any, using: str = DEFAULT_DB_ALIAS) -> bool:
    """Whether task ``work``'s queue is a table of database ``using`` (django-tasks-db): a
    row :func:`queue_row` makes commits with the caller's transaction or not at all."""
    return _shape(work, using) is not None


def queue_row(
    work: Any, *args: Any, run_after: Any = None, using: str = DEFAULT_DB_ALIAS
) -> QueueRow | None:
    """The row ``work.enqueue(*args)`` (with ``work.using(run_after=…)``) would insert, the
    same values the database backend gives it; None unless ``work``'s backend is the database
    queue (django-tasks-db) in database ``using``. Such a row, inserted in a transaction,
    commits with it or not at all. The backend's ``task_enqueued`` signal (a debug log line)
    is not sent."""
    shape = _shape(work, using)
    if shape is None:
        return None
    db = connections[using]
    params = list(shape.fixed)
    # The values that change, made as the model's fields make them (its pk's default, a UUID;
    # the time; the arguments as JSON), without the fields' generic checks: a write pays this.
    task_id = shape.new_id()
    params[shape.at["id"]] = shape.prep_id(task_id, db)
    params[shape.at["enqueued_at"]] = db.ops.adapt_datetimefield_value(timezone.now())
    params[shape.at["args_kwargs"]] = db.ops.adapt_json_value(
        {"args": list(args), "kwargs": {}}, None
    )
    if run_after is not None or work.run_after is not None:
        params[shape.at["run_after"]] = db.ops.adapt_datetimefield_value(
            run_after or work.run_after
        )
    return QueueRow(str(task_id), shape.table, shape.columns, shape.values, params)


def _shape_of(backend: Any, work: Any, using: str) -> _Shape | None:
    """The SQL and fixed values of ``work``'s rows, from the database backend's own model and
    defaults; None when its queue is elsewhere."""
    if find_spec("django_tasks_db") is None:
        return None
    from django_tasks_db.backend import DatabaseBackend
    from django_tasks_db.models import DBTaskResult, get_date_max

    if not isinstance(backend, DatabaseBackend) or backend.options.get("id_function"):
        return None
    if router.db_for_write(DBTaskResult) != using:
        return None
    backend.validate_task(work)
    db = connections[using]
    pk = DBTaskResult._meta.pk
    assert pk is not None
    template: Any = DBTaskResult(
        id=pk.get_default(),
        args_kwargs={"args": [], "kwargs": {}},
        priority=work.priority,
        task_path=work.module_path,
        queue_name=work.queue_name,
        run_after=get_date_max(),
        backend_name=backend.alias,
    )
    fields = list(DBTaskResult._meta.concrete_fields)
    fixed = [f.get_db_prep_save(f.pre_save(template, True), db) for f in fields]
    quote = db.ops.quote_name
    if db.vendor == "postgresql":
        # Typed, so that ``INSERT … SELECT`` takes them as the columns' types.
        values = ", ".join(f"%s::{f.cast_db_type(db)}" for f in fields)
    else:
        values = ", ".join("%s" for _ in fields)
    return _Shape(
        table=quote(DBTaskResult._meta.db_table),
        columns="(" + ", ".join(quote(str(f.column)) for f in fields) + ")",
        values=values,
        fixed=fixed,
        at={f.name: i for i, f in enumerate(fields)},
        new_id=pk.get_default,
        prep_id=lambda value, db: pk.get_db_prep_value(value, db, prepared=True),
    )


def enqueue_in_transaction(work: Any, *args: Any, run_after: Any = None) -> str | None:
    """Enqueue task ``work`` with ``args`` (not before ``run_after``) in the current
    transaction where its queue is a table of the same database: it commits with the
    transaction or not at all (the transaction is the caller's: no second one); returns the
    task's id. With another backend (Redis, RabbitMQ), once the transaction commits
    (:func:`enqueue_on_commit`); returns None."""
    row = queue_row(work, *args, run_after=run_after)
    if row is None:
        enqueue_on_commit(work.using(run_after=run_after) if run_after else work, *args)
        return None
    rawsql.execute(f"INSERT INTO {row.table} {row.columns} VALUES ({row.values})", row.params)  # noqa: S608
    return row.id


def withdraw(task_id: str | None, using: str = DEFAULT_DB_ALIAS) -> None:
    """Take task ``task_id`` (from :func:`enqueue_in_transaction`) off the database queue, in
    the current transaction, unless a worker has started it: for a task that is no longer
    needed, so that the queue a worker searches stays short. Nothing for None."""
    if task_id is None:
        return
    from django_tasks_db.compat import TaskResultStatus
    from django_tasks_db.models import DBTaskResult

    db = connections[using]
    meta = DBTaskResult._meta
    pk, status = meta.pk, meta.get_field("status")
    assert pk is not None
    rawsql.execute(
        f"DELETE FROM {db.ops.quote_name(meta.db_table)} "  # noqa: S608
        f"WHERE {db.ops.quote_name(str(pk.column))} = %s "
        f"AND {db.ops.quote_name(str(status.column))} = %s",
        [pk.get_db_prep_value(task_id, db), status.get_db_prep_save(TaskResultStatus.READY, db)],
        using=using,
    )
