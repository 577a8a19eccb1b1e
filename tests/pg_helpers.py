"""PostgreSQL transactions seen from outside: the client's waits (round trips, read off libpq's
protocol trace), what another connection sees committed, and a connection left clean."""

from __future__ import annotations

import tempfile
import zlib
from collections.abc import Callable
from typing import Any

import psycopg
from django.db import connection


def round_trips(func: Callable[[], Any]) -> int:
    """How many times ``func`` made the client wait for the server, read off libpq's protocol
    trace: each simple Query, each Sync (an extended query or a pipeline's end) and each Flush
    but the one psycopg sends right after a Sync (a Flush alone: a row fetched inside a
    pipeline, which waits for the statements sent so far)."""
    connection.ensure_connection()
    pgconn = connection.connection.pgconn
    with tempfile.TemporaryFile("w+") as trace:
        pgconn.trace(trace.fileno())
        pgconn.set_trace_flags(psycopg.pq.Trace.SUPPRESS_TIMESTAMPS)
        try:
            func()
        finally:
            pgconn.untrace()
        trace.seek(0)
        sent = [
            parts[2]
            for parts in (line.split() for line in trace.read().splitlines())
            if parts[:1] == ["F"] and len(parts) > 2
        ]
    return sum(
        1
        for i, message in enumerate(sent)
        if message in ("Sync", "Query") or (message == "Flush" and sent[i - 1 : i] != ["Sync"])
    )


def committed(sql: str, params: list) -> tuple:
    """One row as another connection sees it (committed data only)."""
    with psycopg.connect(**connection.get_connection_params()) as other:
        row = other.execute(sql, params).fetchone()
    assert row is not None
    return tuple(row)


def committed_source(name: str, app: Any = None) -> str:
    """The source of artifact ``name`` (of ``app`` when given) as another connection sees it."""
    sql = (
        "SELECT b.data, b.compressed FROM versions_artifact a "
        "JOIN versions_blob b ON b.sha256 = a.blob_id WHERE a.name = %s"
    )
    params: list[Any] = [name]
    if app is not None:
        sql += " AND a.app_id = %s"
        params.append(app.pk)
    data, compressed = committed(sql, params)
    return (zlib.decompress(bytes(data)) if compressed else bytes(data)).decode()


def assert_connection_clean() -> None:
    """No transaction left open: the connection is back in autocommit and idle."""
    conn = connection.connection
    assert not connection.in_atomic_block
    assert conn.autocommit
    assert conn.pgconn.transaction_status == psycopg.pq.TransactionStatus.IDLE
