"""The live demo app in Chromium: its sandboxed page runs its script and reads its own API."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from versions.management.commands.load_demo import DEMO_SLUG, load_demo

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_the_demo_page_lists_the_quotes_its_api_route_serves(page, live_server):
    load_demo()
    failed: list[str] = []
    page.on("requestfailed", lambda request: failed.append(request.url))
    page.goto(f"{live_server.url}/apps/{DEMO_SLUG}/")
    expect(page.get_by_role("heading", name="Quote approvals")).to_be_visible()
    quotes = page.locator("#quotes li")
    expect(quotes.first).to_be_visible()
    assert quotes.count() >= 2
    assert failed == []
    # Sandboxed all the same: the page's origin is opaque, it cannot read the panel's cookies.
    assert page.evaluate("() => self.origin") == "null"
