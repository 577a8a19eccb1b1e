"""Agent tokens are managed (docs/operations.md#agent-tokens): they expire (90 days by default,
--expires-in-days), an expired one authenticates nothing, operators list and revoke them by command
and in the admin, and the last use is shown."""

from __future__ import annotations

from datetime import timedelta
from io import StringIO

import pytest
from api_helpers import ApiClient, make_user
from django.core.management import CommandError, call_command
from django.utils import timezone

from versions.models import AgentToken, App
from versions.services import (
    create_agent_token,
    verify_token,
)

pytestmark = pytest.mark.django_db


def run(command: str, *args: str) -> str:
    out = StringIO()
    call_command(command, *args, stdout=out)
    return out.getvalue()


def new_token(*args: str) -> tuple[str, AgentToken]:
    token = run("create_agent_token", *args).rstrip("\n").split("\n")[-1]
    return token, AgentToken.objects.get(prefix=token[:12])


def test_a_token_expires_in_90_days_by_default(app):
    make_user("rvaid")
    before = timezone.now()
    _token, row = new_token("rvaid", "--app", "quotes")
    assert before + timedelta(days=90) <= row.expires_on <= timezone.now() + timedelta(days=90)


def test_expires_in_days_sets_the_expiry_and_is_said_when_created(app):
    make_user("rvaid")
    out = run("create_agent_token", "rvaid", "--app", "quotes", "--expires-in-days", "7")
    row = AgentToken.objects.get()
    assert abs(row.expires_on - (timezone.now() + timedelta(days=7))) < timedelta(minutes=1)
    assert f"expiring {row.expires_on:%Y-%m-%d %H:%M} UTC" in out


@pytest.mark.parametrize("days", ["0", "-1", "3651"])
def test_an_expiry_out_of_range_is_refused(app, days):
    make_user("rvaid")
    with pytest.raises(CommandError, match="A token expires in 1 to 3650 days"):
        run("create_agent_token", "rvaid", "--app", "quotes", "--expires-in-days", days)
    assert not AgentToken.objects.exists()


def test_an_expired_token_authenticates_nothing(app):
    make_user("rvaid")
    token, row = create_agent_token("rvaid", ["quotes"], expires_in_days=1)
    assert ApiClient(token).get("/apps/quotes/artifacts").status_code == 200
    AgentToken.objects.filter(pk=row.pk).update(expires_on=timezone.now() - timedelta(seconds=1))

    assert verify_token(token) is None
    assert ApiClient(token).get("/apps/quotes/artifacts").status_code == 401


def test_list_shows_every_token_with_status_expiry_and_last_use(app):
    make_user("rvaid")
    make_user("viewer")
    App.objects.create(slug="second", name="Second")
    used, used_row = new_token("rvaid", "--app", "quotes", "--app", "second", "--label", "ci")
    _, revoked_row = new_token("viewer", "--app", "quotes")
    _, expired_row = new_token("viewer", "--app", "quotes")
    ApiClient(used).get("/apps/quotes/artifacts")
    run("revoke_agent_token", str(revoked_row.pk))
    AgentToken.objects.filter(pk=expired_row.pk).update(expires_on=timezone.now())

    lines = run("list_agent_tokens").splitlines()

    assert lines[0].split() == [
        "ID",
        "PREFIX",
        "USER",
        "APPS",
        "STATUS",
        "CREATED",
        "EXPIRES",
        "LAST",
        "USED",
        "LABEL",
    ]
    by_id = {line.split()[0]: line for line in lines[1:]}
    assert set(by_id) == {str(used_row.pk), str(revoked_row.pk), str(expired_row.pk)}
    used_row.refresh_from_db()
    assert f"{used_row.prefix}…" in by_id[str(used_row.pk)]
    assert "quotes,second" in by_id[str(used_row.pk)] and " active " in by_id[str(used_row.pk)]
    assert f"{used_row.last_used_on:%Y-%m-%d %H:%M}" in by_id[str(used_row.pk)]
    assert by_id[str(used_row.pk)].endswith("ci")
    assert " revoked " in by_id[str(revoked_row.pk)]
    assert " expired " in by_id[str(expired_row.pk)]
    assert by_id[str(revoked_row.pk)].count("never") == 1  # never used
    assert used not in "\n".join(lines)  # the token itself is never shown again


def test_list_filters_by_user_app_and_active(app):
    make_user("rvaid")
    make_user("viewer")
    App.objects.create(slug="second", name="Second")
    _, mine = new_token("rvaid", "--app", "second")
    _, theirs = new_token("viewer", "--app", "quotes")
    run("revoke_agent_token", theirs.prefix)

    def ids(*args):
        return [line.split()[0] for line in run("list_agent_tokens", *args).splitlines()[1:]]

    assert ids("--user", "rvaid") == [str(mine.pk)]
    assert ids("--app", "quotes") == [str(theirs.pk)]
    assert ids("--active") == [str(mine.pk)]
    assert run("list_agent_tokens", "--user", "nobody") == "No agent tokens match.\n"


def test_revoke_by_id_or_prefix_and_the_token_stops_working(app):
    make_user("rvaid")
    token, row = new_token("rvaid", "--app", "quotes")
    assert ApiClient(token).get("/apps/quotes/artifacts").status_code == 200

    out = run("revoke_agent_token", row.prefix[:8])

    assert out == (
        f"Revoked token {row.pk} ({row.prefix}…) of rvaid. It authenticates nothing from now on.\n"
    )
    assert ApiClient(token).get("/apps/quotes/artifacts").status_code == 401
    again = run("revoke_agent_token", str(row.pk))
    assert again.startswith(f"Token {row.pk} ({row.prefix}…) of rvaid was already revoked")


def test_revoke_refuses_an_unknown_or_ambiguous_token(app):
    make_user("rvaid")
    new_token("rvaid", "--app", "quotes")
    new_token("rvaid", "--app", "quotes")
    with pytest.raises(CommandError, match="There is no agent token “vt_nothing-like-it”"):
        run("revoke_agent_token", "vt_nothing-like-it")
    with pytest.raises(CommandError, match="More than one agent token starts with “vt_”"):
        run("revoke_agent_token", "vt_")
    assert not AgentToken.objects.filter(revoked=True).exists()


def test_the_admin_lists_tokens_and_revokes_them(app, client, django_user_model):
    make_user("rvaid")
    token, row = new_token("rvaid", "--app", "quotes", "--label", "deploy bot")
    ApiClient(token).get("/apps/quotes/artifacts")
    admin = django_user_model.objects.create_superuser("root", password="x" * 20)
    client.force_login(admin)

    listing = client.get("/admin/versions/agenttoken/")
    page = listing.content.decode()
    assert listing.status_code == 200
    assert row.prefix in page and "deploy bot" in page and "active" in page
    assert client.get("/admin/versions/agenttoken/add/").status_code == 403

    done = client.post(
        "/admin/versions/agenttoken/",
        {"action": "revoke_selected", "_selected_action": [row.pk]},
        follow=True,
    )

    assert "It authenticates nothing from now on." in done.content.decode()
    assert AgentToken.objects.get(pk=row.pk).revoked
    assert ApiClient(token).get("/apps/quotes/artifacts").status_code == 401
