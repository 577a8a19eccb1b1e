"""versions.services.flow: the one restore flow every door runs (a set, a point, the release)."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission, User

from versions import messages, services
from versions.errors import Forbidden, InvalidInput, NotFound, PreflightFailed
from versions.models import App, Artifact
from versions.terms import (
    POINT,
    RELEASE,
    SCOPE,
    SET,
)


def _write(app: App, source: str, run: str) -> services.WriteReceipt:
    return services.write_artifact(
        app, "pltf_page", "index", source, requested_by="agent", tool="t", run_id=run
    )


def _viewer() -> services.Actor:
    user = User.objects.create_user("viewer", password=None)
    user.user_permissions.add(Permission.objects.get(codename="view_changeset"))
    return services.actor_for_user(user)


def _source(app: App) -> str:
    return Artifact.objects.get(app=app, name="index").source


def test_the_flow_restores_a_set_a_point_and_the_release_through_one_entry(app):
    first = _write(app, "v1\n", "a")
    services.mark_release(first.change_set_id, by="boss")
    second = _write(app, "v2\n", "b")
    _write(app, "v3\n", "c")
    dry = services.run_restore(SET, second.change_set_id, app=app, dry_run=True)
    assert dry.kind == "dry_run" and _source(app) == "v3\n"
    services.run_restore(POINT, second.restore_point_id, app=app)
    assert _source(app) == "v1\n"
    _write(app, "v4\n", "d")
    receipt = services.run_restore(RELEASE, app=app)
    assert receipt.as_dict()["scope"] == SCOPE and _source(app) == "v1\n"


def test_the_flow_refuses_what_the_actor_may_not_do_and_writes_nothing(app):
    receipt = _write(app, "v1\n", "a")
    _write(app, "v2\n", "b")
    with pytest.raises(Forbidden):
        services.run_restore(SET, receipt.change_set_id, actor=_viewer(), app=app)
    assert _source(app) == "v2\n"


def test_a_set_of_another_app_than_the_one_addressed_is_not_found(app):
    other = App.objects.create(slug="billing", name="Billing")
    receipt = _write(app, "v1\n", "a")
    with pytest.raises(NotFound) as missing:
        services.run_restore(SET, receipt.change_set_id, app=other)
    assert missing.value.message == messages.SET_NOT_FOUND.format(id=receipt.change_set_id)


def test_the_reviewed_hash_of_a_point_is_checked_like_a_sets(app):
    receipt = _write(app, "v1\n", "a")
    _write(app, "v2\n", "b")
    with pytest.raises(PreflightFailed):
        services.run_restore(
            POINT,
            receipt.restore_point_id,
            app=app,
            expected={"pltf_page/index": "0" * 64},
        )
    assert _source(app) == "v2\n"


def test_an_unknown_kind_of_restore_is_refused_in_words(app):
    with pytest.raises(InvalidInput, match="no kind of restore “everything”"):
        services.run_restore("everything", app=app)
