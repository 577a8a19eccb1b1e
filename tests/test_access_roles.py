"""Every action × every role × how the person holds it (docs/architecture.md#access): a member, a
member of a group, not a member, or a global permission. The check is the services' (one door): an
action above the role is ``Forbidden`` naming the role it needs, an app without a role ``NotFound``,
and nothing changes on a refusal."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from django.contrib.auth.models import Group, Permission, User

from versions import messages, services
from versions.errors import Forbidden, NotFound
from versions.models import App, AppMembership, AuditEvent, ChangeSet, RestorePoint
from versions.terms import (
    MANAGE,
    NAME,
    PERMISSIONS,
    RESTORE,
    ROLE_FOR,
    VIEW,
)

ROLES = list(AppMembership.ROLES)


def _sets(app: App) -> tuple[str, str]:
    first = services.write_artifact(
        app, "pltf_page", "index", "v1\n", requested_by="setup", tool="t", run_id="a"
    )
    later = services.write_artifact(
        app, "pltf_page", "index", "v2\n", requested_by="agent", tool="t", run_id="b"
    )
    services.mark_release(first.change_set_id, by="setup")
    return first.change_set_id, later.change_set_id


# action → (what it needs, how to try it with an actor)
ACTIONS: dict[str, tuple[str, Callable[[services.Actor, App, str], object]]] = {
    "view": (VIEW, lambda a, app, s: services.app_for(app.slug, actor=a)),
    "name": (NAME, lambda a, app, s: services.name_change_set(s, "", actor=a)),
    "mark": (NAME, lambda a, app, s: services.mark_release(s, actor=a)),
    "restore": (
        RESTORE,
        lambda a, app, s: services.restore_change_set(s, actor=a, dry_run=True),
    ),
    "revert": (
        RESTORE,
        lambda a, app, s: services.revert_change_set(s, actor=a, dry_run=True),
    ),
    "restore_to_release": (
        RESTORE,
        lambda a, app, s: services.restore_to_release(app, actor=a, dry_run=True),
    ),
    "manage": (
        MANAGE,
        lambda a, app, s: services.app_for(app.slug, actor=a, action=MANAGE),
    ),
}


def _holder(how: str, role: str | None, app: App, action: str) -> User:
    user = User.objects.create_user(f"{how}-{role}-{action}"[:150], password=None)
    if how == "member":
        services.add_member(app, role=role, username=user.username, by="setup")
    elif how == "group":
        group = Group.objects.create(name=f"g-{user.username}"[:150])
        user.groups.add(group)
        services.add_member(app, role=role, group=group.name, by="setup")
    elif how == "global":
        needed = PERMISSIONS.get(ACTIONS[action][0])
        codenames = ["view_changeset"] + ([needed.split(".")[1]] if needed else [])
        user.user_permissions.add(*Permission.objects.filter(codename__in=codenames))
    return User.objects.get(pk=user.pk)


def _snapshot() -> tuple:
    return (
        RestorePoint.objects.count(),
        ChangeSet.objects.count(),
        tuple(ChangeSet.objects.order_by("id").values_list("name", flat=True)),
        App.objects.values_list("release_set_id", flat=True).first(),
        AuditEvent.objects.exclude(action__startswith="member_").count(),
    )


CASES = [(how, role) for how in ("member", "group") for role in ROLES] + [
    ("none", None),
    ("global", None),
]


@pytest.mark.parametrize("action", list(ACTIONS))
@pytest.mark.parametrize(("how", "role"), CASES)
def test_each_action_is_allowed_exactly_from_the_role_that_includes_it(app, action, how, role):
    first, _later = _sets(app)
    needed, attempt = ACTIONS[action]
    actor = services.actor_for_user(_holder(how, role, app, action))
    before = _snapshot()
    if how == "none":
        with pytest.raises(NotFound):
            attempt(actor, app, first)
        assert _snapshot() == before
        return
    if how == "global":
        allowed = needed != MANAGE  # no global permission manages members
    else:
        allowed = ROLES.index(role) >= ROLES.index(ROLE_FOR[needed])
    if allowed:
        attempt(actor, app, first)
        return
    with pytest.raises(Forbidden) as refused:
        attempt(actor, app, first)
    assert refused.value.message.endswith(messages.NEEDS_ROLE.format(role=ROLE_FOR[needed]))
    assert _snapshot() == before


def test_a_role_on_one_app_gives_nothing_on_another(app):
    other = App.objects.create(slug="billing", name="Billing")
    _first, later = _sets(other)
    user = _holder("member", "owner", app, "view")
    actor = services.actor_for_user(user)
    with pytest.raises(NotFound):
        services.app_for("billing", actor=actor)
    with pytest.raises(NotFound):
        services.restore_change_set(later, actor=actor, dry_run=True)
    assert [a.slug for a in services_visible(actor)] == ["quotes"]


def services_visible(actor: services.Actor) -> list[App]:
    from versions import selectors

    return list(selectors.app_list(services.visible_app_ids(actor)))


def test_the_apps_list_costs_the_same_queries_for_1_or_30_memberships(
    app, django_assert_max_num_queries
):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from versions import selectors

    user = User.objects.create_user("many", password=None)
    services.add_member(app, role="viewer", username="many", by="setup")

    def count() -> int:
        with CaptureQueriesContext(connection) as captured:
            actor = services.actor_for_user(User.objects.get(pk=user.pk))
            list(selectors.app_list(services.visible_app_ids(actor)))
        return len(captured.captured_queries)

    few = count()
    for n in range(29):
        extra = App.objects.create(slug=f"app-{n}", name=f"App {n}")
        services.add_member(extra, role="viewer", username="many", by="setup")
    assert count() == few
