"""Hostile agent text stays text; a person without the restore permission sees no restore."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from versions import services
from versions.management.commands.load_demo import DEMO_SLUG, load_demo
from versions.models import App, ChangeSet, RestorePoint

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

XSS = "</textarea><script>alert(1)</script><img src=x onerror=alert(2)>"
XSS_NAME = "<img src=x onerror=alert(3)>"


def test_hostile_source_shows_as_text_everywhere_and_no_dialog_opens(
    page, live_server, make_user, sign_in, problems
):
    app = App.objects.create(slug="hostile", name="Hostile <b>app</b>")
    services.write_artifact(
        app, "pltf_page", XSS_NAME, "<p>fine</p>\n", requested_by=XSS, tool=XSS, run_id="r1"
    )
    r = services.write_artifact(
        app, "pltf_page", XSS_NAME, XSS, requested_by=XSS, tool=XSS, run_id="r2"
    )
    make_user("rvaid", superuser=True)
    sign_in(page, "rvaid")
    expect(page.get_by_role("link", name="Hostile <b>app</b>")).to_be_visible()
    page.get_by_role("link", name="Hostile <b>app</b>").click()

    # The Restore points tab: list, filters, expanded point.
    page.get_by_role("link", name="Restore points").click()
    expect(page.locator("#point-list-items")).to_contain_text(XSS_NAME)
    point_row = page.locator(f"#point-{r.restore_point_id}")
    point_row.get_by_role("link", name=r.restore_point_id, exact=True).click()
    expect(point_row.locator("section.diff")).to_contain_text("<script>alert(1)</script>")
    page.get_by_label("Artifact").select_option(f"pltf_page/{XSS_NAME}")
    page.wait_for_url("**/points/?artifact=*")
    expect(page.locator("#point-list-items > li")).to_have_count(2)
    expect(page.locator("#point-list-items")).to_contain_text(XSS_NAME)
    assert page.locator("main script, main img").count() == 0
    page.get_by_role("link", name="Change sets").click()

    row = page.locator(f"#set-{r.change_set_id}")
    expect(row).to_contain_text(XSS)  # who asked / tool, as text
    row.get_by_role("link", name=r.change_set_id, exact=True).click()
    diff = row.locator("section.diff")
    expect(diff).to_contain_text("<script>alert(1)</script>")
    expect(diff).to_contain_text(XSS_NAME)
    assert page.locator("main script, main img").count() == 0

    row.get_by_label("Name").fill(XSS)
    row.get_by_role("button", name="Save name").click()
    expect(row.locator(".row-head")).to_contain_text(XSS)

    row.get_by_role("button", name="Restore all").click()
    dialog = page.locator("dialog#restore-dialog")
    expect(dialog).to_contain_text(XSS_NAME)
    dialog.get_by_role("button", name="Confirm restore").click()
    expect(row.locator(".receipt")).to_contain_text(XSS_NAME)
    rs_id = row.locator(".receipt h3 a code").inner_text()

    page.goto(f"{live_server.url}/apps/hostile/versions/restore-sets/{rs_id}/")
    expect(page.locator("main")).to_contain_text(XSS_NAME)

    page.wait_for_timeout(300)  # give any injected handler the chance to fire
    assert problems.dialogs == []


def test_without_restore_permission_no_restore_buttons(page, live_server, make_user, sign_in):
    load_demo()
    make_user("viewer", "view_changeset")
    agent = ChangeSet.objects.get(app__slug=DEMO_SLUG, run_id="demo-agent-turn-1")
    point = RestorePoint.objects.filter(change_set=agent).first()
    sign_in(page, "viewer")
    page.goto(f"{live_server.url}/apps/{DEMO_SLUG}/versions/")
    row = page.locator(f"#set-{agent.id}")
    row.get_by_role("link", name=agent.id, exact=True).click()
    expect(row.locator("section.diff")).to_have_count(2)
    for label in ("Restore all", "Undo this restore", "Save name", "Mark as release"):
        expect(page.get_by_role("button", name=label)).to_have_count(0)
    page.goto(f"{live_server.url}/apps/{DEMO_SLUG}/versions/points/{point.id}/")
    expect(page.locator("section.diff")).to_be_visible()
    expect(page.get_by_role("button", name="Restore", exact=True)).to_have_count(0)
    # A forged POST from this signed-in browser (with its CSRF token) answers 403.
    counters = RestorePoint.objects.filter(kind="counter").count()
    status = page.evaluate(
        """async (url) => {
            const token = JSON.parse(document.body.getAttribute('hx-headers'))['X-CSRFToken'];
            const r = await fetch(url, {method: 'POST', headers: {'X-CSRFToken': token}});
            return r.status;
        }""",
        f"/apps/{DEMO_SLUG}/versions/change-sets/{agent.id}/restore/",
    )
    assert status == 403
    assert RestorePoint.objects.filter(kind="counter").count() == counters
