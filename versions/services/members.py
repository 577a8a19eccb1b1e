"""People's access per app (docs/architecture.md#access): adding a user or a group with a role,
changing the role, removing them — for the app's owners, every change in the audit trail.

An app always keeps an owner: removing or demoting its last owner is refused in words (a
superuser can always manage it too).
"""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db import transaction

from versions.errors import Forbidden, InvalidInput, NotFound
from versions.messages import (
    ALREADY_MEMBER,
    LAST_OWNER,
    MEMBERSHIP_NOT_FOUND,
    UNKNOWN_GROUP,
    UNKNOWN_ROLE,
    UNKNOWN_USER,
)
from versions.models import AgentToken, App, AppMembership
from versions.services.access import (
    Actor,
    app_for,
)
from versions.services.audit import (
    Command,
    record,
)
from versions.services.tokens import find_agent_token, revoke_agent_token
from versions.terms import (
    MANAGE,
    MEMBER_ADDED,
    MEMBER_REMOVED,
    MEMBER_ROLE_CHANGED,
)

USER_OR_GROUP = "Give a user or a group (one of them, not both)."

ADDED = MEMBER_ADDED
CHANGED = MEMBER_ROLE_CHANGED
REMOVED = MEMBER_REMOVED
NO_TOKEN_APPS = "{who} may not revoke token {id}: it names no app, so only a superuser may."


def _role(role: object) -> str:
    if role not in AppMembership.ROLES:
        roles = ", ".join(AppMembership.ROLES)
        raise InvalidInput(UNKNOWN_ROLE.format(role=role, roles=roles), field="role")
    return str(role)


def _audit(
    app: App,
    action: str,
    actor: Actor | None,
    by: str | None,
    membership: AppMembership,
    **details: str,
) -> None:
    """The change in the audit trail (who, whom, role, when), in the change's transaction."""
    member = membership.user if membership.user is not None else membership.group
    kind = "user" if membership.user is not None else "group"
    record(
        action,
        actor=actor if actor is not None else Command(by or "command"),
        app=app,
        targets=[f"{kind}:{member.pk if member is not None else ''}"],
        details={"whom": membership.whom, **details},
    )


def _by(by: str | None, actor: Actor | None) -> str:
    return by if by else (actor.name if actor is not None else "")


def _keeps_an_owner(app: App, leaving: AppMembership) -> None:
    """Refuse a change that would leave ``app`` with no owner (``leaving`` stops being one)."""
    owners = AppMembership.objects.select_for_update().filter(app=app, role=AppMembership.OWNER)
    if leaving.role == AppMembership.OWNER and not owners.exclude(pk=leaving.pk).exists():
        raise InvalidInput(LAST_OWNER.format(whom=leaving.whom, slug=app.slug), field="role")


def add_member(
    app: App | str,
    *,
    role: str,
    username: str | None = None,
    group: str | None = None,
    actor: Actor | None = None,
    by: str | None = None,
) -> AppMembership:
    """Give a user (by username) or a group (by name) a role on the app."""
    app_obj = app_for(app, actor=actor, action=MANAGE)
    role = _role(role)
    if bool(username) == bool(group):
        raise InvalidInput(USER_OR_GROUP, field="user")
    with transaction.atomic():
        if username:
            user = get_user_model().objects.filter(username=username).first()
            if user is None:
                raise NotFound(UNKNOWN_USER.format(name=username))
            existing = AppMembership.objects.filter(app=app_obj, user=user).first()
            membership = AppMembership(app=app_obj, user=user, role=role)
        else:
            found = Group.objects.filter(name=group).first()
            if found is None:
                raise NotFound(UNKNOWN_GROUP.format(name=group))
            existing = AppMembership.objects.filter(app=app_obj, group=found).first()
            membership = AppMembership(app=app_obj, group=found, role=role)
        if existing is not None:
            raise InvalidInput(
                ALREADY_MEMBER.format(whom=existing.whom, slug=app_obj.slug, role=existing.role),
                field="user",
            )
        membership.created_by = _by(by, actor)
        membership.save()
        _audit(app_obj, ADDED, actor, by, membership, role=role)
    return membership


def _membership(app: App, membership_id: object) -> AppMembership:
    pk = membership_id if isinstance(membership_id, int) else None
    if isinstance(membership_id, str) and membership_id.isdigit():
        pk = int(membership_id)
    found = (
        AppMembership.objects.select_for_update(of=("self",))
        .select_related("user", "group")
        .filter(app=app, pk=pk)
        .first()
        if pk is not None
        else None
    )
    if found is None:
        raise NotFound(MEMBERSHIP_NOT_FOUND.format(slug=app.slug))
    return found


def change_role(
    app: App | str,
    membership_id: int | str,
    role: str,
    *,
    actor: Actor | None = None,
    by: str | None = None,
) -> AppMembership:
    """Change a member's role (an app's last owner keeps theirs)."""
    app_obj = app_for(app, actor=actor, action=MANAGE)
    role = _role(role)
    with transaction.atomic():
        membership = _membership(app_obj, membership_id)
        previous = membership.role
        if role == previous:
            return membership
        if role != AppMembership.OWNER:
            _keeps_an_owner(app_obj, membership)
        membership.role = role
        membership.save(update_fields=["role"])
        _audit(app_obj, CHANGED, actor, by, membership, role=role, previous=previous)
    return membership


def remove_member(
    app: App | str, membership_id: int | str, *, actor: Actor | None = None, by: str | None = None
) -> None:
    """Remove a member from the app (never its last owner)."""
    app_obj = app_for(app, actor=actor, action=MANAGE)
    with transaction.atomic():
        membership = _membership(app_obj, membership_id)
        _keeps_an_owner(app_obj, membership)
        _audit(app_obj, REMOVED, actor, by, membership, role=membership.role)
        membership.delete()


def revoke_app_token(ref: str, *, actor: Actor | None = None) -> tuple[AgentToken, str]:
    """Revoke the agent token named by id or prefix as ``actor``, who must manage every app
    the token may act on (``Forbidden`` / ``NotFound`` in words otherwise); returns (its row,
    what happened in words). Without an actor, a trusted command revokes it."""
    if actor is not None:
        row = find_agent_token(ref)
        apps = list(row.apps.all())
        if not apps and MANAGE not in actor.everywhere:
            raise Forbidden(NO_TOKEN_APPS.format(who=actor.who, id=row.pk))
        for app in apps:
            app_for(app, actor=actor, action=MANAGE)
        ref = str(row.pk)
    return revoke_agent_token(ref)
