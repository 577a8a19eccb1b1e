"""Screenshots of the panel for the README, at 1280 px and 390 px (and a check that they fit)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest
from playwright.sync_api import expect

from versions.management.commands.load_demo import DEMO_SLUG, load_demo
from versions.models import ChangeSet

# The README's screenshots are refreshed with VERSIONS_SCREENSHOTS=1; otherwise the test still
# takes them (and checks the layout) but into a temporary folder, so a test run leaves the
# tree clean.
DOCS = (
    Path(__file__).resolve().parents[2] / "docs"
    if os.environ.get("VERSIONS_SCREENSHOTS") == "1"
    else Path(tempfile.mkdtemp(prefix="versions-screens-"))
)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _no_horizontal_scroll(page) -> None:
    overflow = page.evaluate(
        "document.documentElement.scrollWidth - document.documentElement.clientWidth"
    )
    assert overflow <= 1, f"the page scrolls sideways by {overflow}px"


def test_screenshots_desktop(page, live_server, make_user, sign_in):
    load_demo()
    make_user("rvaid", superuser=True)
    agent = ChangeSet.objects.get(app__slug=DEMO_SLUG, run_id="demo-agent-turn-1")
    DOCS.mkdir(exist_ok=True)
    page.goto(f"{live_server.url}/accounts/login/")
    page.screenshot(path=str(DOCS / "screenshot-sign-in.png"))
    sign_in(page, "rvaid")
    page.screenshot(path=str(DOCS / "screenshot-apps.png"))
    page.goto(f"{live_server.url}/apps/{DEMO_SLUG}/versions/")
    page.screenshot(path=str(DOCS / "screenshot-change-sets.png"))
    row = page.locator(f"#set-{agent.id}")
    row.get_by_role("link", name=agent.id, exact=True).click()
    expect(row.locator("section.diff")).to_have_count(2)
    _no_horizontal_scroll(page)
    page.screenshot(path=str(DOCS / "screenshot-expanded-set.png"), full_page=True)
    row.get_by_role("button", name="Restore all").click()
    expect(page.locator("dialog#restore-dialog")).to_be_visible()
    page.screenshot(path=str(DOCS / "screenshot-confirm-restore.png"))
    page.get_by_role("button", name="Confirm restore").click()
    expect(row.locator(".receipt")).to_contain_text("Restored")
    row.locator(".receipt").scroll_into_view_if_needed()
    page.screenshot(path=str(DOCS / "screenshot-receipt.png"))
    page.get_by_role("link", name="Restore points").click()
    expect(page.locator("#point-list-items > li").first).to_be_visible()
    page.screenshot(path=str(DOCS / "screenshot-restore-points.png"))


def test_screenshots_phone(phone_page, live_server, make_user, sign_in):
    page = phone_page
    load_demo()
    make_user("rvaid", superuser=True)
    agent = ChangeSet.objects.get(app__slug=DEMO_SLUG, run_id="demo-agent-turn-1")
    sign_in(page, "rvaid")
    page.goto(f"{live_server.url}/apps/{DEMO_SLUG}/versions/")
    _no_horizontal_scroll(page)
    row = page.locator(f"#set-{agent.id}")
    row.get_by_role("link", name=agent.id, exact=True).click()
    expect(row.locator("section.diff")).to_have_count(2)
    _no_horizontal_scroll(page)
    page.screenshot(path=str(DOCS / "screenshot-phone-expanded-set.png"))
    row.get_by_role("button", name="Restore all").click()
    expect(page.locator("dialog#restore-dialog")).to_be_visible()
    _no_horizontal_scroll(page)
    page.screenshot(path=str(DOCS / "screenshot-phone-confirm.png"))


def test_screenshots_review(page, live_server, make_user, sign_in):
    """Find and compare (docs/architecture.md#reviewing)."""
    load_demo()
    make_user("rvaid", superuser=True)
    agent = ChangeSet.objects.get(app__slug=DEMO_SLUG, run_id="demo-agent-turn-1")
    setup = ChangeSet.objects.filter(app__slug=DEMO_SLUG).exclude(pk=agent.pk).get()
    DOCS.mkdir(exist_ok=True)
    sign_in(page, "rvaid")
    page.goto(f"{live_server.url}/apps/{DEMO_SLUG}/versions/")
    page.get_by_role("searchbox", name="Find").fill("stylesheet")
    expect(page.locator("#set-list-items > li")).to_have_count(1)
    _no_horizontal_scroll(page)
    page.screenshot(path=str(DOCS / "screenshot-search.png"))
    page.goto(f"{live_server.url}/apps/{DEMO_SLUG}/versions/compare/{setup.id}...draft/")
    page.get_by_role("link", name="Split").click()
    expect(page.locator("table.diff-table.split")).to_have_count(2)
    page.locator("section.diff[data-file]").nth(1).get_by_label("Viewed").check()
    _no_horizontal_scroll(page)
    page.screenshot(path=str(DOCS / "screenshot-compare.png"))


def test_screenshot_phone_receipt(phone_page, live_server, make_user, sign_in):
    page = phone_page
    load_demo()
    make_user("rvaid", superuser=True)
    agent = ChangeSet.objects.get(app__slug=DEMO_SLUG, run_id="demo-agent-turn-1")
    DOCS.mkdir(exist_ok=True)
    sign_in(page, "rvaid")
    page.goto(f"{live_server.url}/apps/{DEMO_SLUG}/versions/")
    row = page.locator(f"#set-{agent.id}")
    row.get_by_role("link", name=agent.id, exact=True).click()
    row.get_by_role("button", name="Restore all").click()
    page.locator("dialog#restore-dialog").get_by_role("button", name="Confirm restore").click()
    receipt = row.locator(".receipt")
    expect(receipt).to_be_focused()
    expect(receipt).to_be_in_viewport()
    _no_horizontal_scroll(page)
    page.screenshot(path=str(DOCS / "screenshot-phone-receipt.png"))


# Every field a person types a value into, whatever its type: the panel's own border, radius
# and height (a number, URL or date field once kept the browser's bare default beside styled
# text fields on the same form).
_TYPED_FIELDS = (
    "input:not([type=checkbox]):not([type=radio]):not([type=hidden])"
    ":not([type=submit]):not([type=button]), select"
)


def test_every_field_on_a_form_looks_alike(page, live_server, make_user, sign_in):
    load_demo()
    make_user("rvaid", superuser=True)
    sign_in(page, "rvaid")
    base = f"{live_server.url}/apps/{DEMO_SLUG}/versions/"
    seen: set[str] = set()
    for tab in ("settings/", "production/", "members/"):
        page.goto(base + tab)
        fields = page.eval_on_selector_all(
            _TYPED_FIELDS,
            """els => els.map(e => {
                const s = getComputedStyle(e);
                return {field: (e.tagName === 'SELECT' ? 'select' : e.type) + ' #' + e.id,
                        radius: s.borderTopLeftRadius, height: parseFloat(s.minHeight) || 0,
                        border: s.borderTopWidth + ' ' + s.borderTopStyle};
            })""",
        )
        for field in fields:
            seen.add(field["field"].split(" ")[0])
            assert (field["radius"], field["border"]) == ("6px", "1px solid"), (tab, field)
            assert field["height"] >= 36, (tab, field)
    # The page's forms hold each kind this checks.
    assert {"number", "url", "datetime-local", "text", "password", "select"} <= seen, seen
