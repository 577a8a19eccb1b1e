"""versions.services.members: roles per app for users and groups (docs/architecture.md#access), kept
in the audit log; an app always keeps an owner; nothing changes on a refusal."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group, Permission, User

from versions import messages, services
from versions.errors import Forbidden, InvalidInput, NotFound
from versions.models import App, AppMembership, AuditEvent
from versions.terms import (
    PROMOTE,
    RESTORE,
)


@pytest.fixture
def owner(app: App) -> User:
    user = User.objects.create_user("olga", password=None)
    services.add_member(app, role="owner", username="olga", by="setup")
    return user


def _actor(user: User) -> services.Actor:
    return services.actor_for_user(User.objects.get(pk=user.pk))


def _state() -> list[tuple]:
    return list(
        AppMembership.objects.order_by("pk").values_list("app_id", "user_id", "group_id", "role")
    )


def test_an_owner_adds_a_user_and_a_group_and_each_change_is_audited(app, owner):
    User.objects.create_user("rita", password=None)
    Group.objects.create(name="marketing")
    actor = _actor(owner)
    services.add_member(app, role="reviewer", username="rita", actor=actor)
    group = services.add_member(app, role="viewer", group="marketing", actor=actor)
    services.change_role(app, group.pk, "restorer", actor=actor)
    services.remove_member(app, group.pk, actor=actor)
    events = list(
        AuditEvent.objects.filter(app=app, action__startswith="member_")
        .order_by("seq")
        .values_list("action", "actor_name", "details")
    )
    assert events[1:] == [
        ("member_added", "olga", {"whom": "user “rita”", "role": "reviewer"}),
        ("member_added", "olga", {"whom": "group “marketing”", "role": "viewer"}),
        (
            "member_role_changed",
            "olga",
            {"whom": "group “marketing”", "role": "restorer", "previous": "viewer"},
        ),
        ("member_removed", "olga", {"whom": "group “marketing”", "role": "restorer"}),
    ]


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"role": "admin", "username": "rita"}, InvalidInput, "There is no role “admin”"),
        (
            {"role": "viewer", "username": "nobody"},
            NotFound,
            messages.UNKNOWN_USER.format(name="nobody"),
        ),
        (
            {"role": "viewer", "group": "ghosts"},
            NotFound,
            messages.UNKNOWN_GROUP.format(name="ghosts"),
        ),
        ({"role": "viewer"}, InvalidInput, "Give a user or a group"),
    ],
)
def test_bad_members_and_roles_are_refused_in_words_and_nothing_changes(
    app, owner, kwargs, error, message
):
    User.objects.create_user("rita", password=None)
    before = _state()
    with pytest.raises(error) as refused:
        services.add_member(app, actor=_actor(owner), **kwargs)
    assert refused.value.message.startswith(message)
    assert _state() == before


def test_the_last_owner_cannot_be_removed_or_demoted(app, owner):
    membership = AppMembership.objects.get(user=owner)
    before = _state()
    for change in (
        lambda: services.remove_member(app, membership.pk, actor=_actor(owner)),
        lambda: services.change_role(app, membership.pk, "viewer", actor=_actor(owner)),
    ):
        with pytest.raises(InvalidInput) as refused:
            change()
        assert refused.value.message == messages.LAST_OWNER.format(
            whom="user “olga”", slug="quotes"
        )
    assert _state() == before
    User.objects.create_user("second", password=None)
    services.add_member(app, role="owner", username="second", actor=_actor(owner))
    services.remove_member(app, membership.pk, actor=_actor(owner))
    assert not AppMembership.objects.filter(user=owner).exists()


def test_only_owners_manage_members(app, owner):
    rita = User.objects.create_user("rita", password=None)
    services.add_member(app, role="promoter", username="rita", actor=_actor(owner))
    before = _state()
    with pytest.raises(Forbidden) as refused:
        services.add_member(app, role="owner", username="rita", actor=_actor(rita))
    assert refused.value.message.endswith(messages.NEEDS_ROLE.format(role="owner"))
    assert _state() == before


def test_adding_someone_twice_says_to_change_their_role(app, owner):
    User.objects.create_user("rita", password=None)
    services.add_member(app, role="viewer", username="rita", actor=_actor(owner))
    with pytest.raises(InvalidInput, match="already a member"):
        services.add_member(app, role="owner", username="rita", actor=_actor(owner))


def test_a_user_in_two_groups_gets_the_higher_role(app):
    user = User.objects.create_user("gus", password=None)
    for name, role in (("readers", "viewer"), ("fixers", "restorer")):
        group = Group.objects.create(name=name)
        user.groups.add(group)
        services.add_member(app, role=role, group=name, by="setup")
    actor = _actor(user)
    assert actor.may(RESTORE, app) and not actor.may(PROMOTE, app)


def test_a_global_permission_still_means_every_app(app):
    user = User.objects.create_user("glen", password=None)
    user.user_permissions.add(Permission.objects.get(codename="restore_changeset"))
    other = App.objects.create(slug="billing", name="Billing")
    actor = _actor(user)
    assert actor.may(RESTORE, app) and actor.may(RESTORE, other)
