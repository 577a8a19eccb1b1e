"""Agent tokens: created once by the command, stored hashed, scoped to apps, tied to the user."""

from __future__ import annotations

import hashlib
from io import StringIO

import pytest
from api_helpers import ApiClient, make_user
from django.core.management import CommandError, call_command

from versions import services
from versions.models import AgentToken, App
from versions.services import (
    verify_token,
)
from versions.terms import RESTORE

pytestmark = pytest.mark.django_db


def run_command(*args: str) -> list[str]:
    out = StringIO()
    call_command("create_agent_token", *args, stdout=out)
    return out.getvalue().rstrip("\n").split("\n")


def test_command_prints_the_token_once_alone_on_the_last_line(app):
    make_user("rvaid")
    App.objects.create(slug="second", name="Second")
    lines = run_command("rvaid", "--app", "quotes", "--app", "second")
    token = lines[-1]
    assert token.startswith("vt_") and " " not in token and len(token) > 40
    assert all(token not in line for line in lines[:-1])
    row = AgentToken.objects.get()
    assert row.key_hash == hashlib.sha256(token.encode()).hexdigest()
    assert set(row.apps.values_list("slug", flat=True)) == {"quotes", "second"}
    assert verify_token(token) == row
    assert ApiClient(token).get("/apps/second/artifacts").status_code == 200


def test_each_token_is_different(app):
    make_user("rvaid")
    assert (
        run_command("rvaid", "--app", "quotes")[-1] != run_command("rvaid", "--app", "quotes")[-1]
    )


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["nobody", "--app", "quotes"], "no user"),
        (["rvaid", "--app", "missing"], "no app"),
        (["rvaid"], "--app"),
    ],
)
def test_command_refuses_unknown_user_app_or_no_app(app, args, words):
    make_user("rvaid")
    with pytest.raises(CommandError, match=words):
        run_command(*args)
    assert not AgentToken.objects.exists()


def test_inactive_user_gets_no_token_and_loses_existing_ones(app):
    user = make_user("rvaid")
    token = run_command("rvaid", "--app", "quotes")[-1]
    user.is_active = False
    user.save()
    assert verify_token(token) is None
    with pytest.raises(CommandError, match="inactive"):
        run_command("rvaid", "--app", "quotes")


def test_restore_permission_follows_the_user(app):
    make_user("viewer")
    make_user("restorer", can_restore=True)
    viewer = verify_token(run_command("viewer", "--app", "quotes")[-1])
    restorer = verify_token(run_command("restorer", "--app", "quotes")[-1])
    assert viewer is not None and restorer is not None
    assert not services.actor_for_token(viewer).may(RESTORE, app)
    assert services.actor_for_token(restorer).may(RESTORE, app)


@pytest.mark.parametrize("junk", ["", "x", "vt_" + "a" * 600, "bad\x00token"])
def test_junk_tokens_verify_to_nothing(app, junk):
    assert verify_token(junk) is None
