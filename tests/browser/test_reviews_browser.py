"""Review that gates production (docs/architecture.md#reviews), as people click: the owner
requires an approval on the Settings page, a promotion of the agent's turn is refused naming
the set, the reviewer approves it in the Review box (a body with a script stays inert), and
the promotion goes through. axe-core finds nothing serious on the Settings page at 1280 and
390 px."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

pytestmark = pytest.mark.browser


def _sign_out(page) -> None:
    page.get_by_role("button", name="Sign out").click()
    page.wait_for_url("**/accounts/login/**")


def test_a_review_lets_a_protected_promotion_through(page, live_server, demo):
    from versions.models import App

    slug, turn = demo.slug, demo.turn
    production = App.objects.get(slug=slug).production_id

    # The owner requires one approval on the Settings page.
    demo.as_owner(page)
    page.goto(f"{live_server.url}/apps/{slug}/versions/")
    expect(page.locator(f"#set-{turn} .badge.review-required")).to_have_text("Review required")
    page.get_by_role("link", name="Settings").click()
    page.get_by_label("Required approvals").fill("1")
    page.get_by_role("button", name="Save settings").click()
    expect(page.get_by_role("status")).to_contain_text("each change set needs 1 approval")

    # Promoting is refused, naming the set.
    page.get_by_role("link", name="Production").click()
    page.get_by_role("button", name="Promote to production").click()
    dialog = page.locator("#dialog-slot")
    expect(dialog).to_contain_text("Protection still needs reviews of 1 change set")
    expect(dialog).to_contain_text(f"{turn}: Protection of this app: it needs 1 more approval")
    expect(dialog.get_by_role("button", name="Confirm promotion")).to_have_count(0)
    expect(dialog.get_by_role("button", name="Promote anyway")).to_be_visible()
    dialog.get_by_role("button", name="Cancel").click()
    _sign_out(page)

    # The reviewer approves the turn in its Review box.
    demo.as_reviewer(page)
    page.goto(f"{live_server.url}/apps/{slug}/versions/change-sets/{turn}/")
    page.get_by_label("Approve").check()
    page.get_by_role("textbox", name=re.compile("^Review")).fill(
        'Looks **right**. <script>window.hacked = 1</script> <img src=x onerror="window.hacked=2">'
    )
    page.get_by_role("button", name="Submit review").click()
    expect(page.get_by_role("status")).to_have_text("Your review was submitted: Approve.")
    expect(page.locator("#review-status")).to_have_text("Approved")
    # The set's head above the box says so too, without a reload.
    expect(page.locator(f"#head-{turn} .badge.review-approved")).to_have_text("Approved")
    expect(page.locator(f"#head-{turn} .badge.review-required")).to_have_count(0)
    body = page.locator("#set-reviews article .md").first
    expect(body.locator("strong")).to_have_text("right")
    expect(body.locator("script, img")).to_have_count(0)
    assert page.evaluate("window.hacked") is None
    _sign_out(page)

    # Now the promotion goes through.
    demo.as_owner(page)
    page.goto(f"{live_server.url}/apps/{slug}/versions/production/")
    page.get_by_role("button", name="Promote to production").click()
    page.locator("#dialog-slot").get_by_role("button", name="Confirm promotion").click()
    page.wait_for_load_state("networkidle")
    expect(page.locator("#dialog-slot")).to_be_empty()
    assert App.objects.get(slug=slug).production_id != production
    page.goto(f"{live_server.url}/apps/{slug}/versions/")
    expect(page.locator(f"#set-{turn} .badge.review-approved")).to_have_text("Approved")


def test_the_settings_page_has_no_serious_accessibility_problems(
    sized_page, live_server, demo, axe
):

    demo.as_owner(sized_page)
    sized_page.goto(f"{live_server.url}/apps/{demo.slug}/versions/settings/")
    expect(sized_page.get_by_role("heading", name="Settings")).to_be_visible()
    axe(sized_page, "the Settings page")
    sized_page.get_by_label("Required approvals").fill("9")
    sized_page.get_by_role("button", name="Save settings").click()
    expect(sized_page.get_by_role("alert")).to_contain_text("less than or equal to 5")
    axe(sized_page, "the Settings page with an error")
    sized_page.goto(f"{live_server.url}/apps/{demo.slug}/versions/change-sets/{demo.turn}/")
    axe(sized_page, "a set's page with its Review box")
