"""versions.services.naming: names and the release mark, pinned, audited, checked for the actor."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission, User

from versions import messages, services
from versions.errors import Forbidden, InvalidInput, NotFound
from versions.messages import (
    NEEDS,
)
from versions.models import App, AuditEvent, ChangeSet, ReleaseMark, RestorePoint
from versions.terms import (
    NAME,
    ROLE_FOR,
)


@pytest.fixture
def receipt(app: App) -> services.WriteReceipt:
    return services.write_artifact(app, "pltf_page", "index", "v1\n", requested_by="a", tool="t")


def refusal(action: str, who: str, slug: str) -> str:
    """The words of a refusal: what the person may not do, and the role that would allow it."""
    return NEEDS[action].format(who=f"User “{who}”", slug=slug) + messages.NEEDS_ROLE.format(
        role=ROLE_FOR[action]
    )


def _viewer() -> services.Actor:
    user = User.objects.create_user("viewer", password=None)
    user.user_permissions.add(Permission.objects.get(codename="view_changeset"))
    return services.actor_for_user(user)


def test_a_named_set_pins_its_points_and_is_audited(app, receipt):
    cs = services.name_change_set(receipt.change_set_id, "  Quote   list ", by="rvaid")
    assert cs.name == "Quote list"
    assert RestorePoint.objects.get(id=receipt.restore_point_id).pinned
    event = AuditEvent.objects.get(action="set_named")
    assert (event.actor_name, event.details) == ("rvaid", {"name": "Quote list"})


def test_names_are_refused_in_words(app, receipt):
    for bad, message in (
        ("x" * 201, messages.NAME_TOO_LONG),
        ("a\x07b", messages.NAME_HAS_CONTROL),
        (42, messages.NAME_NOT_TEXT),
    ):
        with pytest.raises(InvalidInput) as refused:
            services.name_point(receipt.restore_point_id, bad, by="rvaid")
        assert refused.value.message == message
    assert RestorePoint.objects.get(id=receipt.restore_point_id).name == ""


def test_the_release_mark_moves_and_keeps_its_history(app, receipt):
    later = services.write_artifact(app, "pltf_page", "index", "v2\n", requested_by="a", tool="t")
    services.mark_release(receipt.change_set_id, by="rvaid")
    services.mark_release(later.change_set_id, by="rvaid")
    app.refresh_from_db()
    assert app.release_set_id == later.change_set_id
    services.unmark_release(app, by="rvaid")
    actions = list(ReleaseMark.objects.order_by("pk").values_list("action", flat=True))
    assert actions == [ReleaseMark.MARK, ReleaseMark.MARK, ReleaseMark.UNMARK]


def test_a_viewer_may_not_name_or_mark_and_nothing_changes(app, receipt):
    viewer = _viewer()
    with pytest.raises(Forbidden) as refused:
        services.name_change_set(receipt.change_set_id, "x", actor=viewer)
    assert refused.value.message == refusal(NAME, "viewer", "quotes")
    with pytest.raises(Forbidden):
        services.mark_release(receipt.change_set_id, actor=viewer)
    with pytest.raises(Forbidden):
        services.unmark_release(app, actor=viewer)
    assert ChangeSet.objects.get(id=receipt.change_set_id).name == ""
    assert not ReleaseMark.objects.exists()


def test_a_set_addressed_through_another_app_is_not_found(app, receipt):
    other = App.objects.create(slug="billing", name="Billing")
    with pytest.raises(NotFound):
        services.name_change_set(receipt.change_set_id, "x", by="rvaid", app=other)
    with pytest.raises(NotFound):
        services.mark_release(receipt.change_set_id, by="rvaid", app=other)
