"""A person in Chromium: mark a release, an agent turn happens, review Since release, Restore to
release, confirm, read the receipt, and undo it."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from versions import services
from versions.management.commands.load_demo import DEMO_SLUG, load_demo
from versions.models import Artifact, ChangeSet

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

NOOP = "Every artifact already matched the state before this set — nothing was written."
XSS = "<img src=x onerror=alert(1)>"


def _state() -> dict[tuple[str, str], str | None]:
    return {
        (a.collection, a.name): None if a.deleted else a.source
        for a in Artifact.objects.filter(app__slug=DEMO_SLUG).select_related("blob")
    }


def test_mark_release_agent_turn_review_and_restore_to_release(
    page, live_server, make_user, sign_in
):
    load_demo()
    make_user("rvaid", superuser=True)
    agent = ChangeSet.objects.get(app__slug=DEMO_SLUG, run_id="demo-agent-turn-1")
    sign_in(page, "rvaid")
    page.goto(f"{live_server.url}/apps/{DEMO_SLUG}/versions/")

    # No release yet: the tab says so and offers to mark one.
    page.get_by_role("link", name="Since release").click()
    expect(page.locator("#no-release")).to_contain_text("No release marked")
    expect(page.get_by_role("button", name="Restore to release")).to_have_count(0)
    page.get_by_role("link", name="Mark a release in Change sets").click()

    # Mark the agent's set as release.
    row = page.locator(f"#set-{agent.id}")
    row.get_by_role("link", name=agent.id, exact=True).click()
    row.get_by_role("button", name="Mark as release").click()
    expect(row.locator(f"#badge-{agent.id}")).to_have_text("Release")
    # The views the mark refreshes (HX-Trigger) finish loading before the test writes to the
    # database itself: SQLite's shared in-memory cache locks a table a request is reading.
    page.wait_for_load_state("networkidle")
    at_release = _state()

    # An agent turn after the release: a page changed, a module created, a route deleted.
    index = Artifact.objects.get(app__slug=DEMO_SLUG, collection="pltf_page", name="index")
    route = Artifact.objects.filter(
        app__slug=DEMO_SLUG, collection="pltf_api_route", deleted=False
    ).first()
    assert route is not None
    turn = "agent-after-release"
    services.write_artifact(
        DEMO_SLUG,
        "pltf_page",
        "index",
        index.source.replace("</h1>", f" {XSS} (new)</h1>", 1) + "<p>Added later.</p>\n",
        requested_by="rvaid",
        tool="devzone-agent:write_page",
        run_id=turn,
    )
    services.write_artifact(
        DEMO_SLUG,
        "pltf_frontend_module",
        "late-helper",
        "export const late = true;\n",
        requested_by="rvaid",
        tool="devzone-agent:write_module",
        run_id=turn,
    )
    services.delete_artifact(
        DEMO_SLUG, "pltf_api_route", route.name, requested_by="rvaid", tool="t", run_id=turn
    )
    before_restore = _state()

    # Open Since release: the cumulative diffs of exactly the three artifacts.
    page.get_by_role("link", name="Since release").click()
    expect(page.get_by_role("link", name="Since release")).to_have_attribute("aria-current", "page")
    diffs = page.locator("#release-diffs section.diff")
    expect(diffs).to_have_count(3)
    expect(page.locator("#release-since")).to_contain_text("3 artifacts differ")
    index_diff = diffs.filter(has_text="index")
    expect(index_diff.locator("tr.l-added", has_text="Added later.")).to_have_count(1)
    expect(index_diff).to_contain_text(XSS)  # shown as text, not markup
    expect(diffs.filter(has_text="late-helper").locator(".status-chip")).to_have_text("added")
    expect(diffs.filter(has_text=route.name).locator(".status-chip")).to_have_text("deleted since")
    expect(page.locator("#set-list-items > li")).to_have_count(1)

    # Restore to release → dialog (a dry run) → Confirm restore → the receipt in place.
    page.get_by_role("button", name="Restore to release").click()
    dialog = page.locator("dialog#restore-dialog")
    expect(dialog).to_be_visible()
    expect(dialog).to_contain_text(agent.id)
    for name in ("index", "late-helper", route.name):
        expect(dialog.locator("td strong", has_text=name)).to_have_count(1)
    expect(dialog.get_by_role("button", name="Cancel")).to_be_visible()
    dialog.get_by_role("button", name="Confirm restore").click()
    expect(dialog).to_have_count(0)
    receipt = page.locator(".receipt")
    expect(receipt).to_contain_text("Restored")
    expect(receipt.locator("tbody tr")).to_have_count(3)
    expect(receipt).to_contain_text(agent.id)
    expect(receipt.get_by_role("button", name="Undo this restore")).to_be_visible()
    expect(page.locator("#release-matches")).to_be_visible()
    rs = ChangeSet.objects.get(app__slug=DEMO_SLUG, kind=ChangeSet.RESTORE)
    assert rs.receipt["scope"] == "since_release" and rs.receipt["restoredFromSet"] == agent.id
    after = _state()
    for key, source in at_release.items():
        assert after[key] == source, key
    assert after[("pltf_frontend_module", "late-helper")] is None

    # Nothing differs now: Restore to release is no longer offered as the thing to do.
    since = page.locator("#release-since")
    expect(since).to_contain_text("0 artifacts differ")
    expect(since).to_contain_text("Nothing to restore.")
    expect(since.get_by_role("button", name="Restore to release")).to_be_disabled()
    # Its confirmation page says nothing would be written, and confirming is not the primary
    # action; confirming anyway gives the exact noop sentence.
    page.goto(f"{live_server.url}/apps/{DEMO_SLUG}/versions/since-release/restore/")
    expect(page.locator(".plan")).to_contain_text(
        "Every artifact already matches its state at the release."
    )
    confirm = page.get_by_role("button", name="Confirm restore")
    expect(confirm).not_to_have_class(re.compile(r"\bprimary\b"))
    confirm.click()
    expect(page.locator(".receipt .noop-sentence")).to_have_text(NOOP)
    assert ChangeSet.objects.filter(app__slug=DEMO_SLUG, kind=ChangeSet.RESTORE).count() == 1

    # Undo this restore (from the restore set's receipt page): back to the state before it.
    page.goto(f"{live_server.url}/apps/{DEMO_SLUG}/versions/restore-sets/{rs.id}/")
    receipt = page.locator(".receipt")
    receipt.get_by_role("button", name="Undo this restore").click()
    dialog = page.locator("dialog#restore-dialog")
    expect(dialog).to_be_visible()
    dialog.get_by_role("button", name="Confirm restore").click()
    page.wait_for_url("**/restore-sets/**")
    expect(page.locator(".receipt")).to_contain_text("Restored")
    assert _state() == before_restore
    undo = ChangeSet.objects.get(app__slug=DEMO_SLUG, restored_from=rs)
    assert page.url.endswith(f"/restore-sets/{undo.id}/")

    # The undone restore's receipt page says so, instead of offering the undo again.
    page.goto(f"{live_server.url}/apps/{DEMO_SLUG}/versions/restore-sets/{rs.id}/")
    receipt = page.locator(".receipt")
    expect(receipt.locator(".undone")).to_contain_text(f"Undone by {undo.id}")
    expect(receipt.get_by_role("button", name="Undo this restore")).to_have_count(0)
    receipt.locator(".undone").get_by_role("link", name=undo.id).click()
    page.wait_for_url(f"**/restore-sets/{undo.id}/")
    expect(page.locator(".receipt").get_by_role("button", name="Undo this restore")).to_be_visible()
