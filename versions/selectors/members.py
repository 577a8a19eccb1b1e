"""Who has which role on an app (docs/architecture.md#access), and the recent changes to it."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group

from versions.models import App, AppMembership, AuditEvent

MEMBER_EVENTS = ("member_added", "member_role_changed", "member_removed")


def members(app: App) -> list[AppMembership]:
    """The app's members, owners first, with their users and groups (one query)."""
    rows = list(AppMembership.objects.filter(app=app).select_related("user", "group"))
    order = {role: i for i, role in enumerate(reversed(AppMembership.ROLES))}
    return sorted(
        rows,
        key=lambda m: (
            order[m.role],
            m.user is None,
            (m.user.get_username() if m.user is not None else m.group.name).lower(),  # type: ignore[union-attr]
        ),
    )


def member_history(app: App, limit: int = 20) -> list[AuditEvent]:
    """The latest changes to the app's members, newest first."""
    return list(AuditEvent.objects.filter(app=app, action__in=MEMBER_EVENTS)[:limit])


def member_candidates() -> tuple[list[str], list[str]]:
    """Active usernames and group names, for the add form's suggestions (at most 200 each)."""
    users = get_user_model().objects.filter(is_active=True).order_by("username")
    return (
        list(users.values_list("username", flat=True)[:200]),
        list(Group.objects.order_by("name").values_list("name", flat=True)[:200]),
    )
