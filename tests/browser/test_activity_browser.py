"""The Activity pages in a browser, at 1280 and 390 px: axe finds no serious or critical
violation, the filter works in place, and nothing is wider than the screen."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from versions import services
from versions.management.commands.load_demo import DEMO_SLUG, load_demo
from versions.models import App, AuditEvent

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _fits(page) -> None:
    wide = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
    assert wide <= 0, f"the page is {wide} px wider than the screen"


@pytest.mark.parametrize("width", [1280, 390])
def test_activity_passes_axe_and_filters_in_place(
    browser, live_server, make_user, sign_in, axe, width
):
    context = browser.new_context(viewport={"width": width, "height": 900})
    page = context.new_page()
    page.set_default_timeout(10_000)
    root = make_user("rvaid", superuser=True)
    sign_in(page, "rvaid")
    load_demo()
    app = App.objects.get(slug=DEMO_SLUG)
    actor = services.actor_for_user(root)
    services.record(
        "set_named",
        actor=actor,
        app=app,
        targets=["cs_rp_mj3k2a_0000abcd", "rp_mj3k2a_0000abcd"],
        reason="A very long reason that has to wrap on a phone rather than widen the page "
        "past the screen, with a_very_long_identifier_without_any_space_in_it_at_all",
        details={"name": "Checkout, second try", "previous": "—"},
    )
    services.record("member_added", actor=actor, app=app, details={"whom": "user “ana”"})
    # A forced promotion keeps a message and its findings (a list): a list, each key whole.
    services.record(
        "protection_overridden",
        actor=actor,
        app=app,
        details={
            "message": "Promoted draft to production as dp_mj3k2a_0000abcd: 3 artifacts changed.",
            "findings": ["cs_a: it needs 1 more approval", "cs_b: it has changes requested"],
        },
    )
    # The demo's own actions (its restore) are in the trail too.
    events = AuditEvent.objects.filter(app=app).count()
    assert events >= 2

    page.goto(f"{live_server.url}/apps/{DEMO_SLUG}/versions/")
    page.get_by_role("link", name="Activity", exact=True).click()
    expect(page.locator(".activity-list > li")).to_have_count(events)
    axe(page, "an app's Activity")
    _fits(page)
    expect(page.locator(".activity-details .detail-items li")).to_have_count(2)
    broken = page.evaluate(
        """Array.from(document.querySelectorAll('.activity-details dt')).filter(dt => {
            const range = document.createRange(); range.selectNodeContents(dt);
            return range.getClientRects().length > 1; }).map(dt => dt.textContent)"""
    )
    assert broken == [], f"keys broken over lines: {broken}"

    page.get_by_label("Action").select_option("member_added")
    expect(page.locator(".activity-list > li")).to_have_count(1)
    expect(page).to_have_url(
        f"{live_server.url}/apps/{DEMO_SLUG}/versions/activity/?action=member_added&person="
    )
    axe(page, "an app's Activity, filtered")

    page.goto(f"{live_server.url}/")
    page.get_by_role("link", name="All activity").click()
    expect(page.get_by_role("heading", name="Activity", level=1)).to_be_visible()
    assert page.locator(".activity-list > li").count() >= 3  # the sign-in too
    axe(page, "the instance's Activity")
    _fits(page)
    context.close()
