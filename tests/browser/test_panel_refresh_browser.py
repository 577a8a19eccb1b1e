"""Every view an action changes is refreshed by it, with no reload (docs/architecture.md#reviewing,
docs/architecture.md#panel): the lists of restore points and change sets catch up after a restore or
an undo, while the receipt the person reads stays open and keeps the focus, and what the action's
answer just replaced is not asked for again. At 1280 and 390 px."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from versions.management.commands.load_demo import DEMO_SLUG
from versions.models import ChangeSet, RestorePoint

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _requests(page) -> list[str]:
    """Every GET the page makes from now on (paths with their queries)."""
    seen: list[str] = []
    page.on(
        "request",
        lambda r: seen.append(re.sub(r"^https?://[^/]+", "", r.url)) if r.method == "GET" else None,
    )
    return seen


def _no_reload_marker(page) -> None:
    page.evaluate("window.__stillThisPage = true")


def _still_this_page(page) -> bool:
    return page.evaluate("window.__stillThisPage === true")


def _restore_from_row(page, row, set_id: str, button: str, *, opened: str = ""):
    """Open the set's row, click ``button`` and confirm: the row's receipt and the new restore
    set's id, once every request the action set off has ended."""
    row.get_by_role("link", name=set_id, exact=True).click()
    if opened:
        expect(row.locator(opened).first).to_be_visible()
    row.get_by_role("button", name=button).click()
    page.locator("dialog#restore-dialog").get_by_role("button", name="Confirm restore").click()
    receipt = row.locator(".receipt")
    expect(receipt).to_contain_text("Restored")
    new_id = receipt.locator("h3 a code").inner_text()
    page.wait_for_load_state("networkidle")
    return receipt, new_id


def test_restoring_a_point_puts_its_counter_point_on_top_of_the_list(
    sized_page, live_server, demo_sets
):
    page = sized_page
    agent, _setup = demo_sets(page)
    point = RestorePoint.objects.get(change_set=agent, artifact__name="index")
    page.goto(f"{live_server.url}/apps/{DEMO_SLUG}/versions/points/")
    rows = page.locator("#point-list-items > li")
    before = rows.count()
    assert before >= 2
    _no_reload_marker(page)

    row = page.locator(f"#point-{point.id}")
    row.get_by_role("link", name=point.id, exact=True).click()
    expect(row.locator("section.diff")).to_be_visible()
    seen = _requests(page)
    row.get_by_role("button", name="Restore", exact=True).click()
    dialog = page.locator("dialog#restore-dialog")
    dialog.get_by_role("button", name="Confirm restore").click()
    receipt = row.locator(".receipt")
    expect(receipt).to_contain_text("Restored")
    counter = receipt.locator(".counter-id").inner_text()

    # The list caught up: the counter-point (the state before this restore) is on top.
    expect(rows).to_have_count(before + 1)
    expect(rows.first).to_have_id(f"point-{counter}")
    expect(rows.first.locator(".row-head")).to_contain_text("index")
    # The restored point is still open, with its receipt, and the receipt keeps the focus.
    expect(row.locator(".receipt")).to_contain_text(counter)
    expect(page.locator(f"#rid-{point.id}")).to_have_attribute("aria-expanded", "true")
    expect(receipt).to_be_focused()
    page.wait_for_load_state("networkidle")
    # One refresh of the list, telling which row is open; the row just answered is not
    # asked for again.
    refreshes = [u for u in seen if u.startswith(f"/apps/{DEMO_SLUG}/versions/points/?")]
    assert refreshes == [f"/apps/{DEMO_SLUG}/versions/points/?open={point.id}"]
    assert not [u for u in seen if f"/points/{point.id}/" in u and "restore" not in u]

    # Undo this restore, from the receipt: one more counter-point comes in on top.
    seen.clear()
    receipt.get_by_role("button", name="Undo this restore").click()
    dialog.get_by_role("button", name="Confirm restore").click()
    expect(rows).to_have_count(before + 2)
    newest = RestorePoint.objects.filter(app__slug=DEMO_SLUG).order_by("-created_on", "-id")[0]
    expect(rows.first).to_have_id(f"point-{newest.id}")
    expect(row.locator(".receipt")).to_be_visible()
    ids = rows.evaluate_all("rows => rows.map(r => r.id)")
    assert len(ids) == len(set(ids))  # no row twice
    assert _still_this_page(page)


def test_restore_all_puts_the_restore_set_under_its_set_and_a_filtered_list_stays_filtered(
    sized_page, live_server, demo_sets
):
    page = sized_page
    agent, setup = demo_sets(page)
    page.goto(f"{live_server.url}/apps/{DEMO_SLUG}/versions/")
    rows = page.locator("#set-list-items > li")
    expect(rows).to_have_count(2)
    _no_reload_marker(page)
    filters = page.locator("details[data-fold]")
    if filters.locator("summary").is_visible():  # on a phone the filters fold away
        filters.locator("summary").click()

    # With restore sets hidden, Restore all adds no row to the list; the open row keeps its
    # receipt and the focus.
    page.get_by_label("Kind").select_option("change")
    expect(page.locator("#search-summary")).to_be_visible()
    row = page.locator(f"#set-{agent.id}")
    receipt, rs_id = _restore_from_row(page, row, agent.id, "Restore all", opened="section.diff")
    expect(rows).to_have_count(2)
    expect(page.locator(f"#set-{rs_id}")).to_have_count(0)
    expect(receipt).to_be_visible()
    expect(receipt).to_be_focused()

    # Every set: the restore set sits right under the set it restored
    # (docs/architecture.md#reviewing). Undoing it from its own row puts the new restore set
    # under that one, and the row keeps the receipt of the undo.
    page.get_by_label("Kind").select_option("")
    expect(rows).to_have_count(3)
    expect(rows.first).to_have_id(f"set-{agent.id}")
    expect(rows.nth(1)).to_have_id(f"set-{rs_id}")
    restore_row = page.locator(f"#set-{rs_id}")
    undo, undo_id = _restore_from_row(page, restore_row, rs_id, "Undo this restore")
    expect(rows).to_have_count(4)
    expect(rows.nth(1)).to_have_id(f"set-{rs_id}")
    expect(rows.nth(2)).to_have_id(f"set-{undo_id}")
    expect(rows.nth(2).locator(".badge.kind-restore")).to_be_visible()
    expect(rows.nth(2).locator(".restore-words")).to_contain_text(f"Undo of {rs_id}")
    expect(undo).to_be_visible()
    expect(page.locator(f"#set-{setup.id}")).to_be_visible()
    assert ChangeSet.objects.filter(app__slug=DEMO_SLUG, kind="restore").count() == 2
    assert _still_this_page(page)


def test_the_refresh_after_naming_keeps_every_open_row_open(sized_page, live_server, demo_sets):
    """Naming a set refreshes the list: every open row stays open, with its diffs and the
    name just typed."""
    page = sized_page
    agent, setup = demo_sets(page)
    page.goto(f"{live_server.url}/apps/{DEMO_SLUG}/versions/")
    first = page.locator(f"#set-{setup.id}")
    first.get_by_role("link", name=setup.id, exact=True).click()
    second = page.locator(f"#set-{agent.id}")
    second.get_by_role("link", name=agent.id, exact=True).click()
    expect(second.locator("section.diff").first).to_be_visible()
    second.get_by_label("Name").fill("Approve-all turn")
    second.get_by_role("button", name="Save name").click()
    expect(second.locator(".row-head")).to_contain_text("Approve-all turn")
    page.wait_for_load_state("networkidle")
    # Both rows are still open, diffs and all.
    for row, set_id in ((first, setup.id), (second, agent.id)):
        expect(page.locator(f"#rid-{set_id}")).to_have_attribute("aria-expanded", "true")
        expect(row.locator("section.diff").first).to_be_visible()
    expect(second.get_by_label("Name")).to_have_value("Approve-all turn")
