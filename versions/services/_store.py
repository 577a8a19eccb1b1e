"""Low-level building blocks of the blob store: hashing, delta packing, re-pointing, re-packing.

Delta storage (docs/architecture.md#storage): a new version of an artifact is stored as a zstd frame
compressed with a full copy of an earlier version as a raw-content dictionary (``zstandard``), when
that saves at least half of its bytes. Every delta is against a *full copy* — the previous version
itself when that is one, else the full copy the previous version is a delta against — and a new
full copy is stored once :data:`~versions.models.CHAIN_MAX` versions were deltas against the
same one. Reading any source is so one query for at most two rows and one decompression.
Blobs stay keyed by the sha256 of their bytes and are never changed, except that
:func:`repack` may rewrite a full copy *in place* as a delta of the same bytes.

Private to ``versions.services``: callers use the public functions of the package.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import connection, transaction

from versions import rawsql
from versions.models import CHAIN_MAX, Artifact, Blob, RestorePoint, blob_key


@dataclass(frozen=True)
class DeltaBase:
    """The full copy a new version may be stored as a delta against, and how many versions
    are deltas against it up to the previous one (0: the previous version is that copy)."""

    sha: str
    chain: int
    raw: bytes


def read_with_base(
    sha: str,
    data: Any,
    compressed: bool,
    base_id: str | None,
    chain: int,
    base_data: Any,
    base_compressed: bool | None,
) -> tuple[bytes, DeltaBase]:
    """The bytes of blob ``sha`` from its row (and its base's, read in the same statement),
    and the full copy its artifact's next version may be a delta against."""
    if base_id is None:
        raw = Blob.full_copy(sha, data, compressed)
        return raw, DeltaBase(sha, 0, raw)
    base_raw = Blob.full_copy(base_id, base_data, bool(base_compressed))
    return Blob.unpack_delta(data, base_id, base_raw), DeltaBase(base_id, chain, base_raw)


def pack_after(raw: bytes, base: DeltaBase | None) -> tuple[bytes, bool, str | None, int]:
    """How to store ``raw``, the version after ``base``'s: ``(data, compressed, base_id,
    chain)``, a delta against ``base`` while the chain is short and the delta small, else a
    full copy."""
    if base is not None and base.chain < CHAIN_MAX:
        delta = Blob.pack_delta(raw, base.sha, base.raw)
        if delta is not None:
            return delta, False, base.sha, base.chain + 1
    data, compressed = Blob.pack(raw)
    return data, compressed, None, 0


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
    postgresql = connection.vendor == "postgresql"
    params = [
        (
            blob_key(sha) if postgresql and sha else sha,
            sha or "",
            size if sha else 0,
            sha is None,
            moment,
            by,
            pk,
        )
        for pk, sha, size in rows
    ]
    table = qn(Artifact._meta.db_table)
    if postgresql:
        # One statement for all rows (one round trip): UPDATE … FROM (VALUES …).
        row = "(%s::bytea, %s, %s::bigint, %s::boolean, %s::timestamptz, %s, %s::bigint)"
        sql = (
            f"UPDATE {table} AS a SET blob_id = v.blob_id, sha256 = v.sha256, size = v.size, "  # noqa: S608
            "deleted = v.deleted, route_key = NULL, updated_on = v.updated_on, "
            "updated_by = v.updated_by FROM (VALUES "
            + ", ".join([row] * len(params))
            + ") AS v(blob_id, sha256, size, deleted, updated_on, updated_by, id) "
            "WHERE a.id = v.id"
        )
        rawsql.execute(sql, [value for values in params for value in values])
        return
    # Only quoted identifiers from the model are interpolated; every value is a parameter.
    sql = (
        f"UPDATE {qn(Artifact._meta.db_table)} SET {qn('blob_id')} = %s, {qn('sha256')} = %s, "  # noqa: S608
        f"{qn('size')} = %s, {qn('deleted')} = %s, {qn('route_key')} = NULL, "
        f"{qn('updated_on')} = %s, {qn('updated_by')} = %s WHERE {qn('id')} = %s"
    )
    rawsql.execute_many(sql, params)


@dataclass
class RepackResult:
    """What :func:`repack` did: artifacts walked, blobs rewritten as deltas, and their stored
    bytes before and after."""

    artifacts: int = 0
    repacked: int = 0
    bytes_before: int = 0
    bytes_after: int = 0


def repack(
    *,
    app_id: int | None = None,
    batch: int = 100,
    limit: int | None = None,
    models: Any = None,
) -> RepackResult:
    """Rewrite the full copies of each artifact's history as deltas, in place
    (docs/architecture.md#storage).

    Walks every artifact (of ``app_id``, or all) in id order, ``batch`` artifacts per
    transaction, so an interrupted run keeps what it committed and a second run picks up
    where it stopped: a blob already a delta is skipped, so running it again changes nothing.
    ``limit`` stops after that many artifacts (tests stop half-way with it). ``models``: the
    (Artifact, Blob, RestorePoint) classes to use, a migration's historical ones; the current
    ones by default.

    A blob is rewritten only while nothing can build on it: it is no artifact's current
    source and no delta's base, checked in the rewriting statement itself, so a concurrent
    write never stores a delta against a blob that is becoming one. Each delta is checked
    to give back the same bytes before it is written.
    """
    chosen: tuple[Any, Any, Any] = models or (Artifact, Blob, RestorePoint)
    artifact_model, blob_model, point_model = chosen
    result = RepackResult()
    wanted = {} if app_id is None else {"app_id": app_id}
    pks: list[int] = list(
        artifact_model.objects.filter(**wanted).order_by("pk").values_list("pk", flat=True)
    )
    if limit is not None:
        pks = pks[:limit]
    for start in range(0, len(pks), batch):
        with transaction.atomic():
            if connection.vendor == "postgresql":
                # One re-packer at a time: two could each make the other's base a delta.
                with connection.cursor() as cursor:
                    cursor.execute("SELECT pg_advisory_xact_lock(hashtext('versions_repack'))")
            for pk in pks[start : start + batch]:
                _repack_artifact(pk, artifact_model, blob_model, point_model, result)
                result.artifacts += 1
    return result


def _repack_artifact(
    pk: int, artifact_model: Any, blob_model: Any, point_model: Any, result: RepackResult
) -> None:
    """Re-pack the history of artifact ``pk``: its points' blobs, oldest first, then its own."""
    history = list(
        point_model.objects.filter(artifact_id=pk, previous_blob__isnull=False)
        .order_by("created_on", "id")
        .values_list("previous_blob_id", flat=True)
    )
    current = artifact_model.objects.filter(pk=pk).values_list("blob_id", flat=True).first()
    sequence = list(dict.fromkeys([*history, *([current] if current else [])]))
    if len(sequence) < 2:
        return
    rows = _blob_rows(blob_model, sequence)
    needed = set(blob_model.objects.filter(base_id__in=sequence).values_list("base_id", flat=True))
    key: DeltaBase | None = None
    for sha in sequence:
        row = rows.get(sha)
        if row is None:  # swept meanwhile
            key = None
            continue
        if row.base_id is not None:
            key = DeltaBase(row.base_id, row.chain, rows[row.base_id].raw)
            continue
        if key is not None and key.sha != sha and sha not in needed and sha != current:
            packed, _, base_id, chain = pack_after(row.raw, key)
            if (
                base_id is not None
                and Blob.unpack_delta(packed, key.sha, key.raw) == row.raw
                and _rewrite(blob_model, artifact_model, sha, packed, base_id, chain)
            ):
                result.repacked += 1
                result.bytes_before += row.stored
                result.bytes_after += len(packed)
                needed.add(base_id)
                key = DeltaBase(base_id, chain, key.raw)
                continue
        key = DeltaBase(sha, 0, row.raw)


@dataclass(frozen=True)
class _Row:
    raw: bytes
    base_id: str | None
    chain: int
    stored: int


def _blob_rows(blob_model: Any, shas: list[str]) -> dict[str, _Row]:
    """The given blobs and the bases of those that are deltas, decoded, by sha256."""
    fields = ("sha256", "data", "compressed", "base_id", "chain")
    found = list(blob_model.objects.filter(sha256__in=shas).values_list(*fields))
    bases = {base_id for *_, base_id, _ in found if base_id is not None} - set(shas)
    if bases:
        found += blob_model.objects.filter(sha256__in=bases).values_list(*fields)
    full = {
        sha: Blob.unpack(data, compressed)
        for sha, data, compressed, base, _ in found
        if base is None
    }
    rows = {}
    for sha, data, _compressed, base_id, chain in found:
        raw = full[sha] if base_id is None else Blob.unpack_delta(data, base_id, full[base_id])
        rows[sha] = _Row(raw, base_id, chain, len(data))
    return rows


def _rewrite(
    blob_model: Any, artifact_model: Any, sha: str, packed: bytes, base_id: str, chain: int
) -> bool:
    """Rewrite full copy ``sha`` as ``packed``, a delta against full copy ``base_id``, in one
    statement that checks nothing builds on it (no artifact's current source, no delta's
    base) and that its base is still a full copy. Whether it was rewritten."""
    from django.db.models import Exists, OuterRef

    builds_on = Exists(blob_model.objects.filter(base_id=OuterRef("sha256"))) | Exists(
        artifact_model.objects.filter(blob_id=OuterRef("sha256"))
    )
    base_is_full = Exists(blob_model.objects.filter(sha256=base_id, base__isnull=True))
    return bool(
        blob_model.objects.filter(sha256=sha, base__isnull=True)
        .filter(base_is_full)
        .exclude(builds_on)
        .update(data=packed, compressed=False, base_id=base_id, chain=chain)
    )
