"""Notifications (docs/architecture.md#notifications): an app's webhooks and its members' emails.

- An owner adds, changes and deletes webhooks (:func:`create_webhook`, :func:`change_webhook`,
  :func:`delete_webhook`) and re-sends a delivery (:func:`redeliver`); a member chooses the
  events they hear of by email (:func:`set_email_events`). Each is kept in the audit trail.
- The services that change things call :func:`emit` in their own transaction: the event is
  stored there (only when a webhook or an email takes its type), so it exists exactly when the
  change committed. Its delivery is enqueued in the same transaction on the database queue
  (the default: the task commits with the event or not at all), once it commits on another.
- The worker (``manage.py db_worker``) runs the tasks: :func:`fan_out` (one delivery per
  webhook, the first sent at once, the emails), :func:`deliver` (one signed POST, logged,
  retried with exponential backoff for ``VERSIONS_WEBHOOK_RETRY_HOURS``). A delivery is leased
  while it is sent and a task waits at the lease's end (withdrawn once the try is settled), so
  a worker killed mid-delivery loses nothing: the next one sends it again (at least once). A
  webhook failing for that long is disabled and its owners are told by email.
- Addresses are checked when sending, after DNS resolution, and the request goes to the very
  address checked (no second look-up a rebinding name could answer differently).
"""

from __future__ import annotations

import hashlib
import hmac
import http.client
import ipaddress
import json
import logging
import socket
import ssl
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.mail import send_mail
from django.db import connection, transaction
from django.db.models import Q

from versions import ids, rawsql, terms
from versions.errors import InvalidInput, NotFound
from versions.messages import (
    WEBHOOK_DISABLED_MAIL,
    WEBHOOK_EVENT_UNKNOWN,
    WEBHOOK_EVENTS_NONE,
    WEBHOOK_NOT_FOUND,
    WEBHOOK_SECRET_SHORT,
    WEBHOOK_URL_NEEDS_HTTPS,
    WEBHOOK_URL_NOT_HTTP,
    WEBHOOK_URL_PRIVATE,
    WEBHOOK_URL_TOO_LONG,
    WEBHOOK_URL_UNRESOLVED,
)
from versions.models import (
    App,
    AppMembership,
    DeliveryAttempt,
    EmailSubscription,
    FanOutPending,
    Webhook,
    WebhookDelivery,
    WebhookEvent,
)
from versions.services.access import Actor, actor_for_user, app_for
from versions.services.audit import record
from versions.tasks import enqueue_in_transaction, in_database, queue_row, task, withdraw
from versions.terms import MANAGE, VIEW

log = logging.getLogger("versions.webhooks")

SECRET_MIN = 16
SECRET_MAX = 200
USER_AGENT = "Versions-Webhooks/1"
# Longer than a send can take (connect + send + the answer's first bytes, each within the
# timeout): a lease that runs out means its worker died.
_LEASE_MARGIN = timedelta(seconds=5)
_RESCUE_AFTER = timedelta(seconds=60)


# --------------------------------------------------------------------------------------------
# Settings, read at call time
# --------------------------------------------------------------------------------------------


def allow_private() -> bool:
    """Whether receivers on loopback, link-local and private addresses are allowed."""
    return bool(getattr(settings, "VERSIONS_WEBHOOK_ALLOW_PRIVATE", False))


def require_https() -> bool:
    """Whether webhook URLs must be https:// (production: ``DJANGO_DEBUG=0``)."""
    return bool(getattr(settings, "VERSIONS_WEBHOOK_REQUIRE_HTTPS", not settings.DEBUG))


def timeout_seconds() -> float:
    """How long a receiver has to connect, take the body and answer."""
    return float(getattr(settings, "VERSIONS_WEBHOOK_TIMEOUT_SECONDS", 10))


def retry_seconds() -> float:
    """The first retry's delay; each next one is three times longer."""
    return float(getattr(settings, "VERSIONS_WEBHOOK_RETRY_SECONDS", 10))


def retry_window() -> timedelta:
    """How long a delivery is retried, and how long a webhook may fail before it is disabled."""
    return timedelta(hours=float(getattr(settings, "VERSIONS_WEBHOOK_RETRY_HOURS", 24)))


def _now() -> datetime:
    return ids.ms_to_datetime(ids.now_ms())


def _new_id(prefix: str) -> str:
    return f"{prefix}_{ids.base36(ids.now_ms())}_{ids.random_suffix()}"


def _framed(events: Iterable[str]) -> str:
    return "," + ",".join(events) + ","


# --------------------------------------------------------------------------------------------
# Checks of what an owner types
# --------------------------------------------------------------------------------------------


def is_public_address(address: str) -> bool:
    """Whether ``address`` (IPv4 or IPv6) is a public unicast one: not loopback, link-local,
    private, shared, multicast, reserved or unspecified (an IPv4-mapped IPv6 counts as its
    IPv4)."""
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_global and not ip.is_multicast


def resolve(host: str, port: int) -> list[str]:
    """The addresses ``host`` resolves to, in the resolver's order (empty when it does not)."""
    try:
        found = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError):
        return []
    return list(dict.fromkeys(str(info[4][0]) for info in found))


@dataclass(frozen=True)
class Target:
    """Where a URL sends: its scheme, host (for Host, SNI and the certificate), port, path,
    and the address checked (the one connected to)."""

    scheme: str
    host: str
    port: int
    path: str
    address: str


def check_url(url: object, *, resolve_host: bool = True) -> Target | None:
    """The URL's target, or ``InvalidInput`` in words: http(s) only (https only with
    ``DJANGO_DEBUG=0``), at most 2,000 characters, a host that resolves, and only to public
    addresses unless ``VERSIONS_WEBHOOK_ALLOW_PRIVATE``."""
    if not isinstance(url, str) or not url.strip():
        raise InvalidInput(WEBHOOK_URL_NOT_HTTP.format(url=""), field="url")
    url = url.strip()
    if len(url) > Webhook.URL_MAX:
        raise InvalidInput(
            WEBHOOK_URL_TOO_LONG.format(length=len(url), limit=Webhook.URL_MAX), field="url"
        )
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        parts, port = None, None
    shown = url[:100]
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
        raise InvalidInput(WEBHOOK_URL_NOT_HTTP.format(url=shown), field="url")
    if parts.scheme != "https" and require_https():
        raise InvalidInput(WEBHOOK_URL_NEEDS_HTTPS.format(url=shown), field="url")
    if parts.username or parts.password or any(ord(c) < 33 for c in url):
        raise InvalidInput(WEBHOOK_URL_NOT_HTTP.format(url=shown), field="url")
    if not resolve_host:
        return None
    host = parts.hostname
    port = port or (443 if parts.scheme == "https" else 80)
    addresses = resolve(host, port)
    if not addresses:
        raise InvalidInput(WEBHOOK_URL_UNRESOLVED.format(host=host[:100]), field="url")
    private = [a for a in addresses if not is_public_address(a)]
    if private and not allow_private():
        raise InvalidInput(
            WEBHOOK_URL_PRIVATE.format(host=host[:100], address=private[0]), field="url"
        )
    path = parts.path or "/"
    if parts.query:
        path += "?" + parts.query
    return Target(parts.scheme, host, port, path, addresses[0])


def _check_secret(secret: object) -> str:
    if not isinstance(secret, str) or not SECRET_MIN <= len(secret) <= SECRET_MAX:
        length = len(secret) if isinstance(secret, str) else 0
        raise InvalidInput(
            WEBHOOK_SECRET_SHORT.format(length=length, least=SECRET_MIN, most=SECRET_MAX),
            field="secret",
        )
    return secret


def check_events(events: object, *, allow_none: bool = False) -> list[str]:
    """Known event names, in their canonical order, else ``InvalidInput`` naming the first
    unknown one."""
    if isinstance(events, str):
        events = [events]
    if not isinstance(events, list | tuple):
        raise InvalidInput(WEBHOOK_EVENTS_NONE, field="events")
    for name in events:
        if name not in terms.EVENTS:
            raise InvalidInput(
                WEBHOOK_EVENT_UNKNOWN.format(event=str(name)[:60], known=", ".join(terms.EVENTS)),
                field="events",
            )
    chosen = [name for name in terms.EVENTS if name in events]
    if not chosen and not allow_none:
        raise InvalidInput(WEBHOOK_EVENTS_NONE, field="events")
    return chosen


# --------------------------------------------------------------------------------------------
# Owners manage webhooks; members choose their emails
# --------------------------------------------------------------------------------------------


def _webhook_for(webhook_id: object, actor: Actor | None, app: App | None = None) -> Webhook:
    found = (
        Webhook.objects.select_related("app").filter(pk=webhook_id).first()
        if isinstance(webhook_id, str) and len(webhook_id) <= 40
        else None
    )
    missing = NotFound(WEBHOOK_NOT_FOUND.format(id=str(webhook_id)[:60]))
    if found is None or (app is not None and found.app_id != app.pk):
        raise missing
    if actor is not None:
        actor.check(MANAGE, found.app, missing=missing)
    return found


def create_webhook(
    app: App | str, *, url: object, secret: object, events: object, actor: Actor | None
) -> Webhook:
    """Add a webhook to ``app`` (its owners): ``InvalidInput`` in words and nothing saved when
    the URL, the secret (16 to 200 characters) or an event name is refused."""
    found = app_for(app, actor=actor, action=MANAGE)
    check_url(url)
    checked_secret = _check_secret(secret)
    chosen = check_events(events)
    with transaction.atomic():
        webhook = Webhook.objects.create(
            id=_new_id("wh"),
            app=found,
            url=str(url).strip(),
            secret=checked_secret,
            events=_framed(chosen),
            created_by=actor.name if actor is not None else "command",
            created_on=_now(),
        )
        record(
            terms.WEBHOOK_CREATED,
            actor=actor,
            app=found,
            targets=[webhook.id],
            details={"url": webhook.url, "events": chosen},
        )
    return webhook


def change_webhook(
    webhook_id: str,
    *,
    url: object = None,
    secret: object = None,
    events: object = None,
    active: bool | None = None,
    app: App | None = None,
    actor: Actor | None,
) -> Webhook:
    """Change a webhook's URL, secret (None or "" keeps it), events or whether it is active
    (turning it on again forgets its failures). ``app``: the app it must be of."""
    webhook = _webhook_for(webhook_id, actor, app)
    changed: dict[str, Any] = {}
    if url is not None and str(url).strip() != webhook.url:
        check_url(url)
        webhook.url = changed["url"] = str(url).strip()
    if secret not in (None, ""):
        webhook.secret = _check_secret(secret)
        changed["secret"] = "changed"
    if events is not None:
        chosen = check_events(events)
        if _framed(chosen) != webhook.events:
            webhook.events = _framed(chosen)
            changed["events"] = chosen
    if active is not None and bool(active) != webhook.active:
        webhook.active = changed["active"] = bool(active)
        if webhook.active:
            webhook.failing_since, webhook.disabled_reason = None, ""
    if not changed:
        return webhook
    with transaction.atomic():
        webhook.save()
        record(
            terms.WEBHOOK_CHANGED,
            actor=actor,
            app=webhook.app,
            targets=[webhook.id],
            details=changed,
        )
    return webhook


def delete_webhook(webhook_id: str, *, app: App | None = None, actor: Actor | None) -> None:
    """Delete a webhook with its delivery log."""
    webhook = _webhook_for(webhook_id, actor, app)
    with transaction.atomic():
        record(
            terms.WEBHOOK_DELETED,
            actor=actor,
            app=webhook.app,
            targets=[webhook.id],
            details={"url": webhook.url},
        )
        webhook.delete()


def redeliver(delivery_id: str, *, app: App | None = None, actor: Actor | None) -> WebhookDelivery:
    """Send a delivery's event to its webhook again, as a new delivery (its own id and log)."""
    original = (
        WebhookDelivery.objects.select_related("webhook__app").filter(pk=delivery_id).first()
        if isinstance(delivery_id, str) and len(delivery_id) <= 40
        else None
    )
    missing = NotFound(WEBHOOK_NOT_FOUND.format(id=str(delivery_id)[:60]))
    if original is None or (app is not None and original.webhook.app_id != app.pk):
        raise missing
    if actor is not None:
        actor.check(MANAGE, original.webhook.app, missing=missing)
    now = _now()
    with transaction.atomic():
        again = WebhookDelivery.objects.create(
            id=_new_id("dlv"),
            webhook=original.webhook,
            event_id=original.event_id,
            created_on=now,
            next_attempt_on=now,
            redelivery_of=original,
        )
        record(
            terms.WEBHOOK_REDELIVERED,
            actor=actor,
            app=original.webhook.app,
            targets=[original.webhook_id, original.id, again.id],
            details={"event": original.event_id},
        )
        enqueue_in_transaction(deliver, again.id)
    return again


def set_email_events(app: App | str, events: object, *, actor: Actor) -> list[str]:
    """The events of ``app`` that ``actor`` (a person who may view it) hears of by email; an
    empty list stops them."""
    found = app_for(app, actor=actor, action=VIEW)
    chosen = check_events(events, allow_none=True)
    if actor.user is None:
        raise InvalidInput(WEBHOOK_EVENTS_NONE, field="events")
    with transaction.atomic():
        if chosen:
            EmailSubscription.objects.update_or_create(
                app=found, user=actor.user, defaults={"events": _framed(chosen)}
            )
        else:
            EmailSubscription.objects.filter(app=found, user=actor.user).delete()
        record(
            terms.NOTIFICATIONS_CHANGED,
            actor=actor,
            app=found,
            details={"events": chosen},
        )
    return chosen


# --------------------------------------------------------------------------------------------
# Events: stored in the change's transaction, sent after it commits
# --------------------------------------------------------------------------------------------


def _emit_sql() -> str:
    qn = connection.ops.quote_name
    event = qn(WebhookEvent._meta.db_table)
    hook = qn(Webhook._meta.db_table)
    mail = qn(EmailSubscription._meta.db_table)
    data = "%s::jsonb" if connection.vendor == "postgresql" else "%s"
    # One statement, inserting nothing when no webhook and no email takes the type: a write to
    # an app without subscribers pays one indexed look-up.
    return (
        f"INSERT INTO {event} (id, app_id, type, created_on, data, fanned_out) "  # noqa: S608
        f"SELECT %s, %s, %s, %s, {data}, %s WHERE EXISTS (SELECT 1 FROM {hook} "
        "WHERE app_id = %s AND active AND events LIKE %s) "
        f"OR EXISTS (SELECT 1 FROM {mail} WHERE app_id = %s AND events LIKE %s)"
    )


def _mark_sql(rows: str) -> str:
    """Mark the app's fan-out as queued (``rows``: the app's id and the time): a row when there
    is none, or renew one older than :data:`_RESCUE_AFTER` (its task was lost); else nothing,
    but on PostgreSQL the row found is locked until the write commits (``DO UPDATE`` locks the
    row it finds even when its ``WHERE`` is false; ``DO NOTHING`` would not lock it). A row
    made or renewed: queue the task."""
    mark = _table(FanOutPending)
    return (
        f"INSERT INTO {mark} (app_id, since) {rows} "  # noqa: S608
        f"ON CONFLICT (app_id) DO UPDATE SET since = excluded.since WHERE {mark}.since < %s"
    )


def emit(app_id: int, event_type: str, data: Mapping[str, Any]) -> None:
    """Record event ``event_type`` of app ``app_id`` in the caller's transaction when a webhook
    or a member's email takes it, and see that it is fanned out.

    On the database queue (the default) the app has at most one fan-out task waiting: the
    event marks the app (:class:`FanOutPending`) and only the event that makes the mark
    queues the task (``fan_out_app``), all in the caller's transaction (they commit together
    or not at all). A burst of writes stores its events and one task. Why no event is missed:
    the task deletes the mark and commits that before it reads the app's events (in a new
    transaction). A write that found the mark (and queued nothing) holds it — on SQLite the
    write lock, on PostgreSQL the row's lock — until it commits, so that delete returns only
    after the write committed, and the read after it sees the write's event; a write after
    the delete finds no mark and queues a task of its own. A task lost before its delete (its
    worker killed) leaves a mark that a write renews, with a new task, once it is a minute old.
    On PostgreSQL, writes storing events of one app wait here for each other's commit (the
    row's lock): call it after the locks the change takes (the services do: a write locks
    its artifact first), so that no two writes wait for each other in opposite orders. (A
    caller's transaction holding several writes that prune inside it would lock artifacts
    after it; the services never run writes so.)

    With another queue (Redis, RabbitMQ) the event's own task (``fan_out``) is enqueued once
    the transaction commits."""
    ms = ids.now_ms()
    event_id = f"evt_{ids.base36(ms)}_{ids.ordered_suffix(ms)}"
    pattern = f"%,{event_type},%"
    ops = connection.ops
    params = [
        event_id,
        app_id,
        event_type,
        ops.adapt_datetimefield_value(ids.ms_to_datetime(ms)),
        json.dumps(data, separators=(",", ":")),
        False,
        app_id,
        pattern,
        app_id,
        pattern,
    ]
    if not in_database(fan_out_app):
        inserted = rawsql.execute_deferred(_emit_sql(), params)

        def enqueue() -> None:
            if inserted() > 0:
                fan_out.enqueue(event_id)

        transaction.on_commit(enqueue, robust=True)
        return
    now = ids.ms_to_datetime(ms)
    marked = [
        ops.adapt_datetimefield_value(now),
        ops.adapt_datetimefield_value(now - _RESCUE_AFTER),
    ]
    if connection.vendor != "postgresql":
        # One statement stores the event and reads the app's mark (the write lock is held
        # from BEGIN: no worker deletes it before this write commits). Only a write that
        # finds none, or a stale one, marks the app and queues its task.
        mark = _table(FanOutPending)
        made = rawsql.execute(
            f"{_emit_sql()} RETURNING (SELECT since >= %s FROM {mark} WHERE app_id = %s)",  # noqa: S608
            [*params, marked[1], app_id],
            fetch="one",
        )
        if made is not None and not made[0]:
            rawsql.execute(_mark_sql("VALUES (%s, %s)"), [app_id, *marked])
            enqueue_in_transaction(fan_out_app, app_id)
        return
    row = queue_row(fan_out_app, app_id)
    assert row is not None
    # One statement: no row count is needed, so in the write's pipeline it costs no round
    # trip. Each part runs once, whether or not the next one reads it.
    rawsql.execute_deferred(
        f"WITH made AS ({_emit_sql()} RETURNING app_id), "  # noqa: S608
        f"marked AS ({_mark_sql('SELECT app_id, %s FROM made')} RETURNING 1) "
        f"INSERT INTO {row.table} {row.columns} SELECT {row.values} FROM marked",
        [*params, *marked, *row.params],
    )


# What each action of the engine reports, by its audit-trail name.
_ENGINE_EVENTS = {
    terms.RESTORED: terms.RESTORE_COMPLETED,
    terms.RESTORED_TO_RELEASE: terms.RESTORE_COMPLETED,
    terms.REVERTED: terms.REVERT_COMPLETED,
    terms.PROMOTED: terms.PRODUCTION_PROMOTED,
    terms.ROLLED_BACK: terms.PRODUCTION_ROLLED_BACK,
}


def engine_outcome(action: str, app: App, subject_ref: str, by: str, receipt: Any) -> None:
    """The event of a restore, revert, promotion or rollback the engine just wrote, in its
    transaction (nothing for a dry run or an action that changed nothing)."""
    event_type = _ENGINE_EVENTS.get(action)
    made = getattr(receipt, "set_id", None) or getattr(receipt, "deployment_id", None)
    if event_type is None or not made:
        return
    data: dict[str, Any] = {"by": by, "message": receipt.message}
    if event_type in (terms.PRODUCTION_PROMOTED, terms.PRODUCTION_ROLLED_BACK):
        data.update(
            deployment=receipt.deployment_id,
            previousDeployment=receipt.previous_deployment,
            ref=receipt.ref,
            note=receipt.note,
        )
    else:
        data.update(
            restoreSet=receipt.set_id,
            restoredFrom=subject_ref,
            restored=receipt.written,
        )
        if event_type == terms.REVERT_COMPLETED:
            data["revertedSet"] = subject_ref
        if receipt.scope:
            data["scope"] = receipt.scope
    emit(app.pk, event_type, data)


# --------------------------------------------------------------------------------------------
# The worker's tasks
# --------------------------------------------------------------------------------------------


def body_of(event: WebhookEvent, app_slug: str) -> bytes:
    """The JSON a receiver gets: ``id``, ``type``, ``app``, ``created_on``, ``data``."""
    created = event.created_on.isoformat(timespec="milliseconds").replace("+00:00", "Z")
    return json.dumps(
        {
            "id": event.id,
            "type": event.type,
            "app": app_slug,
            "created_on": created,
            "data": event.data,
        },
        separators=(",", ":"),
        ensure_ascii=False,
    ).encode("utf-8")


def signature(secret: str, timestamp: int, body: bytes) -> str:
    """``Versions-Signature``: ``t=<unix>,v1=<hex HMAC-SHA256 of "<t>.<body>">``."""
    mac = hmac.new(secret.encode("utf-8"), f"{timestamp}.".encode() + body, hashlib.sha256)
    return f"t={timestamp},v1={mac.hexdigest()}"


# How many events one ``fan_out_app`` task fans out; more are left to a task it queues.
_FAN_OUT_BATCH = 200


@task()
def fan_out_app(app_id: int) -> int:
    """Fan out every event of app ``app_id`` not fanned out yet, oldest first (each as
    :func:`fan_out` does); returns how many deliveries it made.

    First the app's mark (:class:`FanOutPending`) is deleted, in a transaction of its own
    that commits before any event is read: a write that found the mark (and so queued no task)
    holds it until it commits, so the delete returns after that write committed and the read
    below, a later transaction, sees its event. A write after the delete makes a new mark and
    a new task. Should this worker die between the two, the events wait for the next event's
    task, which finds every one of them, or for :func:`rescue` a minute on."""
    rescue(_now())
    with transaction.atomic():
        rawsql.execute(
            f"DELETE FROM {_table(FanOutPending)} WHERE app_id = %s",  # noqa: S608
            [app_id],
        )
    waiting = list(
        WebhookEvent.objects.filter(app_id=app_id, fanned_out=False)
        .order_by("created_on", "id")
        .values_list("pk", flat=True)[: _FAN_OUT_BATCH + 1]
    )
    made = sum(_fan_out_event(event_id) for event_id in waiting[:_FAN_OUT_BATCH])
    if len(waiting) > _FAN_OUT_BATCH:
        fan_out_app.enqueue(app_id)  # a long backlog: the rest in a task of its own
    return made


@task()
def fan_out(event_id: str) -> int:
    """One delivery of ``event_id`` per active webhook taking its type, and its emails; the
    first delivery is sent here at once (one task less between a commit and its receipt), the
    others by tasks of their own. Returns how many deliveries it made (0 when another worker
    already did). Queued by :func:`rescue`, and by :func:`emit` with a queue outside the
    database."""
    rescue(_now())
    return _fan_out_event(event_id)


def _fan_out_event(event_id: str) -> int:
    now = _now()
    with transaction.atomic():
        event = WebhookEvent.objects.select_for_update().filter(pk=event_id).first()
        if event is None or event.fanned_out:
            return 0
        hooks = Webhook.objects.filter(
            app_id=event.app_id, active=True, events__contains=f",{event.type},"
        ).select_related("app")
        made = [
            WebhookDelivery(
                id=_new_id("dlv"),
                webhook=webhook,
                event=event,
                created_on=now,
                next_attempt_on=now,
            )
            for webhook in hooks
        ]
        # The rest needs no answer: on PostgreSQL it travels with the COMMIT, one round trip.
        with rawsql.batch(commit=True):
            lease = _lease(made[0], now) if made else None
            rawsql.insert_rows(WebhookDelivery, made)
            rawsql.execute(
                f"UPDATE {_table(WebhookEvent)} SET fanned_out = %s WHERE id = %s",  # noqa: S608
                [True, event.pk],
            )
            for delivery in made[1:]:
                enqueue_in_transaction(deliver, delivery.id)
            _enqueue_emails(event)
    if made:
        _send(made[0], lease)
    return len(made)


def _table(model: Any) -> str:
    return connection.ops.quote_name(model._meta.db_table)


def _enqueue_emails(event: WebhookEvent) -> None:
    """Enqueue the emails of ``event`` when a member chose its type: on the database queue the
    check and the task are one statement."""
    pattern = f"%,{event.type},%"
    row = queue_row(email_event, event.id)
    if row is None:
        taking = EmailSubscription.objects.filter(
            app_id=event.app_id, events__contains=f",{event.type},"
        )
        if taking.exists():
            enqueue_in_transaction(email_event, event.id)
        return
    rawsql.execute(
        f"INSERT INTO {row.table} {row.columns} SELECT {row.values} "  # noqa: S608
        f"WHERE EXISTS (SELECT 1 FROM {_table(EmailSubscription)} "
        "WHERE app_id = %s AND events LIKE %s)",
        [*row.params, event.app_id, pattern],
    )


@dataclass
class Answer:
    """What a receiver answered (``status`` None: no answer, ``error`` says why)."""

    status: int | None
    excerpt: str
    duration_ms: int
    error: str = ""

    @property
    def ok(self) -> bool:
        return self.status is not None and 200 <= self.status < 300


class _PinnedHTTPConnection(http.client.HTTPConnection):
    """Connects to the address that was checked, whatever the host name resolves to now."""

    def __init__(self, host: str, port: int, address: str, timeout: float) -> None:
        super().__init__(host, port, timeout=timeout)
        self._address = address

    def connect(self) -> None:
        self.sock = socket.create_connection((self._address, self.port), self.timeout)


class _PinnedHTTPSConnection(http.client.HTTPSConnection):
    """As :class:`_PinnedHTTPConnection`, over TLS: the certificate is checked for the host."""

    def __init__(self, host: str, port: int, address: str, timeout: float) -> None:
        super().__init__(host, port, timeout=timeout, context=ssl.create_default_context())
        self._address = address

    def connect(self) -> None:
        sock = socket.create_connection((self._address, self.port), self.timeout)
        self.sock = self._context.wrap_socket(sock, server_hostname=self.host)  # type: ignore[attr-defined]


def post(url: str, body: bytes, headers: Mapping[str, str]) -> Answer:
    """POST ``body`` to ``url`` once: the address checked after resolution (refused in words
    when private and not allowed), within the timeout, never following a redirect."""
    started = time.monotonic()

    def took() -> int:
        return int((time.monotonic() - started) * 1000)

    try:
        target = check_url(url)
    except InvalidInput as exc:
        return Answer(None, "", took(), exc.message[:400])
    assert target is not None
    kind = _PinnedHTTPSConnection if target.scheme == "https" else _PinnedHTTPConnection
    conn = kind(target.host, target.port, target.address, timeout_seconds())
    try:
        conn.request("POST", target.path, body=body, headers=dict(headers))
        response = conn.getresponse()
        excerpt = response.read(DeliveryAttempt.EXCERPT_MAX)
        return Answer(response.status, excerpt.decode("utf-8", "replace"), took())
    except TimeoutError:
        return Answer(None, "", took(), f"No answer within {timeout_seconds():g} seconds.")
    except (OSError, http.client.HTTPException) as exc:
        return Answer(None, "", took(), f"{type(exc).__name__}: {exc}"[:400])
    finally:
        conn.close()


def next_try(delivery: WebhookDelivery, now: datetime) -> datetime | None:
    """When a failed delivery is tried again: ``VERSIONS_WEBHOOK_RETRY_SECONDS`` after the
    first try, three times longer after each next, the last at the end of the retry window;
    None once that has passed."""
    end = delivery.created_on + retry_window()
    if now >= end:
        return None
    delay = timedelta(seconds=retry_seconds() * 3 ** max(delivery.attempts - 1, 0))
    return min(now + delay, end)


@task()
def deliver(delivery_id: str) -> str:
    """Send one delivery if it is due and nobody is sending it; returns what became of it."""
    now = _now()
    with transaction.atomic():
        delivery = (
            WebhookDelivery.objects.select_for_update()
            .select_related("webhook__app", "event")
            .filter(pk=delivery_id)
            .first()
        )
        if delivery is None or delivery.state != WebhookDelivery.PENDING:
            return "gone" if delivery is None else delivery.state
        if delivery.next_attempt_on > now or (
            delivery.lease_until is not None and delivery.lease_until > now
        ):
            return "not due"
        if not delivery.webhook.active:
            delivery.state = WebhookDelivery.FAILED
            delivery.save(update_fields=["state"])
            return "webhook disabled"
        lease = _lease(delivery, now)
        delivery.save(update_fields=["attempts", "lease_until"])
    return _send(delivery, lease)


def _lease(delivery: WebhookDelivery, now: datetime) -> str | None:
    """Take ``delivery`` for one try (in the caller's transaction, the row locked or new): it
    is this worker's until the lease runs out, longer than a try can take. Returns the id of
    the task waiting for the lease's end (None off the database queue)."""
    delivery.attempts += 1
    delivery.lease_until = now + timedelta(seconds=3 * timeout_seconds()) + _LEASE_MARGIN
    # Should this worker die while sending, this task finds the lease run out and sends again
    # (at least once). Enqueued in the lease's own transaction: on the database queue, both
    # or neither. Once the try is settled it is withdrawn (:func:`_settle`).
    return enqueue_in_transaction(deliver, delivery.id, run_after=delivery.lease_until)


def _send(delivery: WebhookDelivery, lease: str | None) -> str:
    """One try of a leased delivery: the signed POST, then its log and what follows."""
    webhook, event = delivery.webhook, delivery.event
    body = body_of(event, webhook.app.slug)
    headers = {
        "Content-Type": "application/json",
        "User-Agent": USER_AGENT,
        "Versions-Event": event.type,
        "Versions-Delivery": delivery.id,
        "Versions-Signature": signature(webhook.secret, int(time.time()), body),
    }
    answer = post(webhook.url, body, headers)
    return _settle(delivery, answer, lease)


def _settle(sent: WebhookDelivery, answer: Answer, lease: str | None) -> str:
    """Log the try; on failure schedule the next one, or give up; a webhook failing for the
    whole retry window is disabled and its owners told. The task waiting for the try's lease
    to run out (``lease``) is withdrawn (what follows is decided here: unneeded, it would
    lengthen the queue every worker searches until it ran)."""
    now = _now()
    tried = DeliveryAttempt(
        delivery_id=sent.id,
        attempted_on=now,
        status_code=answer.status,
        duration_ms=answer.duration_ms,
        response_excerpt=answer.excerpt,
        error=answer.error,
    )
    if answer.ok:
        # Nothing to read first: on PostgreSQL the whole transaction is one round trip.
        with transaction.atomic(), rawsql.batch(begin=True, commit=True):
            withdraw(lease)
            rawsql.insert_rows(DeliveryAttempt, [tried])
            rawsql.execute(
                f"UPDATE {_table(WebhookDelivery)} SET state = %s, lease_until = NULL "  # noqa: S608
                "WHERE id = %s",
                [WebhookDelivery.DELIVERED, sent.id],
            )
            # One success forgets the failures.
            rawsql.execute(
                f"UPDATE {_table(Webhook)} SET failing_since = NULL "  # noqa: S608
                "WHERE id = %s AND failing_since IS NOT NULL",
                [sent.webhook_id],
            )
        return WebhookDelivery.DELIVERED
    with transaction.atomic():
        withdraw(lease)
        delivery = (
            WebhookDelivery.objects.select_for_update()
            .select_related("webhook__app")
            .get(pk=sent.id)
        )
        webhook = delivery.webhook
        rawsql.insert_rows(DeliveryAttempt, [tried])
        delivery.lease_until = None
        failing_since = webhook.failing_since or now
        if webhook.failing_since is None:
            Webhook.objects.filter(pk=webhook.pk, failing_since=None).update(failing_since=now)
        again = next_try(delivery, now)
        if webhook.active and (
            now - failing_since >= retry_window()
            or (again is None and failing_since <= _first_try(delivery))
        ):
            _disable(webhook, now)
            delivery.state = WebhookDelivery.FAILED
        elif again is None:
            delivery.state = WebhookDelivery.FAILED
        else:
            delivery.next_attempt_on = again
            enqueue_in_transaction(deliver, delivery.id, run_after=again)
        delivery.save(update_fields=["state", "lease_until", "next_attempt_on"])
        return delivery.state


def _first_try(delivery: WebhookDelivery) -> datetime:
    """When ``delivery`` was first tried. A delivery giving up on a webhook that has failed
    since then failed for the whole retry window, even though the webhook's first failure
    came a moment after the delivery was made (its window's start)."""
    first = delivery.tries.order_by("attempted_on").values_list("attempted_on", flat=True).first()
    return first or delivery.created_on


def owners_emails(app: App) -> list[str]:
    """The email addresses of ``app``'s owners (members with the role, directly or through a
    group)."""
    owners = AppMembership.objects.filter(app=app, role=AppMembership.OWNER)
    users = get_user_model().objects.filter(
        Q(pk__in=owners.filter(user__isnull=False).values("user_id"))
        | Q(groups__in=owners.filter(group__isnull=False).values("group_id")),
        is_active=True,
    )
    return sorted({u.email for u in users if u.email})


def _disable(webhook: Webhook, now: datetime) -> None:
    hours = retry_window().total_seconds() / 3600
    reason = f"Disabled on {now:%Y-%m-%d %H:%M} UTC: every delivery failed for {hours:g} hours."
    Webhook.objects.filter(pk=webhook.pk).update(active=False, disabled_reason=reason)
    WebhookDelivery.objects.filter(webhook=webhook, state=WebhookDelivery.PENDING).update(
        state=WebhookDelivery.FAILED
    )
    record(
        terms.WEBHOOK_DISABLED,
        actor=None,
        app=webhook.app,
        targets=[webhook.id],
        reason=reason,
    )
    recipients = owners_emails(webhook.app)
    if recipients:
        subject, text = WEBHOOK_DISABLED_MAIL
        message = text.format(app=webhook.app.name, url=webhook.url, hours=f"{hours:g}")

        def tell() -> None:
            send_mail(
                subject.format(app=webhook.app.slug),
                message,
                None,
                recipients,
            )

        transaction.on_commit(tell, robust=True)


@task()
def email_event(event_id: str) -> int:
    """Email event ``event_id`` to the members who chose its type and may still view the app;
    returns how many were sent."""
    event = WebhookEvent.objects.select_related("app").filter(pk=event_id).first()
    if event is None:
        return 0
    subscriptions = EmailSubscription.objects.filter(
        app_id=event.app_id, events__contains=f",{event.type},"
    ).select_related("user")
    sent = 0
    label = terms.EVENT_LABELS.get(event.type, event.type)
    lines = "\n".join(f"{key}: {value}" for key, value in event.data.items() if value)
    for subscription in subscriptions:
        user = subscription.user
        if not user.email or not user.is_active:
            continue
        if not actor_for_user(user).may(VIEW, event.app):
            continue
        send_mail(
            f"[Versions] {event.app.name}: {label}",
            f"{label} in {event.app.name} ({event.app.slug}).\n\n{lines}\n\nEvent {event.id}.",
            None,
            [user.email],
        )
        sent += 1
    return sent


_rescued = {"last": datetime.min.replace(tzinfo=UTC)}


def rescue(now: datetime) -> None:
    """Enqueue what a lost enqueue left waiting (with a queue outside the database, a web
    process that died between its commit and its enqueue): events not fanned out and due
    deliveries nobody holds, a minute late. At most every ``VERSIONS_WEBHOOK_RESCUE_SECONDS``
    (10) in one worker process."""
    every = timedelta(seconds=float(getattr(settings, "VERSIONS_WEBHOOK_RESCUE_SECONDS", 10)))
    if now - _rescued["last"] < every:
        return
    _rescued["last"] = now
    late = now - _RESCUE_AFTER
    for event_id in WebhookEvent.objects.filter(fanned_out=False, created_on__lt=late).values_list(
        "pk", flat=True
    )[:50]:
        fan_out.enqueue(event_id)
    waiting = WebhookDelivery.objects.filter(
        Q(lease_until__isnull=True) | Q(lease_until__lt=now),
        state=WebhookDelivery.PENDING,
        next_attempt_on__lt=late,
    )
    for delivery_id in waiting.values_list("pk", flat=True)[:50]:
        deliver.enqueue(delivery_id)
