"""Webhooks on the Settings page and the Notifications tab, as an owner clicks
(docs/architecture.md#notifications): a refused secret is said in words and nothing is saved,
a webhook is added, its delivery log shows what the receiver answered and Redeliver sends the
event again. axe-core finds nothing serious on either page at 1280 and 390 px."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from django.core.management import call_command
from playwright.sync_api import expect

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from webhook_helpers import start_receiver  # noqa: E402

pytestmark = pytest.mark.browser


def _worker() -> None:
    call_command("db_worker", "--batch", "--no-startup-delay", "--no-reload", verbosity=0)


def test_an_owner_adds_a_webhook_reads_its_log_and_redelivers(
    sized_page, live_server, demo_signed_in, axe, settings
):
    from versions import services
    from versions.management.commands.load_demo import DEMO_SLUG
    from versions.models import PAGE, Webhook, WebhookDelivery

    settings.VERSIONS_WEBHOOK_ALLOW_PRIVATE = True
    settings.VERSIONS_WEBHOOK_REQUIRE_HTTPS = False
    page = sized_page
    demo_signed_in(page)
    receiver = start_receiver(answers=[500])
    page.goto(f"{live_server.url}/apps/{DEMO_SLUG}/versions/settings/")
    expect(page.get_by_role("heading", name="Webhooks")).to_be_visible()
    axe(page, "the Settings page without webhooks")

    page.locator("#webhook-url").fill(receiver.url)
    page.locator("#webhook-secret").fill("too short")
    page.get_by_label("change_set.created — An agent started a change set").check()
    page.get_by_role("button", name="Add webhook").click()
    expect(page.locator("#webhook-error")).to_contain_text("secret is 16 to 200 characters")
    assert not Webhook.objects.exists()
    axe(page, "the Settings page with a refused webhook")

    page.locator("#webhook-secret").fill("a-secret-of-twenty-chars")
    page.get_by_role("button", name="Add webhook").click()
    expect(page.get_by_role("status")).to_contain_text("Webhook added")
    expect(page.get_by_role("heading", name=receiver.url)).to_be_visible()

    services.write_artifact(DEMO_SLUG, PAGE, "index", "<p>new</p>\n", tool="t", run_id="b1")
    _worker()  # the first try: the receiver answers 500
    page.reload()
    row = page.locator(f"#{WebhookDelivery.objects.get().id}")
    expect(row).to_contain_text("Retrying")
    expect(row).to_contain_text("500")
    axe(page, "the Settings page with a delivery log")

    row.get_by_role("button", name="Redeliver").click()
    expect(page.get_by_role("status")).to_contain_text("Sent again")
    _worker()
    page.reload()
    expect(page.locator(".deliveries-table tbody tr")).to_have_count(2)
    expect(page.locator(".deliveries-table tbody tr").first).to_contain_text("Delivered")
    assert len(receiver.wait_for(2)) == 2


def test_the_notifications_tab_has_no_serious_accessibility_problems(
    sized_page, live_server, demo_signed_in, axe
):
    from versions.management.commands.load_demo import DEMO_SLUG

    demo_signed_in(sized_page)
    sized_page.goto(f"{live_server.url}/apps/{DEMO_SLUG}/versions/")
    sized_page.get_by_role("link", name="Notifications").click()
    expect(sized_page.get_by_role("heading", name="Notifications")).to_be_visible()
    axe(sized_page, "the Notifications tab")
    sized_page.get_by_label("A review was submitted").check()
    sized_page.get_by_role("button", name="Save notifications").click()
    expect(sized_page.get_by_role("status")).to_contain_text("a review was submitted")
    axe(sized_page, "the Notifications tab, saved")
