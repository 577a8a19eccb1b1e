"""Versions data model: apps, artifacts, content-addressed blobs, restore points, change sets,
deployments.

Sources live once, in :class:`Blob`, keyed by the sha256 of their UTF-8 bytes
(docs/architecture.md#storage). An artifact references the blob of its current source and a restore
point the blob of the source it replaced, so a capture only references bytes that are already stored
and a restore only re-points.
"""

from __future__ import annotations

import functools
import threading
import zlib
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

import zstandard
from django.conf import settings
from django.db import connection, models, transaction
from django.db.models import Q
from django.utils import timezone

from versions import rawsql
from versions.audit_chain import GENESIS, event_document, event_hash, event_id
from versions.ids import datetime_to_ms

# Collections of an app's artifacts (docs/architecture.md#domain).
PAGE = "pltf_page"
FRONTEND_MODULE = "pltf_frontend_module"
STYLESHEET = "pltf_stylesheet"
API_ROUTE = "pltf_api_route"
SERVER_SCRIPT = "pltf_server_script"
COLLECTIONS = (PAGE, FRONTEND_MODULE, STYLESHEET, API_ROUTE, SERVER_SCRIPT)
COLLECTION_CHOICES = [
    (PAGE, "Page"),
    (FRONTEND_MODULE, "Frontend module"),
    (STYLESHEET, "Stylesheet"),
    (API_ROUTE, "API route"),
    (SERVER_SCRIPT, "Server script"),
]

# Full copies of at least this size are stored zstd-compressed (older ones zlib-compressed over
# 256 KB; both read back, told apart by their frame's magic number); reading takes one query.
COMPRESS_FROM_BYTES = 512
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
# Delta storage (docs/architecture.md#storage): a blob may be a zstd frame compressed with a full
# copy of an earlier version of its artifact as a raw-content dictionary. Every delta is against a
# full copy (never against another delta), so reading any source fetches at most two rows in one
# query and runs one decompression; a full copy at least every CHAIN_MAX + 1 versions bounds how far
# a delta drifts from its base.
CHAIN_MAX = 15
# Smaller sources are stored whole: a delta would save a few bytes for a compression's cost.
DELTA_MIN_BYTES = 512
# zstd's default level: a one-line edit of a 28 KB stylesheet takes about 40 bytes, the
# stylesheet itself 3.6 KB (zlib's fastest level: 4.2 KB, slower to read).
ZSTD_LEVEL = 3


# Per thread, the full copies deltas were last read or written against, with their zstd
# dictionaries: blobs never change, so a cached one is never stale, and a busy artifact's next
# write or read skips decompressing its full copy and loading the dictionary.
_BASES_KEPT = 16
_BASES_MAX_BYTES = 16 * 1024 * 1024


class _Base:
    """A full copy's bytes, with a compressor and a decompressor using them as dictionary."""

    __slots__ = ("_compressor", "_decompressor", "raw")

    def __init__(self, raw: bytes) -> None:
        self.raw = raw
        self._compressor: zstandard.ZstdCompressor | None = None
        self._decompressor: zstandard.ZstdDecompressor | None = None

    def _dictionary(self) -> zstandard.ZstdCompressionDict:
        return zstandard.ZstdCompressionDict(self.raw, dict_type=zstandard.DICT_TYPE_RAWCONTENT)

    def compress(self, raw: bytes) -> bytes:
        if self._compressor is None:
            self._compressor = zstandard.ZstdCompressor(
                level=ZSTD_LEVEL,
                dict_data=self._dictionary(),
                write_checksum=False,
                write_dict_id=False,
            )
        return self._compressor.compress(raw)

    def decompress(self, data: bytes) -> bytes:
        if self._decompressor is None:
            self._decompressor = zstandard.ZstdDecompressor(dict_data=self._dictionary())
        return self._decompressor.decompress(data)


class _Bases(threading.local):
    def __init__(self) -> None:
        self.entries: OrderedDict[str, _Base] = OrderedDict()
        self.size = 0

    def get(self, sha: str, load: Callable[[], bytes]) -> _Base:
        entry = self.entries.get(sha)
        if entry is not None:
            self.entries.move_to_end(sha)
            return entry
        entry = self.entries[sha] = _Base(load())
        self.size += len(entry.raw)
        while len(self.entries) > _BASES_KEPT or (
            self.size > _BASES_MAX_BYTES and len(self.entries) > 1
        ):
            _, dropped = self.entries.popitem(last=False)
            self.size -= len(dropped.raw)
        return entry


_bases = _Bases()


def blob_key(sha: str) -> bytes:
    """How PostgreSQL stores blob key ``sha`` (:class:`BlobKeyField`): its 32 bytes; "" (no
    blob) stays empty. Text that is no lowercase hex key is kept as its characters, so it
    matches no key, as it matches none on SQLite."""
    try:
        key = bytes.fromhex(sha)
    except ValueError:
        return sha.encode()
    return key if key.hex() == sha else sha.encode()


def blob_hex(value: bytes | memoryview | str | None) -> str | None:
    """A blob key as read from either database (bytes on PostgreSQL, text on SQLite) as the
    hex text Python works with."""
    if value is None or isinstance(value, str):
        return value
    return value.hex()


class BlobKeyField(models.CharField):
    """A blob's sha256 (docs/architecture.md#storage): hex text in Python, stored as its 32 bytes
    (``bytea``) on PostgreSQL and as the 64-character text on SQLite. Keys that point at a blob
    take the type of their target; every raw statement passes and reads them through
    :func:`blob_key` and :func:`blob_hex` on PostgreSQL."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("max_length", 64)
        super().__init__(*args, **kwargs)

    def db_type(self, connection: Any) -> str | None:
        if connection.vendor == "postgresql":
            return "bytea"
        return super().db_type(connection)

    def get_db_prep_value(self, value: Any, connection: Any, prepared: bool = False) -> Any:
        value = super().get_db_prep_value(value, connection, prepared)
        if isinstance(value, str) and connection.vendor == "postgresql":
            return blob_key(value)
        return value

    def from_db_value(self, value: Any, expression: Any, connection: Any) -> str | None:
        return blob_hex(value)


class BlobForeignKey(models.ForeignKey):
    """A key to a blob (:class:`BlobKeyField`): it reads back as hex text wherever it is
    selected — a subquery's or an aggregate's value too, which Django types as the key itself,
    not as the blob's key it holds."""

    def get_db_converters(self, connection: Any) -> list[Any]:
        return [
            *self.target_field.get_db_converters(connection),
            *super().get_db_converters(connection),
        ]


class BlobQuerySet(models.QuerySet["Blob"]):
    def with_bases(self) -> BlobQuerySet:
        """Read each delta's base in the same query (the default: reading stays one query)."""
        return self.select_related("base")


class BlobManager(models.Manager["Blob"]):
    def get_queryset(self) -> BlobQuerySet:
        return BlobQuerySet(self.model, using=self._db).with_bases()


class Blob(models.Model):
    """One source text, stored once, keyed by the sha256 of its UTF-8 bytes."""

    sha256 = BlobKeyField(primary_key=True, help_text="Hex sha256 of the UTF-8 bytes.")
    data = models.BinaryField(
        help_text="UTF-8 bytes, compressed (zstd, or zlib) when `compressed`; a zstd delta "
        "when `base`."
    )
    # 4 bytes each: a source is at most VERSIONS_MAX_WRITE_BYTES (10 MiB by default).
    size = models.PositiveIntegerField(help_text="Length of the UTF-8 bytes.")
    chars = models.PositiveIntegerField(help_text="Length of the text in characters.")
    compressed = models.BooleanField(default=False)
    created_on = models.DateTimeField(auto_now_add=True)
    base = BlobForeignKey(
        "self",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="+",
        db_index=False,  # the ``blob_base`` index below, without PostgreSQL's pattern index
        help_text="The full copy whose bytes are this blob's zstd dictionary; null for a "
        "full copy. A blob another delta needs is never swept.",
    )
    chain = models.PositiveSmallIntegerField(
        default=0,
        help_text="0 for a full copy; n for the n-th version stored as a delta against its "
        f"base (at most {CHAIN_MAX}: a full copy at least every {CHAIN_MAX + 1} versions).",
    )

    objects = BlobManager()

    class Meta:
        ordering = ["created_on"]
        # Loading an artifact's or a point's blob reads its base in the same query.
        base_manager_name = "objects"
        indexes = [
            # Covers the size and length lookups of a restore, so they never read the bytes
            # (SQLite keeps columns after ``data`` behind its overflow pages). SQLite only:
            # migration 0033 drops it on PostgreSQL, where TOAST keeps a large source out of
            # the row and the primary key and the row serve those lookups.
            models.Index(fields=["sha256", "size", "chars"], name="blob_meta"),
            # The sweep's "does a delta still need this full copy?" check. Partial: full copies
            # (base null, most rows) are not in it, so SQLite's planner, which counts rows per
            # value, no longer takes it for unselective and scans every app's blobs instead.
            models.Index(fields=["base"], name="blob_base", condition=Q(base__isnull=False)),
        ]
        constraints = [
            models.CheckConstraint(
                condition=Q(base__isnull=True, chain=0)
                | Q(base__isnull=False, chain__gte=1, chain__lte=CHAIN_MAX, compressed=False),
                name="blob_delta_chain",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.sha256[:12]} ({self.size} bytes)"

    @property
    def raw(self) -> bytes:
        """The stored UTF-8 bytes, decompressed (a delta's base comes with it: see objects)."""
        if self.base_id is not None:
            return Blob.unpack_delta(self.data, self.base_id, lambda: self.base.raw)  # type: ignore[union-attr]
        return Blob.unpack(self.data, self.compressed)

    @property
    def text(self) -> str:
        """The stored source as text."""
        return self.raw.decode("utf-8")

    @staticmethod
    def pack(raw: bytes) -> tuple[bytes, bool]:
        """The bytes to store for ``raw`` as a full copy and whether they are compressed."""
        if len(raw) >= COMPRESS_FROM_BYTES:
            packed = zstandard.ZstdCompressor(level=ZSTD_LEVEL, write_checksum=False).compress(raw)
            if len(packed) < len(raw):
                return packed, True
        return raw, False

    @staticmethod
    def pack_delta(raw: bytes, base_sha: str, base_raw: bytes) -> bytes | None:
        """``raw`` as a zstd frame with full copy ``base_sha`` (bytes ``base_raw``) as its
        raw-content dictionary, or None when a delta would not save at least half of the
        bytes (store a full copy)."""
        if len(raw) < DELTA_MIN_BYTES or len(base_raw) < DELTA_MIN_BYTES:
            return None
        packed = _bases.get(base_sha, lambda: base_raw).compress(raw)
        return packed if len(packed) <= len(raw) // 2 else None

    @staticmethod
    def unpack_delta(
        data: bytes | memoryview, base_sha: str, base_raw: bytes | Callable[[], bytes]
    ) -> bytes:
        """The UTF-8 bytes of a delta against full copy ``base_sha``, whose bytes are
        ``base_raw`` (or what it returns: called only when they are not at hand already)."""
        load = base_raw if callable(base_raw) else (lambda: base_raw)
        return _bases.get(base_sha, load).decompress(bytes(data))

    @staticmethod
    def full_copy(sha: str, data: bytes | memoryview, compressed: bool) -> bytes:
        """The UTF-8 bytes of full copy ``sha`` (stored ``data``), kept at hand for the deltas
        against it that are likely to follow."""
        return _bases.get(sha, lambda: Blob.unpack(data, compressed)).raw

    @staticmethod
    def unpack(data: bytes | memoryview, compressed: bool) -> bytes:
        """The UTF-8 bytes of a full copy's stored ``data`` (zstd- or zlib-compressed when
        ``compressed``)."""
        data = bytes(data)
        if not compressed:
            return data
        if data[:4] == ZSTD_MAGIC:
            return zstandard.ZstdDecompressor().decompress(data)
        return zlib.decompress(data)


class App(models.Model):
    """A deployed app whose artifacts agents write; the unit of retention and of the live app."""

    slug = models.SlugField(
        max_length=50, unique=True, help_text="Lowercase letters, digits and hyphens."
    )
    name = models.CharField(max_length=200)
    release_set = models.ForeignKey(
        "ChangeSet",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        help_text="The change set currently marked as this app's release (at most one).",
    )
    route_generation = models.PositiveBigIntegerField(
        default=0, help_text="Bumped after every committed route change; servers reload on it."
    )
    production = models.ForeignKey(
        "Deployment",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="+",
        help_text="The deployment /apps/<slug>/ serves; empty: it serves the draft.",
    )
    candidate = models.ForeignKey(
        "Deployment",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="+",
        help_text="The deployment a gradual rollout serves to a share of visitors "
        "(docs/architecture.md#safe-promotion); empty: no rollout runs.",
    )
    rollout_share = models.PositiveSmallIntegerField(
        default=0, help_text="The percentage of visitors a rollout's candidate serves (1-99)."
    )
    watch_until = models.DateTimeField(
        null=True,
        blank=True,
        help_text="Until when the live app counts production's answers after a promotion "
        "(the watch that may roll it back by itself).",
    )
    artifact_locks = models.PositiveIntegerField(
        default=0, help_text="How many of its artifacts owners locked (0: writes skip the check)."
    )
    require_preconditions = models.BooleanField(
        default=False,
        help_text=(
            "Every artifact write through the agent API must say what it expects (If-Match, "
            "If-None-Match or expected_sha256); one that does not is refused with 428."
        ),
    )
    created_on = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["slug"]
        constraints = [
            models.CheckConstraint(
                condition=Q(slug__regex=r"^[a-z0-9-]{1,50}$"), name="app_slug_format"
            ),
            models.CheckConstraint(
                condition=Q(candidate__isnull=True, rollout_share=0)
                | Q(candidate__isnull=False, rollout_share__gte=1, rollout_share__lte=99),
                name="app_rollout_share_1_99",
            ),
        ]

    def __str__(self) -> str:
        return self.slug


class ArtifactQuerySet(models.QuerySet["Artifact"]):
    def live(self) -> ArtifactQuerySet:
        """Artifacts that exist (not tombstones)."""
        return self.filter(deleted=False)


class Artifact(models.Model):
    """One versioned text file of an app, keyed by (app, collection, name)."""

    # No index of its own: artifact_unique_per_app leads with it (and an update that points the
    # artifact at a new blob would write one more index entry on PostgreSQL).
    app = models.ForeignKey(App, on_delete=models.PROTECT, related_name="artifacts", db_index=False)
    collection = models.CharField(max_length=32, choices=COLLECTION_CHOICES)
    name = models.CharField(max_length=200)
    skeleton = models.CharField(
        max_length=1000,
        blank=True,
        db_default="",  # rows inserted in bulk (COPY) without it are still valid
        help_text=(
            "What the name looks like (its confusable skeleton, Unicode TS #39): a new name "
            "that looks like another of the same collection is refused."
        ),
    )
    blob = BlobForeignKey(
        Blob,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="+",
        help_text="The current source; empty for a tombstone.",
    )
    sha256 = models.CharField(
        max_length=64,
        blank=True,
        help_text='Hex sha256 of the current source; "" (the empty marker) for a tombstone.',
    )
    size = models.PositiveBigIntegerField(default=0, help_text="UTF-8 bytes of the source.")
    deleted = models.BooleanField(
        default=False, help_text="A tombstone: deleted behind a restore point, never removed."
    )
    route_key = models.CharField(
        max_length=300,
        null=True,
        blank=True,
        help_text="For live API routes: 'METHOD /path/{}' used to refuse ambiguous routes.",
    )
    pruned_until = models.DateTimeField(
        null=True,
        blank=True,
        help_text="Capture time of this artifact's newest pruned restore point, if any.",
    )
    updated_on = models.DateTimeField()
    updated_by = models.CharField(max_length=150, blank=True)

    objects = ArtifactQuerySet.as_manager()

    class Meta:
        ordering = ["collection", "name"]
        indexes = [
            # Read only when an artifact is made, to refuse a look-alike name.
            models.Index(fields=["app", "collection", "skeleton"], name="artifact_look_per_app"),
        ]
        constraints = [
            models.UniqueConstraint(
                fields=["app", "collection", "name"], name="artifact_unique_per_app"
            ),
            models.UniqueConstraint(
                fields=["app", "route_key"],
                condition=Q(deleted=False, route_key__isnull=False),
                name="artifact_unambiguous_route",
            ),
            models.CheckConstraint(
                condition=Q(collection__in=COLLECTIONS), name="artifact_known_collection"
            ),
            models.CheckConstraint(
                condition=Q(deleted=True, blob__isnull=True, sha256="")
                | Q(deleted=False, blob__isnull=False),
                name="artifact_tombstone_has_no_source",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.app_id}:{self.collection}/{self.name}"

    @property
    def source(self) -> str:
        """The current source text ("" for a tombstone)."""
        blob = self.blob if self.blob_id else None
        return blob.text if blob is not None else ""

    @property
    def exists(self) -> bool:
        return not self.deleted


class ChangeSet(models.Model):
    """The restore points of one agent turn (kind change) or of one restore (kind restore)."""

    CHANGE = "change"
    RESTORE = "restore"
    KIND_CHOICES = [(CHANGE, "Change"), (RESTORE, "Restore")]

    id = models.CharField(
        max_length=48, primary_key=True, help_text="cs_<first point id> or rs_<ms>_<rand>."
    )
    # No index of its own: changeset_app_recent leads with it.
    app = models.ForeignKey(
        App, on_delete=models.PROTECT, related_name="change_sets", db_index=False
    )
    kind = models.CharField(max_length=10, choices=KIND_CHOICES)
    name = models.CharField(max_length=200, blank=True)
    created_on = models.DateTimeField()
    created_by = models.CharField(max_length=150, blank=True)
    restored_from = models.ForeignKey(
        "self",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="restores",
        help_text="For a restore set: the set it restored.",
        db_index=False,  # changeset_restored_from: restore sets only
    )
    receipt = models.JSONField(null=True, blank=True, help_text="A restore set's receipt.")
    run_id = models.CharField(max_length=200, blank=True)
    turn_id = models.CharField(max_length=200, blank=True)
    pruned = models.JSONField(
        default=list,
        blank=True,
        help_text="Points of this set removed by retention: [{pointId, artifactId}].",
    )
    message = models.TextField(
        blank=True,
        default="",
        db_default="",
        help_text="What the agent was asked or did (docs/api.md#turn-messages): the first message "
        "its writes gave, or one it set since; at most 2,000 characters.",
    )
    closed = models.BooleanField(
        default=False,
        db_default=False,
        help_text="A restore or revert acted on this set: later writes of its run or turn "
        "start a new set instead of joining it.",
    )

    class Meta:
        ordering = ["-created_on", "-id"]
        permissions = [("restore_changeset", "Can restore change sets and restore points")]
        # Ascending: new sets append at the end of the app's range (a descending index inserts
        # at its start, which splits pages more often); read backwards for newest first.
        indexes = [
            models.Index(fields=["app", "created_on"], name="changeset_app_recent"),
            # Only restore sets have one: a writer's new set adds no entry.
            models.Index(
                fields=["restored_from"],
                name="changeset_restored_from",
                condition=Q(restored_from__isnull=False),
            ),
            # Retention keeps the counter-points of an app's newest N unnamed restore sets
            # (docs/architecture.md#retention): read off this index alone, never past the app's
            # change sets and named restore sets. A writer's new set adds no entry.
            models.Index(
                fields=["app", "created_on", "id"],
                name="changeset_unnamed_restores",
                condition=Q(kind="restore", name=""),
            ),
        ]
        constraints = [
            # One open set per run: a closed one (restored or reverted) makes way for the next.
            models.UniqueConstraint(
                fields=["app", "run_id"],
                condition=Q(kind="change") & ~Q(run_id="") & Q(closed=False),
                name="changeset_one_per_run",
            ),
        ]

    def __str__(self) -> str:
        return self.id


class RestorePoint(models.Model):
    """The state of one artifact captured immediately before a write replaced it."""

    CAPTURE = "capture"
    COUNTER = "counter"
    KIND_CHOICES = [(CAPTURE, "Capture"), (COUNTER, "Counter (before a restore)")]

    id = models.CharField(max_length=40, primary_key=True, help_text="rp_<ms base36>_<8 chars>.")
    # No single-column indexes on app and artifact: the composite indexes below lead with them,
    # and every index is one more B-tree each capture and counter-point must update.
    app = models.ForeignKey(
        App, on_delete=models.PROTECT, related_name="restore_points", db_index=False
    )
    artifact = models.ForeignKey(
        Artifact, on_delete=models.PROTECT, related_name="points", db_index=False
    )
    kind = models.CharField(max_length=10, choices=KIND_CHOICES)
    previous_blob = BlobForeignKey(
        Blob,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="+",
        help_text="The replaced source; empty when not stored or when nothing existed.",
    )
    previous_sha256 = models.CharField(max_length=64, blank=True)
    previous_size = models.PositiveBigIntegerField(default=0)
    previous_existed = models.BooleanField()
    source_stored = models.BooleanField(
        help_text="False when the previous source was over the size cap and not kept."
    )
    new_sha256 = models.CharField(max_length=64, blank=True, help_text='"" when deleted.')
    requested_by = models.CharField(max_length=150, blank=True)
    written_by = models.CharField(
        max_length=400,
        blank=True,
        default="",
        db_default="",
        help_text="Who really wrote it (docs/api.md#turn-messages): user:<name>, token:<prefix>… "
        "of <user>, or command:<name>, beside the claimed requested_by.",
    )
    tool = models.CharField(max_length=200, blank=True)
    created_on = models.DateTimeField()
    lines_added = models.PositiveIntegerField(default=0)
    lines_removed = models.PositiveIntegerField(default=0)
    run_id = models.CharField(max_length=200, blank=True)
    turn_id = models.CharField(max_length=200, blank=True)
    name = models.CharField(max_length=200, blank=True)
    change_set = models.ForeignKey(ChangeSet, on_delete=models.PROTECT, related_name="points")
    pinned = models.BooleanField(
        default=False,
        help_text="Named, or in a named set or the release set: never pruned, not counted.",
    )

    class Meta:
        ordering = ["-created_on", "-id"]
        indexes = [
            # Also serves the turn lookup of grouping: it scans only the gap's time window of
            # one app (at most the retained points), so turn_id needs no index of its own.
            # Ascending like changeset_app_recent: captures append, queries read backwards.
            models.Index(fields=["app", "created_on"], name="point_app_recent"),
            # Retention counts and prunes capture points and counter-points apart
            # (docs/architecture.md#retention): neither kind's scan reads the other's entries.
            # Ending with the id, it gives the points in retention's order (newest first, ties by
            # id): the cut beyond the newest N is read off the index, with no sort.
            models.Index(
                fields=["app", "kind", "pinned", "created_on", "id"], name="point_app_retention"
            ),
            models.Index(fields=["artifact", "created_on"], name="point_artifact_time"),
        ]
        constraints = [
            models.CheckConstraint(
                condition=Q(kind__in=["capture", "counter"]), name="point_known_kind"
            ),
        ]

    def __str__(self) -> str:
        return self.id

    @property
    def previous_source(self) -> str | None:
        """The replaced source; "" when nothing existed; None when it was not stored."""
        if not self.previous_existed:
            return ""
        if self.previous_blob_id is None:
            return None
        return self.previous_blob.text  # type: ignore[union-attr]


class ReleaseMark(models.Model):
    """History of release marks: who marked or unmarked which set, and when."""

    MARK = "mark"
    UNMARK = "unmark"

    app = models.ForeignKey(App, on_delete=models.PROTECT, related_name="release_marks")
    change_set = models.ForeignKey(
        ChangeSet, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    change_set_ref = models.CharField(max_length=48, help_text="The set id, kept if pruned.")
    action = models.CharField(max_length=10, choices=[(MARK, "Marked"), (UNMARK, "Unmarked")])
    by = models.CharField(max_length=150)
    on = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-on", "-id"]

    def __str__(self) -> str:
        return f"{self.action} {self.change_set_ref}"


class SweepDebt(models.Model):
    """What retention left to settle for a point a pruner removed (both databases): the blob
    the point held, to sweep once nothing references it, and its change set, to remove once it
    has no point left.

    A pruner records a row per point it prunes instead of sweeping blobs and removing emptied
    sets one by one; once an app owes ``VERSIONS_SWEEP_BATCH`` rows, the next pruner settles
    them all (see ``versions.services.retention``). No keys to the blob or the set:
    another sweep may have taken the blob, a write may have referenced it again, a set may
    have been removed or joined again meanwhile, and the settling pruner checks each."""

    app = models.ForeignKey(App, on_delete=models.CASCADE, related_name="+", db_index=False)
    blob_id = BlobKeyField(blank=True, help_text='The sha256 of the blob owed ("": none).')
    change_set_id = models.CharField(
        max_length=48, blank=True, default="", help_text="The change set the point was in."
    )

    class Meta:
        indexes = [models.Index(fields=["app"], name="sweepdebt_app")]

    def __str__(self) -> str:
        return f"{self.blob_id or '-'} / {self.change_set_id or '-'} (app {self.app_id})"


class AgentToken(models.Model):
    """A bearer token for the agent API and MCP server, scoped to apps; stored hashed."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="agent_tokens"
    )
    apps = models.ManyToManyField(App, related_name="agent_tokens")
    key_hash = models.CharField(max_length=64, unique=True, help_text="sha256 of the token.")
    prefix = models.CharField(max_length=12, help_text="First characters, to recognise it.")
    label = models.CharField(max_length=200, blank=True)
    created_on = models.DateTimeField(auto_now_add=True)
    last_used_on = models.DateTimeField(
        null=True, blank=True, help_text="When the token last authenticated (to the minute)."
    )
    expires_on = models.DateTimeField(
        null=True,
        blank=True,
        help_text="After this the token authenticates nothing; empty for tokens made before "
        "tokens expired.",
    )
    revoked = models.BooleanField(default=False)
    can_promote = models.BooleanField(
        default=False, help_text="May promote to production and roll it back (--can-promote)."
    )

    class Meta:
        ordering = ["-created_on"]

    def __str__(self) -> str:
        return f"{self.prefix}… ({self.user})"

    def status(self, now: datetime | None = None) -> str:
        """``revoked``, ``expired`` or ``active``."""
        if self.revoked:
            return "revoked"
        if self.expires_on is not None and self.expires_on <= (now or timezone.now()):
            return "expired"
        return "active"


class AuditChainHead(models.Model):
    """The audit trail's latest event (one row): appending an event locks it, so two writers
    never chain onto the same ``prev_hash``, and ``verify_audit`` knows where the chain ends
    (a deleted latest event is found missing)."""

    id = models.PositiveSmallIntegerField(primary_key=True, default=1)
    seq = models.BigIntegerField(default=0, help_text="The latest event's number (0: none).")
    hash = models.CharField(max_length=64, default=GENESIS, help_text="The latest event's hash.")

    def __str__(self) -> str:
        return f"#{self.seq} {self.hash[:12]}"


def _check_deferred_constraints() -> None:
    """Run the foreign-key checks PostgreSQL defers to COMMIT now, before the chain's head is
    locked: a check at COMMIT may wait on a row another transaction holds while that one waits
    for the head (a deadlock). Afterwards the checks are deferred again, as Django declares
    them."""
    if connection.vendor == "postgresql":
        # Two statements, not one string: in a pipeline (rawsql.batch) each travels alone.
        rawsql.execute("SET CONSTRAINTS ALL IMMEDIATE", [])
        rawsql.execute("SET CONSTRAINTS ALL DEFERRED", [])


# The audit event's columns in the order the prepared INSERT takes them.
_AUDIT_COLUMNS = (
    "id",
    "seq",
    "app_id",
    "actor_kind",
    "actor_name",
    "actor_user_id",
    "actor_token_id",
    "action",
    "targets",
    "reason",
    "details",
    "address",
    "user_agent",
    "created_on",
    "prev_hash",
    "hash",
)


@functools.cache
def _audit_sql(vendor: str) -> dict[str, str]:
    """Appending's three statements for ``vendor``, built once (table names quoted, every value
    a parameter). SQLite's write transaction already excludes other writers: no row lock."""
    qn = connection.ops.quote_name
    head, events = qn(AuditChainHead._meta.db_table), qn(AuditEvent._meta.db_table)
    lock = " FOR UPDATE" if vendor == "postgresql" else ""
    columns = ", ".join(qn(c) for c in _AUDIT_COLUMNS)
    values = ", ".join(["%s"] * len(_AUDIT_COLUMNS))
    return {
        "head": f"SELECT seq, hash FROM {head} WHERE id = 1{lock}",  # noqa: S608
        "insert": f"INSERT INTO {events} ({columns}) VALUES ({values})",  # noqa: S608
        "move_head": f"UPDATE {head} SET seq = %s, hash = %s WHERE id = 1",  # noqa: S608
    }


class AuditEventQuerySet(models.QuerySet["AuditEvent"]):
    def append(
        self,
        *,
        action: str,
        actor_kind: str,
        actor_name: str,
        app: App | None = None,
        app_id: int | None = None,
        actor_user_id: int | None = None,
        actor_token_id: int | None = None,
        targets: Sequence[str] = (),
        reason: str = "",
        details: Mapping[str, Any] | None = None,
        address: str = "",
        user_agent: str = "",
    ) -> AuditEvent:
        """Append one event to the chain, in the caller's transaction (or one of its own): lock
        the chain's head, hash the event onto it, move the head. Three statements."""
        if app is not None:
            app_id, slug = app.pk, app.slug
        elif app_id is not None:
            slug = App.objects.values_list("slug", flat=True).get(pk=app_id)
        else:
            slug = None
        with transaction.atomic(savepoint=False):
            _check_deferred_constraints()
            statements = _audit_sql(connection.vendor)
            head = rawsql.execute(statements["head"], [], "one")
            if head is None:  # a new database (or one a test flushed): the head starts here
                latest = (
                    self.filter(origin_seq__isnull=True)
                    .order_by("-seq")
                    .values_list("seq", "hash")
                    .first()
                ) or (0, GENESIS)
                AuditChainHead.objects.get_or_create(
                    pk=1, defaults={"seq": latest[0], "hash": latest[1]}
                )
                head = rawsql.execute(statements["head"], [], "one")
            now = timezone.now()
            event = AuditEvent(
                id=event_id(datetime_to_ms(now)),
                seq=head[0] + 1,
                app_id=app_id,
                actor_kind=actor_kind,
                actor_name=actor_name[:200],
                actor_user_id=actor_user_id,
                actor_token_id=actor_token_id,
                action=action,
                targets=[str(t) for t in targets],
                reason=reason,
                details=dict(details or {}),
                address=(address or "")[:45],
                user_agent=(user_agent or "")[:300],
                created_on=now,
                prev_hash=head[1],
            )
            event.hash = event_hash(event.prev_hash, event.document(slug))
            # The statements the ORM would run, built once and run on the driver's cursor: an
            # action's own statements are few, and compiling these three (or passing them through
            # Django's cursor wrapper) cost as much as running them.
            ops = connection.ops
            rawsql.execute(
                statements["insert"],
                [
                    *(getattr(event, column) for column in _AUDIT_COLUMNS[:8]),
                    ops.adapt_json_value(event.targets, None),
                    event.reason,
                    ops.adapt_json_value(event.details, None),
                    event.address,
                    event.user_agent,
                    ops.adapt_datetimefield_value(now),
                    event.prev_hash,
                    event.hash,
                ],
            )
            rawsql.execute(statements["move_head"], [event.seq, event.hash])
            event._state.adding = False
            event._state.db = self.db
        return event

    def create(  # type: ignore[override]
        self,
        *,
        kind: str = "",
        by: str = "",
        change_set_ref: str = "",
        data: Mapping[str, Any] | None = None,
        **kwargs: Any,
    ) -> AuditEvent:
        """Events are only appended to the chain. The keywords of the audit log this trail
        replaced (``kind``, ``by``, ``change_set_ref``, ``data``) are read as ``action``, a
        command's name, ``targets`` and ``details``, for the callers still written that way;
        ``versions.services.record`` is the door for new ones."""
        if kind:
            kwargs.setdefault("action", kind)
        kwargs.setdefault("actor_kind", AuditEvent.COMMAND)
        kwargs.setdefault("actor_name", by)
        if change_set_ref:
            kwargs.setdefault("targets", [change_set_ref])
        if data is not None:
            kwargs.setdefault("details", data)
        return self.append(**kwargs)


class AuditEvent(models.Model):
    """One entry of the append-only audit trail: who did what to which targets, from where,
    and when, chained to the event before it.

    The recipe (:mod:`versions.audit_chain` implements it; ``manage.py verify_audit`` checks
    it): ``hash`` = lowercase hex sha256 of the ASCII ``prev_hash`` followed by the canonical
    JSON of the event, where ``prev_hash`` is the previous event's ``hash`` (64 zeros for the
    first) and the canonical JSON is the object ``{"action", "actor": {"kind", "name"},
    "address", "app" (slug or null), "created_on" ("YYYY-MM-DDTHH:MM:SS.ffffffZ", UTC),
    "details", "id", "reason", "seq", "targets", "user_agent"}`` dumped with keys sorted at
    every level, separators ``,`` and ``:`` (no spaces), non-ASCII as is, encoded as UTF-8.
    The links to the user and the token are not covered (they empty themselves on delete).

    Appended only through ``AuditEvent.objects.append`` (``versions.services.record``), which
    locks the one :class:`AuditChainHead` row; never updated or deleted. Agents' writes are
    not here: they are in restore points.
    """

    USER = "user"
    TOKEN = "token"
    COMMAND = "command"
    ACTOR_KINDS = [(USER, "User"), (TOKEN, "Agent token"), (COMMAND, "Command")]

    id = models.CharField(max_length=40, primary_key=True, help_text="ae_<ms base36>_<8 chars>.")
    seq = models.BigIntegerField(unique=True, help_text="Position in the chain, from 1.")
    app = models.ForeignKey(
        App,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="audit_events",
        db_index=False,
        help_text="The app acted on; empty for the instance (sign-in, tokens of several apps).",
    )
    actor_kind = models.CharField(max_length=10, choices=ACTOR_KINDS)
    actor_name = models.CharField(
        max_length=200,
        blank=True,
        help_text="The username, the token (prefix… of user) or the command.",
    )
    actor_user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        db_index=False,
        help_text="The person (a token's user); empty once deleted.",
    )
    actor_token = models.ForeignKey(
        AgentToken,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        db_index=False,
        help_text="The agent token that acted; empty once deleted.",
    )
    action = models.CharField(max_length=40, help_text="What happened: signed_in, member_added, …")
    targets = models.JSONField(default=list, blank=True, help_text="Ids of what it acted on.")
    reason = models.TextField(blank=True, help_text="Why, in the actor's words (if given).")
    details = models.JSONField(default=dict, blank=True, help_text="What changed (role, name…).")
    address = models.CharField(max_length=45, blank=True, help_text="The client's IP address.")
    user_agent = models.CharField(max_length=300, blank=True)
    created_on = models.DateTimeField()
    prev_hash = models.CharField(max_length=64, help_text="The hash of the event before.")
    hash = models.CharField(max_length=64)
    origin_seq = models.BigIntegerField(
        null=True,
        blank=True,
        help_text="For an event loaded with its app from another Versions (manage.py load_app): "
        "its number in the chain it was appended to there, which its hash covers (its ``seq`` "
        "here is negative, outside this instance's chain). Empty for this instance's events.",
    )
    origin_chain = models.CharField(
        max_length=64,
        blank=True,
        default="",
        db_default="",
        help_text="For a loaded event: the chain it was appended to (the hash of that chain's "
        "first event). Empty for this instance's events.",
    )

    objects = AuditEventQuerySet.as_manager()

    class Meta:
        ordering = ["-seq"]
        indexes = [
            models.Index(fields=["app", "-seq"], name="auditevent_app_recent"),
            models.Index(fields=["created_on"], name="auditevent_created"),
        ]

    def __str__(self) -> str:
        return f"#{self.seq} {self.action} by {self.actor_kind}:{self.actor_name}"

    @property
    def loaded(self) -> bool:
        """Loaded with its app from another Versions: it belongs to that instance's chain."""
        return self.origin_seq is not None

    @property
    def chain_seq(self) -> int:
        """The event's number in the chain its hash belongs to."""
        return self.origin_seq if self.origin_seq is not None else self.seq

    def document(self, app_slug: str | None) -> dict[str, Any]:
        """The event as the chain hashes it (``app_slug``: the slug of its app, or None)."""
        return event_document(
            id=self.id,
            seq=self.chain_seq,
            app=app_slug,
            actor_kind=self.actor_kind,
            actor_name=self.actor_name,
            action=self.action,
            targets=self.targets,
            reason=self.reason,
            details=self.details,
            address=self.address,
            user_agent=self.user_agent,
            created_on=self.created_on,
        )


class AppMembership(models.Model):
    """A user's or a group's role on one app (docs/architecture.md#access); each role includes the
    ones before it.

    Managed through :mod:`versions.services.members` (the panel's Members page and the admin),
    which keeps every change in the app's audit log.
    """

    VIEWER = "viewer"
    REVIEWER = "reviewer"
    RESTORER = "restorer"
    PROMOTER = "promoter"
    OWNER = "owner"
    ROLES = (VIEWER, REVIEWER, RESTORER, PROMOTER, OWNER)
    ROLE_CHOICES = [
        (VIEWER, "Viewer: reads the panel, diffs and previews"),
        (REVIEWER, "Reviewer: + names sets and marks the release"),
        (RESTORER, "Restorer: + Restore, Restore all, Revert, Restore to release"),
        (PROMOTER, "Promoter: + promotes and rolls back production"),
        (OWNER, "Owner: + manages the app's members and agent tokens"),
    ]

    app = models.ForeignKey(App, on_delete=models.CASCADE, related_name="memberships")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="app_memberships",
    )
    group = models.ForeignKey(
        "auth.Group",
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="app_memberships",
    )
    role = models.CharField(max_length=10, choices=ROLE_CHOICES)
    created_on = models.DateTimeField(auto_now_add=True)
    created_by = models.CharField(max_length=150, blank=True)

    class Meta:
        ordering = ["app", "-role", "pk"]
        constraints = [
            models.CheckConstraint(
                condition=Q(user__isnull=False, group__isnull=True)
                | Q(user__isnull=True, group__isnull=False),
                name="membership_user_or_group",
            ),
            models.UniqueConstraint(
                fields=["app", "user"], condition=Q(user__isnull=False), name="membership_user"
            ),
            models.UniqueConstraint(
                fields=["app", "group"], condition=Q(group__isnull=False), name="membership_group"
            ),
        ]
        indexes = [
            models.Index(fields=["user", "app"], name="membership_by_user"),
            models.Index(fields=["group", "app"], name="membership_by_group"),
        ]

    def __str__(self) -> str:
        return f"{self.user or self.group} {self.role} of {self.app}"

    @property
    def whom(self) -> str:
        """``user “alice”`` or ``group “marketing”``."""
        if self.user is not None:
            return f"user “{self.user.get_username()}”"
        assert self.group is not None  # a membership is a user's or a group's
        return f"group “{self.group.name}”"


class Deployment(models.Model):
    """An immutable snapshot of an app (docs/architecture.md#environments): per artifact, the blob
    of its source then, or absent (no entry). Entries reference blobs; promoting copies no source
    bytes."""

    id = models.CharField(max_length=40, primary_key=True, help_text="dp_<ms base36>_<8 chars>.")
    # No index of its own: deployment_app_recent leads with it.
    app = models.ForeignKey(
        App, on_delete=models.PROTECT, related_name="deployments", db_index=False
    )
    ref = models.CharField(
        max_length=48, help_text="The state promoted: draft, production, dp_…, cs_…, rs_… or rp_…."
    )
    source_set = models.CharField(
        max_length=48,
        blank=True,
        help_text="The change set whose state this is (for the draft: its newest set); kept as "
        "text, so a set pruned later still shows where the state came from.",
    )
    size = models.PositiveIntegerField(default=0, help_text="How many artifacts exist in it.")
    created_by = models.CharField(max_length=150, blank=True)
    created_on = models.DateTimeField()
    note = models.CharField(max_length=500, blank=True)
    checks = models.JSONField(
        default=list,
        blank=True,
        help_text="The checks run before it was promoted: [{name, ok, detail}] "
        "(docs/architecture.md#safe-promotion).",
    )

    class Meta:
        ordering = ["-created_on", "-id"]
        permissions = [("promote_deployment", "Can promote to production and roll it back")]
        indexes = [models.Index(fields=["app", "created_on"], name="deployment_app_recent")]

    def __str__(self) -> str:
        return self.id


class DeploymentEntry(models.Model):
    """One artifact of a deployment and the blob it holds there (absent artifacts have none)."""

    # No index of its own: deploymententry_unique leads with it.
    deployment = models.ForeignKey(
        Deployment, on_delete=models.PROTECT, related_name="entries", db_index=False
    )
    artifact = models.ForeignKey(
        Artifact, on_delete=models.PROTECT, related_name="+", db_index=False
    )
    # Indexed: the blob sweep asks whether any deployment still references a blob.
    blob = BlobForeignKey(Blob, on_delete=models.PROTECT, related_name="+")

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["deployment", "artifact"], name="deploymententry_unique"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.deployment_id}:{self.artifact_id}"


class DeploymentEvent(models.Model):
    """History of production: every promotion and rollback, who, when, note, from → to."""

    PROMOTION = "promotion"
    ROLLBACK = "rollback"
    # A gradual rollout (docs/architecture.md#safe-promotion): started, advanced, aborted; its
    # completion is a promotion. An automatic rollback is production's or a rollout's.
    ROLLOUT = "rollout"
    ADVANCE = "advance"
    ABORT = "abort"
    AUTO_ROLLBACK = "auto_rollback"
    KINDS = (PROMOTION, ROLLBACK, ROLLOUT, ADVANCE, ABORT, AUTO_ROLLBACK)
    KIND_CHOICES = [
        (PROMOTION, "Promotion"),
        (ROLLBACK, "Rollback"),
        (ROLLOUT, "Rollout started"),
        (ADVANCE, "Rollout advanced"),
        (ABORT, "Rollout aborted"),
        (AUTO_ROLLBACK, "Automatic rollback"),
    ]

    app = models.ForeignKey(App, on_delete=models.PROTECT, related_name="deployment_events")
    kind = models.CharField(max_length=16, choices=KIND_CHOICES)
    from_deployment = models.ForeignKey(
        Deployment,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="+",
        help_text="What production served before (empty: the draft, never promoted).",
    )
    to_deployment = models.ForeignKey(Deployment, on_delete=models.PROTECT, related_name="+")
    by = models.CharField(max_length=150, blank=True)
    on = models.DateTimeField()
    note = models.CharField(max_length=500, blank=True)
    unchanged = models.PositiveIntegerField(
        default=0, help_text="Artifacts that are the same on both sides of the move."
    )
    changes_of = models.ForeignKey(
        "self",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="+",
        help_text="The earlier move whose changes this one's are (see receipt).",
    )
    changes_inverted = models.BooleanField(
        default=False, help_text="This move's changes are those of changes_of, turned around."
    )
    # Last: SQLite keeps the columns after a long value behind its overflow pages, and the
    # rollback path reads the ones above without the receipt.
    receipt = models.JSONField(
        help_text="The receipt of docs/api.md#receipts. A rollback that reverses (or repeats) an "
        "earlier move leaves out its ``changed`` list: it is that move's (``changes_of``), read "
        "when the receipt is shown, so a rollback costs the same whatever it changes."
    )

    class Meta:
        ordering = ["-on", "-id"]
        constraints = [
            models.CheckConstraint(
                condition=Q(
                    kind__in=[
                        "promotion",
                        "rollback",
                        "rollout",
                        "advance",
                        "abort",
                        "auto_rollback",
                    ]
                ),
                name="deploymentevent_known_kind",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.kind} {self.from_deployment_id} → {self.to_deployment_id}"


class ReadingPreference(models.Model):
    """How a person reads comparisons (docs/architecture.md#reviewing): unified or split, kept
    across sign-ins.

    Written through :mod:`versions.services.reading` only; a person without a row reads unified.
    """

    UNIFIED = "unified"
    SPLIT = "split"
    LAYOUTS = (UNIFIED, SPLIT)
    LAYOUT_CHOICES = [(UNIFIED, "Unified: old and new lines in one column"), (SPLIT, "Split")]

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="reading_preference"
    )
    layout = models.CharField(max_length=8, choices=LAYOUT_CHOICES, default=UNIFIED)
    updated_on = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["user"]
        constraints = [
            models.CheckConstraint(
                condition=Q(layout__in=["unified", "split"]), name="readingpreference_known_layout"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.user} reads {self.layout}"


class ViewedMark(models.Model):
    """A file a person marked "Viewed" in a comparison (docs/architecture.md#reviewing), for exactly
    its two states.

    ``key`` is ``app:artifact:left sha256:right sha256``: when either side changes, the file is
    unread again. Each person keeps at most ``VIEWED_KEPT`` marks; the oldest go first.
    """

    VIEWED_KEPT = 2000
    KEY_MAX = 200

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="viewed_marks"
    )
    key = models.CharField(
        max_length=KEY_MAX, help_text="app id:artifact id:left sha256:right sha256 (empty: absent)."
    )
    marked_on = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["user", "-id"]
        constraints = [
            models.UniqueConstraint(fields=["user", "key"], name="viewedmark_once_per_user"),
        ]

    def __str__(self) -> str:
        return f"{self.user} viewed {self.key}"


class AppProtection(models.Model):
    """What promoting an app to production needs from its reviews
    (docs/architecture.md#protection); an app without a row keeps the defaults (no approvals
    required)."""

    MAX_APPROVALS = 5

    app = models.OneToOneField(
        App, on_delete=models.CASCADE, primary_key=True, related_name="protection"
    )
    required_approvals = models.PositiveSmallIntegerField(
        default=0,
        help_text="Approvals (0-5) each change set needs from people other than its authors "
        "before it may go to production; 0: no review is required.",
    )
    block_on_changes_requested = models.BooleanField(
        default=True, help_text="An open change request keeps the set out of production."
    )
    dismiss_stale = models.BooleanField(
        default=True, help_text="Approvals given before later writes joined the set do not count."
    )
    updated_on = models.DateTimeField(auto_now=True)
    updated_by = models.CharField(max_length=150, blank=True)

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=Q(required_approvals__lte=5), name="protection_approvals_0_5"
            ),
        ]

    def __str__(self) -> str:
        return f"protection of {self.app_id}"


class Review(models.Model):
    """A person's review of a change set as it was (its point ids then): an approval, a change
    request or a comment, with a Markdown body (docs/architecture.md#reviews)."""

    APPROVE = "approve"
    REQUEST_CHANGES = "request_changes"
    COMMENT = "comment"
    VERDICTS = (APPROVE, REQUEST_CHANGES, COMMENT)
    VERDICT_CHOICES = [
        (APPROVE, "Approve"),
        (REQUEST_CHANGES, "Request changes"),
        (COMMENT, "Comment"),
    ]
    BODY_MAX = 10_000

    id = models.CharField(max_length=40, primary_key=True, help_text="rv_<ms base36>_<8 chars>.")
    app = models.ForeignKey(App, on_delete=models.CASCADE, related_name="+", db_index=False)
    change_set = models.ForeignKey(ChangeSet, on_delete=models.CASCADE, related_name="reviews")
    author = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    author_name = models.CharField(max_length=150, help_text="The author's username then.")
    verdict = models.CharField(max_length=20, choices=VERDICT_CHOICES)
    body = models.TextField(blank=True, help_text="Markdown, at most 10,000 characters.")
    created_on = models.DateTimeField()
    points = models.JSONField(default=list, help_text="The set's point ids when reviewed.")

    class Meta:
        ordering = ["change_set", "created_on", "id"]
        indexes = [models.Index(fields=["app", "created_on"], name="review_app_recent")]
        constraints = [
            models.CheckConstraint(
                condition=Q(verdict__in=["approve", "request_changes", "comment"]),
                name="review_known_verdict",
            ),
        ]

    def __str__(self) -> str:
        return self.id


class Comment(models.Model):
    """A line comment on a change set's diff, anchored to (artifact, side, blob, line), or a
    reply in its thread (``thread`` set; no anchor of its own)."""

    BEFORE = "before"
    AFTER = "after"
    SIDE_CHOICES = [(BEFORE, "Before"), (AFTER, "After")]

    id = models.CharField(max_length=40, primary_key=True, help_text="cm_<ms base36>_<8 chars>.")
    app = models.ForeignKey(App, on_delete=models.CASCADE, related_name="+", db_index=False)
    change_set = models.ForeignKey(ChangeSet, on_delete=models.CASCADE, related_name="comments")
    thread = models.ForeignKey(
        "self",
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="replies",
        help_text="The thread's first comment, for a reply.",
    )
    artifact = models.ForeignKey(
        Artifact, null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )
    side = models.CharField(max_length=6, choices=SIDE_CHOICES, blank=True)
    blob_sha256 = models.CharField(max_length=64, blank=True, help_text='"" for an absent side.')
    line = models.PositiveIntegerField(null=True, blank=True, help_text="1-based.")
    line_text = models.TextField(blank=True, help_text="The anchored line as it read then.")
    author = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    author_name = models.CharField(max_length=400, help_text="user:<name> or token:<prefix>… of …")
    by_agent = models.BooleanField(default=False, help_text="Written through an agent token.")
    body = models.TextField(help_text="Markdown, at most 10,000 characters.")
    created_on = models.DateTimeField()
    resolved = models.BooleanField(default=False)
    resolved_by = models.CharField(max_length=150, blank=True)
    resolved_on = models.DateTimeField(null=True, blank=True)
    addressed_in = models.CharField(
        max_length=40,
        blank=True,
        help_text="The restore point of the latest write that said it answers this thread "
        '(addresses: ["cm_…"]); a person still resolves it.',
    )

    class Meta:
        ordering = ["created_on", "id"]
        constraints = [
            models.CheckConstraint(
                condition=Q(thread__isnull=False)
                | (Q(artifact__isnull=False) & Q(side__in=["before", "after"]) & Q(line__gte=1)),
                name="comment_anchored_or_reply",
            ),
        ]

    def __str__(self) -> str:
        return self.id


class Webhook(models.Model):
    """An app's webhook (docs/architecture.md#notifications): the events it takes are POSTed,
    signed with its secret, to its URL by the worker. Managed by the app's owners."""

    URL_MAX = 2000

    id = models.CharField(max_length=40, primary_key=True, help_text="wh_<ms base36>_<8 chars>.")
    app = models.ForeignKey(App, on_delete=models.CASCADE, related_name="webhooks")
    url = models.CharField(max_length=URL_MAX, help_text="Where the events are POSTed.")
    secret = models.CharField(max_length=200, help_text="Signs each body (HMAC-SHA256).")
    events = models.CharField(
        max_length=400,
        help_text="The event names it takes, comma-separated and framed by commas (,a,b,).",
    )
    active = models.BooleanField(default=True)
    created_by = models.CharField(max_length=150, blank=True)
    created_on = models.DateTimeField()
    failing_since = models.DateTimeField(
        null=True, blank=True, help_text="Its first failed delivery since its last success."
    )
    disabled_reason = models.CharField(max_length=400, blank=True)

    class Meta:
        ordering = ["app", "created_on", "id"]
        indexes = [models.Index(fields=["app", "active"], name="webhook_app_active")]

    def __str__(self) -> str:
        return self.id

    @property
    def event_list(self) -> list[str]:
        return [name for name in self.events.split(",") if name]


class EmailSubscription(models.Model):
    """A member's choice of an app's events to hear of by email."""

    app = models.ForeignKey(App, on_delete=models.CASCADE, related_name="+")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    events = models.CharField(max_length=400, help_text="As Webhook.events: ,a,b,")

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["app", "user"], name="email_subscription_once")
        ]

    def __str__(self) -> str:
        return f"{self.user_id} on {self.app_id}"

    @property
    def event_list(self) -> list[str]:
        return [name for name in self.events.split(",") if name]


class WebhookEvent(models.Model):
    """Something that happened to an app, stored in the transaction of the change it reports
    (only when a webhook or a member's email takes its type); sent after commit."""

    id = models.CharField(max_length=40, primary_key=True, help_text="evt_<ms base36>_<8 chars>.")
    app = models.ForeignKey(App, on_delete=models.CASCADE, related_name="+", db_index=False)
    type = models.CharField(max_length=40)
    created_on = models.DateTimeField()
    data = models.JSONField(default=dict)
    fanned_out = models.BooleanField(
        default=False, help_text="Its deliveries (one per webhook taking it) exist."
    )

    class Meta:
        ordering = ["created_on", "id"]
        # No index of all an app's events: nothing reads them by app but its fan-out, which
        # reads only the waiting ones; each index is one more B-tree every event's write updates.
        indexes = [
            # The events not fanned out yet (a few at any time): an app's, oldest first, for
            # its fan-out task; all of them, for the rescue of the late ones.
            models.Index(
                fields=["app", "created_on"],
                condition=models.Q(fanned_out=False),
                name="webhook_event_waiting",
            ),
        ]

    def __str__(self) -> str:
        return self.id


class FanOutPending(models.Model):
    """An app whose events wait for a fan-out task that has not started yet
    (docs/architecture.md#notifications): the first event after the worker took the last
    mark makes the mark and the app's one task (``fan_out_app``); the events after it, while
    the mark stands, make neither. The task deletes the mark before it reads the events."""

    app = models.OneToOneField(App, on_delete=models.CASCADE, primary_key=True, related_name="+")
    since = models.DateTimeField(
        help_text="When its task was queued: a mark older than a minute is renewed with a new "
        "task (its task was lost)."
    )

    def __str__(self) -> str:
        return f"fan-out of {self.app_id} queued {self.since}"


class WebhookDelivery(models.Model):
    """One event to one webhook, tried until it is answered 2xx or its time runs out."""

    PENDING = "pending"
    DELIVERED = "delivered"
    FAILED = "failed"
    STATES = [(PENDING, "Pending"), (DELIVERED, "Delivered"), (FAILED, "Failed")]

    id = models.CharField(max_length=40, primary_key=True, help_text="dlv_<ms base36>_<8 chars>.")
    webhook = models.ForeignKey(Webhook, on_delete=models.CASCADE, related_name="deliveries")
    event = models.ForeignKey(WebhookEvent, on_delete=models.CASCADE, related_name="deliveries")
    state = models.CharField(max_length=10, choices=STATES, default=PENDING)
    attempts = models.PositiveIntegerField(default=0)
    created_on = models.DateTimeField()
    next_attempt_on = models.DateTimeField()
    lease_until = models.DateTimeField(
        null=True, blank=True, help_text="A worker is sending it until then."
    )
    redelivery_of = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        ordering = ["-created_on", "id"]
        indexes = [
            models.Index(fields=["webhook", "-created_on"], name="delivery_by_webhook"),
            models.Index(fields=["state", "next_attempt_on"], name="delivery_due"),
        ]

    def __str__(self) -> str:
        return self.id


class DeliveryAttempt(models.Model):
    """One try of a delivery, as its log shows it: when, the answer's status, how long it
    took, the first 1 KB of what it said (or why there was no answer)."""

    EXCERPT_MAX = 1024

    delivery = models.ForeignKey(WebhookDelivery, on_delete=models.CASCADE, related_name="tries")
    attempted_on = models.DateTimeField()
    status_code = models.PositiveSmallIntegerField(null=True, blank=True)
    duration_ms = models.PositiveIntegerField(default=0)
    response_excerpt = models.TextField(blank=True)
    error = models.CharField(max_length=400, blank=True)

    class Meta:
        ordering = ["delivery", "attempted_on", "id"]

    def __str__(self) -> str:
        return f"{self.delivery_id} at {self.attempted_on}"


# --------------------------------------------------------------------------------------------
# Safe promotion (docs/architecture.md#safe-promotion)
# --------------------------------------------------------------------------------------------


class AppCheck(models.Model):
    """An HTTP check an app's owners define: a request to a state's preview, in-process, and
    the answer it must give. Run before every promotion and while production is watched."""

    GET = "GET"
    HEAD = "HEAD"
    METHOD_CHOICES = [(GET, "GET"), (HEAD, "HEAD")]
    MAX_PER_APP = 20

    app = models.ForeignKey(App, on_delete=models.CASCADE, related_name="checks")
    name = models.CharField(max_length=80)
    method = models.CharField(max_length=4, choices=METHOD_CHOICES, default=GET)
    path = models.CharField(
        max_length=300, help_text="Below the app's root: /, /p/<page>, /assets/… or /api/…."
    )
    expect_status = models.PositiveSmallIntegerField(default=200)
    expect_text = models.CharField(
        max_length=200, blank=True, help_text="Text the answer must contain (empty: any)."
    )
    created_by = models.CharField(max_length=150, blank=True)
    created_on = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["app", "name"]
        constraints = [
            models.UniqueConstraint(fields=["app", "name"], name="appcheck_unique_name"),
            models.CheckConstraint(
                condition=Q(method__in=["GET", "HEAD"]), name="appcheck_known_method"
            ),
            models.CheckConstraint(
                condition=Q(expect_status__gte=100, expect_status__lte=599),
                name="appcheck_status_100_599",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.app_id}:{self.name}"


class PromotionPolicy(models.Model):
    """An app's watch settings and its production freeze; an app without a row keeps the
    defaults (5 % errors over 10 minutes, not frozen)."""

    app = models.OneToOneField(
        App, on_delete=models.CASCADE, primary_key=True, related_name="promotion_policy"
    )
    rollback_error_rate = models.PositiveSmallIntegerField(
        default=5, help_text="Percent of answers (5xx or not found) that rolls a candidate back."
    )
    watch_minutes = models.PositiveSmallIntegerField(
        default=10, help_text="How long after a promotion production's answers are watched."
    )
    frozen_on = models.DateTimeField(null=True, blank=True, help_text="Empty: not frozen.")
    frozen_until = models.DateTimeField(
        null=True, blank=True, help_text="When the freeze ends by itself (empty: at Unfreeze)."
    )
    frozen_by = models.CharField(max_length=150, blank=True)
    frozen_reason = models.CharField(max_length=500, blank=True)

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=Q(rollback_error_rate__gte=1, rollback_error_rate__lte=100),
                name="promotionpolicy_rate_1_100",
            ),
        ]

    def __str__(self) -> str:
        return f"promotion policy of {self.app_id}"


class DeploymentWatch(models.Model):
    """The live app's count of a deployment's answers while it is watched (production after a
    promotion, a rollout's candidate): how many, and how many were errors."""

    deployment = models.OneToOneField(
        Deployment, on_delete=models.CASCADE, primary_key=True, related_name="watch"
    )
    app = models.ForeignKey(App, on_delete=models.CASCADE, related_name="+")
    started_on = models.DateTimeField()
    requests = models.PositiveIntegerField(default=0)
    errors = models.PositiveIntegerField(default=0)
    ended_on = models.DateTimeField(null=True, blank=True)
    outcome = models.CharField(max_length=200, blank=True)

    def __str__(self) -> str:
        return f"watch of {self.deployment_id}"


class ScheduledPromotion(models.Model):
    """A promotion to run at a time, of a state fixed when it was scheduled (its sha256 map):
    at that moment it goes through the same pre-flight as any promotion."""

    SCHEDULED = "scheduled"
    RUNNING = "running"
    PROMOTED = "promoted"
    REFUSED = "refused"
    CANCELLED = "cancelled"
    STATUS_CHOICES = [
        (SCHEDULED, "Scheduled"),
        (RUNNING, "Running"),
        (PROMOTED, "Promoted"),
        (REFUSED, "Refused"),
        (CANCELLED, "Cancelled"),
    ]

    id = models.CharField(max_length=40, primary_key=True, help_text="sp_<ms base36>_<8 chars>.")
    app = models.ForeignKey(App, on_delete=models.CASCADE, related_name="scheduled_promotions")
    ref = models.CharField(max_length=48)
    at = models.DateTimeField()
    state = models.JSONField(help_text='The state as scheduled: {"collection/name": sha256}.')
    note = models.CharField(max_length=500, blank=True)
    created_by = models.CharField(max_length=150, blank=True)
    created_on = models.DateTimeField()
    status = models.CharField(max_length=10, choices=STATUS_CHOICES, default=SCHEDULED)
    ran_on = models.DateTimeField(null=True, blank=True)
    result = models.JSONField(null=True, blank=True, help_text="The receipt when it ran.")

    class Meta:
        ordering = ["at", "id"]
        indexes = [models.Index(fields=["status", "at"], name="scheduled_due")]

    def __str__(self) -> str:
        return self.id


class ArtifactLock(models.Model):
    """An artifact agents may not write (an owner locked it); people's restores still work."""

    app = models.ForeignKey(App, on_delete=models.CASCADE, related_name="locks")
    collection = models.CharField(max_length=32)
    name = models.CharField(max_length=200)
    reason = models.CharField(max_length=500, blank=True)
    locked_by = models.CharField(max_length=150, blank=True)
    locked_on = models.DateTimeField()

    class Meta:
        ordering = ["app", "collection", "name"]
        constraints = [
            models.UniqueConstraint(
                fields=["app", "collection", "name"], name="artifactlock_unique"
            ),
        ]

    def __str__(self) -> str:
        return f"lock of {self.collection}/{self.name}"


class RolloutVisitor(models.Model):
    """Which deployment a visitor was drawn onto during a rollout, by a fingerprint of their
    address and user agent: the sandboxed page's own requests (``fetch``, modules) carry no
    cookie, so they find the visitor's draw here (docs/architecture.md#safe-promotion)."""

    app = models.ForeignKey(App, on_delete=models.CASCADE, related_name="+")
    candidate = models.CharField(max_length=40, help_text="The rollout's candidate then.")
    fingerprint = models.CharField(max_length=64)
    deployment = models.CharField(max_length=40)
    created_on = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["app", "candidate", "fingerprint"], name="rolloutvisitor_once"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.fingerprint[:8]} on {self.deployment}"


class ReplicaPin(models.Model):
    """Until when a person's or a token's reads go to the primary, after a write
    (docs/operations.md#read-replicas): their next pages show what they just did even where a
    replica has not replayed it yet. One row per person or token, moved on at every write."""

    key = models.CharField(
        max_length=80, primary_key=True, help_text="u:<user id> or t:<sha256 of the token>."
    )
    until = models.DateTimeField()

    def __str__(self) -> str:
        return f"{self.key} until {self.until:%H:%M:%S}"
