"""A person on a phone (390 px): restoring shows its receipt in place, and the receipt page,
without the page ever getting wider than the screen."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from versions.management.commands.load_demo import DEMO_SLUG, demo_review
from versions.models import ChangeSet

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PHONE = 390


def _page_width(page) -> int:
    return page.evaluate("document.documentElement.scrollWidth")


def _inside_the_screen(locator) -> None:
    box = locator.bounding_box()
    assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= PHONE, box


def test_restore_all_on_a_phone_shows_the_receipt_within_the_screen(
    phone_page, live_server, demo_signed_in
):
    page = phone_page
    agent = demo_signed_in(page)
    page.goto(f"{live_server.url}/apps/{DEMO_SLUG}/versions/")
    row = page.locator(f"#set-{agent.id}")
    row.get_by_role("link", name=agent.id, exact=True).click()
    row.get_by_role("button", name="Restore all").click()
    page.locator("dialog#restore-dialog").get_by_role("button", name="Confirm restore").click()
    receipt = row.locator(".receipt")
    expect(receipt).to_contain_text("Restored")
    assert _page_width(page) <= PHONE
    # Every counter-point id is on the screen, and a link to that point.
    counters = receipt.locator(".counter-id")
    expect(counters).to_have_count(2)
    for i in range(2):
        _inside_the_screen(counters.nth(i))
    rs_id = receipt.locator("h3 a code").inner_text()

    # Undo it from the new restore set's row: one "Undo this restore" there, the receipt's.
    rs_row = page.locator(f"#set-{rs_id}")
    rs_row.get_by_role("link", name=rs_id, exact=True).click()
    rs_row.get_by_role("button", name="Undo this restore").click()
    page.locator("dialog#restore-dialog").get_by_role("button", name="Confirm restore").click()
    expect(rs_row.locator(".receipt")).to_contain_text("Restored")
    expect(rs_row.get_by_role("button", name="Undo this restore")).to_have_count(1)
    expect(
        rs_row.locator(".receipt").get_by_role("button", name="Undo this restore")
    ).to_be_visible()
    expect(rs_row.locator(".toolbar", has_text="Undone by")).to_have_count(1)
    assert _page_width(page) <= PHONE

    # A counter-point id leads to that restore point.
    counter = rs_row.locator(".receipt .counter-id").first
    counter_id = counter.inner_text()
    counter.click()
    page.wait_for_url(f"**/points/{counter_id}/")
    expect(page.locator(f"#point-{counter_id}")).to_be_visible()
    assert _page_width(page) <= PHONE


def test_receipt_page_on_a_phone_fits_and_says_each_thing_once(
    phone_page, live_server, demo_signed_in
):
    page = phone_page
    agent = demo_signed_in(page)
    page.goto(f"{live_server.url}/apps/{DEMO_SLUG}/versions/change-sets/{agent.id}/")
    page.get_by_role("button", name="Restore all").click()
    page.locator("dialog#restore-dialog").get_by_role("button", name="Confirm restore").click()
    page.locator(".receipt h3 a").click()
    page.wait_for_url("**/restore-sets/**")
    rs = ChangeSet.objects.get(app__slug=DEMO_SLUG, kind=ChangeSet.RESTORE)
    assert page.url.endswith(f"/restore-sets/{rs.id}/")

    receipt = page.locator(".receipt")
    expect(receipt).to_contain_text("Restored")
    assert _page_width(page) <= PHONE
    # The table stacks: each value, the counter-point too, is on the screen beside its name.
    for item in rs.receipt["items"]:
        counter = receipt.get_by_role("link", name=item["counterPointId"])
        expect(counter).to_be_visible()
        _inside_the_screen(counter)
    expect(receipt.locator("td[data-label='Counter-point']").first).to_be_visible()
    # Said once: the receipt's id, the set it restored, and one way to its JSON.
    text = page.locator("main").inner_text()
    assert text.count(rs.id) == 1 and text.count(agent.id) == 1
    expect(page.get_by_text("Receipt JSON", exact=True)).to_have_count(0)
    page.get_by_text("Receipt as JSON").click()
    expect(page.locator("details.json pre")).to_contain_text(f'"setId": "{rs.id}"')
    assert _page_width(page) <= PHONE


def test_every_tab_of_an_app_is_on_a_phones_screen(phone_page, live_server, demo_signed_in):
    """All eight tabs are in sight (none scrolled off the edge), and each one opens."""
    page = phone_page
    demo_signed_in(page)
    page.goto(f"{live_server.url}/apps/{DEMO_SLUG}/versions/")
    names = [
        "Change sets", "Restore points", "Since release", "Production", "Notifications",
        "Members", "Activity", "Settings",
    ]  # fmt: skip
    tabs = page.locator("nav.tabs a")
    expect(tabs).to_have_text(names)
    for i in range(len(names)):
        _inside_the_screen(tabs.nth(i))
    for name in names[1:]:
        page.locator(".tabs").get_by_role("link", name=name, exact=True).click()
        expect(page.locator(".tabs").get_by_role("link", name=name, exact=True)).to_have_attribute(
            "aria-current", "page"
        )
        assert _page_width(page) <= PHONE
        for i in range(len(names)):
            _inside_the_screen(tabs.nth(i))


def test_promote_dialog_on_a_phone_keeps_its_buttons_whole(phone_page, live_server, demo_signed_in):
    """The note, Cancel and Confirm promotion fit the screen, each button's words on one line
    (they were squeezed to a letter per line beside the note field)."""
    page = phone_page
    demo_signed_in(page)
    page.goto(f"{live_server.url}/apps/{DEMO_SLUG}/versions/production/")
    page.get_by_role("button", name="Promote to production").click()
    dialog = page.locator("dialog[open]")
    confirm = dialog.get_by_role("button", name="Confirm promotion")
    expect(confirm).to_be_visible()
    for control in (
        dialog.get_by_label("Note"),
        dialog.get_by_role("button", name="Cancel"),
        confirm,
    ):
        _inside_the_screen(control)
    one_line = dialog.get_by_role("button", name="Cancel").bounding_box()
    box = confirm.bounding_box()
    assert one_line is not None and box is not None
    assert box["height"] <= one_line["height"] + 1 and box["width"] > box["height"] * 3, box
    assert _page_width(page) <= PHONE


def test_a_line_comment_on_a_phone_keeps_its_author_and_time_inside_its_thread(phone_page, demo):
    """A comment's head (author · 1 minute ago · the date) wraps inside its thread: it took
    the top bar's one-line layout and ran the date past the thread's edge."""
    page = phone_page
    demo_review()  # the demo reviewer's thread on the agent's page, as `load_demo` leaves it
    demo.as_owner(page)
    page.goto(f"{demo.url}/apps/{demo.slug}/versions/change-sets/{demo.turn}/")
    thread = page.locator(".thread.inline").first
    expect(thread).to_contain_text("Where does the 24 hours come from?")
    frame = thread.bounding_box()
    date = thread.locator(".comment .who .abs").first
    expect(date).to_be_visible()
    box = date.bounding_box()
    assert frame is not None and box is not None
    assert box["x"] + box["width"] <= frame["x"] + frame["width"], (box, frame)
    assert _page_width(page) <= PHONE
