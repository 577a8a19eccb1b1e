"""Environments as a person uses them (docs/architecture.md#environments): the demo's production is
from before the agent's turn; its preview and the draft's render in the panel's sandboxed frame;
Promote to production ships the turn, Roll back production takes it off again."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

pytestmark = pytest.mark.browser


def test_preview_promote_and_roll_back_the_demo(page, live_server, demo):
    demo.as_owner(page)
    base = f"{live_server.url}/apps/{demo.slug}/versions/"

    # Production serves the app from before the agent's turn; the draft has the turn.
    page.goto(f"{base}preview/production/")
    frame = page.frame_locator("iframe.preview-frame")
    expect(frame.get_by_text("Quote approvals")).to_be_visible()
    expect(frame.get_by_role("button", name="Approve all")).to_have_count(0)
    page.goto(f"{base}preview/draft/")
    expect(
        page.frame_locator("iframe.preview-frame").get_by_role("button", name="Approve all")
    ).to_be_visible()

    # Promote the draft: the dialog says what ships, Confirm promotion ships it.
    page.goto(f"{base}production/")
    page.get_by_role("button", name="Promote to production").click()
    dialog = page.locator("dialog#promote-dialog")
    expect(dialog.get_by_text("index")).to_be_visible()
    dialog.get_by_label("Note").fill("reviewed the approve-all button")
    dialog.get_by_role("button", name="Confirm promotion").click()
    expect(page.get_by_text("Promoted. Production now serves")).to_be_visible()
    live = page.context.new_page()
    live.goto(f"{live_server.url}/apps/{demo.slug}/")
    expect(live.get_by_role("button", name="Approve all")).to_be_visible()

    # Roll back production to the first deployment: one pointer moves back.
    page.get_by_role("button", name="Roll back production").first.click()
    page.locator("dialog#rollback-dialog").get_by_role("button", name="Confirm rollback").click()
    expect(page.get_by_text("Rolled back. Production now serves")).to_be_visible()
    live.reload()
    expect(live.get_by_role("button", name="Approve all")).to_have_count(0)
    expect(page.get_by_role("cell", name="reviewed the approve-all button")).to_be_visible()
