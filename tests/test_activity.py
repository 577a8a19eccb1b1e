"""The Activity tab: an app's audit trail for its owners, the whole instance's for superusers;
newest first, filtered by action and person, paginated, every text escaped; anyone else
finds no such page."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission, User

from versions import selectors, services
from versions.models import App, AuditEvent

pytestmark = pytest.mark.django_db


@pytest.fixture
def owner(app: App) -> User:
    user = User.objects.create_user("olga", password=None)
    services.add_member(app, role="owner", username="olga", by="setup")
    return user


@pytest.fixture
def other_app() -> App:
    return App.objects.create(slug="other", name="Other")


def _page(client, user, path):
    client.force_login(user)
    return client.get(path)


def test_an_owner_reads_the_apps_activity_newest_first(client, app, owner, other_app):
    User.objects.create_user("rita", password=None)
    actor = services.actor_for_user(owner)
    services.add_member(app, role="viewer", username="rita", actor=actor)
    services.record("set_named", actor=actor, app=other_app, targets=["cs_rp_elsewhere_1"])

    answer = _page(client, owner, "/apps/quotes/versions/activity/")

    assert answer.status_code == 200
    html = answer.content.decode()
    assert 'aria-current="page">Activity</a>' in html
    # Newest first: rita added (by olga) before olga added (by setup); none of the other app.
    assert html.index("user “rita”") < html.index("user “olga”")
    assert "cs_rp_elsewhere_1" not in html
    assert "Member added" in html


def test_the_tab_is_listed_for_owners_only(client, app, owner):
    viewer = User.objects.create_user("vic", password=None)
    services.add_member(app, role="viewer", username="vic", by="setup")
    assert (
        "/apps/quotes/versions/activity/"
        in _page(client, owner, "/apps/quotes/versions/").content.decode()
    )
    assert (
        "/apps/quotes/versions/activity/"
        not in _page(client, viewer, "/apps/quotes/versions/").content.decode()
    )


def test_a_non_owner_finds_no_such_page_and_a_stranger_no_such_app(client, app, owner, other_app):
    viewer = User.objects.create_user("vic", password=None)
    services.add_member(app, role="restorer", username="vic", by="setup")
    services.add_member(other_app, role="viewer", username="vic", by="setup")

    mine = _page(client, viewer, "/apps/quotes/versions/activity/")
    assert mine.status_code == 404
    assert "only its owners read it" in mine.content.decode()

    stranger = User.objects.create_user("sam", password=None)
    services.add_member(other_app, role="owner", username="sam", by="setup")
    theirs = _page(client, stranger, "/apps/quotes/versions/activity/")
    missing = _page(client, stranger, "/apps/quotes/versions/no-such-page/")
    assert theirs.status_code == missing.status_code == 404
    assert "There is no app “quotes”." in theirs.content.decode()
    assert "Activity" not in theirs.content.decode().split("<main", 1)[1].split("</main>")[0]


def test_filters_by_action_and_person(client, app, owner):
    User.objects.create_user("rita", password=None)
    actor = services.actor_for_user(owner)
    services.add_member(app, role="viewer", username="rita", actor=actor)
    services.record("set_named", actor=None, app=app, targets=["cs_rp_x_1"])

    by_action = _page(client, owner, "/apps/quotes/versions/activity/?action=set_named")
    html = by_action.content.decode()
    assert "cs_rp_x_1" in html and "user “rita”" not in html

    by_person = client.get("/apps/quotes/versions/activity/?person=olga").content.decode()
    assert "user “rita”" in by_person and "cs_rp_x_1" not in by_person

    nothing = client.get("/apps/quotes/versions/activity/?person=nobody").content.decode()
    assert "Nothing matches these filters" in nothing


def test_a_tokens_events_count_as_its_users(app):
    make = User.objects.create_user("rvaid", password=None)
    token, row = services.create_agent_token("rvaid", ["quotes"])
    services.record("restored", actor=services.actor_for_token(row), app=app, targets=["rs_1"])
    page = selectors.activity_page(app, person="rvaid")
    assert [e.actor_name for e in page] == [f"{row.prefix}… of rvaid"] and make


def test_text_is_escaped(client, app, owner):
    services.record(
        "set_named",
        actor=None,
        app=app,
        targets=["<script>alert(1)</script>"],
        reason="<b>why</b>",
        details={"name": "<img src=x onerror=alert(1)>"},
    )
    html = _page(client, owner, "/apps/quotes/versions/activity/").content.decode()
    assert "<script>alert(1)</script>" not in html and "&lt;script&gt;" in html
    assert "<img src=x" not in html and "&lt;img src=x" in html
    assert "<b>why</b>" not in html


def test_the_activity_is_paginated(client, app, owner):
    for n in range(selectors.ACTIVITY_PER_PAGE + 3):
        services.record("set_named", actor=None, app=app, targets=[f"cs_rp_{n}_x"])
    first = _page(client, owner, "/apps/quotes/versions/activity/").content.decode()
    assert f"cs_rp_{selectors.ACTIVITY_PER_PAGE + 2}_x" in first and "cs_rp_0_x" not in first
    second = client.get("/apps/quotes/versions/activity/?page=2").content.decode()
    assert "cs_rp_0_x" in second and "Page 2 of 2" in second


def test_the_htmx_tab_answers_a_fragment(client, app, owner):
    client.force_login(owner)
    answer = client.get("/apps/quotes/versions/activity/", headers={"HX-Request": "true"})
    html = answer.content.decode()
    assert html.startswith('<div id="tab-body"') and "<html" not in html


def test_a_superuser_reads_every_apps_activity_others_find_no_page(client, app, owner, other_app):
    services.record("set_named", actor=None, app=other_app, targets=["cs_rp_other_1"])
    services.record("signed_in", actor=services.actor_for_user(owner))
    root = User.objects.create_superuser("root", password=None)

    html = _page(client, root, "/versions/activity/").content.decode()
    assert "cs_rp_other_1" in html and "Signed in" in html and "Member added" in html
    assert 'href="/versions/activity/"' in html  # the top bar leads to it

    # An owner of an app, even with every global permission, is not a superuser.
    owner.user_permissions.add(*Permission.objects.filter(content_type__app_label="versions"))
    refused = _page(client, owner, "/versions/activity/")
    assert refused.status_code == 404
    assert AuditEvent.objects.filter(action="signed_in").exists()


def test_list_and_mapping_details_read_as_a_list_and_as_pairs(client, app, owner):
    """A promotion forced past protection keeps its findings (a list) and a protection change
    its before and after (mappings): the page shows them as a list and as pairs, escaped,
    never as Python's ['…'] or {'…': …}."""
    services.record(
        "protection_overridden",
        actor=None,
        app=app,
        targets=["cs_a", "cs_b"],
        reason="hotfix",
        details={
            "findings": ["cs_a: it needs <1> more approval", "cs_b: it has changes requested"],
            "before": {"required_approvals": 0, "dismiss_stale": True, "note": None},
            "events": list(range(25)),
        },
    )
    html = _page(client, owner, "/apps/quotes/versions/activity/").content.decode()
    assert "['" not in html and "{'" not in html and "[0, 1" not in html
    assert "<li>cs_a: it needs &lt;1&gt; more approval</li>" in html
    assert "<li>cs_b: it has changes requested</li>" in html
    # Pairs in the order the database keeps them (PostgreSQL's jsonb orders keys its own way).
    for pair in ("required_approvals: 0", "dismiss_stale: yes", "note: —"):
        assert pair in html
    assert "<li>19</li><li>… and 5 more</li>" in html and "<li>20</li>" not in html
