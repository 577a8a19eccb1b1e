"""Statements run on the database driver's own cursor, for the few hot paths where Django's
cursor wrapper costs as much as the statement (capture, restore, retention, the audit append,
loading sources).

Errors are translated as Django's are. Where queries are logged (DEBUG, assertNumQueries,
``CaptureQueriesContext``) the statements still run here, on the driver's cursor — the path
production runs — and log themselves as Django's cursor would, so they are seen and counted.
Only execute wrappers (``connection.execute_wrapper``), which need Django's cursor to wrap,
send the statements through it.

On PostgreSQL a transaction that is the connection's own (:func:`outermost`) can be two round
trips: :func:`execute_first` sends BEGIN with its first statement, ``batch(commit=True)``
sends COMMIT with its last ones; Django's atomic block still owns the transaction (rollback on
error, on-commit callbacks).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from functools import lru_cache
from typing import Any

import psycopg
from django.db import DEFAULT_DB_ALIAS, connections
from psycopg.types.json import Json, Jsonb


def recorded(db: Any) -> bool:
    """Whether someone wraps this connection's execution (then it goes through Django's cursor,
    which applies the wrappers)."""
    return bool(db.execute_wrappers)


def _log(db: Any, sql: str, params: Sequence[Any], started: float) -> None:
    """Log a statement as Django's debug cursor does — the SQL with its values in place — when
    this connection logs queries. Bytes (sources) are logged by their length only."""
    if db.queries_logged:
        shown = _interpolated(sql, params) if params else sql
        db.queries_log.append({"sql": shown, "time": f"{time.monotonic() - started:.3f}"})


def _literal(value: Any) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    if isinstance(value, bytes | memoryview):
        return f"'<{len(value)} bytes>'"
    if isinstance(value, Json | Jsonb):  # a JSON parameter (PostgreSQL): its text
        return _literal((value.dumps or json.dumps)(value.obj))
    if isinstance(value, list | tuple):  # an array parameter (PostgreSQL)
        return "'{}'" if not value else "ARRAY[" + ", ".join(map(_literal, value)) + "]"
    return "'" + str(value).replace("'", "''") + "'"


def _interpolated(sql: str, params: Sequence[Any]) -> str:
    parts = sql.split("%s")
    if len(parts) != len(params) + 1:
        return f"{sql} -- params {[_literal(p) for p in params]}"
    out = [parts[0]]
    for value, part in zip(params, parts[1:], strict=True):
        out.append(_literal(value))
        out.append(part)
    return "".join(out)


def execute(
    sql: str,
    params: Sequence[Any],
    fetch: str = "",
    *,
    binary: bool = False,
    using: str = DEFAULT_DB_ALIAS,
) -> Any:
    """Run ``sql`` (Django's ``%s`` style); ``fetch`` "one" or "all" returns rows, else the
    row count. ``binary``: on PostgreSQL, rows in binary format (a bytea read as bytes, not as
    hex text to decode).

    On PostgreSQL the cursor binds server-side: values travel apart from the statement, bytes
    as bytes (Django's client-side binding would inline a source as an escaped literal), and
    a statement is prepared after its second run on a connection (the ``prepare_threshold``
    that VERSIONS_PREPARE_STATEMENTS sets), which pays off where connections persist.
    """
    db = connections[using]
    if recorded(db):  # Django's own cursor: logged and counted (text results on PostgreSQL)
        with db.cursor() as cursor:
            cursor.execute(sql, params)
            return _fetched(cursor, fetch)
    db.ensure_connection()
    db.validate_no_broken_transaction()  # as Django's cursor does before every statement
    started = time.monotonic()
    try:
        if db.vendor != "postgresql":
            with db.wrap_database_errors:
                cursor = db.connection.execute(_qmark(sql), params)
                try:
                    return _fetched(cursor, fetch)
                finally:
                    cursor.close()
        with db.wrap_database_errors:
            # Not closed: in pipeline mode its result may still be on the way.
            pg_cursor = _pg_cursor(db, binary)
            pg_cursor.execute(_numbered(sql), params)
            return _fetched(pg_cursor, fetch)
    finally:
        _log(db, sql, params, started)


def execute_many(sql: str, rows: Sequence[Sequence[Any]], *, using: str = DEFAULT_DB_ALIAS) -> None:
    """Run ``sql`` once for every row of parameters in ``rows``: one statement prepared once and
    re-run (the driver's ``executemany``). Logged as Django logs an ``executemany``."""
    db = connections[using]
    if recorded(db):
        with db.cursor() as cursor:
            cursor.executemany(sql, rows)
        return
    db.ensure_connection()
    db.validate_no_broken_transaction()
    started = time.monotonic()
    try:
        with db.wrap_database_errors:
            if db.vendor != "postgresql":
                db.connection.executemany(_qmark(sql), rows)
            else:
                _pg_cursor(db, binary=False).executemany(_numbered(sql), rows)
    finally:
        if db.queries_logged:
            db.queries_log.append(
                {"sql": f"{len(rows)} times: {sql}", "time": f"{time.monotonic() - started:.3f}"}
            )


def insert_rows(model: Any, rows: Sequence[Any], *, using: str = DEFAULT_DB_ALIAS) -> None:
    """Insert ``rows`` (new instances of ``model``) in one statement that returns nothing, so
    inside a :func:`batch` no reply is awaited: their fields' values as the ORM would send
    them (an automatic id is the database's, and not read back)."""
    if not rows:
        return
    db = connections[using]
    meta = model._meta
    fields = [f for f in meta.concrete_fields if f is not meta.auto_field]
    qn = db.ops.quote_name
    one = "(" + ", ".join(["%s"] * len(fields)) + ")"
    execute(
        f"INSERT INTO {qn(meta.db_table)} ({', '.join(qn(f.column) for f in fields)}) "  # noqa: S608
        f"VALUES {', '.join([one] * len(rows))}",
        [f.get_db_prep_save(f.pre_save(row, True), db) for row in rows for f in fields],
        using=using,
    )


@lru_cache(maxsize=256)
def _qmark(sql: str) -> str:
    """``sql`` in sqlite3's parameter style (these statements hold no literal %)."""
    return sql.replace("%s", "?")


@lru_cache(maxsize=512)
def _numbered(sql: str) -> str:
    """``sql`` in PostgreSQL's own parameter style (``$1``, ``$2``, …), for a
    :func:`_pg_cursor`: converted once per statement text, then remembered.

    psycopg's own cursor converts a ``%s`` statement on every run, remembering only statements
    under 4 KB; a restore's counter-points and re-points of 100 artifacts are one multi-row
    statement each, longer than that, and converting them cost more than the server took to
    run them (docs/performance.md#restore-placeholders). Like :func:`_qmark`, it assumes the
    statement holds no literal %.
    """
    parts = sql.split("%s")
    out = [parts[0]]
    for number, part in enumerate(parts[1:], start=1):
        out.append(f"${number}")
        out.append(part)
    return "".join(out)


def _pg_cursor(db: Any, binary: bool) -> psycopg.Cursor[Any]:
    """A cursor on the driver's connection that takes statements as the server does: run them
    through :func:`_numbered`."""
    cursor: psycopg.Cursor[Any] = psycopg.RawCursor(db.connection)
    if binary:
        cursor.format = psycopg.pq.Format.BINARY
    return cursor


def outermost(using: str = DEFAULT_DB_ALIAS) -> bool:
    """Whether the current atomic block is the only one, and its transaction the connection's
    own: it commits as the block ends (no savepoint, no transaction begun by hand)."""
    db = connections[using]
    return len(db.atomic_blocks) == 1 and db.commit_on_exit and not db.savepoint_ids


def _fusable(db: Any) -> bool:
    """Whether BEGIN and COMMIT can travel with a transaction's statements: PostgreSQL with
    pipeline mode, nobody recording queries, in the :func:`outermost` atomic block with nothing
    marked for rollback."""
    return (
        db.vendor == "postgresql"
        and outermost(db.alias)
        and not db.needs_rollback
        and not recorded(db)
        and psycopg.Pipeline.is_supported()
    )


def execute_first(
    sql: str,
    params: Sequence[Any],
    fetch: str = "",
    *,
    binary: bool = False,
    using: str = DEFAULT_DB_ALIAS,
) -> Any:
    """:func:`execute` for the first statement of an atomic block: on PostgreSQL the block's
    BEGIN travels with it, one round trip instead of two (psycopg would send BEGIN on its own
    and wait for it). Anywhere else, or once the transaction has begun, plain :func:`execute`.
    """
    db = connections[using]
    fusable = _fusable(db)
    if fusable:
        db.ensure_connection()
        conn = db.connection
        fusable = conn.pgconn.transaction_status == psycopg.pq.TransactionStatus.IDLE and hasattr(
            conn, "_autocommit"
        )
    if not fusable:
        return execute(sql, params, fetch, binary=binary, using=using)
    begin = getattr(conn, "_get_tx_start_command", lambda: b"BEGIN")()
    started = time.monotonic()
    with db.wrap_database_errors:
        cursor = _pg_cursor(db, binary)
        # While the pipeline is built psycopg must not start the transaction itself (it
        # would send BEGIN and wait for it): the BEGIN is the pipeline's first statement.
        conn._autocommit = True
        try:
            with conn.pipeline():
                psycopg.Cursor(conn).execute(begin)
                cursor.execute(_numbered(sql), params)
        finally:
            conn._autocommit = False
        _log(db, sql, params, started)
        # The results arrived when the pipeline ended.
        return _fetched(cursor, fetch)


def first_of(queryset: Any) -> Any:
    """The first instance ``queryset`` finds (a plain one: its model's own fields, no joins
    or annotations), or None, its statement run as :func:`execute_first` runs it: as an
    atomic block's first, on PostgreSQL with the block's BEGIN, one round trip. Its values
    are converted and its instance made as the ORM's own iteration does."""
    db = queryset.db
    compiler = queryset.query.get_compiler(using=db)
    sql, params = compiler.as_sql()
    row = execute_first(sql, params, "one", using=db)
    if row is None:
        return None
    columns = [column for column, _sql, _alias in compiler.select]
    converters = compiler.get_converters(columns)
    if converters:
        row = next(iter(compiler.apply_converters([row], converters)))
    return queryset.model.from_db(db, [column.target.attname for column in columns], row)


class Batch:
    """What the statements of a :func:`batch` block may add: a transaction of their own to run
    once the block's transaction committed, in the same round trip (:meth:`follow`)."""

    def __init__(self, *, can_follow: bool) -> None:
        # Whether COMMIT travels with the block's statements, so a transaction can follow it.
        self.can_follow = can_follow
        self.following: list[tuple[str, Sequence[Any]]] = []
        self.on_error: Callable[[Exception], None] | None = None

    def follow(
        self, statements: Sequence[tuple[str, Sequence[Any]]], on_error: Callable[[Exception], None]
    ) -> None:
        """Run ``statements`` (sql, params) once the block's transaction committed, as one more
        transaction sent with it (no round trip of its own). Its failure cannot undo the
        block's transaction: it is rolled back and handed to ``on_error``. Only where
        :attr:`can_follow`."""
        if not self.can_follow:
            raise RuntimeError("no transaction can follow this batch's: see Batch.can_follow")
        self.following.extend(statements)
        self.on_error = on_error


@contextmanager
def batch(
    using: str = DEFAULT_DB_ALIAS, *, begin: bool = False, commit: bool = False
) -> Iterator[Batch]:
    """Send the statements run inside without waiting for each reply, where the driver can
    (psycopg's pipeline mode on PostgreSQL): one round trip for several writes instead of one
    each. An error comes out at the first row fetched or at the end of the block.

    ``begin``: the block starts its transaction (the first statements of an :func:`outermost`
    atomic block, none run yet): BEGIN travels with the block's statements, as with
    :func:`execute_first`. ``commit``: the block ends its transaction. Where the enclosing
    atomic block is the outermost one (see :func:`_fusable`), COMMIT travels with the block's
    statements when it ends without an error, and the atomic block finds nothing left to
    commit (its on-commit callbacks still run as it exits). The caller runs nothing that can
    fail after such a block. With both, a whole transaction is one round trip.

    The block gets a :class:`Batch`: with COMMIT fused, a transaction may follow it
    (:meth:`Batch.follow`), in the same round trip.
    """
    db = connections[using]
    if db.vendor != "postgresql" or recorded(db) or not psycopg.Pipeline.is_supported():
        yield Batch(can_follow=False)
        return
    fusable = _fusable(db)
    fuse_commit = commit and fusable
    db.ensure_connection()
    conn = db.connection
    fuse_begin = (
        begin
        and fusable
        and conn.pgconn.transaction_status == psycopg.pq.TransactionStatus.IDLE
        and hasattr(conn, "_autocommit")
    )
    block = Batch(can_follow=fuse_commit and hasattr(conn, "_autocommit"))
    if fuse_begin:
        # psycopg must not start the transaction itself (it would send BEGIN and wait for
        # it): the BEGIN is the pipeline's first statement.
        conn._autocommit = True
    committed = psycopg.Cursor(conn)
    try:
        with db.wrap_database_errors:
            try:
                with conn.pipeline():
                    if fuse_begin:
                        psycopg.Cursor(conn).execute(
                            getattr(conn, "_get_tx_start_command", lambda: b"BEGIN")()
                        )
                    yield block
                    if fuse_commit:
                        committed.execute(b"COMMIT")
                    if block.following:
                        _send_following(db, conn, block.following)
            except psycopg.Error as exc:
                if not (block.following and _was_committed(committed)):
                    raise
                _end_failed_follower(conn)
                assert block.on_error is not None
                block.on_error(exc)
    finally:
        if fuse_begin:
            conn._autocommit = False


def _send_following(db: Any, conn: Any, statements: Sequence[tuple[str, Sequence[Any]]]) -> None:
    """Queue a transaction of ``statements`` after the pipeline's COMMIT.

    No BEGIN and no COMMIT of its own: the statements after the COMMIT, up to the pipeline's
    Sync (sent as the pipeline ends), are one implicit transaction, which the server commits
    at the Sync, or rolls back if one of them failed (the extended query protocol's rule).
    Its transaction-level locks and settings last to the Sync; two statements fewer.
    """
    started = time.monotonic()
    autocommit = conn._autocommit
    conn._autocommit = True  # psycopg must not begin a transaction of its own
    try:
        for sql, params in statements:
            psycopg.RawCursor(conn).execute(_numbered(sql), params)
    finally:
        conn._autocommit = autocommit
    for sql, params in statements:
        _log(db, sql, params, started)


def _was_committed(cursor: psycopg.Cursor[Any]) -> bool:
    """Whether the pipeline's COMMIT, run on ``cursor``, committed."""
    result = cursor.pgresult
    return (
        result is not None
        and result.status == psycopg.pq.ExecStatus.COMMAND_OK
        and cursor.statusmessage == "COMMIT"
    )


def _end_failed_follower(conn: Any) -> None:
    """Roll back the transaction that followed a committed one and failed (the connection is
    then as the committed transaction left it)."""
    if conn.pgconn.transaction_status == psycopg.pq.TransactionStatus.INERROR:
        autocommit = conn._autocommit
        conn._autocommit = True
        try:
            conn.execute(b"ROLLBACK")
        finally:
            conn._autocommit = autocommit


def _fetched(cursor: Any, fetch: str) -> Any:
    if fetch == "one":
        return cursor.fetchone()
    if fetch == "all":
        return cursor.fetchall()
    return cursor.rowcount


def execute_deferred(
    sql: str, params: Sequence[Any], *, using: str = DEFAULT_DB_ALIAS
) -> Callable[[], int]:
    """:func:`execute` without waiting for the row count: inside a :func:`batch` on PostgreSQL
    the statement travels with the others; the callable returns its row count once the
    batch's results arrived (after its transaction committed, e.g. in ``on_commit``)."""
    db = connections[using]
    if db.vendor != "postgresql" or recorded(db):
        count = execute(sql, params, using=using)
        return lambda: int(count)
    db.ensure_connection()
    db.validate_no_broken_transaction()
    started = time.monotonic()
    cursor = _pg_cursor(db, binary=False)
    try:
        with db.wrap_database_errors:
            cursor.execute(_numbered(sql), params)
    finally:
        _log(db, sql, params, started)
    return lambda: cursor.rowcount
