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

from versions.models import App, Artifact, Blob, ChangeSet, ReleaseMark, RestorePoint


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
    app_table, mark = _table(App), _table(ReleaseMark)
    return {
        "excess_rows": (
            "SELECT id, previous_blob_id, change_set_id, artifact_id, created_on "
            f"FROM {point} WHERE app_id = %s AND pinned = %s "
            "ORDER BY created_on DESC, id DESC LIMIT 1000000000 OFFSET %s"
        ),
        "emptied_sets": (
            f"SELECT id FROM {change_set} AS cs WHERE cs.kind = 'change' AND cs.id IN ({{ids}}) "
            f"AND NOT EXISTS (SELECT 1 FROM {point} AS p WHERE p.change_set_id = cs.id)"
        ),
        "forget_set_in_sets": (
            f"UPDATE {change_set} SET restored_from_id = NULL WHERE restored_from_id IN ({{ids}})"
        ),
        "forget_set_in_marks": (
            f"UPDATE {mark} SET change_set_id = NULL WHERE change_set_id IN ({{ids}})"
        ),
        "forget_set_in_apps": (
            f"UPDATE {app_table} SET release_set_id = NULL WHERE release_set_id IN ({{ids}})"
        ),
        "delete_sets": f"DELETE FROM {change_set} WHERE id IN ({{ids}})",
        "delete_points": f"DELETE FROM {point} WHERE id IN ({{ids}})",
        # One statement: a blob goes only if, at that moment, nothing references it.
        "sweep": (
            f"DELETE FROM {blob} WHERE sha256 IN ({{ids}}) "
            f"AND NOT EXISTS (SELECT 1 FROM {artifact} AS a WHERE a.blob_id = {blob}.sha256) "
            f"AND NOT EXISTS (SELECT 1 FROM {point} AS p WHERE p.previous_blob_id = {blob}.sha256)"
        ),
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
        # Counting at most keep + 1 index entries: no sort, no table access.
        "excess": (
            f"SELECT COUNT(*) FROM (SELECT 1 FROM {point} WHERE app_id = %s AND pinned = %s "
            "LIMIT %s) AS capped"
        ),
    }


def _q(name: str) -> str:
    return _sql(connection.vendor)[name]


def _dt(value: datetime) -> Any:
    return connection.ops.adapt_datetimefield_value(value)


def _read_dt(value: object) -> datetime | None:
    """A stored datetime as an aware UTC datetime (SQLite hands back naive ones or text)."""
    if value is None:
        return None
    parsed = value if isinstance(value, datetime) else parse_datetime(str(value))
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
        cursor.execute(_q("excess"), [app_id, False, keep + 1])
        return cursor.fetchone()[0] > keep


def _in(name: str, values: list) -> str:
    return _q(name).format(ids=", ".join(["%s"] * len(values)))


def excess_points(app_id: int, keep: int) -> list[tuple[str, str | None, str, int, datetime]]:
    """The app's unpinned points beyond the newest ``keep``: (id, blob, set, artifact, time)."""
    with connection.cursor() as cursor:
        cursor.execute(_q("excess_rows"), [app_id, False, keep])
        rows = cursor.fetchall()
    return [(r[0], r[1], r[2], r[3], _read_dt(r[4])) for r in rows]  # type: ignore[misc]


def delete_points(point_ids: list[str]) -> None:
    with connection.cursor() as cursor:
        cursor.execute(_in("delete_points", point_ids), point_ids)


def delete_emptied_change_sets(set_ids: list[str]) -> set[str]:
    """Delete the change sets among ``set_ids`` left with no point; returns their ids.

    What pointed at them (a restore set's ``restored_from``, release history, a release mark)
    is cleared first, as the models' SET_NULL says.
    """
    with connection.cursor() as cursor:
        cursor.execute(_in("emptied_sets", set_ids), set_ids)
        emptied = [row[0] for row in cursor.fetchall()]
        if emptied:
            for name in ("forget_set_in_sets", "forget_set_in_marks", "forget_set_in_apps"):
                cursor.execute(_in(name, emptied), emptied)
            cursor.execute(_in("delete_sets", emptied), emptied)
    return set(emptied)


def sweep_blobs(candidates: list[str]) -> int:
    """Delete the blobs among ``candidates`` that no artifact and no point references."""
    if not candidates:
        return 0
    with connection.cursor() as cursor:
        cursor.execute(_in("sweep", candidates), candidates)
        return cursor.rowcount
