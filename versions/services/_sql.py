"""Prepared SQL for the capture hot path.

A capture is a handful of single-row statements; building each through the ORM costs more
than running it, and capture must cost about a plain save. These helpers run the same
statements the ORM would, with the SQL built once. Private to ``versions.services``.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cache
from typing import Any

from django.db import connection
from django.utils.dateparse import parse_datetime

from versions.models import Artifact, Blob, ChangeSet, RestorePoint


@dataclass
class ArtifactRow:
    """The columns of a locked artifact row that a capture needs."""

    pk: int
    blob_id: str | None
    sha256: str
    size: int
    deleted: bool
    updated_on: datetime | None


def _table(model: type) -> str:
    return connection.ops.quote_name(model._meta.db_table)  # type: ignore[attr-defined]


@cache
def _sql(vendor: str) -> dict[str, str]:
    artifact, blob = _table(Artifact), _table(Blob)
    point, change_set = _table(RestorePoint), _table(ChangeSet)
    lock = " FOR UPDATE" if vendor == "postgresql" else ""
    json_cast = "::jsonb" if vendor == "postgresql" else ""
    return {
        "lock": (
            f"SELECT id, blob_id, sha256, size, deleted, updated_on FROM {artifact} "
            f"WHERE app_id = %s AND collection = %s AND name = %s{lock}"
        ),
        "blob": f"SELECT data, compressed FROM {blob} WHERE sha256 = %s",
        "insert_blob": (
            f"INSERT INTO {blob} (sha256, data, size, chars, compressed, created_on) "
            "VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (sha256) DO NOTHING"
        ),
        "insert_set": (
            f"INSERT INTO {change_set} (id, app_id, kind, name, created_on, created_by, "
            "restored_from_id, receipt, run_id, turn_id, pruned) "
            f"VALUES (%s, %s, 'change', '', %s, %s, NULL, NULL, %s, %s, %s{json_cast})"
        ),
        "set_by_run": (
            f"SELECT id FROM {change_set} WHERE app_id = %s AND kind = 'change' AND run_id = %s"
        ),
        "set_by_turn": (
            f"SELECT change_set_id FROM {point} WHERE app_id = %s AND turn_id = %s "
            "AND run_id = '' AND kind = 'capture' AND created_on >= %s "
            "ORDER BY created_on DESC LIMIT 1"
        ),
        "insert_point": (
            f"INSERT INTO {point} (id, app_id, artifact_id, kind, previous_blob_id, "
            "previous_sha256, previous_size, previous_existed, source_stored, new_sha256, "
            "requested_by, tool, created_on, lines_added, lines_removed, run_id, turn_id, "
            "name, change_set_id, pinned) VALUES "
            "(%s, %s, %s, 'capture', %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, "
            "'', %s, %s)"
        ),
        "update_artifact": (
            f"UPDATE {artifact} SET blob_id = %s, sha256 = %s, size = %s, deleted = %s, "
            "route_key = NULL, updated_on = %s, updated_by = %s WHERE id = %s"
        ),
        "excess": (
            f"SELECT 1 FROM {point} WHERE app_id = %s AND pinned = %s "
            "ORDER BY created_on DESC, id DESC LIMIT 1 OFFSET %s"
        ),
    }


def _q(name: str) -> str:
    return _sql(connection.vendor)[name]


def _dt(value: datetime) -> Any:
    return connection.ops.adapt_datetimefield_value(value)


def _read_dt(value: object) -> datetime | None:
    if value is None or isinstance(value, datetime):
        return value
    parsed = parse_datetime(str(value))
    if parsed is not None and parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed


def lock_row(app_id: int, collection: str, name: str) -> ArtifactRow | None:
    """The artifact row, locked for update (PostgreSQL; SQLite holds the write lock), or None."""
    with connection.cursor() as cursor:
        cursor.execute(_q("lock"), [app_id, collection, name])
        row = cursor.fetchone()
    if row is None:
        return None
    return ArtifactRow(row[0], row[1], row[2] or "", row[3], bool(row[4]), _read_dt(row[5]))


def read_blob(sha: str) -> bytes:
    """The stored bytes of blob ``sha`` (one query)."""
    with connection.cursor() as cursor:
        cursor.execute(_q("blob"), [sha])
        data, compressed = cursor.fetchone()
    data = bytes(data)
    return zlib.decompress(data) if compressed else data


def insert_blob(raw: bytes, sha: str, chars: int, now: datetime) -> None:
    """Store ``raw`` under ``sha`` unless that blob is stored already."""
    data, compressed = Blob.pack(raw)
    with connection.cursor() as cursor:
        cursor.execute(_q("insert_blob"), [sha, data, len(raw), chars, compressed, _dt(now)])


def find_set_by_run(app_id: int, run_id: str) -> str | None:
    with connection.cursor() as cursor:
        cursor.execute(_q("set_by_run"), [app_id, run_id])
        row = cursor.fetchone()
    return row[0] if row else None


def find_set_by_turn(app_id: int, turn_id: str, since: datetime) -> str | None:
    with connection.cursor() as cursor:
        cursor.execute(_q("set_by_turn"), [app_id, turn_id, _dt(since)])
        row = cursor.fetchone()
    return row[0] if row else None


def insert_change_set(
    set_id: str, app_id: int, created_on: datetime, by: str, run_id: str, turn_id: str
) -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            _q("insert_set"), [set_id, app_id, _dt(created_on), by, run_id, turn_id, "[]"]
        )


def insert_point(
    *,
    point_id: str,
    app_id: int,
    artifact_id: int,
    previous_blob_id: str | None,
    previous_sha256: str,
    previous_size: int,
    previous_existed: bool,
    source_stored: bool,
    new_sha256: str,
    requested_by: str,
    tool: str,
    created_on: datetime,
    lines_added: int,
    lines_removed: int,
    run_id: str,
    turn_id: str,
    change_set_id: str,
) -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            _q("insert_point"),
            [
                point_id,
                app_id,
                artifact_id,
                previous_blob_id,
                previous_sha256,
                previous_size,
                previous_existed,
                source_stored,
                new_sha256,
                requested_by,
                tool,
                _dt(created_on),
                lines_added,
                lines_removed,
                run_id,
                turn_id,
                change_set_id,
                False,
            ],
        )


def update_artifact(pk: int, *, sha: str | None, size: int, by: str, now: datetime) -> None:
    """Point a non-route artifact at blob ``sha`` (None: a tombstone)."""
    with connection.cursor() as cursor:
        cursor.execute(
            _q("update_artifact"),
            [sha, sha or "", size if sha else 0, sha is None, _dt(now), by, pk],
        )


def has_excess_points(app_id: int, keep: int) -> bool:
    """Whether the app has more than ``keep`` unpinned points (then retention must prune)."""
    with connection.cursor() as cursor:
        cursor.execute(_q("excess"), [app_id, False, keep])
        return cursor.fetchone() is not None
