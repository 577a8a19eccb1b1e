"""A person rolling back a failed workflow phase from the panel, in Chromium
(docs/architecture.md#workspace-rollback)."""

from __future__ import annotations

import json
import os
import subprocess
import threading
from pathlib import Path

import pytest
from playwright.sync_api import expect

from versions.workspace import ChangesTracker

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

LOG = ".bug-changes.json"
PHASE = "bug-fixing"
XSS = "<script>alert(1)</script><img src=x onerror=alert(2)>"
APP_V1 = "def total(items):\n    return sum(items)\n\n\nprint('ready')\n"
APP_V2 = "def total(items):\n    return sum(i.price for i in items)\n\n\nprint('ready')\n"
UTIL_V1 = "".join(f"line {i}\n" for i in range(60))
UTIL_V2 = UTIL_V1.replace("line 30\n", f"line 30 {XSS}\n")
NOTES_V2 = "# Notes\n\nThe phase wrote this and committed it.\n"


def _git(root: Path, *args: str) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    result = subprocess.run(
        ["git", *args], cwd=root, capture_output=True, text=True, env=env, check=False
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def _write(root: Path, rel: str, text: str) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text.encode())


def _snapshot(root: Path) -> dict[str, bytes]:
    files = {}
    for current, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d not in {".git", ".rollback-undo"}]
        for name in filenames:
            rel = (Path(current) / name).relative_to(root).as_posix()
            if rel != LOG:
                files[rel] = (Path(current) / name).read_bytes()
    return files


@pytest.fixture
def workspace(tmp_path: Path, settings) -> tuple[Path, dict[str, bytes]]:
    """A git repository registered as workspace "bugfix", after a tracked phase; and the tree
    before that phase."""
    root = tmp_path / "work"
    root.mkdir()
    _git(root, "init", "-q", "-b", "main")
    _git(root, "config", "user.email", "browser-tests@example.com")
    _git(root, "config", "user.name", "Browser Tests")
    _git(root, "config", "commit.gpgsign", "false")
    (root / ".git" / "info" / "exclude").write_text(".rollback/\n.rollback-undo/\n*changes*.json\n")
    _write(root, "src/app.py", APP_V1)
    _write(root, "src/util.py", UTIL_V1)
    _write(root, "docs/notes.md", "# Notes\n")
    _git(root, "add", "-A")
    _git(root, "commit", "-q", "-m", "initial")
    # gitignores .rollback/ first (docs/architecture.md#workspace-rollback)
    tracker = ChangesTracker(root / LOG, PHASE)
    _git(root, "add", ".gitignore")
    _git(root, "commit", "-q", "-m", "ignore the rollback backups")
    before = _snapshot(root)

    tracker.record_modify(root / "src/app.py")
    _write(root, "src/app.py", APP_V2)
    tracker.record_modify(root / "src/util.py")
    _write(root, "src/util.py", UTIL_V2)
    _write(root, "src/new_helper.py", "def helper():\n    return 42\n")
    tracker.record_create(root / "src/new_helper.py")
    _write(root, "docs/notes.md", NOTES_V2)
    _git(root, "add", "docs/notes.md")
    _git(root, "commit", "-q", "-m", "phase: notes")
    tracker.record_commit(_git(root, "rev-parse", "HEAD"))

    settings.VERSIONS_WORKSPACES = {"bugfix": str(root)}
    return root.resolve(), before


def test_roll_back_a_phase_from_the_panel(page, make_user, sign_in, workspace) -> None:
    root, before = workspace
    after_phase = _snapshot(root)
    assert after_phase != before
    make_user("rvaid", superuser=True)
    sign_in(page, "rvaid")

    # The home page lists the workspace; open it: the log is a change-set row.
    section = page.locator("#workspaces")
    expect(section).to_contain_text("bugfix")
    section.get_by_role("link", name="bugfix").click()
    row = page.locator("li.workspace-log", has_text=LOG)
    expect(row).to_contain_text(PHASE)
    expect(row).to_contain_text("Files modified")

    # Expand it by clicking the log's name: a backup→current diff per file.
    row.get_by_role("link", name=LOG).click()
    expect(row.locator("section.diff")).to_have_count(3)
    app = row.locator("section.diff", has_text="src/app.py")
    expect(app.locator("tr.l-added")).to_contain_text("i.price")
    expect(app.locator("tr.l-removed")).to_contain_text("return sum(items)")
    expect(row.locator("section.diff", has_text="src/new_helper.py")).to_contain_text("added")
    util = row.locator("section.diff", has_text="src/util.py")
    expect(util.locator("tr.l-added")).to_contain_text(XSS)  # shown as text, never run
    # An "N unchanged lines" expander loads the hidden lines.
    context_rows = util.locator("tr.l-context").count()
    util.locator("button.gap-btn").first.click()
    expect(util.locator("tr.l-context")).not_to_have_count(context_rows)

    # Restore all → the seed's confirmation summary; Cancel leaves everything as it was.
    row.get_by_role("button", name="Restore all").click()
    dialog = page.locator("dialog#restore-dialog")
    expect(dialog).to_be_visible()
    # Told for a person first; the seed's prompt is one click away, word for word.
    outline = dialog.locator("ul.rollback-outline")
    expect(outline).to_contain_text("Restore 2 modified files from their backups")
    expect(outline).to_contain_text("Delete 1 created file")
    expect(outline).to_contain_text("Revert 1 git commit")
    prompt = dialog.locator("pre")
    expect(prompt).to_be_hidden()
    dialog.get_by_text("As the command line asks it").click()
    expect(prompt).to_be_visible()
    expect(prompt).to_contain_text(f'Rollback changes from phase "{PHASE}"?')
    expect(prompt).to_contain_text("- Files modified: 2")
    expect(prompt).to_contain_text("- Files created: 1")
    expect(prompt).to_contain_text("- Git commits: 1")
    expect(prompt).to_contain_text("Proceed with rollback? (yes/no)")
    dialog.get_by_role("button", name="Cancel").click()
    expect(dialog).to_have_count(0)
    assert _snapshot(root) == after_phase

    # Again, and Confirm restore: the report shows in place.
    row.get_by_role("button", name="Restore all").click()
    dialog = page.locator("dialog#restore-dialog")
    expect(dialog.locator("pre")).to_contain_text("4. Revert 1 git commits")
    dialog.get_by_role("button", name="Confirm restore").click()
    expect(dialog).to_have_count(0)
    report = row.locator(".workspace-report")
    expect(report).to_contain_text(f"Rolled back phase “{PHASE}”")
    expect(report).to_contain_text("Restored src/app.py from .rollback/src-app.py.backup")
    expect(report).to_contain_text("Deleted src/new_helper.py")
    expect(report).to_contain_text("Reverted git commit")
    # The report's JSON is there, folded away until asked for.
    expect(report.locator("code.report-json")).to_be_hidden()
    report.get_by_text("Report as JSON").click()
    data = json.loads(report.locator("code.report-json").inner_text())
    assert data["success"] is True and data["errors"] == [] and data["warnings"] == []
    assert data["files_restored"] == 2 and data["files_deleted"] == 1
    assert data["git_commits_reverted"] == 1
    expect(report.get_by_role("link", name="Open the undo log")).to_be_visible()
    # The list caught up with no reload: the rollback's undo log is a row of its own, and
    # the rolled-back row stays open with its report.
    logs = page.locator("#log-list-items > li")
    expect(logs).to_have_count(2)
    expect(page.locator("li.workspace-log", has_text="Rollback of")).to_contain_text("undo log")
    expect(row.locator(".row-head")).to_contain_text("rolled back")
    expect(report).to_be_visible()

    # On disk: the tree before the phase, byte for byte (backups removed: all succeeded).
    assert _snapshot(root) == before
    assert _git(root, "status", "--porcelain") == ""


def test_while_a_rollback_runs_the_panel_says_so_and_its_button_is_disabled(
    page, make_user, sign_in, workspace, monkeypatch
) -> None:
    from versions.workspace import log_sets

    release = threading.Event()
    real_rollback = log_sets.rollback

    def slow_rollback(*args, **kwargs):
        release.wait(30)  # until the test has seen the page while it waits
        return real_rollback(*args, **kwargs)

    monkeypatch.setattr(log_sets, "rollback", slow_rollback)
    make_user("rvaid", superuser=True)
    sign_in(page, "rvaid")
    page.locator("#workspaces").get_by_role("link", name="bugfix").click()
    row = page.locator("li.workspace-log", has_text=LOG)
    row.get_by_role("link", name=LOG).click()
    row.get_by_role("button", name="Restore all").click()
    dialog = page.locator("dialog#restore-dialog")
    confirm = dialog.get_by_role("button", name="Confirm restore")
    confirm.click()
    try:
        expect(dialog.get_by_role("status")).to_have_text("Rolling back…")
        expect(confirm).to_be_disabled()
    finally:
        release.set()
    expect(dialog).to_have_count(0)
    expect(row.locator(".workspace-report")).to_contain_text(f"Rolled back phase “{PHASE}”")


def test_a_big_phase_shows_its_files_a_page_at_a_time(
    page, make_user, sign_in, tmp_path, settings
) -> None:
    root = tmp_path / "big"
    root.mkdir()
    tracker = ChangesTracker(root / LOG, PHASE, workspace=root)
    for i in range(60):
        _write(root, f"src/f{i:02}.py", f"value = {i}\n")
        tracker.record_modify(root / f"src/f{i:02}.py")
        _write(root, f"src/f{i:02}.py", f"value = {i} + 1\n")
    settings.VERSIONS_WORKSPACES = {"big": str(root)}
    make_user("rvaid", superuser=True)
    sign_in(page, "rvaid")

    page.locator("#workspaces").get_by_role("link", name="big").click()
    row = page.locator("li.workspace-log", has_text=LOG)
    row.get_by_role("link", name=LOG).click()
    expect(row.locator("section.diff")).to_have_count(50)
    expect(row).to_contain_text("50 of 60 files shown")

    row.get_by_role("button", name="Show the next 10 files").click()
    expect(row.locator("section.diff")).to_have_count(60)
    expect(row.locator("section.diff").last).to_contain_text("src/f59.py")
    expect(row.get_by_role("button", name="Show the next 10 files")).to_have_count(0)


def test_a_later_phase_and_an_undo_log_are_said_in_words(
    page, make_user, sign_in, workspace
) -> None:
    root, _ = workspace
    feature = ChangesTracker(root / ".feature-changes.json", "feature")
    feature.record_modify(root / "src/app.py")
    _write(root, "src/app.py", APP_V2 + "# feature\n")
    make_user("rvaid", superuser=True)
    sign_in(page, "rvaid")
    page.locator("#workspaces").get_by_role("link", name="bugfix").click()

    # The earlier phase's diff of src/app.py includes the feature's line, and says so beside it.
    row = page.locator("li.workspace-log", has_text=LOG)
    row.get_by_role("link", name=LOG).click()
    app = row.locator("section.diff", has_text="src/app.py")
    expect(app.locator("tr.l-added")).to_contain_text(["i.price", "# feature"])
    expect(app.locator(".later-changes")).to_contain_text(
        "Changed again after this phase by phase “feature” (.feature-changes.json)"
    )
    expect(
        row.locator("section.diff", has_text="src/util.py").locator(".later-changes")
    ).to_have_count(0)

    row.get_by_role("button", name="Restore all").click()
    dialog = page.locator("dialog#restore-dialog")
    expect(dialog.locator("ul.rollback-changed-later")).to_contain_text("src/app.py")
    dialog.get_by_role("button", name="Confirm restore").click()
    expect(row.locator(".workspace-report")).to_contain_text(f"Rolled back phase “{PHASE}”")

    # Its undo log undoes that rollback; it is not the phase asked about again.
    row.locator(".workspace-report").get_by_role("link", name="Open the undo log").click()
    undo = page.locator("li.workspace-log.expanded")
    undo.get_by_role("button", name="Restore all").click()
    dialog = page.locator("dialog#restore-dialog")
    expect(dialog.get_by_role("heading", level=2)).to_have_text(
        f"Undo the rollback of phase “{PHASE}”"
    )
    dialog.get_by_role("button", name="Confirm restore").click()
    expect(undo.locator(".workspace-report")).to_contain_text(
        f"Undid the rollback of phase “{PHASE}”"
    )
    assert (root / "src/app.py").read_text() == APP_V2 + "# feature\n"
