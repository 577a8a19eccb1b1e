"""Counting the client's waits for PostgreSQL: round trips, read off libpq's protocol trace."""

from __future__ import annotations

import tempfile
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
