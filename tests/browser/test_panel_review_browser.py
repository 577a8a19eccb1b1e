"""Reviewing in Chromium (SPEC §16), at 1280 and 390 px: find a set with the search box and the
filters, compare two states (unified / split, file list, Viewed marks), the review keys."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from versions import services
from versions.management.commands.load_demo import DEMO_SLUG, load_demo
from versions.models import ChangeSet

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

SIZES = {"desktop": (1280, 900), "phone": (390, 844)}


@pytest.fixture(params=list(SIZES))
def sized_page(request, browser, live_server, problems):
    width, height = SIZES[request.param]
    context = browser.new_context(viewport={"width": width, "height": height})
    page = context.new_page()
    page.set_default_timeout(10_000)
    page.on("pageerror", lambda exc: problems.errors.append(str(exc)))
    yield page
    context.close()
    assert problems.errors == [], problems.errors


def _demo(make_user, sign_in, page) -> tuple[ChangeSet, ChangeSet]:
    load_demo()
    make_user("rvaid", superuser=True)
    sign_in(page, "rvaid")
    agent = ChangeSet.objects.get(app__slug=DEMO_SLUG, run_id="demo-agent-turn-1")
    setup = ChangeSet.objects.filter(app__slug=DEMO_SLUG).exclude(pk=agent.pk).get()
    return agent, setup


def test_find_a_set_with_the_search_box_and_hide_restore_sets(
    sized_page, live_server, make_user, sign_in
):
    page = sized_page
    agent, setup = _demo(make_user, sign_in, page)
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
