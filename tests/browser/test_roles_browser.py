"""The demo's reviewer (docs/architecture.md#access), as a person signs in and clicks: one app
listed, no restore buttons, a forged restore refused, the other app a 404 in words; the owner's
Members tab."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.browser


@pytest.fixture
def demo(transactional_db):
    from versions.management.commands.load_demo import (
        DEMO_SLUG,
        SECOND_SLUG,
        demo_accounts,
        load_demo,
        load_second_app,
    )
    from versions.models import ChangeSet

    load_demo()
    load_second_app()
    accounts = dict(demo_accounts())
    turn = ChangeSet.objects.get(app__slug=DEMO_SLUG, run_id="demo-agent-turn-1")
    return {"accounts": accounts, "turn": turn, "demo": DEMO_SLUG, "second": SECOND_SLUG}


def _sign_in(page, live_server, username: str, password: str) -> None:
    page.goto(f"{live_server.url}/")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(f"{live_server.url}/")


def test_the_demo_reviewer_sees_one_app_and_cannot_restore(page, live_server, demo):
    from versions.management.commands.load_demo import REVIEWER_PASSWORD, REVIEWER_USER

    _sign_in(page, live_server, REVIEWER_USER, REVIEWER_PASSWORD)
    assert page.get_by_role("link", name="Quote approvals (demo)").count() == 1
    assert page.get_by_text("Staff directory").count() == 0
    page.get_by_role("link", name="Quote approvals (demo)").click()
    turn = demo["turn"]
    row = page.locator(f"#set-{turn.id}")
    row.get_by_role("link", name=turn.id, exact=True).click()
    page.get_by_role("button", name="Save name").wait_for()
    assert page.get_by_role("button", name="Restore all").count() == 0
    assert page.get_by_role("link", name="Members").count() == 0

    # A forged POST with the page's own CSRF token: refused in words, nothing restored.
    token = page.locator("input[name=csrfmiddlewaretoken]").first.input_value()
    forged = page.request.post(
        f"{live_server.url}/apps/{demo['demo']}/versions/change-sets/{turn.id}/restore/",
        form={"csrfmiddlewaretoken": token},
        headers={"Referer": page.url},
    )
    assert forged.status == 403 and "restorer" in forged.text()

    other = page.goto(f"{live_server.url}/apps/{demo['second']}/versions/")
    assert other is not None and other.status == 404
    assert page.get_by_text(f"There is no app “{demo['second']}”").is_visible()


def test_the_demo_owner_gives_the_reviewer_a_role_on_the_second_app(page, live_server, demo):
    from versions.management.commands.load_demo import DEMO_PASSWORD, DEMO_USER
    from versions.models import AppMembership

    _sign_in(page, live_server, DEMO_USER, DEMO_PASSWORD)
    page.goto(f"{live_server.url}/apps/{demo['second']}/versions/")
    page.get_by_role("link", name="Members").click()
    page.get_by_label("Username or group name").fill("reviewer")
    page.get_by_label("Role", exact=True).select_option("viewer")
    page.get_by_role("button", name="Add member").click()
    page.get_by_text("user “reviewer” is now viewer of this app.").wait_for()
    assert AppMembership.objects.filter(
        app__slug=demo["second"], user__username="reviewer", role="viewer"
    ).exists()
    # Removing goes through a dialog, like the panel's other actions.
    page.get_by_role("button", name="Remove reviewer", exact=True).click()
    dialog = page.locator("dialog#member-dialog")
    dialog.get_by_role("button", name="Remove member").click()
    page.get_by_text("user “reviewer” was removed from this app.").wait_for()
    assert not AppMembership.objects.filter(
        app__slug=demo["second"], user__username="reviewer"
    ).exists()
