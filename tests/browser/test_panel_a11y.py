"""axe-core on every panel page and state, at 1280 and 390 px (docs/architecture.md#reviewing): no
serious or critical violation (diff gutters' and hunk headers' contrast included) and headings in
order."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect
from test_workspace_browser import LOG, workspace  # noqa: F401 - the workspace fixture

from versions.management.commands.load_demo import DEMO_SLUG, load_demo
from versions.models import ChangeSet, RestorePoint

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _walk_every_state(page, live_server, axe) -> None:
    load_demo()
    agent = ChangeSet.objects.get(app__slug=DEMO_SLUG, run_id="demo-agent-turn-1")
    setup = ChangeSet.objects.filter(app__slug=DEMO_SLUG).exclude(pk=agent.pk).get()
    base = f"{live_server.url}/apps/{DEMO_SLUG}/versions/"

    page.goto(f"{live_server.url}/")
    axe(page, "the apps")
    page.goto(base)
    axe(page, "Change sets")

    row = page.locator(f"#set-{agent.id}")
    row.get_by_role("link", name=agent.id, exact=True).click()
    expect(row.locator("section.diff table")).to_have_count(2)
    axe(page, "an expanded set, What this set did")
    row.get_by_role("link", name="Then → now").click()
    expect(row.get_by_role("link", name="Then → now")).to_have_attribute("aria-current", "true")
    axe(page, "an expanded set, Then → now")
    page.goto(f"{base}change-sets/{agent.id}/")
    axe(page, "a set's own page")

    page.goto(base)
    page.get_by_role("link", name="Restore points").click()
    expect(page.locator("#point-list-items > li").first).to_be_visible()
    axe(page, "Restore points")
    point = RestorePoint.objects.filter(change_set=agent).order_by("created_on").first()
    prow = page.locator(f"#point-{point.id}")
    prow.get_by_role("link", name=point.id, exact=True).click()
    expect(prow.locator("section.diff table")).to_have_count(1)
    axe(page, "an expanded point")

    # Mark the setup as release: Since release then lists the agent turn's two artifacts.
    page.goto(f"{base}change-sets/{setup.id}/")
    page.get_by_role("button", name="Mark as release").click()
    expect(page.locator(f"#badge-{setup.id}")).to_have_text("Release")
    page.goto(f"{base}since-release/")
    expect(page.locator("#release-diffs section.diff")).to_have_count(2)
    axe(page, "Since release")
    page.get_by_role("button", name="Restore to release").click()
    dialog = page.locator("dialog#restore-dialog")
    expect(dialog).to_be_visible()
    axe(page, "the restore dialog")
    dialog.get_by_role("button", name="Confirm restore").click()
    expect(page.locator(".receipt")).to_contain_text("Restored")
    axe(page, "a receipt in place")
    rs = ChangeSet.objects.get(app__slug=DEMO_SLUG, kind=ChangeSet.RESTORE)
    page.goto(f"{base}restore-sets/{rs.id}/")
    axe(page, "a receipt page")
    page.goto(f"{base}members/")
    axe(page, "Members")
    page.goto(f"{base}production/")
    axe(page, "Production")
    page.get_by_role("button", name="Promote to production").click()
    page.locator("dialog#promote-dialog").wait_for()
    axe(page, "the promote dialog")
    page.goto(f"{base}preview/draft/")
    axe(page, "a preview")
    page.goto(f"{base}change-sets/cs_nope/")
    axe(page, "a 404")


def _walk_workspace(page, live_server, axe) -> None:
    page.goto(f"{live_server.url}/workspaces/")
    axe(page, "workspaces")
    page.goto(f"{live_server.url}/workspaces/bugfix/")
    row = page.locator("li.workspace-log", has_text=LOG)
    row.get_by_role("link", name=LOG).click()
    expect(row.locator("section.diff")).to_have_count(3)
    axe(page, "an expanded changes log")
    row.get_by_role("button", name="Restore all").click()
    expect(page.locator("dialog#restore-dialog")).to_be_visible()
    axe(page, "a workspace's restore dialog")


def test_every_panel_state_passes_axe_on_a_desktop(page, live_server, make_user, sign_in, axe):
    make_user("rvaid", superuser=True)
    sign_in(page, "rvaid")
    _walk_every_state(page, live_server, axe)


def test_every_panel_state_passes_axe_on_a_phone(phone_page, live_server, make_user, sign_in, axe):
    make_user("rvaid", superuser=True)
    sign_in(phone_page, "rvaid")
    _walk_every_state(phone_page, live_server, axe)


@pytest.mark.parametrize("width", [1280, 390])
def test_workspaces_pass_axe(
    browser,
    live_server,
    make_user,
    sign_in,
    axe,
    workspace,  # noqa: F811
    width,
    problems,
):
    context = browser.new_context(viewport={"width": width, "height": 900})
    context.on("console", problems.on_console)
    page = context.new_page()
    page.set_default_timeout(10_000)
    make_user("rvaid", superuser=True)
    sign_in(page, "rvaid")
    _walk_workspace(page, live_server, axe)
    context.close()
    problems.assert_none_refused()
