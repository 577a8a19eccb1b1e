"""Environments through the doors (docs/architecture.md#environments): the Production tab (Promote
to production with what it ships, Confirm promotion, Roll back production), previews, the API's
deployments endpoints and MCP's tools — the services decide who may promote."""

from __future__ import annotations

import hashlib
import re
from html import unescape
from html.parser import HTMLParser

import pytest
from api_helpers import ApiClient, make_token, make_user
from django.contrib.auth.models import Permission, User
from django.test import Client
from django.urls import reverse

from versions import messages, services
from versions.models import App, Deployment, RestorePoint


def _write(app: App, source: str, run: str) -> None:
    services.write_artifact(
        app, "pltf_page", "index", source, requested_by="agent", tool="t", run_id=run
    )


@pytest.fixture
def boss() -> Client:
    client = Client()
    client.force_login(User.objects.create_superuser("boss", password=None))
    return client


def test_the_production_tab_promotes_the_draft_and_rolls_back(app, boss, client):
    _write(app, "<p>v1</p>\n", "a")
    tab = boss.get(reverse("versions:production", args=["quotes"])).content.decode()
    assert "Promote to production" in tab and "no production deployment yet" in tab
    dialog = boss.get(
        reverse("versions:promote", args=["quotes"]), {"ref": "draft"}, HTTP_HX_REQUEST="true"
    )
    html = dialog.content.decode()
    assert "Confirm promotion" in html and "<strong>index</strong>" in html and "+1" in html
    promoted = boss.post(
        reverse("versions:promote", args=["quotes"]),
        {
            "ref": "draft",
            "expected": "pltf_page/index=" + hashlib.sha256(b"<p>v1</p>\n").hexdigest(),
        },
        HTTP_HX_REQUEST="true",
    )
    assert (
        promoted.status_code == 200
        and "Promoted. Production now serves" in promoted.content.decode()
    )
    first = Deployment.objects.get()
    _write(app, "<p>v2</p>\n", "b")
    assert client.get("/apps/quotes/").content == b"<p>v1</p>\n"  # production, not the draft
    boss.post(
        reverse("versions:promote", args=["quotes"]), {"ref": "draft"}, HTTP_HX_REQUEST="true"
    )
    assert client.get("/apps/quotes/").content == b"<p>v2</p>\n"
    rolled = boss.post(
        reverse("versions:rollback", args=["quotes", first.id]), HTTP_HX_REQUEST="true"
    )
    assert "Rolled back. Production now serves" in rolled.content.decode()
    assert client.get("/apps/quotes/").content == b"<p>v1</p>\n"


def test_a_draft_changed_since_the_dialog_is_not_promoted(app, boss):
    _write(app, "<p>v1</p>\n", "a")
    stale = boss.post(
        reverse("versions:promote", args=["quotes"]),
        {"ref": "draft", "expected": "pltf_page/index=" + "0" * 64},
        HTTP_HX_REQUEST="true",
    )
    assert stale.status_code == 409 and "Nothing changed." in stale.content.decode()
    assert not Deployment.objects.exists()


def test_a_person_without_the_promote_role_sees_no_button_and_is_refused(app):
    _write(app, "<p>v1</p>\n", "a")
    user = User.objects.create_user("rita", password=None)
    services.add_member(app, role="restorer", username="rita", by="setup")
    rita = Client()
    rita.force_login(user)
    assert (
        "Promote to production</button>"
        not in rita.get(reverse("versions:production", args=["quotes"])).content.decode()
    )
    refused = rita.post(reverse("versions:promote", args=["quotes"]), {"ref": "draft"})
    assert refused.status_code == 403 and "promoter" in refused.content.decode()
    assert not Deployment.objects.exists()


def test_the_preview_page_frames_a_signed_sandboxed_link(app, boss):
    _write(app, "<p>v1</p>\n", "a")
    page = boss.get(reverse("versions:preview", args=["quotes", "draft"])).content.decode()
    assert 'sandbox="allow-scripts allow-forms"' in page and "/apps/quotes/at/draft/s/" in page
    assert (
        boss.get(reverse("versions:preview", args=["quotes", "cs_rp_zz_00000000"])).status_code
        == 404
    )


def test_the_api_lists_promotes_and_rolls_back_only_with_a_promoting_token(app):
    _write(app, "<p>v1</p>\n", "a")
    user = make_user("rvaid")
    user.user_permissions.add(Permission.objects.get(codename="promote_deployment"))
    plain = ApiClient(make_token("rvaid", "quotes"))
    refused = plain.post("/apps/quotes/deployments", {})
    assert refused.status_code == 403 and refused.json()["message"] == messages.TOKEN_CANNOT_PROMOTE
    token, _row = services.create_agent_token("rvaid", ["quotes"], can_promote=True)
    api = ApiClient(token)
    done = api.post("/apps/quotes/deployments", {"note": "first"})
    assert done.status_code == 200 and done.json()["kind"] == "promotion"
    _write(app, "<p>v2</p>\n", "b")
    api.post("/apps/quotes/deployments", {})
    listed = api.get("/apps/quotes/deployments").json()
    assert len(listed["deployments"]) == 2 and listed["history"][0]["kind"] == "promotion"
    first_id = listed["deployments"][1]["id"]
    assert listed["rollback_targets"] == [first_id]  # production served it; not the current
    back = api.post("/apps/quotes/production/rollback", {"note": "broke"})
    assert back.status_code == 200 and back.json()["kind"] == "rollback"
    assert api.get("/apps/quotes/deployments").json()["rollback_targets"] == [
        listed["deployments"][0]["id"]
    ]
    assert api.get("/apps/quotes/deployments").json()["production"] == done.json()["deploymentId"]


def test_rolling_back_without_an_earlier_deployment_is_refused_in_words(app):
    user = make_user("rvaid")
    user.user_permissions.add(Permission.objects.get(codename="promote_deployment"))
    token, _row = services.create_agent_token("rvaid", ["quotes"], can_promote=True)
    refused = ApiClient(token).post("/apps/quotes/production/rollback", {})
    assert refused.status_code == 409 and refused.json()["message"]


def test_once_promoted_restores_say_they_change_the_draft_only(app, boss):
    _write(app, "<p>v1</p>\n", "a")
    services.promote(app, by="boss")
    dp = Deployment.objects.get().id
    _write(app, "<p>v2</p>\n", "b")
    set_id = services.write_artifact(
        app, "pltf_page", "index", "<p>v3</p>\n", requested_by="agent", tool="t", run_id="c"
    ).change_set_id
    url = reverse("versions:restore_change_set", args=["quotes", set_id])
    notice = messages.PRODUCTION_STILL_SERVES.format(deployment=dp)
    assert notice in boss.get(url, HTTP_HX_REQUEST="true").content.decode()
    done = boss.post(url, {"ret": f"set:{set_id}"}, HTTP_HX_REQUEST="true").content.decode()
    assert notice in _notice(done) and "Promote to production" in _notice(done)


def _notice(html: str) -> str:
    """The production notice of a restore's dialog or receipt in ``html`` ("" if none)."""
    start = html.find('<p class="note production-notice">')
    return "" if start < 0 else html[start : html.index("</p>", start)]


def test_a_restore_that_brings_the_draft_back_to_production_says_so_not_promote(app, boss):
    """Restore all of the only set written since the promotion leaves the draft holding what
    production serves: the dialog and the receipt say so, and offer no promotion."""
    _write(app, "<p>v1</p>\n", "a")
    services.promote(app, by="boss")
    dp = Deployment.objects.get().id
    set_id = services.write_artifact(
        app, "pltf_page", "index", "<p>v2</p>\n", requested_by="agent", tool="t", run_id="b"
    ).change_set_id
    url = reverse("versions:restore_change_set", args=["quotes", set_id])
    dialog = _notice(boss.get(url, HTTP_HX_REQUEST="true").content.decode())
    assert dialog == (
        '<p class="note production-notice">This changes the draft only. Production still serves '
        f"{dp}, just what the draft holds afterwards: there is nothing to promote."
    )
    done = _notice(
        boss.post(url, {"ret": f"set:{set_id}"}, HTTP_HX_REQUEST="true").content.decode()
    )
    assert done == (
        f'<p class="note production-notice">Production still serves {dp}, just what the draft '
        "holds now: there is nothing to promote."
    )
    # Undoing that restore takes the draft away from production again: promote to ship it.
    undo_set = RestorePoint.objects.filter(change_set__kind="restore").get().change_set_id
    undo = reverse("versions:restore_change_set", args=["quotes", undo_set])
    notice = messages.PRODUCTION_STILL_SERVES.format(deployment=dp)
    assert notice in _notice(boss.get(undo, HTTP_HX_REQUEST="true").content.decode())
    again = boss.post(undo, {"ret": f"set:{undo_set}"}, HTTP_HX_REQUEST="true").content.decode()
    assert notice in _notice(again) and "Promote to production" in _notice(again)


def test_the_panel_may_frame_a_preview_and_no_other_site_may(app, boss, client):
    _write(app, "<p>v1</p>\n", "a")
    answer = client.get(services.preview_url(app, "draft"))
    assert answer.status_code == 200 and answer["X-Frame-Options"] == "SAMEORIGIN"
    assert answer["Content-Security-Policy"].startswith("sandbox")


def test_a_preview_of_a_set_links_to_its_diff_and_to_compare_with_the_draft(app, boss):
    _write(app, "<p>v1</p>\n", "a")
    set_id = services.write_artifact(
        app, "pltf_page", "index", "<p>v2</p>\n", requested_by="agent", tool="t", run_id="b"
    ).change_set_id
    back = reverse("versions:change_set", args=["quotes", set_id])
    page = boss.get(
        reverse("versions:preview", args=["quotes", set_id]), {"back": back}
    ).content.decode()
    assert f'href="{back}">Back to its diff' in page
    assert f"/apps/quotes/versions/compare/{set_id}...draft/" in page


@pytest.mark.parametrize(
    "back",
    [
        "javascript:alert(1)",
        "https://evil.example/",
        "//evil.example/x",
        "/apps/quotes/versions/../../admin/",
    ],
)
def test_a_previews_way_back_leads_only_into_the_apps_panel(app, boss, back):
    _write(app, "<p>v1</p>\n", "a")
    page = boss.get(
        reverse("versions:preview", args=["quotes", "draft"]), {"back": back}
    ).content.decode()
    assert "Back to its diff" not in page


class _Forms(HTMLParser):
    """The panel's forms as it renders them: each form's action and its named inputs."""

    def __init__(self) -> None:
        super().__init__()
        self.forms: list[tuple[str, list[tuple[str, str]]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if tag == "form":
            self.forms.append((found.get("action") or "", []))
        elif tag == "input" and self.forms and found.get("name"):
            self.forms[-1][1].append((found["name"] or "", found.get("value") or ""))


def _form(html: str, action: str, **having: str) -> list[tuple[str, str]]:
    """The fields of the one form of ``html`` posting to ``action`` whose fields include
    ``having``."""
    parser = _Forms()
    parser.feed(html)
    matches = [
        fields
        for act, fields in parser.forms
        if act == action and set(having.items()) <= set(fields)
    ]
    assert len(matches) == 1, parser.forms
    return [(k, v) for k, v in matches[0] if k != "csrfmiddlewaretoken"]


def _as_post(fields: list[tuple[str, str]]) -> dict[str, list[str]]:
    data: dict[str, list[str]] = {}
    for key, value in fields:
        data.setdefault(key, []).append(value)
    return data


def _promote_dialog_of_set(boss: Client, set_id: str) -> dict[str, list[str]]:
    """From the set's page, the Promote to production button, then its dialog's form."""
    promote_url = reverse("versions:promote", args=["quotes"])
    page = boss.get(reverse("versions:change_set", args=["quotes", set_id])).content.decode()
    button = _form(page, promote_url, ref=set_id)
    dialog = boss.get(promote_url, _as_post(button), HTTP_HX_REQUEST="true").content.decode()
    assert "Confirm promotion" in dialog
    return _as_post(_form(dialog, promote_url, ref=set_id))


def test_promoting_a_set_that_later_sets_changed_ships_what_its_dialog_showed(app, boss, client):
    _write(app, "<p>v1</p>\n", "a")
    first = services.write_artifact(
        app, "pltf_page", "about", "<p>about</p>\n", requested_by="agent", tool="t", run_id="a"
    ).change_set_id
    _write(app, "<p>v2</p>\n", "b")  # a later set: the draft is no longer the set's state
    confirmed = _promote_dialog_of_set(boss, first)
    assert sorted(confirmed["expected"]) == [
        "pltf_page/about=" + hashlib.sha256(b"<p>about</p>\n").hexdigest(),
        "pltf_page/index=" + hashlib.sha256(b"<p>v1</p>\n").hexdigest(),
    ]
    promoted = boss.post(
        reverse("versions:promote", args=["quotes"]), confirmed, HTTP_HX_REQUEST="true"
    )
    html = promoted.content.decode()
    assert promoted.status_code == 200 and "Promoted. Production now serves" in html, html
    assert client.get("/apps/quotes/").content == b"<p>v1</p>\n"


def test_a_set_whose_promotion_changed_between_dialog_and_confirm_is_not_promoted(app, boss):
    first = services.write_artifact(
        app, "pltf_page", "index", "<p>v1</p>\n", requested_by="agent", tool="t", run_id="a"
    ).change_set_id
    confirmed = _promote_dialog_of_set(boss, first)
    # Production moves on between the dialog and the confirmation: what the promotion would
    # ship now is not what the person reviewed.
    services.write_artifact(
        app, "pltf_page", "about", "<p>about</p>\n", requested_by="agent", tool="t", run_id="b"
    )
    services.promote(app, by="boss")
    refused = boss.post(
        reverse("versions:promote", args=["quotes"]), confirmed, HTTP_HX_REQUEST="true"
    )
    assert refused.status_code == 409 and "Nothing changed." in refused.content.decode()
    assert "it was not among what you reviewed" in unescape(refused.content.decode())
    assert Deployment.objects.count() == 1


def test_the_production_tab_pages_through_a_long_history(app, boss):
    """The tab shows the newest 50 events of production's history; "Older events" pages on by
    the same cursor the API uses, and a mangled cursor shows the newest again."""
    _write(app, "<p>v0</p>\n", "r0")
    services.promote(app, by="boss")
    for i in range(1, 56):
        _write(app, f"<p>v{i}</p>\n", f"r{i}")
        services.promote(app, by="boss", note=f"ship {i}")
    url = reverse("versions:production", args=["quotes"])
    newest = boss.get(url).content.decode()
    assert "“ship 55”" in newest and "“ship 6”" in newest and "“ship 5”" not in newest
    older_link = OlderLink()
    older_link.feed(newest)
    assert older_link.href, "an Older events link"
    older = boss.get(unescape(older_link.href)).content.decode()
    assert "“ship 5”" in older and "“ship 1”" in older and "“ship 6”" not in older
    assert "Newest events" in older
    trailing = OlderLink()
    trailing.feed(older)
    assert trailing.href is None  # the oldest page: nothing older
    mangled = boss.get(url, {"history": "not-a-cursor"})
    assert mangled.status_code == 200 and "“ship 55”" in mangled.content.decode()


class OlderLink(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.href: str | None = None
        self._in: str | None = None

    def handle_starttag(self, tag, attrs):
        if tag == "a":
            self._in = dict(attrs).get("href")

    def handle_data(self, data):
        if self._in and data.strip() == "Older events":
            self.href = self._in

    def handle_endtag(self, tag):
        if tag == "a":
            self._in = None


def _rollback_buttons(html: str) -> set[str]:
    """The deployments the Production tab offers Roll back production to (one form each)."""
    return set(re.findall(r"/production/rollback/(dp_[a-z0-9_]+)/\" hx-get", html))


def test_a_rollout_candidate_is_no_rollback_target_and_a_rollback_ends_the_rollout(
    app, boss, client
):
    """Found in use: during a rollout the candidate's row offered Roll back production, which
    moved production to a deployment it never served, past the rollout, and left the rollout
    "running" on production itself."""
    _write(app, "<p>v1</p>\n", "a")
    first = services.promote(app, by="boss").deployment_id
    _write(app, "<p>v2</p>\n", "b")
    second = services.promote(app, by="boss").deployment_id
    _write(app, "<p>v3</p>\n", "c")
    candidate = services.promote(app, by="boss", rollout=25).deployment_id
    tab = reverse("versions:production", args=["quotes"])
    assert _rollback_buttons(boss.get(tab).content.decode()) == {first}

    refused = boss.post(
        reverse("versions:rollback", args=["quotes", candidate]), HTTP_HX_REQUEST="true"
    )
    body = unescape(refused.content.decode())
    assert refused.status_code == 409
    assert f"{candidate} is the candidate of the rollout running" in body
    assert "Complete rollout serves it to everyone" in body
    after = App.objects.get(pk=app.pk)
    assert (after.production_id, after.candidate_id, after.rollout_share) == (second, candidate, 25)

    dialog = boss.get(reverse("versions:rollback", args=["quotes", first]), HTTP_HX_REQUEST="true")
    words = re.sub(r"<[^>]+>", "", unescape(dialog.content.decode()))
    assert f"The rollout of {candidate} (25 % of visitors) ends with it" in words
    rolled = boss.post(reverse("versions:rollback", args=["quotes", first]), HTTP_HX_REQUEST="true")
    assert rolled.status_code == 200 and "Rolled back. Production now serves" in rolled.text
    after = App.objects.get(pk=app.pk)
    assert (after.production_id, after.candidate_id, after.rollout_share) == (first, None, 0)
    for _ in range(8):  # no visitor is drawn onto the candidate any more
        assert Client().get("/apps/quotes/").content == b"<p>v1</p>\n"
    html = boss.get(tab).content.decode()
    assert "Rollout running" not in html
    # The candidate never served production: no rollback goes to it now either.
    assert _rollback_buttons(html) == {second}
    never = boss.post(
        reverse("versions:rollback", args=["quotes", candidate]), HTTP_HX_REQUEST="true"
    )
    assert never.status_code == 409
    assert f"never served {candidate}" in unescape(never.content.decode())
    assert App.objects.get(pk=app.pk).production_id == first


def test_a_freeze_and_a_scheduled_promotion_read_as_times_a_person_reads(app, boss):
    """Found in use: the freeze said "Since 2026-12-06T04:21:39.848Z … until
    2026-12-24T18:00:00.000Z" and a scheduled promotion "at 2026-…Z": the wire's ISO text."""
    from datetime import timedelta

    from django.utils import timezone

    _write(app, "<p>v1</p>\n", "a")
    services.promote(app, by="boss")
    _write(app, "<p>v2</p>\n", "b")
    boss_actor = services.actor_for_user(User.objects.get(username="boss"))
    due = timezone.now() + timedelta(hours=3)
    scheduled = services.promote(app, by="boss", at=due)
    assert scheduled.message.startswith(  # a sentence, whatever the ref it names
        f"Scheduled: draft will be promoted at {due:%Y-%m-%d %H:%M} UTC as it is now (1 artifact),"
    )
    services.promotion.freeze_production(
        app, actor=boss_actor, reason="Black Friday", until=timezone.now() + timedelta(days=18)
    )
    html = boss.get(reverse("versions:production", args=["quotes"])).content.decode()
    text = " ".join(re.sub(r"<[^>]+>", " ", re.sub(r'="[^"]*"', "", html)).split())
    assert not re.search(r"\d{4}-\d\d-\d\dT\d\d:\d\d", text), re.findall(r"\S*\dT\d\S*", text)
    assert "Since just now" in text and "it ends in 18 days" in text
    assert re.search(r"due in 3 hours \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC by boss", text)


def test_a_refused_rollout_step_names_each_finding_once(app, boss):
    """Found in use: Complete rollout while production was frozen printed the refusal's whole
    message, which spells out the finding, and then the same finding again as a list."""
    _write(app, "<p>v1</p>\n", "a")
    services.promote(app, by="boss")
    _write(app, "<p>v2</p>\n", "b")
    services.promote(app, by="boss", rollout=20)
    boss_actor = services.actor_for_user(User.objects.get(username="boss"))
    services.promotion.freeze_production(app, actor=boss_actor, reason="Launch week")
    refused = boss.post(
        reverse("versions:production_rollout", args=["quotes"]),
        {"step": "complete"},
        HTTP_HX_REQUEST="true",
    )
    assert refused.status_code == 409
    receipt = unescape(
        refused.content.decode().split('id="receipt-main"')[1].split("</section>")[0]
    )
    assert "Nothing changed." in receipt and "Pre-flight found 1 problem:" in receipt
    assert receipt.count("is frozen since") == 1, receipt
