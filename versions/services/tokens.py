"""Agent tokens: bearer tokens for the agent API and the MCP server, scoped to apps.

A token is random (``secrets.token_urlsafe``) and shown once; only its sha256 is stored.
A token authenticates its user: the user's Django permissions apply on top of the app scope.
Tokens expire (``expires_in_days``, 90 by default) and are listed and revoked by operators
(``list_agent_tokens``, ``revoke_agent_token``, the admin).
"""

from __future__ import annotations

import hashlib
import secrets
from datetime import timedelta
from typing import Any

from django.contrib.auth import get_user_model
from django.db import transaction
from django.db.models import Q, QuerySet
from django.utils import timezone

from versions.errors import Forbidden, InvalidInput, NotFound
from versions.messages import NOT_OWNER
from versions.models import AgentToken, App, AppMembership
from versions.services.audit import (
    Command,
    ExpiredToken,
    record,
)
from versions.terms import (
    DEFAULT_EXPIRY_DAYS,
    TOKEN_CREATED,
    TOKEN_EXPIRED_USED,
)
from versions.terms import (
    TOKEN_REVOKED as REVOKED,
)

TOKEN_PREFIX = "vt_"
RESTORE_PERMISSION = "versions.restore_changeset"
PROMOTE_PERMISSION = "versions.promote_deployment"
# last_used_on is refreshed at most this often, so a burst of requests writes it once.
_TOUCH_EVERY = timedelta(minutes=1)

USER_NOT_FOUND = "There is no user “{username}”."
USER_INACTIVE = "User “{username}” is inactive; an inactive user cannot hold a token."
NO_APPS = "A token needs at least one app: pass --app <slug>."
MAX_EXPIRY_DAYS = 3650
BAD_EXPIRY = "A token expires in 1 to {most} days (got {days})."
TOKEN_NOT_FOUND = "There is no agent token “{ref}”: give its id or its prefix (list_agent_tokens)."
TOKEN_AMBIGUOUS = "More than one agent token starts with “{ref}” (ids {ids}): give its id."
TOKEN_REVOKED = "Revoked token {id} ({prefix}…) of {user}. It authenticates nothing from now on."
TOKEN_ALREADY_REVOKED = "Token {id} ({prefix}…) of {user} was already revoked; nothing changed."


def hash_token(token: str) -> str:
    """The stored form of a token: the hex sha256 of its UTF-8 bytes."""
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


@transaction.atomic
def create_agent_token(
    username: str,
    app_slugs: list[str],
    *,
    label: str = "",
    expires_in_days: int = DEFAULT_EXPIRY_DAYS,
    can_promote: bool = False,
    actor: Any = None,
) -> tuple[str, AgentToken]:
    """Create a token for ``username`` scoped to ``app_slugs``, expiring in ``expires_in_days``;
    returns (the token, its row).

    The token itself is returned only here: the database keeps its hash. Only a token made
    ``can_promote`` may promote to production or roll it back (and its user needs the
    permission too). Recorded in the audit trail of each of its apps, as ``actor`` (default:
    the ``create_agent_token`` command).
    """
    if isinstance(expires_in_days, bool) or not 1 <= expires_in_days <= MAX_EXPIRY_DAYS:
        raise InvalidInput(
            BAD_EXPIRY.format(most=MAX_EXPIRY_DAYS, days=expires_in_days), field="expires_in_days"
        )
    user = get_user_model().objects.filter(username=username).first()
    if user is None:
        raise NotFound(USER_NOT_FOUND.format(username=username))
    if not user.is_active:
        raise InvalidInput(USER_INACTIVE.format(username=username), field="username")
    if not app_slugs:
        raise InvalidInput(NO_APPS, field="app")
    apps = []
    for slug in dict.fromkeys(app_slugs):
        app = App.objects.filter(slug=slug).first()
        if app is None:
            raise NotFound(f"There is no app “{slug}”.")
        if not _may_hold_token(user, app):
            raise Forbidden(NOT_OWNER.format(username=username, slug=slug))
        apps.append(app)
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    row = AgentToken.objects.create(
        user=user,
        key_hash=hash_token(token),
        prefix=token[:12],
        label=label[:200],
        expires_on=timezone.now() + timedelta(days=expires_in_days),
        can_promote=bool(can_promote),
    )
    row.apps.set(apps)
    _audit(TOKEN_CREATED, row, apps, actor or Command("create_agent_token"))
    return token, row


def _audit(action: str, row: AgentToken, apps: list[App], actor: Any) -> None:
    """One event per app the token acts on (each app's owners see it in its Activity)."""
    details = {
        "user": row.user.get_username(),
        "apps": sorted(app.slug for app in apps),
        "label": row.label,
        "expires_on": row.expires_on.isoformat() if row.expires_on else None,
        "can_promote": row.can_promote,
    }
    where: list[App | None] = list(apps) or [None]
    for app in where:
        record(action, actor=actor, app=app, targets=[row.prefix], details=details)


def _may_hold_token(user: Any, app: App) -> bool:
    """An app with members gives tokens only to its owners or to holders of a global
    permission (docs/architecture.md#access); an app nobody was made a member of keeps round 1's
    rule."""
    memberships = AppMembership.objects.filter(app=app)
    if not memberships.exists() or user.is_superuser:
        return True
    global_perms = ("versions.view_changeset", "versions.change_changeset")
    if any(user.has_perm(perm) for perm in (*global_perms, RESTORE_PERMISSION)):
        return True
    mine = memberships.filter(Q(user=user) | Q(group__in=user.groups.all()))
    return mine.filter(role=AppMembership.OWNER).exists()


def verify_token(
    token: str | None, *, request_meta: dict[str, str] | None = None
) -> AgentToken | None:
    """The live token row for ``token``: known, not revoked, not expired, of an active user;
    else None. An expired token's use is recorded in the audit trail (``request_meta``: where
    it came from)."""
    if not token or len(token) > 512:
        return None
    now = timezone.now()
    row = (
        AgentToken.objects.select_related("user")
        .filter(key_hash=hash_token(token), revoked=False)
        .filter(Q(expires_on__isnull=True) | Q(expires_on__gt=now))
        .first()
    )
    if row is None:
        _expired_use(token, now, request_meta)
        return None
    if not row.user.is_active:
        return None
    if row.last_used_on is None or now - row.last_used_on > _TOUCH_EVERY:
        AgentToken.objects.filter(pk=row.pk).update(last_used_on=now)
        row.last_used_on = now
    return row


def _expired_use(token: str, now: Any, request_meta: dict[str, str] | None) -> None:
    """Record the use of a known token past its expiry (one query when a token is refused)."""
    row = (
        AgentToken.objects.select_related("user")
        .filter(key_hash=hash_token(token), revoked=False, expires_on__lte=now)
        .first()
    )
    if row is None:
        return
    who = ExpiredToken(row, request_meta)
    _audit(TOKEN_EXPIRED_USED, row, list(row.apps.all()), who)


def token_app_slugs(row: AgentToken) -> set[str]:
    """The slugs of the apps ``row`` may act on."""
    cached = getattr(row, "_app_slugs", None)
    if cached is None:
        cached = set(row.apps.values_list("slug", flat=True))
        row._app_slugs = cached  # type: ignore[attr-defined]
    return cached


def token_can_promote(row: AgentToken) -> bool:
    """Whether the token was made ``--can-promote`` and its user holds the promote permission."""
    return row.can_promote and row.user.is_active and row.user.has_perm(PROMOTE_PERMISSION)


def list_agent_tokens(
    *, username: str | None = None, app_slug: str | None = None, active_only: bool = False
) -> QuerySet[AgentToken]:
    """Agent tokens, newest first, with their users and apps; filtered by user, app or state."""
    rows = AgentToken.objects.select_related("user").prefetch_related("apps")
    if username:
        rows = rows.filter(user__username=username)
    if app_slug:
        rows = rows.filter(apps__slug=app_slug).distinct()
    if active_only:
        now = timezone.now()
        rows = rows.filter(revoked=False, user__is_active=True).filter(
            Q(expires_on__isnull=True) | Q(expires_on__gt=now)
        )
    return rows.order_by("-created_on", "-id")


def find_agent_token(ref: str) -> AgentToken:
    """The token whose id is ``ref``, or whose prefix starts with ``ref`` (one only)."""
    ref = ref.strip().rstrip("…")
    rows = AgentToken.objects.select_related("user")
    if ref.isdigit():
        row = rows.filter(pk=int(ref)).first()
        if row is not None:
            return row
    matches = list(rows.filter(prefix__startswith=ref)[:6]) if len(ref) >= 3 else []
    if not matches:
        raise NotFound(TOKEN_NOT_FOUND.format(ref=ref))
    if len(matches) > 1:
        ids = ", ".join(str(m.pk) for m in matches)
        raise InvalidInput(TOKEN_AMBIGUOUS.format(ref=ref, ids=ids), field="token")
    return matches[0]


@transaction.atomic
def revoke_agent_token(ref: str, *, actor: Any = None) -> tuple[AgentToken, str]:
    """Revoke the token named by id or prefix; returns (its row, what happened in words).
    Recorded in the audit trail of each of its apps, as ``actor`` (default: the
    ``revoke_agent_token`` command)."""
    row = find_agent_token(ref)
    words = {"id": row.pk, "prefix": row.prefix, "user": row.user.get_username()}
    if row.revoked:
        return row, TOKEN_ALREADY_REVOKED.format(**words)
    AgentToken.objects.filter(pk=row.pk).update(revoked=True)
    row.revoked = True
    _audit(REVOKED, row, list(row.apps.all()), actor or Command("revoke_agent_token"))
    return row, TOKEN_REVOKED.format(**words)
