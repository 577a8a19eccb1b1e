"""Versions data model: apps, artifacts, content-addressed blobs, restore points, change sets,
deployments.

Sources live once, in :class:`Blob`, keyed by the sha256 of their UTF-8 bytes (SPEC §11). An
artifact references the blob of its current source and a restore point the blob of the source
it replaced, so a capture only references bytes that are already stored and a restore only
re-points.
"""

from __future__ import annotations

import zlib

from django.conf import settings
from django.db import models
from django.db.models import Q

# Collections of an app's artifacts (SPEC §2).
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

# Blobs larger than this are stored zlib-compressed; reading still takes one query.
COMPRESS_OVER_BYTES = 256 * 1024


class Blob(models.Model):
    """One source text, stored once, keyed by the sha256 of its UTF-8 bytes."""

    sha256 = models.CharField(
        max_length=64, primary_key=True, help_text="Hex sha256 of the UTF-8 bytes."
    )
    data = models.BinaryField(help_text="UTF-8 bytes, zlib-compressed when `compressed`.")
    size = models.PositiveBigIntegerField(help_text="Length of the UTF-8 bytes.")
    chars = models.PositiveBigIntegerField(help_text="Length of the text in characters.")
    compressed = models.BooleanField(default=False)
    created_on = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_on"]
        indexes = [
            # Covers the size and length lookups of a restore, so they never read the bytes
            # (SQLite keeps columns after ``data`` behind its overflow pages).
            models.Index(fields=["sha256", "size", "chars"], name="blob_meta"),
        ]

    def __str__(self) -> str:
        return f"{self.sha256[:12]} ({self.size} bytes)"

    @property
    def raw(self) -> bytes:
        """The stored UTF-8 bytes, decompressed."""
        data = bytes(self.data)
        return zlib.decompress(data) if self.compressed else data

    @property
    def text(self) -> str:
        """The stored source as text."""
        return self.raw.decode("utf-8")

    @staticmethod
    def pack(raw: bytes) -> tuple[bytes, bool]:
        """The bytes to store for ``raw`` and whether they are compressed."""
        if len(raw) > COMPRESS_OVER_BYTES:
            packed = zlib.compress(raw, 1)
            if len(packed) < len(raw):
                return packed, True
        return raw, False


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
    created_on = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["slug"]
        constraints = [
            models.CheckConstraint(
                condition=Q(slug__regex=r"^[a-z0-9-]{1,50}$"), name="app_slug_format"
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
    blob = models.ForeignKey(
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


class ChangeSetQuerySet(models.QuerySet["ChangeSet"]):
    def for_app(self, app: App) -> ChangeSetQuerySet:
        return self.filter(app=app)


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

    objects = ChangeSetQuerySet.as_manager()

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
        ]
        constraints = [
            models.UniqueConstraint(
                fields=["app", "run_id"],
                condition=Q(kind="change") & ~Q(run_id=""),
                name="changeset_one_per_run",
            ),
        ]

    def __str__(self) -> str:
        return self.id


class RestorePointQuerySet(models.QuerySet["RestorePoint"]):
    def unpinned(self) -> RestorePointQuerySet:
        return self.filter(pinned=False)


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
    previous_blob = models.ForeignKey(
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

    objects = RestorePointQuerySet.as_manager()

    class Meta:
        ordering = ["-created_on", "-id"]
        indexes = [
            # Also serves the turn lookup of grouping: it scans only the gap's time window of
            # one app (at most the retained points), so turn_id needs no index of its own.
            # Ascending like changeset_app_recent: captures append, queries read backwards.
            models.Index(fields=["app", "created_on"], name="point_app_recent"),
            models.Index(fields=["app", "pinned", "created_on"], name="point_app_retention"),
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


class AuditEvent(models.Model):
    """Things worth a paper trail that are not writes: refused pre-flights, names, marks."""

    app = models.ForeignKey(App, on_delete=models.PROTECT, related_name="audit_events")
    kind = models.CharField(max_length=40)
    by = models.CharField(max_length=150, blank=True)
    on = models.DateTimeField(auto_now_add=True)
    change_set_ref = models.CharField(max_length=48, blank=True)
    data = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["-on", "-id"]
        indexes = [models.Index(fields=["app", "-on"], name="audit_app_recent")]

    def __str__(self) -> str:
        return f"{self.kind} {self.change_set_ref}"


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
    last_used_on = models.DateTimeField(null=True, blank=True)
    revoked = models.BooleanField(default=False)
    can_promote = models.BooleanField(
        default=False, help_text="May promote to production and roll it back (--can-promote)."
    )

    class Meta:
        ordering = ["-created_on"]

    def __str__(self) -> str:
        return f"{self.prefix}… ({self.user})"


class Deployment(models.Model):
    """An immutable snapshot of an app (SPEC §13): per artifact, the blob of its source then,
    or absent (no entry). Entries reference blobs; promoting copies no source bytes."""

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
    blob = models.ForeignKey(Blob, on_delete=models.PROTECT, related_name="+")

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
    KIND_CHOICES = [(PROMOTION, "Promotion"), (ROLLBACK, "Rollback")]

    app = models.ForeignKey(App, on_delete=models.PROTECT, related_name="deployment_events")
    kind = models.CharField(max_length=10, choices=KIND_CHOICES)
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
        help_text="The receipt of SPEC §13. A rollback that reverses (or repeats) an earlier "
        "move leaves out its ``changed`` list: it is that move's (``changes_of``), read when "
        "the receipt is shown, so a rollback costs the same whatever it changes."
    )

    class Meta:
        ordering = ["-on", "-id"]
        constraints = [
            models.CheckConstraint(
                condition=Q(kind__in=["promotion", "rollback"]), name="deploymentevent_known_kind"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.kind} {self.from_deployment_id} → {self.to_deployment_id}"
