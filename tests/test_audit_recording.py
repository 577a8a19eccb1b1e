"""What goes into the audit trail, through the doors people and commands use: sign-in,
sign-out, failed sign-in, lock-out, tokens made, revoked and used after expiry, members,
names and the release mark. Agents' writes do not (they are restore points)."""

from __future__ import annotations

from datetime import timedelta
from io import StringIO

import pytest
from api_helpers import ApiClient, make_user
from django.contrib.auth.models import User
from django.core.management import call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from versions import services
from versions.errors import InvalidInput
from versions.models import AgentToken, App, AuditEvent

pytestmark = pytest.mark.django_db

LOGIN = "/accounts/login/"
PASSWORD = "correct horse battery staple"


@pytest.fixture(autouse=True)
def quick_hashing(settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


def _events(**filters) -> list[tuple]:
    rows = AuditEvent.objects.filter(**filters).order_by("seq")
    return list(rows.values_list("action", "actor_kind", "actor_name", "address"))


def test_sign_in_sign_out_and_a_failed_sign_in_are_recorded_with_the_address(client):
    User.objects.create_user("ana", password=PASSWORD)
    client.post(LOGIN, {"username": "ana", "password": "wrong"}, REMOTE_ADDR="10.0.0.7")
    client.post(LOGIN, {"username": "ana", "password": PASSWORD}, REMOTE_ADDR="10.0.0.7")
    client.post("/accounts/logout/", REMOTE_ADDR="10.0.0.8")

    assert _events() == [
        ("signin_failed", "user", "ana", "10.0.0.7"),
        ("signed_in", "user", "ana", "10.0.0.7"),
        ("signed_out", "user", "ana", "10.0.0.8"),
    ]
    signed_in = AuditEvent.objects.get(action="signed_in")
    assert signed_in.actor_user is not None and signed_in.actor_user.username == "ana"
    assert signed_in.app_id is None


def test_a_lock_out_is_recorded(client):
    User.objects.create_user("ana", password=PASSWORD)
    for _ in range(5):
        client.post(LOGIN, {"username": "ana", "password": "wrong"}, REMOTE_ADDR="10.0.0.9")
    locked = AuditEvent.objects.filter(action="locked_out")
    assert locked.exists()
    assert (locked.first().actor_name, locked.first().address) == ("ana", "10.0.0.9")


def test_tokens_made_and_revoked_are_recorded_on_each_of_their_apps(app):
    make_user("rvaid")
    App.objects.create(slug="second", name="Second")
    out = StringIO()
    call_command("create_agent_token", "rvaid", "--app", "quotes", "--app", "second", stdout=out)
    row = AgentToken.objects.get()
    call_command("revoke_agent_token", str(row.pk), stdout=StringIO())

    events = AuditEvent.objects.order_by("seq")
    assert [(e.action, e.app.slug, e.targets) for e in events] == [
        ("token_created", "quotes", [row.prefix]),
        ("token_created", "second", [row.prefix]),
        ("token_revoked", "quotes", [row.prefix]),
        ("token_revoked", "second", [row.prefix]),
    ]
    assert {(e.actor_kind, e.actor_name) for e in events} == {
        ("command", "create_agent_token"),
        ("command", "revoke_agent_token"),
    }
    assert events[0].details["user"] == "rvaid"
    assert row.key_hash not in str(events[0].details)  # the secret is never recorded


def test_a_token_used_after_it_expired_is_recorded_with_its_address(app):
    make_user("rvaid")
    token, row = services.create_agent_token("rvaid", ["quotes"])
    AgentToken.objects.filter(pk=row.pk).update(expires_on=timezone.now() - timedelta(seconds=1))

    answer = ApiClient(token).client.get(
        "/api/v1/apps/quotes/artifacts",
        headers={"Authorization": f"Bearer {token}"},
        REMOTE_ADDR="192.0.2.44",
    )

    assert answer.status_code == 401
    event = AuditEvent.objects.get(action="token_used_after_expiry")
    assert (event.actor_kind, event.actor_name) == ("token", f"{row.prefix}… of rvaid")
    assert (event.actor_token_id, event.app.slug, event.address) == (row.pk, "quotes", "192.0.2.44")
    # An unknown token is not an expired one: nothing to name.
    ApiClient("vt_nobody").get("/apps/quotes/artifacts")
    assert AuditEvent.objects.filter(action="token_used_after_expiry").count() == 1


def test_membership_changes_name_the_owner_and_whom(app):
    olga = User.objects.create_user("olga", password=None)
    User.objects.create_user("rita", password=None)
    services.add_member(app, role="owner", username="olga", by="setup")
    actor = services.actor_for_user(olga)
    membership = services.add_member(app, role="viewer", username="rita", actor=actor)
    services.change_role(app, membership.pk, "restorer", actor=actor)
    services.remove_member(app, membership.pk, actor=actor)

    events = list(AuditEvent.objects.filter(app=app).order_by("seq"))
    assert [(e.action, e.actor_kind, e.actor_name) for e in events] == [
        ("member_added", "command", "setup"),
        ("member_added", "user", "olga"),
        ("member_role_changed", "user", "olga"),
        ("member_removed", "user", "olga"),
    ]
    assert events[2].details == {"whom": "user “rita”", "role": "restorer", "previous": "viewer"}
    assert events[1].targets == [f"user:{membership.user_id}"]


def test_a_refused_membership_change_records_nothing(app):
    User.objects.create_user("olga", password=None)
    owner = services.add_member(app, role="owner", username="olga", by="setup")
    with pytest.raises(InvalidInput):
        services.remove_member(app, owner.pk, by="setup")  # the last owner stays
    assert [e.action for e in AuditEvent.objects.all()] == ["member_added"]


def test_names_and_the_release_mark_are_recorded(app):
    receipt = services.write_artifact(
        "quotes", "pltf_page", "index", "<h1>Hi</h1>", tool="t", run_id="r1", turn_id="t1"
    )
    set_id = receipt.change_set_id
    services.name_change_set(set_id, "First page", by="rvaid")
    services.mark_release(set_id, by="rvaid")
    services.unmark_release(app, by="rvaid")

    assert [(e.action, e.targets) for e in AuditEvent.objects.order_by("seq")] == [
        ("set_named", [set_id]),
        ("release_marked", [set_id]),
        ("release_unmarked", [set_id]),
    ]


def test_an_agents_write_records_nothing_and_adds_no_statement(app):
    services.write_artifact(
        "quotes", "pltf_page", "index", "<h1>A</h1>", tool="t", run_id="r", turn_id="t"
    )
    with CaptureQueriesContext(connection) as queries:
        services.write_artifact(
            "quotes", "pltf_page", "index", "<h1>B</h1>", tool="t", run_id="r", turn_id="t"
        )
    assert not AuditEvent.objects.exists()
    assert not [q for q in queries.captured_queries if "audit" in q["sql"].lower()]


AUDIT_TABLES = (AuditEvent._meta.db_table, "versions_auditchainhead")


@pytest.mark.parametrize("kind", ["new artifact", "next version", "delete", "edit"])
def test_no_write_of_an_agents_token_touches_the_audit_tables(app, kind):
    # The trail is not empty (its head row exists): an append would lock it, a write must not.
    make_user("agent-owner")
    secret, _ = services.create_agent_token("agent-owner", ["quotes"])
    actor = services.authenticate_token(secret)
    services.write_artifact("quotes", "pltf_page", "index", "<h1>A</h1>\n", tool="t", actor=actor)
    assert AuditEvent.objects.count() == 1  # the token made, by the command that made it

    with CaptureQueriesContext(connection) as queries:
        if kind == "new artifact":
            services.write_artifact("quotes", "pltf_page", "new", "x\n", tool="t", actor=actor)
        elif kind == "next version":
            services.write_artifact(
                "quotes", "pltf_page", "index", "<h1>B</h1>\n", tool="t", actor=actor
            )
        elif kind == "delete":
            services.delete_artifact("quotes", "pltf_page", "index", tool="t", actor=actor)
        else:
            services.edit_artifact("quotes", "pltf_page", "index", "A", "C", tool="t", actor=actor)

    statements = [q["sql"].lower() for q in queries.captured_queries]
    assert statements, "the write ran its statements"
    assert [s for s in statements if any(table in s for table in AUDIT_TABLES)] == []
    assert AuditEvent.objects.count() == 1


# --- safe promotion (docs/architecture.md#safe-promotion) ------------------------------------


def test_every_safe_promotion_action_is_recorded_with_who_and_what(app, client):
    from versions.models import PAGE

    owner = User.objects.create_user("olga", password=None)
    services.add_member(app, role="owner", username="olga")
    actor = services.actor_for_user(owner)
    services.write_artifact(app, PAGE, "index", "<p>v1</p>", requested_by="a", tool="t")
    services.promote(app, actor=actor)
    services.write_artifact(app, PAGE, "index", "<p>v2</p>", requested_by="a", tool="t")
    steps = services.promotion
    steps.add_check(app, actor=actor, name="Home", path="/")
    steps.set_watch(app, actor=actor, rollback_error_rate=10, watch_minutes=5)
    candidate = services.promote(app, actor=actor, rollout=20).deployment_id
    steps.advance_rollout(app, to=50, actor=actor)
    steps.abort_rollout(app, actor=actor)
    services.promote(app, actor=actor, rollout=20)
    steps.complete_rollout(app, actor=actor)
    schedule = services.promote(app, actor=actor, at=timezone.now() + timedelta(hours=1))
    steps.cancel_schedule(app, schedule_id=schedule.schedule_id, actor=actor)
    steps.freeze_production(app, actor=actor, reason="launch")
    steps.unfreeze_production(app, actor=actor)
    steps.lock_artifact(app, collection=PAGE, name="index", actor=actor)
    steps.unlock_artifact(app, collection=PAGE, name="index", actor=actor)
    steps.remove_check(app, actor=actor, name="Home")
    production = App.objects.get(pk=app.pk).production_id
    steps.auto_rollback(app, deployment=production, cause="a test cause")

    rows = AuditEvent.objects.filter(app=app).order_by("seq")
    actions = [row.action for row in rows if row.action not in ("member_added", "promoted")]
    assert actions == [
        "check_added",
        "watch_changed",
        "rollout_started",
        "rollout_advanced",
        "rollout_aborted",
        "rollout_started",
        "rollout_completed",
        "promotion_scheduled",
        "schedule_cancelled",
        "production_frozen",
        "production_unfrozen",
        "artifact_locked",
        "artifact_unlocked",
        "check_removed",
        "auto_rolled_back",
    ]
    started = rows.filter(action="rollout_started").first()
    assert (started.actor_name, started.targets[-1]) == ("olga", candidate)
    assert rows.get(action="production_frozen").reason == "launch"
    automatic = rows.get(action="auto_rolled_back")
    assert (automatic.actor_kind, automatic.actor_name) == ("command", "versions:watch")
    assert automatic.targets[0] == production
