"""Read replicas: lag-tolerant reads go to PostgreSQL hot standbys (docs/operations.md).

``DATABASE_REPLICA_URLS`` adds one database alias per standby (``replica_1``, ``replica_2``, …).
The router here sends a read to a replica only when all of these hold:

- the request is lag-tolerant (the middleware below says so): a GET or HEAD of the live app or
  a preview, of a panel page, or of the agent API's history and compare reads;
- the person or token asking has not written in the last ``VERSIONS_REPLICA_PIN_SECONDS``
  (every write request pins them to the primary: they see their own restore on their next page);
- the read is not inside a transaction (pre-flights, locks and ``select_for_update`` run in one,
  on the primary) and is of the project's own history tables (sign-in, sessions, tokens,
  memberships and the pins themselves are always read on the primary: access is decided on
  the freshest state);
- a replica is up, still a standby, and behind by at most ``VERSIONS_REPLICA_MAX_LAG_SECONDS``
  (checked at most every ``VERSIONS_REPLICA_CHECK_SECONDS`` per process, on the replica itself).

Writes always go to the primary. A replica that fails while answering costs the request one
retry on the primary (the view runs again, reads only), never an error page, and is skipped
until its next check.
"""

from __future__ import annotations

import hashlib
import logging
import random
import threading
import time
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, connections
from django.db import Error as DatabaseError
from django.http import HttpRequest, HttpResponse
from django.utils import timezone

logger = logging.getLogger(__name__)

ALIAS_PREFIX = "replica_"
SAFE_METHODS = frozenset({"GET", "HEAD"})

# Whether this request's reads may go to a replica, and which replica answered one.
_replica_reads: ContextVar[bool] = ContextVar("versions_replica_reads", default=False)
_replica_used: ContextVar[str | None] = ContextVar("versions_replica_used", default=None)


def replica_aliases() -> list[str]:
    """The database aliases of the configured standbys, in order."""
    return [alias for alias in settings.DATABASES if alias.startswith(ALIAS_PREFIX)]


def pin_seconds() -> float:
    return float(getattr(settings, "VERSIONS_REPLICA_PIN_SECONDS", 5))


def max_lag_seconds() -> float:
    return float(getattr(settings, "VERSIONS_REPLICA_MAX_LAG_SECONDS", 10))


def check_seconds() -> float:
    return float(getattr(settings, "VERSIONS_REPLICA_CHECK_SECONDS", 1))


# --- health -----------------------------------------------------------------------------------


@dataclass
class _State:
    checked: float  # time.monotonic() of the check
    usable: bool
    reason: str = ""


_states: dict[str, _State] = {}
_states_lock = threading.Lock()

# The primary's WAL position, then on the standby: still in recovery, bytes not yet replayed,
# seconds since the last transaction it replayed was committed.
_PRIMARY_POSITION = "SELECT pg_current_wal_lsn()::text"
_STANDBY_STATE = (
    "SELECT pg_is_in_recovery(), "
    "pg_wal_lsn_diff(%s::pg_lsn, pg_last_wal_replay_lsn()), "
    "EXTRACT(EPOCH FROM clock_timestamp() - pg_last_xact_replay_timestamp())"
)


def _check(alias: str) -> _State:
    """Ask the primary where its WAL is and the standby how far it has replayed: caught up
    (replayed at least that far) is lag 0; else the lag is the age of its last replayed
    commit."""
    now = time.monotonic()
    try:
        with connections[DEFAULT_DB_ALIAS].cursor() as cursor:
            cursor.execute(_PRIMARY_POSITION)
            position = cursor.fetchone()[0]
        with connections[alias].cursor() as cursor:
            cursor.execute(_STANDBY_STATE, [position])
            in_recovery, behind, age = cursor.fetchone()
    except DatabaseError as exc:
        connections[alias].close()
        return _State(now, False, f"unreachable ({str(exc).strip().splitlines()[0][:200]})")
    if not in_recovery:
        return _State(now, False, "not a standby (it was promoted or is a primary of its own)")
    if behind is not None and behind <= 0:
        return _State(now, True)
    lag = float(age) if age is not None else float("inf")
    if lag > max_lag_seconds():
        return _State(now, False, f"behind by {lag:.1f} s (the bound is {max_lag_seconds():g} s)")
    return _State(now, True)


def _usable(alias: str) -> bool:
    state = _states.get(alias)
    if state is not None and time.monotonic() - state.checked < check_seconds():
        return state.usable
    fresh = _check(alias)
    with _states_lock:
        before = _states.get(alias)
        _states[alias] = fresh
    if before is None or before.usable != fresh.usable:
        if fresh.usable:
            logger.info("read replica %s is in use", alias)
        else:
            logger.warning("read replica %s is skipped: %s", alias, fresh.reason)
    return fresh.usable


def mark_unusable(alias: str, reason: str) -> None:
    """Skip ``alias`` until its next check (a query on it just failed)."""
    with _states_lock:
        _states[alias] = _State(time.monotonic(), False, reason)
    connections[alias].close()
    logger.warning(
        "read replica %s failed while answering (%s): retried on the primary", alias, reason
    )


def healthy_replica() -> str | None:
    """A usable replica's alias (one at random when several are), or None."""
    usable = [alias for alias in replica_aliases() if _usable(alias)]
    return random.choice(usable) if usable else None  # noqa: S311 - spreading load, not secrets


# --- router -----------------------------------------------------------------------------------

# Read on the primary whatever the request: who is signed in, which token, who may do what,
# and the pins themselves.
_PRIMARY_MODELS = frozenset({"agenttoken", "appmembership", "replicapin", "auditchainhead"})


class ReplicaRouter:
    """Reads of a lag-tolerant request, outside any transaction, to a healthy replica; every
    write and everything else to the primary."""

    def db_for_read(self, model: type[Any], **hints: Any) -> str | None:
        if not _replica_reads.get():
            return None
        meta = model._meta
        if meta.app_label != "versions" or meta.model_name in _PRIMARY_MODELS:
            return None
        if connections[DEFAULT_DB_ALIAS].in_atomic_block:
            return None
        alias = healthy_replica()
        if alias is not None:
            _replica_used.set(alias)
        return alias

    def db_for_write(self, model: type[Any], **hints: Any) -> str:
        return DEFAULT_DB_ALIAS

    def allow_relation(self, obj1: Any, obj2: Any, **hints: Any) -> bool:
        return True  # the replicas hold the primary's rows

    def allow_migrate(self, db: str, app_label: str, **hints: Any) -> bool:
        return db == DEFAULT_DB_ALIAS


def read_alias() -> str:
    """Where a raw read of history should run now (the router's choice for a history table)."""
    from versions.models import Blob

    return ReplicaRouter().db_for_read(Blob) or DEFAULT_DB_ALIAS


# --- which requests may read from a replica ---------------------------------------------------

_API = "/api/v1/"


def _api_read_is_lag_tolerant(request: HttpRequest) -> bool:
    """The API's history and compare reads: an artifact's history, a state at a ref (``?at=``),
    change sets and their diffs, restore points, receipts. A plain artifact read stays on the
    primary: its ETag is what the agent's next conditional write is checked against."""
    path = request.path_info[len(_API) :]
    return (
        path.endswith(("/history", "/diff"))
        or "at" in request.GET
        or path.startswith(("change-sets/", "restore-points/", "restore-sets/"))
        or (path.startswith("apps/") and path.rstrip("/").endswith("/change-sets"))
    )


def _is_live(path: str) -> bool:
    parts = path.split("/", 4)  # "", "apps", slug, rest…
    return len(parts) >= 3 and parts[1] == "apps" and (len(parts) < 4 or parts[3] != "versions")


def pin_key(request: HttpRequest) -> str | None:
    """Who asks, as a pin's key: the token (by its hash) or the signed-in person; None for a
    visitor. A visitor without a session cookie is never looked up."""
    header = request.headers.get("Authorization", "")
    if header[:7].lower() == "bearer " and header[7:].strip():
        return "t:" + hashlib.sha256(header[7:].strip().encode()).hexdigest()
    if settings.SESSION_COOKIE_NAME not in request.COOKIES:
        return None
    user = getattr(request, "user", None)
    if user is not None and user.is_authenticated:
        return f"u:{user.pk}"
    return None


def _pinned(key: str | None) -> bool:
    from versions.models import ReplicaPin

    return key is not None and ReplicaPin.objects.filter(key=key, until__gt=timezone.now()).exists()


def lag_tolerant(request: HttpRequest) -> bool:
    """Whether this request's reads may go to a replica (see the module's docstring)."""
    if request.method not in SAFE_METHODS:
        return False
    path = request.path_info
    if path.startswith(_API):
        return _api_read_is_lag_tolerant(request) and not _pinned(pin_key(request))
    if path.startswith(("/admin/", "/accounts/", "/static/")):
        return False
    key = pin_key(request)
    if _is_live(path):
        return not _pinned(key)  # visitors of the live app and previews; pinned people not
    return key is not None and not _pinned(key)  # panel pages of a signed-in person


def pin(key: str) -> None:
    """Send ``key``'s reads to the primary for the pin's seconds from now."""
    from versions.models import ReplicaPin

    until = timezone.now() + timedelta(seconds=pin_seconds())
    ReplicaPin.objects.bulk_create(
        [ReplicaPin(key=key, until=until)],
        update_conflicts=True,
        unique_fields=["key"],
        update_fields=["until"],
    )


class ReplicaReads:
    """Middleware (last in the list, installed when replicas are configured): decides per
    request whether its reads may go to a replica, pins a writer to the primary, and answers a
    replica's failure with one retry of the view on the primary."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        reads = _replica_reads.set(False)
        used = _replica_used.set(None)
        try:
            response = self.get_response(request)
        finally:
            _replica_reads.reset(reads)
            _replica_used.reset(used)
        if request.method not in SAFE_METHODS:
            key = pin_key(request)
            if key is not None:
                try:
                    pin(key)
                except DatabaseError:  # the write is done: its answer stands
                    logger.warning("could not pin %s to the primary", key[:10], exc_info=True)
        return response

    def process_view(
        self, request: HttpRequest, view: Callable[..., Any], args: Any, kwargs: Any
    ) -> None:
        request._versions_view = (view, args, kwargs)  # type: ignore[attr-defined]
        if lag_tolerant(request):
            _replica_reads.set(True)

    def process_exception(self, request: HttpRequest, exception: Exception) -> Any:
        alias = _replica_used.get()
        if not _replica_reads.get() or alias is None or not isinstance(exception, DatabaseError):
            return None
        mark_unusable(
            alias,
            str(exception).strip().splitlines()[0][:200]
            if str(exception)
            else type(exception).__name__,
        )
        _replica_reads.set(False)
        _replica_used.set(None)
        view, args, kwargs = request._versions_view  # type: ignore[attr-defined]
        try:
            response = view(request, *args, **kwargs)
            if hasattr(response, "render") and callable(response.render):
                response = response.render()
        except DatabaseError:
            return None  # the primary failed too: the original error takes its usual course
        return response
