"""Reviewing in Chromium (docs/architecture.md#reviewing), at 1280 and 390 px: find a set with the
search box and the filters, compare two states (unified / split, file list, Viewed marks), the
review keys."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from versions import services
from versions.management.commands.load_demo import DEMO_SLUG

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_find_a_set_with_the_search_box_and_hide_restore_sets(sized_page, live_server, demo_sets):
    page = sized_page
    agent, setup = demo_sets(page)
    rs = services.restore_change_set(agent.id, by="rvaid").set_id
    page.goto(f"{live_server.url}/apps/{DEMO_SLUG}/versions/")
    rows = page.locator("#set-list-items > li")
    expect(rows).to_have_count(3)
    # Each collapsed row names its artifacts.
    expect(page.locator(f"#set-{agent.id} .arts")).to_contain_text("index, App")

    page.get_by_role("searchbox", name="Find").fill("write_stylesheet")  # a tool
    expect(rows).to_have_count(1)
    expect(rows.first).to_have_id(f"set-{agent.id}")
    assert "q=write_stylesheet" in page.url  # the search is a link
    page.get_by_role("searchbox", name="Find").fill("")
    page.get_by_label("Kind").select_option("change")  # hide restore sets
    expect(rows).to_have_count(2)
    expect(page.locator(f"#set-{rs}")).to_have_count(0)
    page.get_by_label("Named only").check()
    expect(page.locator("#search-summary")).to_have_text("No change set matches.")
    page.get_by_role("link", name="Clear").click()
    expect(rows).to_have_count(3)
    # A found set expands as in the plain list.
    page.get_by_role("searchbox", name="Find").fill(setup.id)
    expect(rows).to_have_count(1)
    rows.first.get_by_role("link", name=setup.id, exact=True).click()
    expect(rows.first.locator("section.diff").first).to_be_visible()


def test_compare_from_a_set_split_view_file_list_and_viewed_marks(
    sized_page, live_server, demo_sets, axe, sign_in
):
    page = sized_page
    agent, setup = demo_sets(page)
    page.goto(f"{live_server.url}/apps/{DEMO_SLUG}/versions/")
    row = page.locator(f"#set-{setup.id}")
    row.get_by_role("link", name=setup.id, exact=True).click()
    row.get_by_role("link", name="Compare…").click()
    page.wait_for_url(f"**/compare/{setup.id}...draft/")
    expect(page.locator("#compare-summary")).to_contain_text("2 files differ")
    files = page.locator("section.diff[data-file]")
    expect(files).to_have_count(2)
    axe(page, "compare, unified")

    # The file list jumps to a file.
    nav = page.get_by_role("navigation", name="Files that differ")
    nav.get_by_role("link", name=re.compile(r"^App")).click()
    assert page.url.endswith("#" + files.nth(1).get_attribute("id"))
    expect(files.nth(1)).to_be_in_viewport()

    # Split: old beside new; remembered on the next visit.
    page.get_by_role("link", name="Split").click()
    expect(page.locator("table.diff-table.split")).to_have_count(2)
    expect(page.locator("table.split td.code.s-removed").first).to_be_visible()
    axe(page, "compare, split")
    page.goto(f"{live_server.url}/apps/{DEMO_SLUG}/versions/compare/{setup.id}...draft/")
    expect(page.locator("table.diff-table.split")).to_have_count(2)

    # Viewed: the file folds away, the list says so, and it is remembered.
    first = files.first
    first.get_by_label("Viewed").check()
    expect(first.locator("table")).to_be_hidden()
    expect(page.locator("#viewed-count")).to_have_text("1")
    expect(nav.locator("li").first).to_have_class(re.compile(r"\bviewed\b"))
    page.wait_for_load_state("networkidle")
    page.reload()
    expect(page.locator("section.diff[data-file]").first.get_by_label("Viewed")).to_be_checked()
    expect(page.locator("section.diff[data-file]").first.locator("table")).to_be_hidden()

    # Both are the person's, not the session's: kept after signing out and in again.
    page.get_by_role("button", name="Sign out").click()
    page.wait_for_url("**/accounts/login/**")
    sign_in(page, "rvaid")
    page.goto(f"{live_server.url}/apps/{DEMO_SLUG}/versions/compare/{setup.id}...draft/")
    expect(page.locator("table.diff-table.split")).to_have_count(2)
    kept = page.locator("section.diff[data-file]")
    expect(kept.first.locator("table")).to_be_hidden()  # the viewed one stays folded
    expect(kept.nth(1).locator("table.split")).to_be_visible()
    expect(kept.first.get_by_label("Viewed")).to_be_checked()
    expect(kept.nth(1).get_by_label("Viewed")).not_to_be_checked()
    expect(page.locator("#viewed-count")).to_have_text("1")

    # Production (promoted before the agent's turn) → the draft: what a promotion would ship.
    page.goto(f"{live_server.url}/apps/{DEMO_SLUG}/versions/compare/production...draft/")
    expect(page.locator("section.diff[data-file]")).to_have_count(2)
    # An unknown deployment is a 404 in words.
    page.goto(f"{live_server.url}/apps/{DEMO_SLUG}/versions/compare/dp_zz_00000000...draft/")
    expect(page.locator("h1")).to_have_text("Not found")
    expect(page.locator("main")).to_contain_text("dp_zz_00000000")


def test_review_keys_move_between_files_and_changes(sized_page, live_server, demo_sets):
    page = sized_page
    agent, setup = demo_sets(page)
    page.goto(f"{live_server.url}/apps/{DEMO_SLUG}/versions/compare/{setup.id}...draft/")
    files = page.locator("section.diff[data-file]")
    expect(files).to_have_count(2)
    page.locator("h2").first.click()  # keys go to the page, not a field
    page.keyboard.press("j")
    expect(files.nth(0)).to_have_class(re.compile(r"\bkey-current\b"))
    expect(files.nth(0)).to_be_focused()
    page.keyboard.press("j")
    expect(files.nth(1)).to_have_class(re.compile(r"\bkey-current\b"))
    expect(files.nth(1)).to_be_in_viewport()
    page.keyboard.press("k")
    expect(files.nth(0)).to_have_class(re.compile(r"\bkey-current\b"))

    # n / p: the first line of each run of changes, in order.
    where = (
        "Array.from(document.querySelectorAll('.diff-table tr'))"
        ".indexOf(document.querySelector('tr.key-change'))"
    )
    page.keyboard.press("n")
    current = page.locator("tr.key-change")
    expect(current).to_have_count(1)
    first_change = page.evaluate(where)
    page.keyboard.press("n")
    second_change = page.evaluate(where)
    assert second_change > first_change
    expect(current).to_be_in_viewport()
    page.keyboard.press("p")
    assert page.evaluate(where) == first_change

    # Typing in a field is typing, not a key (the picker's From list: its own type-ahead).
    page.get_by_label("From").press("j")
    expect(files.nth(0)).to_have_class(re.compile(r"\bkey-current\b"))  # did not move

    # ? lists the keys.
    page.locator("h2").first.click()
    page.keyboard.press("?")
    keys = page.get_by_role("dialog", name="Keyboard keys")
    expect(keys).to_be_visible()
    for words in ("Next file", "Previous file", "Next change", "Previous change"):
        expect(keys).to_contain_text(words)
    keys.get_by_role("button", name="Close").click()
    expect(keys).to_be_hidden()


def test_keys_work_on_an_expanded_set_too(page, live_server, demo_sets):
    agent, _ = demo_sets(page)
    page.goto(f"{live_server.url}/apps/{DEMO_SLUG}/versions/change-sets/{agent.id}/")
    files = page.locator("section.diff")
    expect(files).to_have_count(2)
    page.locator("h1").click()
    page.keyboard.press("j")
    page.keyboard.press("j")
    expect(files.nth(1)).to_have_class(re.compile(r"\bkey-current\b"))


def test_diff_lines_wrap_at_word_boundaries_on_a_phone(phone_page, live_server, demo_sets):
    page = phone_page
    agent, _ = demo_sets(page)
    page.goto(f"{live_server.url}/apps/{DEMO_SLUG}/versions/change-sets/{agent.id}/")
    expect(page.locator("section.diff table")).to_have_count(2)
    # Every word of a wrapped line stays whole: measured with a Range per word.
    broken = page.evaluate(
        """() => {
            const out = [];
            for (const td of document.querySelectorAll('.diff-table td.code')) {
                const walker = document.createTreeWalker(td, NodeFilter.SHOW_TEXT);
                let node;
                while ((node = walker.nextNode())) {
                    const re = /[A-Za-z]{4,}/g;
                    let m;
                    while ((m = re.exec(node.data))) {
                        const r = document.createRange();
                        r.setStart(node, m.index);
                        r.setEnd(node, m.index + m[0].length);
                        const boxes = Array.from(r.getClientRects()).filter(b => b.width > 0);
                        const tops = new Set(boxes.map(b => Math.round(b.top)));
                        if (tops.size > 1) out.push(m[0]);
                    }
                }
            }
            return out;
        }"""
    )
    assert broken == [], f"words broken across lines: {broken[:10]}"
    # Tool chips keep their hyphenated names on one line.
    page.goto(f"{live_server.url}/apps/{DEMO_SLUG}/versions/")
    for chip in page.locator(".meta .tools code").all():
        box = chip.bounding_box()
        assert box is not None and box["height"] < 24, chip.inner_text()
