"""Safe promotion (docs/architecture.md#safe-promotion): checks before promote, gradual rollouts
pinned by a signed cookie, the watch's automatic rollback, scheduled promotions, freezes and
artifact locks — each a plan or a pre-flight rule of the one engine. Rollout split, stickiness
and the automatic rollback are measured through the live app, with real requests."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.core import signing
from django.test import Client
from django.utils import timezone

from versions import messages
from versions.errors import Conflict, Forbidden, InvalidInput, PreflightFailed
from versions.models import (
    API_ROUTE,
    PAGE,
    STYLESHEET,
    App,
    Artifact,
    AuditEvent,
    Deployment,
    DeploymentEvent,
    DeploymentWatch,
    RolloutVisitor,
    ScheduledPromotion,
)
from versions.services import (
    actor_for_user,
    add_member,
    promote,
    promotion,
    rollback_production,
    write_artifact,
)

pytestmark = pytest.mark.django_db


def write(app, collection, name, source):
    return write_artifact(app, collection, name, source, requested_by="agent", tool="t")


def route(path, body):
    return json.dumps({"method": "GET", "path": path, "body": body})


def version(app, label):
    """One version of the app: a page, a stylesheet and a route that all say ``label``."""
    write(
        app,
        PAGE,
        "index",
        f"<!doctype html><link rel=stylesheet href=assets/App.css><h1>{label}</h1>",
    )
    write(app, STYLESHEET, "App", f"/* {label} */ body {{ color: green; }}\n")
    write(app, API_ROUTE, "version", route("/version", {"v": label}))


@pytest.fixture
def owner(app, django_user_model):
    user = django_user_model.objects.create_user("olga", password=None)
    add_member(app, role="owner", username="olga")
    return actor_for_user(user)


@pytest.fixture
def promoter(app, django_user_model):
    user = django_user_model.objects.create_user("pete", password=None)
    add_member(app, role="promoter", username="pete")
    return actor_for_user(user)


@pytest.fixture
def two_versions(app):
    """Production serves v1; the draft is v2."""
    version(app, "v1")
    first = promote(app, by="rvaid").deployment_id
    version(app, "v2")
    return first


_addresses = iter(range(1, 10**6))


def fresh_visit(slug="quotes", path="/"):
    """A new visitor (their own address, no cookie) and their first page."""
    n = next(_addresses)
    client = Client(REMOTE_ADDR=f"10.{n // 65536 % 256}.{n // 256 % 256}.{n % 256}")
    return client, client.get(f"/apps/{slug}{path}")


def label_of(response) -> str:
    body = response.content.decode()
    return "v2" if "v2" in body else "v1" if "v1" in body else "?"


def events(action):
    return list(AuditEvent.objects.filter(action=action).values_list("targets", flat=True))


# --------------------------------------------------------------------------------------------
# Checks before promote
# --------------------------------------------------------------------------------------------


def test_checks_that_pass_are_on_the_receipt_and_stored_on_the_deployment(app, owner):
    version(app, "v1")
    promotion.add_check(app, actor=owner, name="Home says v1", path="/", expect_text="v1")
    promotion.add_check(app, actor=owner, name="Version route", path="/api/version")
    data = promote(app, by="rvaid").as_dict()
    names = [(c["name"], c["ok"]) for c in data["checks"]]
    assert names == [
        (messages.BUILTIN_ROUTES, True),
        (messages.BUILTIN_PAGES, True),
        (messages.BUILTIN_ASSETS, True),
        ("Home says v1", True),
        ("Version route", True),
    ]
    assert Deployment.objects.get(pk=data["deploymentId"]).checks == data["checks"]


def test_a_failing_http_check_refuses_the_promotion_and_changes_nothing(app, owner, client):
    version(app, "v1")
    promotion.add_check(app, actor=owner, name="About page", path="/p/about")
    with pytest.raises(PreflightFailed) as refused:
        promote(app, by="rvaid")
    data = refused.value.answer()
    assert data["kind"] == "preflight_failed"
    assert [f["name"] for f in data["findings"]] == ["About page"]
    assert "Answered 404; expected 200." in data["findings"][0]["reason"]
    assert [c["ok"] for c in data["checks"]][-1] is False
    assert App.objects.get(pk=app.pk).production_id is None
    assert not Deployment.objects.exists()
    dry = promote(app, by="rvaid", dry_run=True).as_dict()  # the dialog shows the same
    assert dry["checks"] == data["checks"] and dry["findings"] == data["findings"]


def test_an_owner_promotes_past_a_failing_check_with_a_reason_others_may_not(app, owner, promoter):
    version(app, "v1")
    promotion.add_check(app, actor=owner, name="About page", path="/p/about")
    with pytest.raises(Forbidden, match="Only an owner"):
        promote(app, actor=promoter, override_reason="ship it")
    receipt = promote(app, actor=owner, override_reason="the about page comes tomorrow")
    assert receipt.kind == "promotion"
    assert receipt.checks is not None and receipt.checks[-1].ok is False
    overridden = AuditEvent.objects.get(action="checks_overridden")
    assert overridden.reason == "the about page comes tomorrow"
    assert overridden.targets == ["About page"]


@pytest.mark.parametrize(
    "path",
    [
        "/../admin/",
        "//evil.example/",
        "http://evil.example/",
        "/p/../../admin",
        "/assets/%2e%2e/x.css",
        "/api/../../admin",
        "/api/a?x=1",
        "admin",
        "/p/a/b",
        "/static/x.css",
        "/api/a\\..\\b",
        "",
    ],
)
def test_a_check_path_that_escapes_the_app_is_refused_in_words(app, owner, path):
    with pytest.raises(InvalidInput) as refused:
        promotion.add_check(app, actor=owner, name="escape", path=path)
    assert "must stay inside the app" in refused.value.message
    assert not app.checks.exists()


def test_check_fields_are_refused_in_words(app, owner, promoter):
    with pytest.raises(InvalidInput, match="GET or HEAD"):
        promotion.add_check(app, actor=owner, name="x", path="/", method="POST")
    with pytest.raises(InvalidInput, match="from 100 to 599"):
        promotion.add_check(app, actor=owner, name="x", path="/", expect_status=99)
    with pytest.raises(Forbidden):
        promotion.add_check(app, actor=promoter, name="x", path="/")
    promotion.add_check(app, actor=owner, name="x", path="/")
    with pytest.raises(Conflict, match="already has a check named"):
        promotion.add_check(app, actor=owner, name="x", path="/p/a")


def test_a_page_that_does_not_parse_is_a_finding(app):
    write(app, PAGE, "index", "<h1>hi</h1><script>let x = 1;")
    with pytest.raises(PreflightFailed) as refused:
        promote(app, by="rvaid")
    reasons = [f.reason for f in refused.value.receipt.findings]
    assert reasons == [
        "Page “index”: <script> is never closed, so the rest of the page is read as its content"
    ]


def test_an_asset_a_page_references_must_exist_in_the_state(app):
    write(app, PAGE, "index", '<link rel="stylesheet" href="assets/Missing.css"><p>hi</p>')
    write(
        app,
        PAGE,
        "about",
        '<script src="../assets/app.js"></script><a href="https://x.example/y.css">x</a>',
    )
    with pytest.raises(PreflightFailed) as refused:
        promote(app, by="rvaid")
    reasons = sorted(f.reason for f in refused.value.receipt.findings)
    assert reasons == [
        "Page “about” references “../assets/app.js”, which is not in this state.",
        "Page “index” references “assets/Missing.css”, which is not in this state.",
    ]
    write(app, STYLESHEET, "Missing", "p {}")
    write(app, "pltf_frontend_module", "app", "export {};")
    assert promote(app, by="rvaid").kind == "promotion"


# --------------------------------------------------------------------------------------------
# Gradual rollout
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("share", [0, 100, -5, 150, "half", True, 12.5])
def test_a_rollout_share_outside_1_to_99_is_refused_in_words(two_versions, app, share):
    with pytest.raises(InvalidInput) as refused:
        promote(app, by="rvaid", rollout=share)
    assert "1 to 99 percent of visitors" in refused.value.message
    assert App.objects.get(pk=app.pk).candidate_id is None


def test_a_rollout_needs_production(app):
    version(app, "v1")
    with pytest.raises(Conflict, match="Promote to production first"):
        promote(app, by="rvaid", rollout=10)


def test_the_rollout_split_and_stickiness_over_240_fresh_visitors(two_versions, app):
    receipt = promote(app, by="rvaid", rollout=30)
    assert receipt.kind == "rollout" and receipt.rollout == 30
    assert receipt.as_dict()["message"].startswith("Rollout started")
    candidates = 0
    for _ in range(240):
        client, page = fresh_visit()
        label = label_of(page)
        assert label in ("v1", "v2")
        cookie = page.cookies["versions_dp"]
        assert cookie["path"] == "/apps/quotes/" and cookie["httponly"]
        candidates += label == "v2"
        # Skew protection: the same visitor's asset, route and page again are all one version.
        sheet = client.get("/apps/quotes/assets/App.css")
        answer = client.get("/apps/quotes/api/version")
        again = client.get("/apps/quotes/")
        assert f"/* {label} */" in sheet.content.decode()
        assert answer.json() == {"v": label}
        assert label_of(again) == label
        assert "versions_dp" not in again.cookies  # pinned already: no new draw
        # The sandboxed page's own fetch carries no cookie: the visitor's draw still holds.
        bare = Client(REMOTE_ADDR=client.defaults["REMOTE_ADDR"])
        assert bare.get("/apps/quotes/api/version").json() == {"v": label}
    # 30 % of 240 is 72; a binomial draw stays within ±5 standard deviations (~36).
    assert 36 <= candidates <= 108, candidates


def test_two_rollouts_at_once_are_impossible(two_versions, app):
    promote(app, by="rvaid", rollout=20)
    write(app, PAGE, "index", "<p>v3</p>")
    for kwargs in ({"rollout": 50}, {}):
        with pytest.raises(PreflightFailed) as refused:
            promote(app, by="rvaid", **kwargs)
        assert "is already running (20 % of visitors)" in refused.value.message


def test_advance_complete_and_abort_move_one_pointer_each(two_versions, app, client):
    started = promote(app, by="rvaid", rollout=10)
    candidate = started.deployment_id
    advanced = promotion.advance_rollout(app, to=60, by="rvaid")
    assert advanced.kind == "advance" and advanced.rollout == 60
    assert App.objects.get(pk=app.pk).rollout_share == 60
    assert promotion.advance_rollout(app, to=60, by="rvaid").kind == "noop"
    done = promotion.complete_rollout(app, by="rvaid")
    assert done.kind == "promotion" and done.deployment_id == candidate
    assert done.previous_deployment == two_versions
    assert done.message == f"Rollout completed: production now serves {candidate} to everyone."
    after = App.objects.get(pk=app.pk)
    assert (after.production_id, after.candidate_id, after.rollout_share) == (candidate, None, 0)
    assert label_of(Client().get("/apps/quotes/")) == "v2"
    # A rollback undoes the completed rollout like any promotion.
    assert rollback_production(app, by="rvaid").deployment_id == two_versions
    write(app, PAGE, "index", "<p>v3</p>")
    third = promote(app, by="rvaid", rollout=50).deployment_id
    aborted = promotion.abort_rollout(app, by="rvaid", note="not today")
    assert aborted.kind == "abort" and aborted.deployment_id == two_versions
    assert aborted.previous_deployment == third
    after = App.objects.get(pk=app.pk)
    assert (after.production_id, after.candidate_id) == (two_versions, None)
    kinds = list(
        DeploymentEvent.objects.filter(app=app).order_by("id").values_list("kind", flat=True)
    )
    assert kinds == ["promotion", "rollout", "advance", "promotion", "rollback", "rollout", "abort"]
    with pytest.raises(Conflict, match="has no rollout running"):
        promotion.complete_rollout(app, by="rvaid")
    for action in ("rollout_started", "rollout_advanced", "rollout_completed", "rollout_aborted"):
        assert events(action), action


def test_a_forged_or_foreign_cookie_falls_back_to_the_split_never_a_500(two_versions, app):
    other = App.objects.create(slug="other", name="Other")
    write(other, PAGE, "index", "<p>other</p>")
    foreign = promote(other, by="rvaid").deployment_id
    promote(app, by="rvaid", rollout=50)
    signer = signing.get_cookie_signer(salt="versions.live.rollout")
    for value in ("garbage", signer.sign(foreign), signer.sign("dp_forged_x"), "x" * 5000, "é:ü"):
        client = Client()
        client.cookies["versions_dp"] = value
        response = client.get("/apps/quotes/")
        assert response.status_code == 200 and label_of(response) in ("v1", "v2")
        assert "versions_dp" in response.cookies  # drawn again, and pinned
        route = client.get("/apps/quotes/api/version")
        assert route.status_code == 200


def test_a_cookie_of_a_finished_rollout_is_drawn_again_onto_production(two_versions, app):
    started = promote(app, by="rvaid", rollout=99)
    client = Client()
    client.cookies["versions_dp"] = signing.get_cookie_signer(salt="versions.live.rollout").sign(
        started.deployment_id
    )
    assert label_of(client.get("/apps/quotes/")) == "v2"
    promotion.abort_rollout(app, by="rvaid")
    assert label_of(client.get("/apps/quotes/")) == "v1"


# --------------------------------------------------------------------------------------------
# Automatic rollback, driven by real requests through the live app
# --------------------------------------------------------------------------------------------


def _pinned_to_candidate(candidate: str) -> Client:
    for _ in range(200):
        client, page = fresh_visit()
        if (
            signing.get_cookie_signer(salt="versions.live.rollout").unsign(
                page.cookies["versions_dp"].value
            )
            == candidate
        ):
            return client
    raise AssertionError("no visitor was drawn onto the candidate")


def test_the_candidates_error_rate_aborts_the_rollout_by_itself(two_versions, app):
    write(app, PAGE, "about", "<p>about v1</p>")
    promote(app, by="rvaid")  # production has /p/about
    production = App.objects.get(pk=app.pk).production_id
    from versions.services import delete_artifact

    delete_artifact(app, PAGE, "about", requested_by="agent", tool="t")
    candidate = promote(app, by="rvaid", rollout=50).deployment_id
    visitor = _pinned_to_candidate(candidate)
    for _ in range(25):
        visitor.get("/apps/quotes/p/about")  # the candidate lost the page: 404s
    after = App.objects.get(pk=app.pk)
    assert (after.production_id, after.candidate_id) == (production, None)
    event = DeploymentEvent.objects.filter(app=app).first()
    assert event.kind == "auto_rollback" and event.from_deployment_id == candidate
    assert event.receipt["kind"] == "auto_rollback"
    assert "were errors (5xx or not found), over the 5 % bound" in event.receipt["cause"]
    assert events("auto_rolled_back") == [[candidate, production]]
    assert label_of(visitor.get("/apps/quotes/")) == "v2"  # production, whose index is v2


def test_production_with_errors_in_its_watch_rolls_back_to_the_deployment_it_replaced(app):
    version(app, "v1")
    write(app, PAGE, "about", "<p>about</p>")
    first = promote(app, by="rvaid").deployment_id
    from versions.services import delete_artifact

    delete_artifact(app, PAGE, "about", requested_by="agent", tool="t")
    second = promote(app, by="rvaid").deployment_id
    client = Client()
    for _ in range(19):
        assert client.get("/apps/quotes/").status_code == 200
    assert client.get("/apps/quotes/p/about").status_code == 404
    assert App.objects.get(pk=app.pk).production_id == second  # 1 of 20 is 5 %: not over
    for _ in range(10):
        client.get("/apps/quotes/p/about")
    assert App.objects.get(pk=app.pk).production_id == first
    receipt = DeploymentEvent.objects.filter(app=app).first().receipt
    assert receipt["kind"] == "auto_rollback" and receipt["deploymentId"] == first
    assert receipt["message"].startswith(f"Rolled back automatically from {second} to {first}")


def test_healthy_traffic_never_rolls_back(two_versions, app):
    second = promote(app, by="rvaid").deployment_id
    client = Client()
    for _ in range(60):
        assert client.get("/apps/quotes/api/version").status_code == 200
    assert App.objects.get(pk=app.pk).production_id == second


def test_a_failing_post_promotion_check_rolls_production_back(two_versions, app, owner):
    second = promote(app, actor=owner).deployment_id  # no check yet: it passes its pre-flight
    # A check added while production is watched, which production fails:
    promotion.add_check(app, actor=owner, name="Says v1", path="/", expect_text="v1")
    receipt = promotion.run_post_promotion_checks(second)
    assert receipt is not None and receipt.kind == "auto_rollback"
    assert receipt.cause.startswith("check “Says v1” failed after the promotion")
    assert App.objects.get(pk=app.pk).production_id == two_versions
    assert promotion.run_post_promotion_checks(second) is None  # not production any more


def test_the_watch_keeps_a_promotion_an_owner_made_past_a_failing_check(two_versions, app, owner):
    """Promote anyway is the owner's decision: the watch runs the other checks again, never
    the one the promotion went past, so it does not undo the promotion seconds later."""
    promotion.add_check(app, actor=owner, name="Says v1", path="/", expect_text="v1")
    promotion.add_check(app, actor=owner, name="Answers", path="/")
    second = promote(app, actor=owner, override_reason="hotfix, the text changes").deployment_id
    assert promotion.run_post_promotion_checks(second) is None
    assert App.objects.get(pk=app.pk).production_id == second
    # A check that passed when it was promoted still rolls it back if it fails after.
    promotion.remove_check(app, actor=owner, name="Answers")
    promotion.add_check(app, actor=owner, name="Answers", path="/", expect_text="no such words")
    receipt = promotion.run_post_promotion_checks(second)
    assert receipt is not None and receipt.cause.startswith("check “Answers” failed after")
    assert App.objects.get(pk=app.pk).production_id == two_versions


# --------------------------------------------------------------------------------------------
# Scheduled promotion
# --------------------------------------------------------------------------------------------


def test_a_schedule_in_the_past_or_without_an_offset_is_refused(app, promoter):
    version(app, "v1")
    with pytest.raises(InvalidInput, match="only be scheduled in the future"):
        promote(app, actor=promoter, at=timezone.now() - timedelta(minutes=1))
    with pytest.raises(InvalidInput, match="with its offset"):
        promote(app, actor=promoter, at="2099-01-01T10:00:00")
    with pytest.raises(InvalidInput, match="cannot be scheduled"):
        promote(app, actor=promoter, at=timezone.now() + timedelta(hours=1), rollout=10)
    assert not ScheduledPromotion.objects.exists()


def test_a_due_schedule_promotes_the_state_fixed_when_it_was_scheduled(app, promoter):
    version(app, "v1")
    at = timezone.now() + timedelta(hours=1)
    scheduled = promote(app, actor=promoter, at=at, note="Friday release").as_dict()
    assert scheduled["kind"] == "scheduled" and scheduled["scheduleId"].startswith("sp_")
    assert promotion.run_due_schedules(timezone.now()) == []
    ran = promotion.run_due_schedules(at + timedelta(seconds=1))
    assert [(sid, r["kind"]) for sid, r in ran] == [(scheduled["scheduleId"], "promotion")]
    row = ScheduledPromotion.objects.get()
    assert row.status == "promoted" and row.result["deploymentId"]
    assert label_of(Client().get("/apps/quotes/")) == "v1"
    assert promotion.run_due_schedules(at + timedelta(hours=1)) == []  # runs once


def test_a_schedule_whose_state_changed_since_is_refused_not_shipped_changed(app, promoter):
    version(app, "v1")
    at = timezone.now() + timedelta(hours=1)
    promote(app, actor=promoter, at=at)
    version(app, "v2")
    ((_, result),) = promotion.run_due_schedules(at)
    assert result["kind"] == "preflight_failed"
    assert "changed since you reviewed it" in result["message"]
    assert ScheduledPromotion.objects.get().status == "refused"
    assert App.objects.get(pk=app.pk).production_id is None


def test_a_cancelled_schedule_promotes_nothing(app, promoter):
    version(app, "v1")
    at = timezone.now() + timedelta(hours=1)
    sid = promote(app, actor=promoter, at=at).schedule_id
    assert promotion.cancel_schedule(app, schedule_id=sid, actor=promoter)["kind"] == "cancelled"
    with pytest.raises(Conflict, match="only a scheduled one can be cancelled"):
        promotion.cancel_schedule(app, schedule_id=sid, actor=promoter)
    assert promotion.run_due_schedules(at) == []
    assert App.objects.get(pk=app.pk).production_id is None
    assert events("promotion_scheduled") and events("schedule_cancelled") == [[sid]]


def test_a_freeze_at_the_schedules_time_refuses_it(app, promoter, owner):
    version(app, "v1")
    at = timezone.now() + timedelta(hours=1)
    promote(app, actor=promoter, at=at)
    promotion.freeze_production(app, actor=owner, reason="holiday")
    ((_, result),) = promotion.run_due_schedules(at)
    assert result["kind"] == "preflight_failed" and "is frozen" in result["message"]


# --------------------------------------------------------------------------------------------
# Freeze and locks
# --------------------------------------------------------------------------------------------


def test_a_freeze_refuses_promotion_and_rollout_steps_but_not_rollback(
    two_versions, app, owner, promoter
):
    second = promote(app, by="rvaid").deployment_id
    with pytest.raises(Forbidden):
        promotion.freeze_production(app, actor=promoter, reason="no")
    with pytest.raises(InvalidInput, match="needs a reason"):
        promotion.freeze_production(app, actor=owner, reason="  ")
    with pytest.raises(InvalidInput, match="must be in the future"):
        promotion.freeze_production(
            app, actor=owner, reason="x", until=timezone.now() - timedelta(hours=1)
        )
    frozen = promotion.freeze_production(app, actor=owner, reason="Black Friday")
    assert frozen["frozen"] and frozen["reason"] == "Black Friday"
    write(app, PAGE, "index", "<p>v3</p>")
    with pytest.raises(PreflightFailed) as refused:
        promote(app, actor=promoter)
    assert "is frozen since" in refused.value.message and "“Black Friday”" in refused.value.message
    with pytest.raises(PreflightFailed):
        promote(app, actor=promoter, rollout=10)
    assert rollback_production(app, actor=promoter).deployment_id == two_versions  # allowed
    promotion.unfreeze_production(app, actor=owner)
    with pytest.raises(Conflict, match="is not frozen"):
        promotion.unfreeze_production(app, actor=owner)
    assert promote(app, actor=promoter).kind == "promotion"
    assert second
    assert events("production_frozen") and events("production_unfrozen")


def test_a_freeze_stops_advancing_and_completing_a_rollout_not_aborting_it(
    two_versions, app, owner
):
    promote(app, by="rvaid", rollout=10)
    promotion.freeze_production(app, actor=owner, reason="incident")
    for step in (
        lambda: promotion.advance_rollout(app, to=50, by="r"),
        lambda: promotion.complete_rollout(app, by="r"),
    ):
        with pytest.raises(PreflightFailed, match="is frozen"):
            step()
    assert promotion.abort_rollout(app, by="rvaid").kind == "abort"


def test_an_artifact_lock_refuses_agents_writes_but_not_peoples_restores(app, owner):
    from api_helpers import ApiClient, make_token

    from versions.services import restore_change_set

    write(app, PAGE, "index", "<p>v1</p>")
    turn = write(app, PAGE, "index", "<p>v2</p>")
    promotion.lock_artifact(app, collection=PAGE, name="index", actor=owner, reason="legal text")
    token = make_token("olga", "quotes")
    answer = ApiClient(token).put("/apps/quotes/artifacts/pltf_page/index", {"source": "<p>x</p>"})
    assert answer.status_code == 423
    body = answer.json()
    assert body["error"] == "locked"
    assert "is locked by olga (“legal text”): agents may not write it" in body["message"]
    assert ApiClient(token).delete("/apps/quotes/artifacts/pltf_page/index").status_code == 423
    restored = restore_change_set(turn.change_set_id, actor=owner)
    assert restored.kind == "restore"
    promotion.unlock_artifact(app, collection=PAGE, name="index", actor=owner)
    again = ApiClient(token).put("/apps/quotes/artifacts/pltf_page/index", {"source": "<p>x</p>"})
    assert again.status_code == 200
    assert events("artifact_locked") == [["pltf_page/index"]]
    assert events("artifact_unlocked") == [["pltf_page/index"]]


def test_an_agents_restore_or_revert_does_not_write_a_locked_artifact(app, owner):
    """Read in the code: the lock was checked where an agent writes an artifact, not where it
    restores one, so an agent's Restore all, Revert or point restore overwrote a locked
    artifact. Each is now refused in words, nothing written; a person still restores."""
    from api_helpers import ApiClient, make_token

    from versions.services import restore_change_set

    def turn(run, collection, name, source):
        return write_artifact(
            app, collection, name, source, requested_by="agent", tool="t", run_id=run
        )

    turn("one", PAGE, "index", "<p>v1</p>")
    turn("one", STYLESHEET, "App", "body { color: black; }")
    turn = turn("two", PAGE, "index", "<p>v2</p>")
    promotion.lock_artifact(app, collection=PAGE, name="index", actor=owner, reason="legal text")
    agent = ApiClient(make_token("olga", "quotes"))
    for path, body in (
        (f"/change-sets/{turn.change_set_id}/restore", {}),
        (f"/change-sets/{turn.change_set_id}/revert", {}),
        (f"/restore-points/{turn.restore_point_id}/restore", {}),
    ):
        refused = agent.post(path, body)
        assert refused.status_code == 409, (path, refused.json())
        message = refused.json()["message"]
        assert "index: It is locked by olga (“legal text”): an agent may not write it" in message
    planned = agent.post(f"/change-sets/{turn.change_set_id}/restore", {"dry_run": True}).json()
    assert [f["reason"] for f in planned["findings"]] == [
        "It is locked by olga (“legal text”): an agent may not write it. A person may restore "
        "it, or an owner unlock it."
    ]
    assert Artifact.objects.get(app=app, name="index").blob.text == "<p>v2</p>"
    assert restore_change_set(turn.change_set_id, actor=owner).kind == "restore"
    assert Artifact.objects.get(app=app, name="index").blob.text == "<p>v1</p>"


def test_a_rollback_during_a_rollout_ends_it_and_never_goes_to_the_candidate(two_versions, app):
    version(app, "v2")
    second = promote(app, by="rvaid").deployment_id
    version(app, "v3")
    candidate = promote(app, by="rvaid", rollout=50).deployment_id
    for _ in range(6):
        fresh_visit()  # visitors drawn: some pinned to the candidate
    assert DeploymentWatch.objects.filter(pk=candidate, ended_on__isnull=True).exists()
    with pytest.raises(Conflict, match="is the candidate of the rollout running"):
        rollback_production(app, by="rvaid", to=candidate)
    back = rollback_production(app, by="rvaid")  # to what production served before
    assert back.kind == "rollback" and back.deployment_id == two_versions
    assert back.message == (
        f"Production rolled back from {second} to {two_versions}; the rollout of {candidate} "
        f"ended: every visitor is served {two_versions}."
    )
    after = App.objects.get(pk=app.pk)
    assert (after.production_id, after.candidate_id, after.rollout_share) == (two_versions, None, 0)
    assert not DeploymentWatch.objects.filter(pk=candidate, ended_on__isnull=True).exists()
    assert not RolloutVisitor.objects.filter(app=app).exists()
    assert {label_of(fresh_visit()[1]) for _ in range(6)} == {"v1"}
    # The candidate never served production: a rollback does not ship it past its rollout.
    with pytest.raises(Conflict, match=f"never served {candidate}"):
        rollback_production(app, by="rvaid", to=candidate)
    assert rollback_production(app, by="rvaid", to=second).deployment_id == second
