"""Safe promotion as a person uses it (docs/architecture.md#safe-promotion), at 1280 and 390 px:
the promote dialog shows the checks and starts a rollout, the Production tab advances and
aborts it, the Settings page adds a check; axe finds nothing serious on any of them. The live
app, in Chromium, keeps each visitor's page, stylesheet and route on one deployment while a
rollout runs (the sandboxed page's own requests carry the pinning cookie)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from playwright.sync_api import expect

pytestmark = pytest.mark.browser

SHOTS = Path("/tmp/versions-shots")


def _app():
    from versions.models import API_ROUTE, PAGE, STYLESHEET, App
    from versions.services import promote, write_artifact

    app = App.objects.create(slug="shop", name="Shop")

    def version(label: str, color: str) -> None:
        page = (
            "<!doctype html><html lang=en><title>Shop</title>"
            "<link rel=stylesheet href=assets/App.css>"
            f"<h1 id=label>{label}</h1><p id=route>…</p>"
            "<script>fetch('api/version').then(r => r.json())"
            ".then(d => { document.getElementById('route').textContent = d.v; })</script>"
        )
        for collection, name, source in (
            (PAGE, "index", page),
            (STYLESHEET, "App", f"h1 {{ color: {color}; }}"),
            (
                API_ROUTE,
                "version",
                json.dumps({"method": "GET", "path": "/version", "body": {"v": label}}),
            ),
        ):
            write_artifact(app, collection, name, source, requested_by="agent", tool="t")

    version("v1", "rgb(0, 128, 0)")
    promote(app, by="rvaid")
    version("v2", "rgb(255, 0, 0)")
    return app


def test_start_advance_and_abort_a_rollout(sized_page, make_user, sign_in, axe, live_server):
    page = sized_page
    size = "phone" if page.viewport_size["width"] < 600 else "desktop"
    SHOTS.mkdir(exist_ok=True)
    _app()
    make_user("rvaid", superuser=True)
    sign_in(page, "rvaid")
    base = f"{live_server.url}/apps/shop/versions/"

    page.goto(f"{base}production/")
    page.get_by_role("button", name="Promote to production").click()
    dialog = page.locator("dialog#promote-dialog")
    expect(dialog.get_by_text("Pages parse as HTML")).to_be_visible()
    expect(dialog.get_by_text("Assets referenced by pages exist")).to_be_visible()
    axe(page, f"the promote dialog with checks ({size})")
    page.screenshot(path=str(SHOTS / f"promote-dialog-{size}.png"), full_page=True)
    dialog.get_by_label("Share of visitors (%)").fill("50")
    dialog.get_by_role("button", name="Start rollout").click()
    expect(page.get_by_text("Rollout started")).to_be_visible()
    expect(page.locator("#rollout-share")).to_have_text("50 %")
    axe(page, f"the Production tab with a rollout running ({size})")
    page.screenshot(path=str(SHOTS / f"rollout-running-{size}.png"), full_page=True)

    # The live app: whichever deployment a visitor is drawn onto, its page, stylesheet and
    # route are all that deployment's, on every reload.
    seen = set()
    for _ in range(6):
        visitor = page.context.browser.new_context()
        live = visitor.new_page()
        live.goto(f"{live_server.url}/apps/shop/")
        label = live.locator("#label").inner_text()
        expect(live.locator("#route")).to_have_text(label)
        color = live.locator("#label").evaluate("e => getComputedStyle(e).color")
        assert color == {"v1": "rgb(0, 128, 0)", "v2": "rgb(255, 0, 0)"}[label]
        live.reload()
        assert live.locator("#label").inner_text() == label  # pinned
        seen.add(label)
        visitor.close()
    assert seen <= {"v1", "v2"}

    page.get_by_label("Share (%)").fill("80")
    page.get_by_role("button", name="Advance").click()
    expect(page.get_by_text("Rollout advanced")).to_be_visible()
    expect(page.locator("#rollout-share")).to_have_text("80 %")
    page.get_by_role("button", name="Abort rollout").click()
    expect(page.get_by_text("Rollout aborted")).to_be_visible()
    expect(page.locator("#rollout-share")).to_have_count(0)
    expect(page.get_by_text("aborted").first).to_be_visible()
    axe(page, f"the Production tab after the abort ({size})")
    page.screenshot(path=str(SHOTS / f"rollout-aborted-{size}.png"), full_page=True)


def test_the_settings_section_and_a_freeze(sized_page, make_user, sign_in, axe, live_server):
    page = sized_page
    size = "phone" if page.viewport_size["width"] < 600 else "desktop"
    SHOTS.mkdir(exist_ok=True)
    _app()
    make_user("rvaid", superuser=True)
    sign_in(page, "rvaid")
    page.goto(f"{live_server.url}/apps/shop/versions/settings/")
    page.get_by_label("Name", exact=True).first.fill("Home page answers")
    page.get_by_label("Path below /apps/shop").fill("/../admin")
    page.get_by_role("button", name="Add check").click()
    expect(page.get_by_text("must stay inside the app")).to_be_visible()
    page.get_by_label("Path below /apps/shop").fill("/")
    page.get_by_role("button", name="Add check").click()
    expect(page.get_by_text("Check “Home page answers” added.")).to_be_visible()
    expect(page.get_by_role("cell", name="GET /")).to_be_visible()
    axe(page, f"the Settings page's safe promotion section ({size})")
    page.screenshot(path=str(SHOTS / f"settings-{size}.png"), full_page=True)

    # Locking, at the foot of a long page: what happened (or why not) is drawn under the form
    # the person just used, where they are looking, not at the top of the section.
    lock_name = page.locator("#lock-name")
    lock_name.fill("nope")
    page.get_by_role("button", name="Lock artifact").click()
    refused = page.get_by_text("App “shop” has no pltf_page “nope” to lock.")
    expect(refused).to_be_in_viewport()
    expect(lock_name).to_have_value("nope")  # nothing typed is lost
    lock_name.fill("index")
    page.locator("#lock-reason").fill("copy signed off")
    page.get_by_role("button", name="Lock artifact").click()
    expect(page.get_by_text("index is locked: agents may not write it.")).to_be_in_viewport()
    expect(page.locator("ul.locks")).to_contain_text("copy signed off")
    page.get_by_role("button", name="Unlock index").click()
    expect(page.get_by_text("index is unlocked.")).to_be_in_viewport()
    page.get_by_label("Error-rate bound (%)").fill("7")
    page.get_by_role("button", name="Save watch").click()
    expect(page.get_by_text("Watch saved.")).to_be_in_viewport()

    page.goto(f"{live_server.url}/apps/shop/versions/production/")
    page.get_by_text("Freeze production").first.click()
    page.get_by_label("Reason").fill("Launch week")
    page.get_by_role("button", name="Freeze production").click()
    expect(page.get_by_text("Production is frozen").first).to_be_visible()
    axe(page, f"the Production tab while frozen ({size})")
    page.screenshot(path=str(SHOTS / f"frozen-{size}.png"), full_page=True)
    page.get_by_role("button", name="Unfreeze").click()
    expect(page.get_by_text("Production is unfrozen.")).to_be_visible()
