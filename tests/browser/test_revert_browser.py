"""Revert this set as a person uses it (docs/architecture.md#revert): a later agent edited the same
stylesheet elsewhere; Restore all's dialog names that later work; Revert this set takes back only
the agent's turn and keeps the later edit."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from versions import services
from versions.management.commands.load_demo import DEMO_SLUG, load_demo
from versions.models import Artifact, ChangeSet

pytestmark = pytest.mark.browser


def _source(name: str) -> str:
    return Artifact.objects.get(app__slug=DEMO_SLUG, name=name).source


def test_revert_this_set_keeps_the_later_agents_edit(page, live_server, make_user, sign_in):
    load_demo()
    make_user("rvaid", superuser=True)
    turn = ChangeSet.objects.get(app__slug=DEMO_SLUG, run_id="demo-agent-turn-1")
    before_turn = {
        p.artifact.name: p.previous_source
        for p in turn.points.select_related("artifact").order_by("created_on")
    }
    # A later agent appends a rule to the stylesheet the turn changed.
    later_css = _source("App") + "\n.later-agent { color: teal; }\n"
    services.write_artifact(
        DEMO_SLUG,
        "pltf_stylesheet",
        "App",
        later_css,
        requested_by="agent-b",
        tool="t",
        run_id="later",
    )
    sign_in(page, "rvaid")
    page.goto(f"{live_server.url}/apps/{DEMO_SLUG}/versions/")
    row = page.locator(f"#set-{turn.id}")
    row.get_by_role("link", name=turn.id, exact=True).click()

    # Restore all would also undo agent-b's rule: its dialog says so.
    row.get_by_role("button", name="Restore all").click()
    dialog = page.locator("dialog#restore-dialog")
    expect(dialog.get_by_text("This also undoes later work")).to_be_visible()
    expect(dialog.get_by_text("by agent-b")).to_be_visible()
    dialog.get_by_role("button", name="Cancel").click()

    row.get_by_role("button", name="Revert this set").click()
    dialog = page.locator("dialog#restore-dialog")
    expect(dialog.get_by_role("heading", name=f"Revert this set {turn.id}")).to_be_visible()
    # Revert's dialog speaks of Revert only: the later work is kept, not undone.
    expect(dialog.get_by_text("This also undoes later work")).to_have_count(0)
    dialog.get_by_role("button", name="Confirm revert").click()
    expect(page.get_by_text("Reverted. Receipt")).to_be_visible()
    assert _source("index") == before_turn["index"]
    css = _source("App")
    assert css == before_turn["App"] + "\n.later-agent { color: teal; }\n"
