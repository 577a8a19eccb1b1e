"""Agent tokens: bearer tokens for the agent API and the MCP server, scoped to apps.

A token is random (``secrets.token_urlsafe``) and shown once; only its sha256 is stored.
A token authenticates its user: the user's Django permissions apply on top of the app scope.
"""

from __future__ import annotations

import hashlib
import secrets
from datetime import timedelta
from typing import Any

from django.contrib.auth import get_user_model
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from versions.errors import Forbidden, InvalidInput, NotFound
from versions.models import AgentToken, App, AppMembership

TOKEN_PREFIX = "vt_"
RESTORE_PERMISSION = "versions.restore_changeset"
# last_used_on is refreshed at most this often, so a burst of requests writes it once.
_TOUCH_EVERY = timedelta(minutes=1)

USER_NOT_FOUND = "There is no user “{username}”."
USER_INACTIVE = "User “{username}” is inactive; an inactive user cannot hold a token."
NO_APPS = "A token needs at least one app: pass --app <slug>."
NOT_OWNER = (
    "User “{username}” is not an owner of app “{slug}”: only an app's owners (or people with "
    "a global permission) may hold its agent tokens, and a token never acts beyond its user's "
    "role. Nothing was created."
)


def hash_token(token: str) -> str:
    """The stored form of a token: the hex sha256 of its UTF-8 bytes."""
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


@transaction.atomic
def create_agent_token(
    username: str, app_slugs: list[str], *, label: str = ""
) -> tuple[str, AgentToken]:
    """Create a token for ``username`` scoped to ``app_slugs``; returns (the token, its row).

    The token itself is returned only here: the database keeps its hash.
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
        if not _may_hold_token(user, app):
            raise Forbidden(NOT_OWNER.format(username=username, slug=slug))
        apps.append(app)
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    row = AgentToken.objects.create(
        user=user, key_hash=hash_token(token), prefix=token[:12], label=label[:200]
    )
    row.apps.set(apps)
    return token, row


def _may_hold_token(user: Any, app: App) -> bool:
    """An app with members gives tokens only to its owners or to holders of a global
    permission (SPEC §19); an app nobody was made a member of keeps round 1's rule."""
    memberships = AppMembership.objects.filter(app=app)
    if not memberships.exists() or user.is_superuser:
        return True
    global_perms = ("versions.view_changeset", "versions.change_changeset")
    if any(user.has_perm(perm) for perm in (*global_perms, RESTORE_PERMISSION)):
        return True
    mine = memberships.filter(Q(user=user) | Q(group__in=user.groups.all()))
    return mine.filter(role=AppMembership.OWNER).exists()


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


def revoke_token(row: AgentToken) -> None:
    """Revoke a token: it authenticates nothing from now on."""
    AgentToken.objects.filter(pk=row.pk).update(revoked=True)
