"""A session that expires while the panel is open: the person signs in again and is back."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from versions.management.commands.load_demo import DEMO_SLUG
from versions.models import RestorePoint

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_restore_all_after_the_session_expired_leads_to_sign_in_and_back(
    page, live_server, demo_signed_in
):
    agent = demo_signed_in(page)
    panel = f"{live_server.url}/apps/{DEMO_SLUG}/versions/"
    page.goto(panel)
    row = page.locator(f"#set-{agent.id}")
    row.get_by_role("link", name=agent.id, exact=True).click()
    expect(row.get_by_role("button", name="Restore all")).to_be_visible()
    points = RestorePoint.objects.count()

    page.context.clear_cookies(name="sessionid")  # the session expired meanwhile
    row.get_by_role("button", name="Restore all").click()
    # The whole page goes to the sign-in form (not the form swapped into the panel).
    page.wait_for_url(f"{live_server.url}/accounts/login/?next=/apps/{DEMO_SLUG}/versions/")
    expect(page.locator("#set-" + agent.id)).to_have_count(0)
    assert page.locator("header.topbar").count() == 1
    page.get_by_label("Username").fill("rvaid")
    page.get_by_label("Password").fill("correct-horse-battery")
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(panel)
    expect(page.locator(f"#set-{agent.id}")).to_be_visible()
    assert RestorePoint.objects.count() == points  # nothing was restored on the way
