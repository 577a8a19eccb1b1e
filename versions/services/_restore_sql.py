"""Prepared SQL for the restore engine (docs/architecture.md#restore, docs/architecture.md#storage).

A Restore all is a handful of statements over many rows; building them through the ORM (query
compilation, per-value preparation, model instances) costs more than running them. These
helpers run the same statements the ORM would, with the SQL built once per database vendor,
on the driver's own cursor (:mod:`versions.rawsql`, as capture does): Django's cursor wrapper
costs as much as a short statement. Private to ``versions.services``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from datetime import UTC, datetime
from functools import cache
from typing import Any

from django.db import connection
from django.utils.dateparse import parse_datetime

from versions import rawsql
from versions.models import App, Artifact, ChangeSet, RestorePoint, blob_hex, blob_key

# Only quoted table names from the models are interpolated; every value is a parameter.
# Counter-point columns, in the order of the rows :func:`insert_counter_points` takes.
COUNTER_COLUMNS = (
    "id",
    "app_id",
    "artifact_id",
    "previous_blob_id",
    "previous_sha256",
    "previous_size",
    "previous_existed",
    "new_sha256",
    "requested_by",
    "written_by",
    "tool",
    "created_on",
    "lines_added",
    "lines_removed",
    "change_set_id",
)


def _table(model: type) -> str:
    return connection.ops.quote_name(model._meta.db_table)  # type: ignore[attr-defined]


@cache
def _sql(vendor: str) -> dict[str, str]:
    artifact, point = _table(Artifact), _table(RestorePoint)
    change_set, app = _table(ChangeSet), _table(App)
    lock = " FOR UPDATE" if vendor == "postgresql" else ""
    # SQLite's stored text of a moment, unparsed: only the latest of them is ever read.
    updated_on = "CAST(updated_on AS TEXT)" if vendor == "sqlite" else "updated_on"
    counter_row = "(" + ", ".join(["%s"] * len(COUNTER_COLUMNS)) + ")"
    return {
        "set_and_app": (
            "SELECT cs.id, cs.pruned, a.id, a.slug, a.name, a.release_set_id, "  # noqa: S608
            f"a.route_generation, a.created_on FROM {change_set} AS cs "
            f"INNER JOIN {app} AS a ON a.id = cs.app_id WHERE cs.id = %s"
        ),
        # {ids}: one placeholder per primary key, ascending (the one lock order).
        "lock": (
            "SELECT id, app_id, collection, name, blob_id, sha256, size, deleted, route_key, "  # noqa: S608
            f"{updated_on} FROM {artifact} WHERE id IN ({{ids}}) ORDER BY id{lock}"
        ),
        # A set a restore or revert acted on closes (a restore set, or one closed, stays).
        "close_set": (
            f"UPDATE {change_set} SET closed = %s WHERE id = %s AND app_id = %s "  # noqa: S608
            f"AND kind = '{ChangeSet.CHANGE}' AND closed = %s"
        ),
        "insert_set": (
            f"INSERT INTO {change_set} (id, app_id, kind, name, created_on, created_by, "  # noqa: S608
            "restored_from_id, receipt, run_id, turn_id, pruned) "
            f"VALUES (%s, %s, '{ChangeSet.RESTORE}', '', %s, %s, %s, %s, '', '', %s)"
        ),
        # Columns not listed take the model's defaults, written as literals.
        "insert_counter": (
            f"INSERT INTO {point} ({', '.join(COUNTER_COLUMNS)}, kind, source_stored, run_id, "  # noqa: S608
            "turn_id, name, pinned) VALUES "
        ),
        "counter_row": counter_row[:-1] + f", '{RestorePoint.COUNTER}', %s, '', '', '', %s)",
    }


def _q(name: str) -> str:
    return _sql(connection.vendor)[name]


def read_moment(value: Any) -> datetime:
    """A DateTimeField value as read by a raw cursor: aware UTC datetime."""
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    parsed = parse_datetime(str(value))
    assert parsed is not None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def _json(value: Any) -> Any:
    return json.loads(value) if isinstance(value, str | bytes) else value


def change_set_and_app(set_id: str) -> tuple[str, list[dict[str, Any]], App] | None:
    """(id, pruned list, its app) of change set ``set_id``, one query; None if there is none."""
    row = rawsql.execute(_q("set_and_app"), [set_id], fetch="one")
    if row is None:
        return None
    cs_id, pruned, app_id, slug, name, release_set_id, generation, created_on = row
    app = App(
        id=app_id,
        slug=slug,
        name=name,
        release_set_id=release_set_id,
        route_generation=generation,
        created_on=read_moment(created_on),
    )
    app._state.adding = False
    app._state.db = connection.alias
    return cs_id, _json(pruned) or [], app


def lock_artifacts(pks: list[int], *, lock: bool) -> list[tuple]:
    """The artifact rows of ``pks`` (ascending) in primary-key order, locked unless ``lock``
    is false: (id, app_id, collection, name, blob_id, sha256, size, deleted, route_key,
    updated_on)."""
    sql = _q("lock")
    if not lock:
        sql = sql.removesuffix(" FOR UPDATE")
    rows: list[tuple] = []
    # Ascending chunks keep the one lock order even past the backend's parameter limit.
    for start in range(0, len(pks), 900):
        chunk = pks[start : start + 900]
        rows.extend(rawsql.execute(sql.format(ids=", ".join(["%s"] * len(chunk))), chunk, "all"))
    if connection.vendor == "postgresql":  # blob keys are stored as bytes there
        return [(*row[:4], blob_hex(row[4]), *row[5:]) for row in rows]
    return rows


def insert_restore_set(
    set_id: str,
    app_id: int,
    created_on: datetime,
    by: str,
    restored_from: str,
    receipt: dict[str, Any],
) -> None:
    """Store a restore set (``kind`` restore, no name, nothing pruned) with its receipt."""
    ops = connection.ops
    rawsql.execute(
        _q("insert_set"),
        [
            set_id,
            app_id,
            ops.adapt_datetimefield_value(created_on),
            by,
            restored_from,
            ops.adapt_json_value(receipt, None),
            ops.adapt_json_value([], None),
        ],
    )


def close_set(app_id: int, set_id: str) -> None:
    """Close the change set a restore or revert just acted on (in its transaction): later
    writes of its run or turn start a new set, so the next write of a session that reverted
    its turn is not taken back with it by a second Restore all."""
    rawsql.execute(_q("close_set"), [True, set_id, app_id, False])


def insert_counter_points(rows: Sequence[Sequence[Any]]) -> None:
    """Store counter-points, each a row of ``COUNTER_COLUMNS`` values (``created_on`` already
    adapted for the database).

    SQLite runs one prepared single-row INSERT for every row (no round trips to save, and a
    short statement is cheap to prepare); PostgreSQL gets multi-row VALUES, one statement (one
    round trip) per parameter batch.
    """
    if not rows:
        return
    head, row = _q("insert_counter"), _q("counter_row")
    if connection.vendor == "sqlite":
        rawsql.execute_many(head + row, [(*r, True, False) for r in rows])
        return
    # Blob keys are stored as bytes on PostgreSQL.
    key = COUNTER_COLUMNS.index("previous_blob_id")
    rows = [(*r[:key], None if r[key] is None else blob_key(r[key]), *r[key + 1 :]) for r in rows]
    width = len(COUNTER_COLUMNS) + 2
    per_batch = max(1, (connection.features.max_query_params or 10_000) // width)
    for start in range(0, len(rows), per_batch):
        batch = rows[start : start + per_batch]
        rawsql.execute(
            head + ", ".join([row] * len(batch)),
            [value for r in batch for value in (*r, True, False)],
        )


_ALPHABET = b"0123456789abcdefghijklmnopqrstuvwxyz"
# Bytes below 252 = 7 × 36 map uniformly onto the 36 characters; the rest are dropped.
_TO_CHAR = bytes(_ALPHABET[b % 36] for b in range(256))
_REJECTED = bytes(range(252, 256))


def random_suffixes(count: int) -> list[str]:
    """``count`` texts of 8 characters of [0-9a-z], each uniformly random (as
    ``secrets.randbelow(36**8)`` in base 36, zero-padded), from the OS RNG in one call or so."""
    needed = 8 * count
    chars = b""
    while len(chars) < needed:
        chars += os.urandom(needed - len(chars) + 16).translate(_TO_CHAR, _REJECTED)
    text = chars.decode("ascii")
    return [text[i : i + 8] for i in range(0, needed, 8)]
