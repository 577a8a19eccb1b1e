"""The panel under its Content-Security-Policy in a real browser: the signed-in pages run with
nothing refused (every browser test fails on a refusal, see conftest), and a refusal is seen."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from versions.management.commands.load_demo import DEMO_SLUG

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_an_inline_style_or_script_on_a_panel_page_is_refused_and_seen(
    page, live_server, demo_signed_in, problems
):
    demo_signed_in(page)
    page.goto(f"{live_server.url}/apps/{DEMO_SLUG}/versions/")
    expect(page.locator("header.topbar")).to_be_visible()
    assert problems.csp == []

    page.evaluate("document.body.setAttribute('style', 'outline: 1px solid red')")
    page.evaluate(
        "() => { const s = document.createElement('script'); s.textContent = 'window.ran = 1';"
        " document.body.append(s); }"
    )
    page.wait_for_timeout(200)

    assert page.evaluate("window.ran") is None  # the inline script did not run
    assert any("inline style" in text for text in problems.csp), problems.csp
    assert any("inline script" in text for text in problems.csp), problems.csp
    problems.csp.clear()  # seen and expected: the fixture fails on any other
