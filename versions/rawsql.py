"""Statements run on the database driver's own cursor, for the few hot paths where Django's
cursor wrapper costs as much as the statement (capture, retention, loading sources).

Errors are translated as Django's are. Where someone records queries (the debug cursor,
assertNumQueries, execute wrappers) every statement still runs through Django's cursor, so it
is seen and counted.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import psycopg
from django.db import DEFAULT_DB_ALIAS, connections


def recorded(db: Any) -> bool:
    """Whether someone records this connection's queries."""
    return bool(db.queries_logged or db.execute_wrappers)


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
    if db.vendor != "postgresql":
        sql = sql.replace("%s", "?")  # sqlite3's style; these statements hold no literal %
        with db.wrap_database_errors:
            cursor = db.connection.cursor()
            try:
                cursor.execute(sql, params)
                return _fetched(cursor, fetch)
            finally:
                cursor.close()
    with db.wrap_database_errors:
        # Not closed: in pipeline mode its result may still be on the way.
        pg_cursor: psycopg.Cursor[Any] = psycopg.Cursor(db.connection)
        if binary:
            pg_cursor.format = psycopg.pq.Format.BINARY
        pg_cursor.execute(sql, params)
        return _fetched(pg_cursor, fetch)


@contextmanager
def batch(using: str = DEFAULT_DB_ALIAS) -> Iterator[None]:
    """Send the statements run inside without waiting for each reply, where the driver can
    (psycopg's pipeline mode on PostgreSQL): one round trip for several writes instead of one
    each. An error comes out at the first row fetched or at the end of the block."""
    db = connections[using]
    if db.vendor != "postgresql" or recorded(db) or not psycopg.Pipeline.is_supported():
        yield
        return
    db.ensure_connection()
    with db.wrap_database_errors, db.connection.pipeline():
        yield


def _fetched(cursor: Any, fetch: str) -> Any:
    if fetch == "one":
        return cursor.fetchone()
    if fetch == "all":
        return cursor.fetchall()
    return cursor.rowcount
