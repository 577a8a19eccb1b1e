"""Previews in Chromium (docs/architecture.md#environments): a signed preview link opens a state of
the app in the live app's sandbox, and — with no cookies sent from the sandbox's opaque origin — its
stylesheet, module and API route load too, because the link's signature is in every relative URL."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from versions.management.commands.load_demo import DEMO_SLUG, load_demo
from versions.models import ChangeSet
from versions.services import (
    preview_url,
)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_signed_preview_of_the_agents_turn_loads_its_stylesheet_and_api_route(page, live_server):
    app = load_demo()
    turn = ChangeSet.objects.get(app=app, run_id="demo-agent-turn-1")
    url = preview_url(app, turn.id)
    answers: dict[str, int] = {}
    page.on("response", lambda response: answers.__setitem__(response.url, response.status))
    failed: list[str] = []
    page.on("requestfailed", lambda request: failed.append(request.url))

    page.goto(f"{live_server.url}{url}")
    # The state right after the turn: the agent's button, and the quotes its route serves.
    expect(page.locator("#approve-all")).to_be_visible()
    quotes = page.locator("#quotes li")
    expect(quotes.first).to_be_visible()
    assert quotes.count() >= 2
    assert failed == []
    base = f"{live_server.url}{url}"
    assert answers[f"{base}assets/App.css"] == 200
    assert answers[f"{base}assets/quotes.js"] == 200
    assert answers[f"{base}api/quotes"] == 200
    # The stylesheet applied: the agent's danger button has its own colour.
    background = page.evaluate(
        "() => getComputedStyle(document.getElementById('approve-all')).backgroundColor"
    )
    assert background not in ("", "rgba(0, 0, 0, 0)", "rgb(239, 239, 239)")
    # Sandboxed like the live app: an opaque origin.
    assert page.evaluate("() => self.origin") == "null"


def test_production_stays_as_it_was_while_the_draft_preview_is_only_for_link_holders(
    page, live_server
):
    load_demo()
    page.goto(f"{live_server.url}/apps/{DEMO_SLUG}/")
    expect(page.locator("#quotes li").first).to_be_visible()
    expect(page.locator("#approve-all")).to_have_count(0)
    response = page.goto(f"{live_server.url}/apps/{DEMO_SLUG}/at/draft/")
    assert response is not None and response.status == 404
    expect(page.locator("body")).to_contain_text("open a signed preview link")
