"""Roles per app through the doors (docs/architecture.md#access): the panel and the API answer what
the services decide — an app without a role is a 404 in words, an action above the role a 403 naming
it."""

from __future__ import annotations

import pytest
from api_helpers import ApiClient, make_token
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from versions import messages, services
from versions.errors import Forbidden
from versions.models import App, AppMembership, ChangeSet, RestorePoint


@pytest.fixture
def apps(app: App) -> dict:
    other = App.objects.create(slug="billing", name="Billing")
    ids = {}
    for a in (app, other):
        services.write_artifact(
            a, "pltf_page", "index", "v1\n", requested_by="s", tool="t", run_id="1"
        )
        r = services.write_artifact(
            a, "pltf_page", "index", "v2\n", requested_by="agent", tool="t", run_id="2"
        )
        ids[a.slug] = (r.change_set_id, r.restore_point_id)
    User.objects.create_user("owner", password=None)
    services.add_member(app, role="owner", username="owner", by="setup")
    return ids


def _reviewer(app: App) -> Client:
    User.objects.create_user("rev", password=None)
    services.add_member(app, role="reviewer", username="rev", by="setup")
    client = Client()
    client.force_login(User.objects.get(username="rev"))
    return client


def _writes() -> tuple[int, int]:
    return RestorePoint.objects.count(), ChangeSet.objects.count()


def test_a_reviewer_sees_one_app_and_no_restore_buttons(app, apps):
    client = _reviewer(app)
    home = client.get("/").content.decode()
    assert "quotes" in home and "billing" not in home
    panel = client.get(reverse("versions:change_set", args=["quotes", apps["quotes"][0]]))
    html = panel.content.decode()
    assert panel.status_code == 200 and "Restore all" not in html and "Save name" in html


NEEDS_RESTORER = "needs the <strong>restorer</strong> role on this app: ask one of its owners."


def test_a_reviewer_is_told_which_role_restoring_needs_where_the_buttons_would_be(app, apps):
    set_id, point_id = apps["quotes"]
    services.mark_release(set_id, by="setup")
    services.write_artifact(app, "pltf_page", "index", "v3\n", requested_by="a", tool="t")
    pages = [
        reverse("versions:change_set", args=["quotes", set_id]),
        reverse("versions:restore_point", args=["quotes", point_id]),
        reverse("versions:since_release", args=["quotes"]),
    ]
    reviewer, owner = _reviewer(app), Client()
    owner.force_login(User.objects.get(username="owner"))
    for url in pages:
        seen = reviewer.get(url).content.decode()
        assert NEEDS_RESTORER in seen, url
        assert "Restore all" not in seen and ">Restore</button>" not in seen
        assert NEEDS_RESTORER not in owner.get(url).content.decode(), url


def test_a_reviewers_forged_restore_is_403_naming_the_role_and_writes_nothing(app, apps):
    client = _reviewer(app)
    before = _writes()
    set_id, point_id = apps["quotes"]
    for url in (
        reverse("versions:restore_change_set", args=["quotes", set_id]),
        reverse("versions:restore_point_restore", args=["quotes", point_id]),
        reverse("versions:restore_to_release", args=["quotes"]),
    ):
        refused = client.post(url)
        assert refused.status_code == 403
        assert "restorer" in refused.content.decode()
    assert _writes() == before


def test_the_other_apps_urls_are_404_in_words_for_a_reviewer(app, apps):
    client = _reviewer(app)
    set_id, point_id = apps["billing"]
    for url in (
        reverse("versions:change_sets", args=["billing"]),
        reverse("versions:change_set", args=["billing", set_id]),
        reverse("versions:restore_point", args=["billing", point_id]),
        reverse("versions:since_release", args=["billing"]),
        reverse("versions:restore_change_set", args=["billing", set_id]),
    ):
        missing = client.get(url)
        assert missing.status_code == 404, url
        assert "There is no app “billing”" in missing.content.decode()


def test_the_members_tab_is_for_owners_only(app, apps):
    reviewer = _reviewer(app)
    assert reviewer.get(reverse("versions:members", args=["quotes"])).status_code == 403
    owner = Client()
    owner.force_login(User.objects.get(username="owner"))
    page = owner.get(reverse("versions:members", args=["quotes"]))
    assert page.status_code == 200 and "Add member" in page.content.decode()
    added = owner.post(
        reverse("versions:add_member", args=["quotes"]),
        {"kind": "user", "name": "rev", "role": "viewer"},
        HTTP_HX_REQUEST="true",
    )
    assert added.status_code == 422  # rev is a member already: said in words
    assert "already a member" in added.content.decode()
    # Each change is said as a sentence, the role with its article.
    rev = AppMembership.objects.get(app=app, user__username="rev")
    changed = owner.post(
        reverse("versions:change_role", args=["quotes", rev.pk]),
        {"role": "owner"},
        HTTP_HX_REQUEST="true",
    )
    assert "User “rev” is now an owner." in changed.content.decode()


def test_a_token_never_acts_beyond_its_users_role_a_reviewer_writes_but_may_not_restore(app, apps):
    # An owner's token, and then the owner is made a reviewer: the token follows the role.
    User.objects.create_user("rev", password=None)
    membership = services.add_member(app, role="owner", username="rev", by="setup")
    api = ApiClient(make_token("rev", "quotes"))
    services.change_role(app, membership.pk, "reviewer", by="setup")
    assert api.put("/apps/quotes/artifacts/pltf_page/index", {"source": "v3\n"}).status_code == 200
    before = _writes()
    refused = api.post(f"/change-sets/{apps['quotes'][0]}/restore", {})
    assert refused.status_code == 403
    assert refused.json()["message"].endswith(messages.NEEDS_ROLE.format(role="restorer"))
    assert _writes() == before


def test_a_token_is_only_for_an_owner_of_an_app_with_members(app, apps):
    User.objects.create_user("rev", password=None)
    services.add_member(app, role="reviewer", username="rev", by="setup")
    with pytest.raises(Forbidden) as refused:
        services.create_agent_token("rev", ["quotes"])
    assert refused.value.message == messages.NOT_OWNER.format(username="rev", slug="quotes")
    token, _row = services.create_agent_token("owner", ["quotes"])
    assert token.startswith("vt_")


def test_a_token_whose_user_left_the_app_can_no_longer_read_or_write_it(app, apps):
    User.objects.create_user("gone", password=None)
    membership = services.add_member(app, role="owner", username="gone", by="setup")
    api = ApiClient(make_token("gone", "quotes"))
    assert api.get("/apps/quotes/artifacts").status_code == 200
    services.remove_member(app, membership.pk, by="setup")  # "owner" stays an owner
    before = _writes()
    assert api.get("/apps/quotes/artifacts").status_code == 404
    assert api.put("/apps/quotes/artifacts/pltf_page/index", {"source": "x\n"}).status_code == 404
    assert _writes() == before


def test_a_reviewer_is_told_which_role_promoting_needs(app, apps):
    note = "need the <strong>promoter</strong> role on this app: ask one of its owners."
    url = reverse("versions:production", args=["quotes"])
    reviewer, owner = _reviewer(app), Client()
    owner.force_login(User.objects.get(username="owner"))
    seen = reviewer.get(url).content.decode()
    assert note in seen and "Promote to production" not in seen
    shown = owner.get(url).content.decode()
    assert note not in shown and "Promote to production" in shown
