"""Feedback (docs/architecture.md#reviewing), in Chromium at 1280 and 390 px: a request shows that
it is working while it runs, focus and the view land on the result after a dialog closes, an action
refreshes every view it changed (no stale "Nothing to restore"), times read in the viewer's time
zone."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from versions import services
from versions.management.commands.load_demo import DEMO_SLUG
from versions.models import ChangeSet

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_expanding_a_set_on_a_slow_network_shows_it_is_working(sized_page, live_server, demo_sets):
    page = sized_page
    agent, _ = demo_sets(page)
    page.goto(f"{live_server.url}/apps/{DEMO_SLUG}/versions/")
    held = []
    page.route(re.compile(rf".*/change-sets/{agent.id}/$"), lambda route: held.append(route))
    row = page.locator(f"#set-{agent.id}")
    row.get_by_role("link", name=agent.id, exact=True).click()
    # The answer has not come: the bar at the top shows, the row says it is busy.
    expect(page.locator("#progress")).to_be_visible()
    expect(row).to_have_attribute("aria-busy", "true")
    expect(row.locator(".rid")).to_have_attribute("aria-busy", "true")
    assert len(held) == 1
    held[0].continue_()
    expect(row.locator("section.diff table")).to_have_count(2)
    expect(page.locator("#progress")).to_be_hidden()
    expect(page.locator(f"#set-{agent.id}")).not_to_have_attribute("aria-busy", "true")


def test_after_confirm_restore_focus_and_view_land_on_the_receipt(
    sized_page, live_server, demo_sets
):
    page = sized_page
    agent, _ = demo_sets(page)
    page.goto(f"{live_server.url}/apps/{DEMO_SLUG}/versions/")
    row = page.locator(f"#set-{agent.id}")
    row.get_by_role("link", name=agent.id, exact=True).click()
    expect(row.locator("section.diff table")).to_have_count(2)
    row.get_by_role("button", name="Restore all").click()
    dialog = page.locator("dialog#restore-dialog")
    dialog.get_by_role("button", name="Confirm restore").click()
    expect(dialog).to_have_count(0)
    receipt = row.locator(".receipt")
    expect(receipt).to_contain_text("Restored")
    expect(receipt).to_be_focused()
    expect(receipt).to_be_in_viewport()


def test_an_error_after_a_dialog_gets_the_focus(sized_page, live_server, demo_sets):
    page = sized_page
    agent, _ = demo_sets(page)
    page.goto(f"{live_server.url}/apps/{DEMO_SLUG}/versions/")
    row = page.locator(f"#set-{agent.id}")
    row.get_by_role("link", name=agent.id, exact=True).click()
    row.get_by_role("button", name="Restore all").click()
    dialog = page.locator("dialog#restore-dialog")
    expect(dialog).to_be_visible()
    # The set disappears (retention, another person) before Confirm restore.
    page.route(
        re.compile(r".*/restore/$"),
        lambda route: route.fulfill(status=404, headers={"X-Versions-Error": "Gone (test)."}),
    )
    dialog.get_by_role("button", name="Confirm restore").click()
    expect(dialog).to_have_count(0)
    flash = page.locator("#flash")
    expect(flash).to_have_text("Gone (test).")
    expect(flash).to_be_focused()
    expect(flash).to_be_in_viewport()


def test_undo_in_place_on_since_release_refreshes_what_differs(sized_page, live_server, demo_sets):
    page = sized_page
    agent, setup = demo_sets(page)
    services.mark_release(setup.id, by="rvaid")
    page.goto(f"{live_server.url}/apps/{DEMO_SLUG}/versions/since-release/")
    since = page.locator("#release-since")
    expect(since).to_contain_text("2 artifacts differ")
    page.get_by_role("button", name="Restore to release").click()
    page.locator("dialog#restore-dialog").get_by_role("button", name="Confirm restore").click()
    expect(page.locator(".receipt")).to_contain_text("Restored")
    expect(since).to_contain_text("Nothing to restore.")

    # Undo that restore in place, from its row in the list below.
    rs = ChangeSet.objects.get(app__slug=DEMO_SLUG, kind=ChangeSet.RESTORE)
    row = page.locator(f"#set-{rs.id}")
    row.get_by_role("link", name=rs.id, exact=True).click()
    row.get_by_role("button", name="Undo this restore").click()
    page.locator("dialog#restore-dialog").get_by_role("button", name="Confirm restore").click()
    expect(row.locator(".receipt")).to_contain_text("Restored")
    # The summary above follows without a reload.
    expect(since).to_contain_text("2 artifacts differ")
    expect(since).not_to_contain_text("Nothing to restore")
    expect(since.get_by_role("button", name="Restore to release")).to_be_enabled()
    expect(page.locator("#release-diffs section.diff")).to_have_count(2)
    expect(row.locator(".receipt")).to_be_visible()  # the receipt stays where it was


def test_times_read_in_the_viewers_time_zone_with_utc_on_hover(sized_page, live_server, demo_sets):
    page = sized_page
    demo_sets(page)
    page.goto(f"{live_server.url}/apps/{DEMO_SLUG}/versions/")
    local = page.locator(".row-head .abs").first
    expect(local).to_be_visible()  # on a phone too
    expect(local).to_contain_text("GMT+9")  # the context's Asia/Tokyo
    expect(local).to_have_attribute("title", re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC$"))
    expect(page.locator(".row-head time").first).to_have_attribute("title", re.compile("UTC"))
