"""Portable backups of one app (docs/operations.md#dump-load): ``dump_app`` writes its whole
history to one archive, ``load_app`` puts it into another Versions, ids kept, in one
transaction.

The archive is a zstd frame (with its checksum) of JSON lines: a header (format, version, the
app's slug, the source's chain head), then one line per row — blobs as stored (the bytes, the
compression, the delta base, never re-encoded), the app, artifacts, change sets, restore
points, release marks, deployments with their entries and events, retention's owed sweeps,
reviews and line comments (their authors by username), the app's protection, HTTP checks,
watch and freeze, and locked artifacts, memberships (by username or group name) and the app's
audit events — and an end line with the count of rows and the sha256 of every line before it,
so a damaged or truncated archive is refused.

Audit events keep their ids and hashes: they belong to the source's chain, not this one. They
are stored with ``origin_seq`` (their number there) and a negative ``seq`` outside this chain,
and the ``app_loaded`` event appended to this chain carries their digest, which
``verify_audit`` checks them against.
"""

from __future__ import annotations

import base64
import hashlib
import itertools
import json
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import zstandard
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.management.color import no_style
from django.db import IntegrityError, connection, models, transaction
from django.db.models import Min
from django.utils import timezone

from versions import selectors
from versions.errors import Conflict, Forbidden, InvalidInput
from versions.messages import LOAD_ID_TAKEN, LOAD_SLUG_EXISTS, LOAD_UNKNOWN_VERSION, NO_NEW_APPS
from versions.models import (
    App,
    AppCheck,
    AppMembership,
    AppProtection,
    Artifact,
    ArtifactLock,
    AuditChainHead,
    AuditEvent,
    Blob,
    ChangeSet,
    Comment,
    Deployment,
    DeploymentEntry,
    DeploymentEvent,
    PromotionPolicy,
    ReleaseMark,
    RestorePoint,
    Review,
    SweepDebt,
)
from versions.services.access import ROLE_FOR, Actor, app_for
from versions.services.audit import Command, record
from versions.services.validation import check_new_app_slug
from versions.terms import APP_DUMPED, APP_LOADED, MANAGE

FORMAT = "versions-app"
VERSION = 1

LOAD_NOT_ARCHIVE = "{file} is not a Versions app archive ({why}); nothing was loaded."
LOAD_DAMAGED = "{file} is damaged or cut short ({why}); nothing was loaded."
LOAD_CHAIN_BROKEN = "The archive's audit events do not verify: {problem} Nothing was loaded."
LOAD_DOES_NOT_FIT = "The archive does not fit this database ({why}); nothing was loaded."

# The rows of an archive, in the order they are written and loaded (a row's references come
# before it, except the app's release set and production, which the database checks at commit).
_BLOB, _APP, _AUDIT, _MEMBER = "blob", "app", "audit_event", "membership"
_TABLES: dict[str, type[models.Model]] = {
    _BLOB: Blob,
    _APP: App,
    "artifact": Artifact,
    "change_set": ChangeSet,
    "restore_point": RestorePoint,
    "release_mark": ReleaseMark,
    "deployment": Deployment,
    "deployment_entry": DeploymentEntry,
    "deployment_event": DeploymentEvent,
    "sweep_debt": SweepDebt,
    "review": Review,
    "comment": Comment,
    "protection": AppProtection,
    "check": AppCheck,
    "promotion_policy": PromotionPolicy,
    "lock": ArtifactLock,
}
# Kept with their ids (a receipt, a target or a thread names them; the app's own settings rows
# are keyed by the app); the others get this database's.
_KEEP_IDS = (
    "app",
    "artifact",
    "change_set",
    "restore_point",
    "release_mark",
    "deployment",
    "deployment_entry",
    "deployment_event",
    "review",
    "comment",
    "protection",
    "promotion_policy",
)
# Rows naming a person by this database's user id: the archive names them by username, and a
# load finds that user there (or none; the author's name stays on the row as written).
_BY_USER = ("review", "comment")
_CHUNK = 500


@dataclass(frozen=True)
class PortableReport:
    """What a dump wrote or a load put in: the app, the archive and the rows of each kind."""

    slug: str
    path: str
    sha256: str
    rows: dict[str, int] = field(default_factory=dict)
    event_id: str = ""


# Writing


def _encode(fields: list[models.Field[Any, Any]], row: dict[str, Any]) -> dict[str, Any]:
    out = {}
    for f in fields:
        value = row[f.attname]
        if value is not None and isinstance(f, models.BinaryField):
            value = base64.b64encode(bytes(value)).decode("ascii")
        elif isinstance(value, datetime):
            value = value.isoformat()
        out[f.attname] = value
    return out


def _fields(model: type[models.Model]) -> list[models.Field[Any, Any]]:
    return list(model._meta.concrete_fields)


def _rows(model: type[models.Model], query: models.QuerySet[Any]) -> Iterator[dict[str, Any]]:
    fields = _fields(model)
    names = [f.attname for f in fields]
    for row in query.order_by("pk").values(*names).iterator(chunk_size=_CHUNK):
        yield _encode(fields, row)


def _chunks(items: list[Any]) -> Iterator[list[Any]]:
    for start in range(0, len(items), _CHUNK):
        yield items[start : start + _CHUNK]


def _usernames() -> dict[Any, str]:
    """Each user's username by id: an archive names people by username, never by this
    database's ids."""
    users = get_user_model()
    return dict(users.objects.values_list("pk", users.USERNAME_FIELD))


def _user_ids() -> dict[str, Any]:
    """Each user's id by username: a load finds an archive's people here by name."""
    return {name: pk for pk, name in _usernames().items()}


def _blob_rows(app: App) -> Iterator[dict[str, Any]]:
    """The blobs the app references, with the full copies its deltas need (full copies first)."""
    wanted = set(
        Artifact.objects.filter(app=app, blob__isnull=False).values_list("blob_id", flat=True)
    )
    wanted |= set(
        RestorePoint.objects.filter(app=app, previous_blob__isnull=False).values_list(
            "previous_blob_id", flat=True
        )
    )
    wanted |= set(
        DeploymentEntry.objects.filter(deployment__app=app).values_list("blob_id", flat=True)
    )
    bases: set[str] = set()
    for chunk in _chunks(sorted(wanted)):
        found = Blob.objects.filter(sha256__in=chunk, base__isnull=False)
        bases |= set(found.values_list("base_id", flat=True))
    ordered = sorted(bases) + sorted(wanted - bases)
    full_first = {sha: 0 if sha in bases else 1 for sha in ordered}
    rows: list[dict[str, Any]] = []
    for chunk in _chunks(ordered):
        rows.extend(_rows(Blob, Blob.objects.filter(sha256__in=chunk)))
    rows.sort(key=lambda r: (full_first[r["sha256"]], r["base_id"] is not None, r["sha256"]))
    yield from rows


def _chain_id() -> str:
    """This instance's chain: the hash of its first event ("" before there is one)."""
    first = AuditEvent.objects.filter(origin_seq__isnull=True, seq=1).values_list("hash")
    return next(iter(first), ("",))[0]


def _audit_rows(app: App, chain: str) -> Iterator[dict[str, Any]]:
    usernames = _usernames()
    events = AuditEvent.objects.filter(app=app).order_by("seq")
    for event in events.iterator(chunk_size=_CHUNK):
        yield {
            "id": event.id,
            "chain": event.origin_chain if event.loaded else chain,
            "chain_seq": event.chain_seq,
            "actor_kind": event.actor_kind,
            "actor_name": event.actor_name,
            "actor_user": usernames.get(event.actor_user_id),
            "action": event.action,
            "targets": event.targets,
            "reason": event.reason,
            "details": event.details,
            "address": event.address,
            "user_agent": event.user_agent,
            "created_on": event.created_on.isoformat(),
            "prev_hash": event.prev_hash,
            "hash": event.hash,
        }


def _member_rows(app: App) -> Iterator[dict[str, Any]]:
    rows = AppMembership.objects.filter(app=app).select_related("user", "group").order_by("pk")
    for m in rows:
        yield {
            "user": m.user.get_username() if m.user is not None else None,
            "group": m.group.name if m.group is not None else None,
            "role": m.role,
            "created_on": m.created_on.isoformat(),
            "created_by": m.created_by,
        }


def _archive_lines(app: App) -> Iterator[tuple[str, dict[str, Any]]]:
    by_app = {
        "artifact": Artifact.objects.filter(app=app),
        "change_set": ChangeSet.objects.filter(app=app),
        "restore_point": RestorePoint.objects.filter(app=app),
        "release_mark": ReleaseMark.objects.filter(app=app),
        "deployment": Deployment.objects.filter(app=app),
        "deployment_entry": DeploymentEntry.objects.filter(deployment__app=app),
        "deployment_event": DeploymentEvent.objects.filter(app=app),
        "sweep_debt": SweepDebt.objects.filter(app=app),
        "review": Review.objects.filter(app=app),
        "comment": Comment.objects.filter(app=app),
        "protection": AppProtection.objects.filter(app=app),
        "check": AppCheck.objects.filter(app=app),
        "promotion_policy": PromotionPolicy.objects.filter(app=app),
        "lock": ArtifactLock.objects.filter(app=app),
    }
    usernames = _usernames()
    for row in _rows(App, App.objects.filter(pk=app.pk)):
        yield _APP, row
    for kind, query in by_app.items():
        for row in _rows(_TABLES[kind], query):
            if kind in _BY_USER:
                row["author"] = usernames.get(row.pop("author_id"))
            yield kind, row
    for row in _member_rows(app):
        yield _MEMBER, row


def dump_app(
    app: App | str, path: str | os.PathLike[str], *, actor: Actor | None = None
) -> PortableReport:
    """Write ``app``'s whole history to the archive ``path`` (replaced whole, or not at all)
    and record it in the audit trail. ``actor`` must manage the app (None: a trusted command)."""
    found = app_for(app, actor=actor, action=MANAGE)
    target = Path(path)
    partial = target.with_name(target.name + ".part")
    digest = hashlib.sha256()
    rows: dict[str, int] = {}
    outer = connection.in_atomic_block  # a caller's transaction: its snapshot is the one read
    with transaction.atomic():
        if connection.vendor == "postgresql" and not outer:
            with connection.cursor() as cursor:  # one snapshot for every table
                cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
        head = AuditChainHead.objects.filter(pk=1).values_list("seq", "hash").first() or (0, "")
        chain = _chain_id()
        header = {
            "format": FORMAT,
            "version": VERSION,
            "app": found.slug,
            "dumped_on": timezone.now().isoformat(),
            "source_chain": chain,
            "source_head": {"seq": head[0], "hash": head[1]},
        }
        compressor = zstandard.ZstdCompressor(level=3, write_checksum=True)
        try:
            with open(partial, "wb") as raw, compressor.stream_writer(raw) as out:

                def put(document: dict[str, Any]) -> None:
                    line = json.dumps(document, ensure_ascii=False, sort_keys=True).encode()
                    line += b"\n"
                    digest.update(line)
                    out.write(line)

                put(header)
                sections: Iterable[tuple[str, dict[str, Any]]] = itertools.chain(
                    ((_BLOB, r) for r in _blob_rows(found)),
                    _archive_lines(found),
                    ((_AUDIT, r) for r in _audit_rows(found, chain)),
                )
                for kind, row in sections:
                    rows[kind] = rows.get(kind, 0) + 1
                    put({"kind": kind, "row": row})
                put({"kind": "end", "rows": sum(rows.values()), "sha256": digest.hexdigest()})
            os.replace(partial, target)
        finally:
            partial.unlink(missing_ok=True)
    archive_sha = hashlib.sha256(target.read_bytes()).hexdigest()
    with transaction.atomic():
        event = record(
            APP_DUMPED,
            actor=actor or Command("dump_app"),
            app=found,
            targets=[found.slug],
            details={
                "file": target.name,
                "sha256": archive_sha,
                "rows": rows,
                "head": header["source_head"],
            },
        )
    return PortableReport(found.slug, str(target), archive_sha, rows, event.id)


# Reading


@dataclass
class _Archive:
    header: dict[str, Any]
    rows: dict[str, list[dict[str, Any]]]
    sha256: str


def _read(path: Path) -> _Archive:
    name = path.name
    try:
        packed = path.read_bytes()
    except OSError as exc:
        raise InvalidInput(LOAD_NOT_ARCHIVE.format(file=name, why=exc.strerror or exc)) from None
    if not packed.startswith(b"\x28\xb5\x2f\xfd"):
        raise InvalidInput(LOAD_NOT_ARCHIVE.format(file=name, why="not a zstd frame"))
    unpacker = zstandard.ZstdDecompressor().decompressobj()
    try:
        text = unpacker.decompress(packed)
    except zstandard.ZstdError as exc:
        raise InvalidInput(LOAD_DAMAGED.format(file=name, why=exc)) from None
    if not unpacker.eof:
        raise InvalidInput(LOAD_DAMAGED.format(file=name, why="its compressed frame ends early"))
    lines = text.split(b"\n")
    try:
        header = json.loads(lines[0])
    except (UnicodeDecodeError, ValueError):
        header = None
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        raise InvalidInput(LOAD_NOT_ARCHIVE.format(file=name, why="no Versions header"))
    if header.get("version") != VERSION:
        raise InvalidInput(
            LOAD_UNKNOWN_VERSION.format(file=name, version=header.get("version"), known=VERSION)
        )
    digest = hashlib.sha256()
    rows: dict[str, list[dict[str, Any]]] = {}
    end: dict[str, Any] | None = None
    for number, line in enumerate(lines):
        if end is not None:
            if line:
                raise InvalidInput(LOAD_DAMAGED.format(file=name, why="lines after its end"))
            continue
        try:
            document = json.loads(line)
            if number and document["kind"] == "end":
                end = document
                continue
        except (UnicodeDecodeError, ValueError, KeyError, TypeError):
            raise InvalidInput(
                LOAD_DAMAGED.format(file=name, why=f"line {number + 1} is not whole")
            ) from None
        digest.update(line + b"\n")
        if number:
            rows.setdefault(document["kind"], []).append(document["row"])
    if end is None:
        raise InvalidInput(LOAD_DAMAGED.format(file=name, why="its end is missing"))
    count = sum(len(r) for r in rows.values())
    if end.get("sha256") != digest.hexdigest() or end.get("rows") != count:
        raise InvalidInput(LOAD_DAMAGED.format(file=name, why="its checksum does not match"))
    unknown = set(rows) - set(_TABLES) - {_AUDIT, _MEMBER}
    if unknown or len(rows.get(_APP, [])) != 1:
        raise InvalidInput(LOAD_DAMAGED.format(file=name, why="rows of unknown kinds"))
    return _Archive(header, rows, hashlib.sha256(packed).hexdigest())


def _decode(model: type[models.Model], row: dict[str, Any], keep_id: bool) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for f in _fields(model):
        if f.primary_key and not keep_id:
            continue
        value = row[f.attname]
        if value is not None and isinstance(f, (models.BinaryField, models.DateTimeField)):
            value = f.to_python(value)
        out[f.attname] = value
    return out


def _insert(model: type[models.Model], rows: list[dict[str, Any]]) -> None:
    """INSERT the rows as they are (no ``auto_now_add``, no defaults in between)."""
    if not rows:
        return
    fields = [f for f in _fields(model) if f.attname in rows[0]]
    quote = connection.ops.quote_name
    columns = ", ".join(quote(f.column or f.attname) for f in fields)
    marks = ", ".join(["%s"] * len(fields))
    # Names from the model's own table and columns, values as parameters.
    sql = f"INSERT INTO {quote(model._meta.db_table)} ({columns}) VALUES ({marks})"  # noqa: S608
    with connection.cursor() as cursor:
        for chunk in _chunks(rows):
            params = [[f.get_db_prep_save(r[f.attname], connection) for f in fields] for r in chunk]
            cursor.executemany(sql, params)


def _check_blobs(rows: list[dict[str, Any]]) -> None:
    """Every blob's stored bytes read back to the sha256 it is stored under."""
    raw: dict[str, bytes] = {}
    for row in rows:
        data = bytes(row["data"])
        base = row["base_id"]
        if base is None:
            text = Blob.unpack(data, row["compressed"])
        elif base in raw:
            text = Blob.unpack_delta(data, base, raw[base])
        else:
            raise InvalidInput(
                LOAD_DAMAGED.format(
                    file="The archive", why=f"blob {row['sha256'][:12]} lacks its base"
                )
            )
        if hashlib.sha256(text).hexdigest() != row["sha256"] or len(text) != row["size"]:
            raise InvalidInput(
                LOAD_DAMAGED.format(
                    file="The archive", why=f"blob {row['sha256'][:12]} does not read back"
                )
            )
        if base is None:
            raw[row["sha256"]] = text


def _refuse_taken_ids(archive: _Archive) -> None:
    for kind in _KEEP_IDS:
        model = _TABLES[kind]
        ids = [row[model._meta.pk.attname] for row in archive.rows.get(kind, [])]
        for chunk in _chunks(ids):
            taken = model._default_manager.filter(pk__in=chunk).values_list("pk", flat=True).first()
            if taken is not None:
                label = kind.replace("_", " ")
                raise Conflict(LOAD_ID_TAKEN.format(kind=label, id=taken))
    ids = [row["id"] for row in archive.rows.get(_AUDIT, [])]
    for chunk in _chunks(ids):
        taken = AuditEvent.objects.filter(pk__in=chunk).values_list("pk", flat=True).first()
        if taken is not None:
            raise Conflict(LOAD_ID_TAKEN.format(kind="audit event", id=taken))


def _audit_events(archive: _Archive, app_id: int) -> list[AuditEvent]:
    users = _user_ids()
    rows = archive.rows.get(_AUDIT, [])
    lowest = AuditEvent.objects.aggregate(low=Min("seq"))["low"] or 0
    start = min(lowest, 0) - len(rows)
    events = []
    for n, row in enumerate(rows):
        events.append(
            AuditEvent(
                id=row["id"],
                seq=start + n,
                origin_seq=row["chain_seq"],
                origin_chain=row["chain"],
                app_id=app_id,
                actor_kind=row["actor_kind"],
                actor_name=row["actor_name"],
                actor_user_id=users.get(row["actor_user"]) if row["actor_user"] else None,
                actor_token_id=None,
                action=row["action"],
                targets=row["targets"],
                reason=row["reason"],
                details=row["details"],
                address=row["address"],
                user_agent=row["user_agent"],
                created_on=AuditEvent._meta.get_field("created_on").to_python(row["created_on"]),
                prev_hash=row["prev_hash"],
                hash=row["hash"],
            )
        )
    return events


def _memberships(archive: _Archive, app_id: int) -> tuple[list[dict[str, Any]], list[str]]:
    users = _user_ids()
    groups = dict(Group.objects.values_list("name", "pk"))
    made, skipped = [], []
    for row in archive.rows.get(_MEMBER, []):
        user_id = users.get(row["user"]) if row["user"] is not None else None
        group_id = groups.get(row["group"]) if row["group"] is not None else None
        if user_id is None and group_id is None:
            skipped.append(
                f"{'user' if row['user'] is not None else 'group'} {row['user'] or row['group']}"
            )
            continue
        made.append(
            {
                "app_id": app_id,
                "user_id": user_id,
                "group_id": group_id,
                "role": row["role"],
                "created_on": AppMembership._meta.get_field("created_on").to_python(
                    row["created_on"]
                ),
                "created_by": row["created_by"],
            }
        )
    return made, skipped


def load_app(path: str | os.PathLike[str], *, actor: Actor | None = None) -> PortableReport:
    """Put the app of the archive ``path`` into this Versions, ids and bytes as they were, in
    one transaction, and record it in the audit trail; refused in words (nothing written) when
    its slug or one of its ids is taken here, or the archive is damaged or of another version.
    ``actor`` must be able to add apps (None: a trusted command)."""
    if actor is not None and MANAGE not in actor.everywhere:
        raise Forbidden(NO_NEW_APPS.format(who=actor.who, role=ROLE_FOR[MANAGE]))
    source = Path(path)
    archive = _read(source)
    app_row = archive.rows[_APP][0]
    slug = app_row["slug"]
    if App.objects.filter(slug=slug).exists():
        raise Conflict(LOAD_SLUG_EXISTS.format(slug=slug))
    check_new_app_slug(slug)
    blobs = [_decode(Blob, row, True) for row in archive.rows.get(_BLOB, [])]
    _check_blobs(blobs)
    events = _audit_events(archive, app_row["id"])
    walk = selectors.walk_loaded(events, slug)
    if walk.problem:
        raise InvalidInput(LOAD_CHAIN_BROKEN.format(problem=walk.problem))
    rows = {kind: len(r) for kind, r in archive.rows.items()}
    try:
        with transaction.atomic():
            _refuse_taken_ids(archive)
            have: set[str] = set()
            for chunk in _chunks([b["sha256"] for b in blobs]):
                have |= set(Blob.objects.filter(sha256__in=chunk).values_list("sha256", flat=True))
            _insert(Blob, [b for b in blobs if b["sha256"] not in have])
            loaded: list[type[models.Model]] = []
            users = _user_ids()
            for kind, model in _TABLES.items():
                if kind == _BLOB:
                    continue
                keep = kind in _KEEP_IDS
                found_rows = archive.rows.get(kind, [])
                if kind in _BY_USER:
                    found_rows = [
                        {**r, "author_id": users.get(r.get("author") or "")} for r in found_rows
                    ]
                _insert(model, [_decode(model, row, keep) for row in found_rows])
                loaded.append(model)
            members, skipped = _memberships(archive, app_row["id"])
            _insert(AppMembership, members)
            AuditEvent.objects.bulk_create(events, batch_size=_CHUNK)
            _reset_sequences(loaded)
            app = App.objects.get(pk=app_row["id"])
            event = record(
                APP_LOADED,
                actor=actor or Command("load_app"),
                app=app,
                targets=[slug],
                details={
                    "archive": {
                        "sha256": archive.sha256,
                        "version": archive.header["version"],
                        "dumped_on": archive.header.get("dumped_on", ""),
                        "source_chain": archive.header.get("source_chain", ""),
                        "source_head": archive.header.get("source_head", {}),
                    },
                    "rows": rows,
                    "blobs_already_here": len(have),
                    "members_skipped": skipped,
                    "events": walk.count,
                    "digest": walk.digest,
                    "verified": f"{walk.count} events of the archive's chain intact",
                },
            )
    except IntegrityError as exc:
        raise Conflict(LOAD_DOES_NOT_FIT.format(why=str(exc).splitlines()[0])) from None
    return PortableReport(slug, str(source), archive.sha256, rows, event.id)


def _reset_sequences(models_: list[type[models.Model]]) -> None:
    """Rows inserted with their ids: the next ids this database hands out come after them."""
    statements = connection.ops.sequence_reset_sql(no_style(), models_)
    if statements:
        with connection.cursor() as cursor:
            for sql in statements:
                cursor.execute(sql)
