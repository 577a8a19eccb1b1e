"""Safe promotion through the doors (docs/api.md#safe-promotion): the panel's Production tab
(Start rollout, Advance, Complete rollout, Abort rollout, Freeze production, Unfreeze,
Schedule promotion, Cancel) and Settings section (checks, watch, locks), the API's rollout,
freeze and schedule endpoints and MCP's tools — thin adapters, the services decide who may."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from api_helpers import ApiClient
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from versions import messages
from versions.mcp import build_server
from versions.models import PAGE, App, AppCheck, ArtifactLock, AuditEvent, ScheduledPromotion
from versions.services import (
    add_member,
    change_role,
    create_agent_token,
    mark_release,
    promote,
    write_artifact,
)


def write(app, source, name="index"):
    return write_artifact(app, PAGE, name, source, requested_by="agent", tool="t")


def person(app: App, username: str, role: str) -> Client:
    User.objects.create_user(username, password=None)
    add_member(app, role=role, username=username)
    client = Client()
    client.force_login(User.objects.get(username=username))
    return client


def hx(client: Client, url: str, data: dict[str, Any] | None = None) -> Any:
    return client.post(url, data or {}, HTTP_HX_REQUEST="true")


@pytest.fixture
def shipped(app):
    write(app, "<p>v1</p>")
    promote(app, by="rvaid")
    write(app, "<p>v2</p>")
    return app


def url(name: str, *args: str) -> str:
    return reverse(f"versions:{name}", args=["quotes", *args])


# --------------------------------------------------------------------------------------------
# The panel
# --------------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_the_panel_starts_advances_completes_and_aborts_a_rollout(shipped):
    pete = person(shipped, "pete", "promoter")
    dialog = pete.get(url("promote"), {"ref": "draft"}, HTTP_HX_REQUEST="true").content.decode()
    assert "Start rollout" in dialog and "Schedule promotion" in dialog
    assert "Pages parse as HTML" in dialog  # the checks, shown before confirming
    started = hx(pete, url("promote"), {"ref": "draft", "mode": "rollout", "rollout": "25"})
    html = started.content.decode()
    assert started.status_code == 200 and "Rollout started" in html and "25 %" in html
    assert "Advance" in html and "Complete rollout" in html and "Abort rollout" in html
    advanced = hx(pete, url("production_rollout"), {"step": "advance", "share": "60"})
    assert "Rollout advanced" in advanced.content.decode()
    assert App.objects.get(pk=shipped.pk).rollout_share == 60
    refused = hx(pete, url("production_rollout"), {"step": "advance", "share": "100"})
    assert refused.status_code == 409 and "1 to 99 percent of visitors" in refused.content.decode()
    aborted = hx(pete, url("production_rollout"), {"step": "abort"})
    assert "Rollout aborted" in aborted.content.decode()
    assert App.objects.get(pk=shipped.pk).candidate_id is None
    hx(pete, url("promote"), {"ref": "draft", "mode": "rollout", "rollout": "10"})
    done = hx(pete, url("production_rollout"), {"step": "complete"})
    assert "Promoted. Production now serves" in done.content.decode()
    history = pete.get(url("production")).content.decode()
    assert "Rollout of" in history and "advanced to 60 %" in history and "aborted" in history


@pytest.mark.django_db
def test_the_panel_freezes_and_unfreezes_production_for_owners_only(shipped):
    olga = person(shipped, "olga", "owner")
    pete = person(shipped, "pete", "promoter")
    assert "Freeze production" not in pete.get(url("production")).content.decode()
    assert hx(pete, url("production_freeze"), {"reason": "x"}).status_code == 403
    frozen = hx(olga, url("production_freeze"), {"reason": "Launch week"})
    assert "Production is frozen" in frozen.content.decode()
    assert "“Launch week”" in frozen.content.decode()
    refused = hx(pete, url("promote"), {"ref": "draft"})
    assert refused.status_code == 409 and "is frozen since" in refused.content.decode()
    unfrozen = hx(olga, url("production_freeze"), {"unfreeze": "1"})
    assert "Production is unfrozen." in unfrozen.content.decode()
    assert hx(pete, url("promote"), {"ref": "draft"}).status_code == 200


@pytest.mark.django_db
def test_the_promote_dialog_says_a_check_fails_not_that_protection_needs_reviews(shipped):
    """With no approvals required, a failing HTTP check is named once, as a check (not as a
    change set lacking reviews, linked to a set page that does not exist), and an owner may
    promote anyway, which the watch then leaves in place."""
    from versions.services import promotion

    olga = person(shipped, "olga", "owner")
    pete = person(shipped, "pete", "promoter")
    check = {"what": "add_check", "name": "Says v1", "path": "/", "expect_text": "v1"}
    hx(olga, url("safe_promotion_settings"), check)  # the draft says v2
    dialog = olga.get(url("promote"), {"ref": "draft"}, HTTP_HX_REQUEST="true").content.decode()
    assert "Protection still needs reviews" not in dialog
    assert url("change_set", "Says v1") not in dialog
    assert "1 check fails on what would ship:" in dialog
    assert dialog.count("Check “Says v1” failed: Answered 200") == 1
    assert "Pre-flight found" not in dialog  # nothing that Promote anyway cannot get past
    assert "Promote anyway" in dialog and "the watch after the promotion then leaves" in dialog
    as_promoter = pete.get(url("promote"), {"ref": "draft"}, HTTP_HX_REQUEST="true")
    assert "Nothing is promoted unless an owner promotes anyway" in as_promoter.content.decode()
    assert 'name="override_reason"' not in as_promoter.content.decode()
    done = hx(olga, url("promote"), {"ref": "draft", "override_reason": "the copy is right"})
    assert done.status_code == 200
    production = App.objects.get(pk=shipped.pk).production_id
    assert promotion.run_post_promotion_checks(production) is None  # the watch keeps it
    assert App.objects.get(pk=shipped.pk).production_id == production


@pytest.mark.django_db
def test_the_panel_schedules_and_cancels_a_promotion(shipped):
    pete = person(shipped, "pete", "promoter")
    past = hx(pete, url("promote"), {"ref": "draft", "mode": "schedule", "at": "2001-01-01T10:00"})
    assert past.status_code == 409 and "only be scheduled in the future" in past.content.decode()
    at = (timezone.now() + timedelta(days=1)).strftime("%Y-%m-%dT%H:%M")
    made = hx(pete, url("promote"), {"ref": "draft", "mode": "schedule", "at": at})
    html = made.content.decode()
    assert "will be promoted at" in html and "Scheduled promotions" in html
    row = ScheduledPromotion.objects.get()
    cancelled = hx(pete, url("production_schedule_cancel", row.id))
    assert "was cancelled" in cancelled.content.decode()
    assert ScheduledPromotion.objects.get().status == "cancelled"


@pytest.mark.django_db
def test_the_production_tab_says_why_a_scheduled_promotion_did_not_run(shipped):
    """A schedule refused at its moment (here: production frozen since) does not just vanish
    from the Production tab: the person who scheduled it reads there that, and why."""
    from versions.services import promotion

    olga = person(shipped, "olga", "owner")
    production = App.objects.get(pk=shipped.pk).production_id
    at = timezone.now() + timedelta(hours=3)
    note = {"note": "ship tonight"}
    hx(
        olga,
        url("promote"),
        {"ref": "draft", "mode": "schedule", "at": f"{at:%Y-%m-%dT%H:%M}", **note},
    )
    hx(olga, url("production_freeze"), {"reason": "Launch week"})
    (ran,) = promotion.run_due_schedules(now=at + timedelta(minutes=1))
    assert ran[1]["kind"] == "preflight_failed"
    page = olga.get(url("production")).content.decode()
    assert "Scheduled promotions that did not run" in page
    assert "“ship tonight”: <strong>refused at its moment</strong>" in page
    assert "is frozen since" in page.split("Scheduled promotions that did not run")[1]
    assert App.objects.get(pk=shipped.pk).production_id == production  # nothing was promoted


@pytest.mark.django_db
def test_the_settings_section_adds_checks_saves_the_watch_and_locks(app):
    write(app, "<p>v1</p>")
    olga = person(app, "olga", "owner")
    page = olga.get(reverse("versions:app_settings", args=["quotes"])).content.decode()
    assert "Safe promotion" in page and "Add check" in page and "Lock artifact" in page
    settings = url("safe_promotion_settings")
    escaped = hx(olga, settings, {"what": "add_check", "name": "up", "path": "/../admin"})
    assert escaped.status_code == 422 and "must stay inside the app" in escaped.content.decode()
    added = hx(
        olga, settings, {"what": "add_check", "name": "Home", "path": "/", "expect_text": "v1"}
    )
    assert added.status_code == 200 and "GET /" in added.content.decode()
    assert AppCheck.objects.get().name == "Home"
    hx(olga, settings, {"what": "watch", "rollback_error_rate": "10", "watch_minutes": "30"})
    hx(olga, settings, {"what": "lock", "collection": PAGE, "name": "index", "reason": "legal"})
    assert ArtifactLock.objects.get().reason == "legal"
    shown = olga.get(reverse("versions:app_settings", args=["quotes"])).content.decode()
    assert "locked by olga" in shown and 'value="10"' in shown and 'value="30"' in shown
    hx(olga, settings, {"what": "unlock", "collection": PAGE, "name": "index"})
    hx(olga, settings, {"what": "remove_check", "name": "Home"})
    assert not ArtifactLock.objects.exists() and not AppCheck.objects.exists()
    actions = set(AuditEvent.objects.values_list("action", flat=True))
    assert {"check_added", "check_removed", "watch_changed", "artifact_locked"} <= actions
    pete = person(app, "pete", "promoter")
    assert (
        hx(pete, settings, {"what": "lock", "collection": PAGE, "name": "index"}).status_code == 403
    )


@pytest.mark.django_db
def test_a_lock_shows_on_the_artifacts_diffs_to_everyone_who_reads_them(app):
    """The lock list is on the owners' Settings page; a reviewer or restorer reading a set, a
    point or Since release sees the lock on the locked artifact's diff, in words."""
    write(app, "<p>v1</p>")
    first = write(app, "<p>v1</p>", name="about")
    mark_release(first.change_set_id, by="olga")
    receipt = write(app, "<p>v2</p>")
    write(app, "<p>about v2</p>", name="about")
    olga = person(app, "olga", "owner")
    rita = person(app, "rita", "restorer")
    hx(olga, url("safe_promotion_settings"), {"what": "lock", "collection": PAGE, "name": "index"})
    said = "It is locked by olga: an agent may not write it."
    pages = [
        rita.get(url("change_set", receipt.change_set_id)),
        rita.get(url("restore_point", receipt.restore_point_id)),
        rita.get(url("since_release")),
    ]
    for page in pages:
        html = page.content.decode()
        assert page.status_code == 200 and said in html
        assert html.count('class="badge locked"') == 1  # index only; about is not locked
    hx(
        olga,
        url("safe_promotion_settings"),
        {"what": "unlock", "collection": PAGE, "name": "index"},
    )
    assert said not in rita.get(url("change_set", receipt.change_set_id)).content.decode()


# --------------------------------------------------------------------------------------------
# The API
# --------------------------------------------------------------------------------------------


def token_of(app: App, username: str, role: str, *, can_promote: bool = True) -> ApiClient:
    """A token of a person with ``role`` on the app (the token itself is made while they are
    an owner, who alone may hold an app's tokens; it acts as far as their role goes)."""
    return ApiClient(raw_token(app, username, role, can_promote=can_promote))


def raw_token(app: App, username: str, role: str, *, can_promote: bool = True) -> str:
    User.objects.create_user(username, password=None)
    membership = add_member(app, role="owner", username=username)
    token, _row = create_agent_token(username, [app.slug], can_promote=can_promote)
    if role != "owner":
        change_role(app, membership.pk, role, by="test")
    return token


@pytest.mark.django_db
def test_the_api_runs_a_rollout_and_refuses_bad_shares_and_a_second_rollout(shipped):
    token_of(shipped, "olga", "owner")  # an app always keeps an owner
    api = token_of(shipped, "pete", "promoter")
    for bad in (0, 100, "50"):
        answer = api.post("/apps/quotes/rollout", {"to": bad})
        assert answer.status_code in (400, 422), answer.json()
    # Asking nothing is told what to ask, in the door's own words (it said "“None” is not a
    # whole number in that range" of a field named "rollout", which this door does not have).
    empty = api.post("/apps/quotes/rollout", {})
    assert (empty.status_code, empty.json()["field"]) == (400, "to")
    assert empty.json()["message"] == messages.ROLLOUT_NOTHING_ASKED
    assert "None" not in empty.json()["message"]
    started = api.post("/apps/quotes/rollout", {"to": 20, "note": "canary"})
    assert started.status_code == 200 and started.json()["kind"] == "rollout"
    assert started.json()["rollout"] == 20 and "checks" in started.json()
    assert api.post("/apps/quotes/rollout", {"to": 40}).json()["kind"] == "advance"
    second = api.post("/apps/quotes/deployments", {})
    assert second.status_code == 409 and "already running" in second.json()["message"]
    overview = api.get("/apps/quotes/deployments").json()
    assert overview["rollout"]["share"] == 40
    assert api.post("/apps/quotes/rollout", {"action": "abort"}).json()["kind"] == "abort"
    assert api.post("/apps/quotes/rollout", {"action": "explode"}).status_code == 422
    none = api.post("/apps/quotes/rollout", {"action": "complete"})
    assert none.status_code == 409 and "has no rollout running" in none.json()["message"]
    viewer = token_of(shipped, "vera", "viewer", can_promote=False)
    assert viewer.post("/apps/quotes/rollout", {"to": 10}).status_code == 403


@pytest.mark.django_db
def test_the_api_freezes_for_owners_and_schedules_promotions(shipped):
    owner = token_of(shipped, "olga", "owner")
    promoter = token_of(shipped, "pete", "promoter")
    assert promoter.post("/apps/quotes/production/freeze", {"reason": "x"}).status_code == 403
    frozen = owner.post("/apps/quotes/production/freeze", {"reason": "Audit"})
    assert frozen.status_code == 200 and frozen.json()["frozen"] is True
    assert promoter.get("/apps/quotes/production/freeze").json()["reason"] == "Audit"
    refused = promoter.post("/apps/quotes/deployments", {})
    assert refused.status_code == 409 and "is frozen" in refused.json()["message"]
    assert owner.post("/apps/quotes/production/unfreeze").json() == {"frozen": False}
    past = promoter.post("/apps/quotes/schedules", {"at": "2001-01-01T00:00:00Z"})
    assert past.status_code == 400 and "only be scheduled in the future" in past.json()["message"]
    at = (timezone.now() + timedelta(hours=2)).isoformat()
    made = promoter.post("/apps/quotes/schedules", {"at": at, "note": "tonight"})
    assert made.status_code == 201 and made.json()["kind"] == "scheduled"
    sid = made.json()["scheduleId"]
    listed = promoter.get("/apps/quotes/schedules").json()["schedules"]
    assert [(s["id"], s["status"]) for s in listed] == [(sid, "scheduled")]
    assert promoter.delete(f"/apps/quotes/schedules/{sid}").json()["kind"] == "cancelled"
    assert promoter.delete("/apps/quotes/schedules/sp_nope").status_code == 404


@pytest.mark.django_db(transaction=True)
def test_mcp_offers_rollout_and_schedule_to_promoting_tokens_and_freeze_to_owners(shipped):
    owner = raw_token(shipped, "olga", "owner")
    promoter = raw_token(shipped, "pete", "promoter")
    writer = raw_token(shipped, "wes", "promoter", can_promote=False)
    names = set(build_server("quotes", promoter)._tool_manager._tools)
    assert {"rollout", "schedule_promotion"} <= names and "freeze_production" not in names
    assert "rollout" not in build_server("quotes", writer)._tool_manager._tools
    assert "freeze_production" in build_server("quotes", owner)._tool_manager._tools

    def tool(token: str, name: str, **arguments: Any) -> tuple[bool, dict[str, Any]]:
        result = build_server("quotes", token)._tool_manager._tools[name].fn(**arguments)
        return bool(result.is_error), dict(result.structured_content or {})

    error, data = tool(promoter, "rollout", to=150)
    assert error and "1 to 99 percent" in data["message"]
    error, data = tool(promoter, "rollout", to=30)
    assert not error and data["kind"] == "rollout"
    error, data = tool(owner, "freeze_production", reason="hold")
    assert not error and data["frozen"] is True
    error, data = tool(promoter, "rollout", to=60)
    assert error and "is frozen" in data["message"]
    error, data = tool(promoter, "rollout", action="abort")
    assert not error and data["kind"] == "abort"
    tool(owner, "freeze_production", reason="", unfreeze=True)
    error, data = tool(promoter, "schedule_promotion", at="2001-01-01T00:00:00Z")
    assert error and "only be scheduled in the future" in data["message"]


@pytest.mark.django_db(transaction=True)
def test_mcp_writes_to_a_locked_artifact_are_refused_in_words(app):
    write(app, "<p>v1</p>")
    User.objects.create_user("olga", password=None)
    add_member(app, role="owner", username="olga")
    from versions.services import actor_for_user, promotion

    promotion.lock_artifact(
        app, collection=PAGE, name="index", actor=actor_for_user(User.objects.get()), reason="legal"
    )
    token, _ = create_agent_token("olga", ["quotes"])
    server = build_server("quotes", token)
    result = server._tool_manager._tools["write_artifact"].fn(
        collection=PAGE, name="index", source="<p>x</p>", ctx=None
    )
    data = dict(result.structured_content or {})
    assert result.is_error and data["error"] == "locked"
    assert "agents may not write it" in data["message"]
