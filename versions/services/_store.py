"""Low-level building blocks shared by the route-save path and restore: hashing, re-pointing.

Private to ``versions.services``: callers use the public functions of the package.
"""

from __future__ import annotations

import hashlib
from datetime import datetime

from django.db import connection

from versions.models import Artifact


def sha256_hex(raw: bytes) -> str:
    return hashlib.sha256(raw).hexdigest()


def repoint(
    artifact: Artifact,
    *,
    sha: str | None,
    size: int,
    by: str,
    now: datetime,
    route_key: str | None = None,
) -> None:
    """Point ``artifact`` at blob ``sha`` (None: make it a tombstone). Writes no source bytes."""
    artifact.blob_id = sha  # type: ignore[assignment]
    artifact.sha256 = sha or ""
    artifact.size = size if sha else 0
    artifact.deleted = sha is None
    artifact.route_key = route_key if sha else None
    artifact.updated_on = now
    artifact.updated_by = by
    Artifact.objects.filter(pk=artifact.pk).update(
        blob_id=artifact.blob_id,
        sha256=artifact.sha256,
        size=artifact.size,
        deleted=artifact.deleted,
        route_key=artifact.route_key,
        updated_on=now,
        updated_by=by,
    )


def repoint_many(rows: list[tuple[int, str | None, int]], *, by: str, now: datetime) -> None:
    """Point each artifact at its blob (None: tombstone) in one statement batch. Not for
    routes, which take the route-save path.

    ``rows`` are ``(artifact pk, sha, size)``. Like :func:`repoint`, it writes no source bytes;
    one prepared UPDATE run for every row keeps a restore of many artifacts cheap.
    """
    if not rows:
        return
    qn = connection.ops.quote_name
    moment = connection.ops.adapt_datetimefield_value(now)
    params = [
        (sha, sha or "", size if sha else 0, sha is None, moment, by, pk) for pk, sha, size in rows
    ]
    table = qn(Artifact._meta.db_table)
    if connection.vendor == "postgresql":
        # One statement for all rows (one round trip): UPDATE … FROM (VALUES …).
        row = "(%s, %s, %s::bigint, %s::boolean, %s::timestamptz, %s, %s::bigint)"
        sql = (
            f"UPDATE {table} AS a SET blob_id = v.blob_id, sha256 = v.sha256, size = v.size, "  # noqa: S608
            "deleted = v.deleted, route_key = NULL, updated_on = v.updated_on, "
            "updated_by = v.updated_by FROM (VALUES "
            + ", ".join([row] * len(params))
            + ") AS v(blob_id, sha256, size, deleted, updated_on, updated_by, id) "
            "WHERE a.id = v.id"
        )
        with connection.cursor() as cursor:
            cursor.execute(sql, [value for values in params for value in values])
        return
    # Only quoted identifiers from the model are interpolated; every value is a parameter.
    sql = (
        f"UPDATE {qn(Artifact._meta.db_table)} SET {qn('blob_id')} = %s, {qn('sha256')} = %s, "  # noqa: S608
        f"{qn('size')} = %s, {qn('deleted')} = %s, {qn('route_key')} = NULL, "
        f"{qn('updated_on')} = %s, {qn('updated_by')} = %s WHERE {qn('id')} = %s"
    )
    with connection.cursor() as cursor:
        cursor.executemany(sql, params)
