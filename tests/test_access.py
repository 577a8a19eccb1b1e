"""versions.services.access: the Actor each door builds, and the checks every service makes."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission, User

from versions import messages, services
from versions.errors import Forbidden, NotFound, Unauthenticated
from versions.messages import (
    APP_NOT_FOUND,
    NEEDS,
)
from versions.models import App
from versions.terms import (
    NAME,
    PROMOTE,
    RESTORE,
    ROLE_FOR,
    VIEW,
    WRITE,
)


def refusal(action: str, who: str, slug: str) -> str:
    """The words of a refusal: what the person may not do, and the role that would allow it."""
    return NEEDS[action].format(who=f"User “{who}”", slug=slug) + messages.NEEDS_ROLE.format(
        role=ROLE_FOR[action]
    )


def _user(username: str, *codenames: str, superuser: bool = False) -> User:
    if superuser:
        return User.objects.create_superuser(username, password=None)
    user = User.objects.create_user(username, password=None)
    user.user_permissions.add(
        *Permission.objects.filter(content_type__app_label="versions", codename__in=codenames)
    )
    return user


@pytest.fixture
def other(db) -> App:
    return App.objects.create(slug="billing", name="Billing")


def test_a_command_may_do_everything_everywhere(app, other):
    actor = services.Actor.command("load_demo")
    for action in (VIEW, NAME, RESTORE, PROMOTE):
        assert actor.may(action, app) and actor.may(action, other)
    assert actor.label == "command:load_demo"


def test_a_user_may_what_its_global_permissions_say_on_every_app(app, other):
    viewer = services.actor_for_user(_user("viewer", "view_changeset"))
    assert viewer.may(VIEW, app) and viewer.may(VIEW, other)
    assert not viewer.may(RESTORE, app)
    with pytest.raises(Forbidden) as refused:
        viewer.require(RESTORE, app)
    assert refused.value.message == refusal(RESTORE, "viewer", "quotes")


def test_a_person_who_may_view_nothing_may_not_use_the_panel(app):
    with pytest.raises(Forbidden) as refused:
        services.require_panel(services.actor_for_user(_user("nobody")))
    assert refused.value.message == messages.NO_VIEW


def test_an_app_the_actor_may_not_see_does_not_exist_for_it(app):
    nobody = services.actor_for_user(_user("nobody"))
    with pytest.raises(NotFound):
        services.app_for("quotes", actor=nobody)
    with pytest.raises(NotFound):
        services.app_for("nope", actor=services.Actor.command())


def test_a_token_acts_only_on_its_apps_and_restores_only_with_its_users_permission(app, other):
    token, _row = services.create_agent_token(_user("agent").username, ["quotes"])
    actor = services.authenticate_token(token)
    assert services.app_for("quotes", actor=actor, action=WRITE) == app
    # Outside its apps, an app does not exist for a token: the same answer as a missing one.
    with pytest.raises(NotFound) as refused:
        services.app_for("billing", actor=actor)
    assert refused.value.message == APP_NOT_FOUND.format(slug="billing")
    with pytest.raises(Forbidden) as no_restore:
        services.app_for("quotes", actor=actor, action=RESTORE)
    assert no_restore.value.message == refusal(RESTORE, "agent", "quotes")


def test_a_revoked_or_unknown_token_is_refused_in_words(app):
    token, row = services.create_agent_token(_user("agent").username, ["quotes"])
    services.revoke_app_token(str(row.pk))
    for candidate in (token, "vt_nope", None):
        with pytest.raises(Unauthenticated) as refused:
            services.authenticate_token(candidate)
        assert refused.value.message == messages.TOKEN_REFUSED


def test_set_and_point_lookups_check_the_actor_and_say_which_id(app, other):
    receipt = services.write_artifact(app, "pltf_page", "index", "v1\n", requested_by="a", tool="t")
    token, _row = services.create_agent_token(_user("agent").username, ["billing"])
    outsider = services.authenticate_token(token)
    # Another app's ids answer what missing ones do (docs/api.md#existence).
    with pytest.raises(NotFound) as elsewhere:
        services.set_for(receipt.change_set_id, actor=outsider)
    assert elsewhere.value.message == f"There is no change set “{receipt.change_set_id}”."
    with pytest.raises(NotFound) as elsewhere:
        services.point_for(receipt.restore_point_id, actor=outsider)
    assert elsewhere.value.message == f"There is no restore point “{receipt.restore_point_id}”."
    with pytest.raises(NotFound) as missing:
        services.set_for("cs_rp_zzz_00000000", actor=outsider)
    assert missing.value.message == "There is no change set “cs_rp_zzz_00000000”."
    assert services.set_for(receipt.change_set_id).app == app


def test_a_workspace_rollback_needs_the_restore_permission_on_every_app(app):
    services.require_workspace_rollback(services.actor_for_user(_user("boss", superuser=True)))
    with pytest.raises(Forbidden):
        services.require_workspace_rollback(services.actor_for_user(_user("v", "view_changeset")))
