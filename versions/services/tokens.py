"""Agent tokens: bearer tokens for the agent API and the MCP server, scoped to apps.

A token is random (``secrets.token_urlsafe``) and shown once; only its sha256 is stored.
A token authenticates its user: the user's Django permissions apply on top of the app scope.
"""

from __future__ import annotations

import hashlib
import secrets
from datetime import timedelta

from django.contrib.auth import get_user_model
from django.db import transaction
from django.utils import timezone

from versions.errors import InvalidInput, NotFound
from versions.models import AgentToken, App

TOKEN_PREFIX = "vt_"
RESTORE_PERMISSION = "versions.restore_changeset"
PROMOTE_PERMISSION = "versions.promote_deployment"
# last_used_on is refreshed at most this often, so a burst of requests writes it once.
_TOUCH_EVERY = timedelta(minutes=1)

USER_NOT_FOUND = "There is no user “{username}”."
USER_INACTIVE = "User “{username}” is inactive; an inactive user cannot hold a token."
NO_APPS = "A token needs at least one app: pass --app <slug>."


def hash_token(token: str) -> str:
    """The stored form of a token: the hex sha256 of its UTF-8 bytes."""
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


@transaction.atomic
def create_agent_token(
    username: str, app_slugs: list[str], *, label: str = "", can_promote: bool = False
) -> tuple[str, AgentToken]:
    """Create a token for ``username`` scoped to ``app_slugs``; returns (the token, its row).

    The token itself is returned only here: the database keeps its hash. Only a token made
    ``can_promote`` may promote to production or roll it back (and its user needs the
    permission too).
    """
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
        apps.append(app)
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    row = AgentToken.objects.create(
        user=user,
        key_hash=hash_token(token),
        prefix=token[:12],
        label=label[:200],
        can_promote=bool(can_promote),
    )
    row.apps.set(apps)
    return token, row


def verify_token(token: str | None) -> AgentToken | None:
    """The live token row for ``token``: known, not revoked, of an active user; else None."""
    if not token or len(token) > 512:
        return None
    row = (
        AgentToken.objects.select_related("user")
        .filter(key_hash=hash_token(token), revoked=False)
        .first()
    )
    if row is None or not row.user.is_active:
        return None
    now = timezone.now()
    if row.last_used_on is None or now - row.last_used_on > _TOUCH_EVERY:
        AgentToken.objects.filter(pk=row.pk).update(last_used_on=now)
        row.last_used_on = now
    return row


def token_app_slugs(row: AgentToken) -> set[str]:
    """The slugs of the apps ``row`` may act on."""
    cached = getattr(row, "_app_slugs", None)
    if cached is None:
        cached = set(row.apps.values_list("slug", flat=True))
        row._app_slugs = cached  # type: ignore[attr-defined]
    return cached


def token_can_restore(row: AgentToken) -> bool:
    """Whether the token's user holds the restore permission."""
    return row.user.is_active and row.user.has_perm(RESTORE_PERMISSION)


def token_can_promote(row: AgentToken) -> bool:
    """Whether the token was made ``--can-promote`` and its user holds the promote permission."""
    return row.can_promote and row.user.is_active and row.user.has_perm(PROMOTE_PERMISSION)


def revoke_token(row: AgentToken) -> None:
    """Revoke a token: it authenticates nothing from now on."""
    AgentToken.objects.filter(pk=row.pk).update(revoked=True)
