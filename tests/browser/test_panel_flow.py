"""A person clicking through the Versions panel in Chromium: review, name, mark, restore, undo."""

from __future__ import annotations

import re
import threading

import pytest
from playwright.sync_api import expect

from versions.management.commands.load_demo import DEMO_SLUG, load_demo
from versions.models import Artifact, ChangeSet, RestorePoint

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

NOOP = "Every artifact already matched the state before this set — nothing was written."


def _agent_set() -> ChangeSet:
    return ChangeSet.objects.get(app__slug=DEMO_SLUG, run_id="demo-agent-turn-1")


def _initial_set() -> ChangeSet:
    return ChangeSet.objects.get(app__slug=DEMO_SLUG, run_id="demo-initial-version")


def _source(name: str) -> str:
    return Artifact.objects.get(app__slug=DEMO_SLUG, name=name).source


def test_review_name_mark_restore_all_noop_and_undo(page, live_server, make_user, sign_in):
    load_demo()
    make_user("rvaid", superuser=True)
    agent, initial = _agent_set(), _initial_set()
    sign_in(page, "rvaid")

    # Open the demo app from the app list.
    page.get_by_role("link", name="Quote approvals (demo)").click()
    expect(page.get_by_role("link", name="Change sets")).to_have_attribute("aria-current", "page")
    row = page.locator(f"#set-{agent.id}")
    expect(row).to_contain_text("Unnamed")
    expect(row).to_contain_text("devzone-agent:write_page")

    # Expand the agent's change set by clicking its id: both then→now diffs.
    row.get_by_role("link", name=agent.id, exact=True).click()
    expect(row.locator("section.diff")).to_have_count(2)
    expect(row.locator("section.diff", has_text="index")).to_contain_text("Approve all")
    expect(row.locator("section.diff", has_text="App").locator("tr.l-added").first).to_be_visible()
    expect(row.locator(".diff-table td.ln").first).to_be_visible()
    # An "N unchanged lines" expander loads the hidden lines.
    gap = row.locator("section.diff", has_text="App").locator("button.gap-btn").first
    label = gap.inner_text()
    hidden = int(re.search(r"(\d+) unchanged line", label).group(1))
    rows_before = row.locator("section.diff", has_text="App").locator("tr.l-context").count()
    gap.click()
    expect(row.locator("section.diff", has_text="App").locator("tr.l-context")).to_have_count(
        rows_before + min(hidden, 200)
    )

    # Name it.
    row.get_by_label("Name").fill("Agent turn: approve-all button")
    row.get_by_role("button", name="Save name").click()
    expect(row.locator(".row-head")).to_contain_text("Agent turn: approve-all button")
    assert ChangeSet.objects.get(pk=agent.pk).name == "Agent turn: approve-all button"

    # Mark as release; then mark the other set: the badge moves.
    row.get_by_role("button", name="Mark as release").click()
    expect(row.locator(f"#badge-{agent.id}")).to_have_text("Release")
    expect(row.get_by_role("button", name="Unmark release")).to_be_visible()
    other = page.locator(f"#set-{initial.id}")
    other.get_by_role("link", name=initial.id).click()
    other.get_by_role("button", name="Mark as release").click()
    expect(other.locator(f"#badge-{initial.id}")).to_have_text("Release")
    expect(page.locator(f"#badge-{agent.id}")).to_have_text("")
    expect(page.locator("#release-summary")).to_contain_text(initial.id)
    other.get_by_role("link", name=initial.id).click()  # collapse it again
    expect(other.locator("section.diff")).to_have_count(0)

    # Restore all → the dialog lists both artifacts → Confirm restore → the receipt in place.
    row.get_by_role("button", name="Restore all").click()
    dialog = page.locator("dialog#restore-dialog")
    expect(dialog).to_be_visible()
    expect(dialog).to_contain_text("index")
    expect(dialog).to_contain_text("App")
    dialog.get_by_role("button", name="Confirm restore").click()
    expect(dialog).to_have_count(0)
    receipt = row.locator(".receipt")
    expect(receipt).to_contain_text("Restored")
    expect(receipt.locator("tbody tr")).to_have_count(2)
    counters = receipt.locator(".counter-id").all_inner_texts()
    assert len(counters) == 2 and all(
        re.fullmatch(r"rp_[0-9a-z]+_[0-9a-z]{8}", c) for c in counters
    )
    assert set(counters) == set(
        RestorePoint.objects.filter(kind="counter").values_list("id", flat=True)
    )
    rs_id = receipt.locator("h3 a code").inner_text()
    assert ChangeSet.objects.filter(id=rs_id, kind="restore").exists()
    # The new restore set appeared right under the set it restored, saying what it restored
    # (docs/architecture.md#reviewing).
    expect(page.locator(f"#set-{agent.id} + li")).to_have_id(f"set-{rs_id}")
    expect(page.locator(f"#set-{rs_id} .restore-words")).to_contain_text(
        f"Restore all of {agent.id}"
    )
    # Then → now, the diffs say the artifacts match their state before the set (what the set
    # itself did, the default view (docs/architecture.md#revert), does not change with a restore).
    row.get_by_role("link", name="Then → now").click()
    expect(row.locator(".status-chip.s-identical")).to_have_count(2)

    # The live app serves the old content again.
    live = page.context.new_page()
    live.goto(f"{live_server.url}/apps/{DEMO_SLUG}/")
    expect(live.locator("body")).to_contain_text("Quotes waiting for approval.")
    expect(live.locator("#approve-all")).to_have_count(0)
    live.close()

    # Restore all again: the exact noop sentence, nothing written.
    counters_before = RestorePoint.objects.filter(kind="counter").count()
    row.get_by_role("button", name="Restore all").click()
    dialog = page.locator("dialog#restore-dialog")
    expect(dialog).to_contain_text("already matched")
    dialog.get_by_role("button", name="Confirm restore").click()
    expect(row.locator(".receipt")).to_contain_text(NOOP)
    assert RestorePoint.objects.filter(kind="counter").count() == counters_before

    # Undo the restore, from the restore set's own row.
    rs_row = page.locator(f"#set-{rs_id}")
    rs_row.get_by_role("link", name=rs_id).click()
    rs_row.get_by_role("button", name="Undo this restore").click()
    dialog = page.locator("dialog#restore-dialog")
    expect(dialog).to_be_visible()
    dialog.get_by_role("button", name="Confirm restore").click()
    expect(rs_row.locator(".receipt")).to_contain_text("Restored")
    assert "Approve all" in _source("index")


def test_cancel_writes_nothing(page, live_server, make_user, sign_in):
    load_demo()
    make_user("rvaid", superuser=True)
    agent = _agent_set()
    points = RestorePoint.objects.count()
    sets = ChangeSet.objects.count()
    index = _source("index")
    sign_in(page, "rvaid")
    page.goto(f"{live_server.url}/apps/{DEMO_SLUG}/versions/")
    row = page.locator(f"#set-{agent.id}")
    row.get_by_role("link", name=agent.id, exact=True).click()
    row.get_by_role("button", name="Restore all").click()
    dialog = page.locator("dialog#restore-dialog")
    expect(dialog).to_be_visible()
    expect(dialog.get_by_role("button", name="Cancel")).to_be_focused()
    dialog.get_by_role("button", name="Cancel").click()
    expect(dialog).to_have_count(0)
    # Escape closes it too.
    row.get_by_role("button", name="Restore all").click()
    expect(page.locator("dialog#restore-dialog")).to_be_visible()
    page.keyboard.press("Escape")
    expect(page.locator("dialog#restore-dialog")).to_have_count(0)
    expect(row.get_by_role("button", name="Restore all")).to_be_focused()
    assert RestorePoint.objects.count() == points
    assert ChangeSet.objects.count() == sets
    assert _source("index") == index


def test_while_restore_all_runs_the_dialog_says_so_and_cannot_be_confirmed_twice(
    page, live_server, make_user, sign_in, monkeypatch
):
    from versions import services

    load_demo()
    make_user("rvaid", superuser=True)
    agent = _agent_set()
    release = threading.Event()
    calls: list[bool] = []
    real = services.run_restore

    def slow(*args, **kwargs):
        if not kwargs.get("dry_run"):
            calls.append(True)
            release.wait(30)  # until the test has seen the dialog while it waits
        return real(*args, **kwargs)

    monkeypatch.setattr(services, "run_restore", slow)
    sign_in(page, "rvaid")
    page.goto(f"{live_server.url}/apps/{DEMO_SLUG}/versions/")
    row = page.locator(f"#set-{agent.id}")
    row.get_by_role("link", name=agent.id, exact=True).click()
    row.get_by_role("button", name="Restore all").click()
    dialog = page.locator("dialog#restore-dialog")
    confirm = dialog.get_by_role("button", name="Confirm restore")
    confirm.click()
    try:
        expect(dialog.get_by_role("status")).to_have_text("Restoring…")
        expect(confirm).to_be_disabled()
    finally:
        release.set()
    expect(dialog).to_have_count(0)
    expect(page.locator(".receipt").first).to_be_visible()
    assert calls == [True]  # one restore, however impatient the person


def test_restore_single_point_from_restore_points_tab(page, live_server, make_user, sign_in):
    load_demo()
    make_user("rvaid", superuser=True)
    point = RestorePoint.objects.get(change_set=_agent_set(), artifact__name="index")
    stylesheet = _source("App")
    sign_in(page, "rvaid")
    page.goto(f"{live_server.url}/apps/{DEMO_SLUG}/versions/")
    page.get_by_role("link", name="Restore points").click()
    expect(page.get_by_role("link", name="Restore points")).to_have_attribute(
        "aria-current", "page"
    )
    assert page.url.endswith("/versions/points/")
    # Filter by tool, then expand the point.
    page.get_by_label("Tool").select_option("devzone-agent:write_page")
    expect(page.locator("#point-list-items > li")).to_have_count(1)
    assert "tool=devzone-agent" in page.url
    row = page.locator(f"#point-{point.id}")
    row.get_by_role("link", name=point.id, exact=True).click()
    expect(row.locator("section.diff")).to_contain_text("Approve all")
    row.get_by_label("Name").fill("Before the approve-all button")
    row.get_by_role("button", name="Save name").click()
    expect(row.locator(".row-head")).to_contain_text("Before the approve-all button")
    row.get_by_role("button", name="Restore", exact=True).click()
    dialog = page.locator("dialog#restore-dialog")
    expect(dialog).to_contain_text("index")
    dialog.get_by_role("button", name="Confirm restore").click()
    expect(row.locator(".receipt")).to_contain_text("Restored")
    expect(row.locator(".receipt .counter-id")).to_have_count(1)
    assert "Approve all" not in _source("index")
    assert _source("App") == stylesheet  # a point restores its own artifact only
