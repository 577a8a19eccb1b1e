"""The workspace pages of the panel told for a person (docs/architecture.md#workspace-rollback),
through Django's test client: the confirmation summary as a list with singular and plural, the
seed's prompt kept verbatim behind a disclosure, files a later phase changed again, undo logs, the
report, times."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse
from rollback_helpers import write, write_log

from versions.workspace import log_sets

WS = "demo"
BUG_LOG = ".bug-changes.json"
FEATURE_LOG = ".feature-changes.json"
APP_V1 = "export const VERSION = '1.0.0';\n"
APP_BUG = "export const VERSION = '1.0.1';\n"
APP_FEATURE = APP_BUG + "// feature\n"
SEED_PROMPT_SINGULAR = (
    "Rollback changes from phase &quot;bug-fixing&quot;?\n\nChanges to revert:\n"
    "- Files modified: 1\n- Files created: 1\n- Commands executed: 2\n- Git commits: 1\n\n"
    "This action will:\n1. Restore 1 files from backups\n2. Delete 1 created files\n"
    "3. Revert 2 commands\n4. Revert 1 git commits\n\nProceed with rollback? (yes/no)"
)


def _log(phase: str, timestamp: str, **fields: Any) -> dict[str, Any]:
    return {
        "phase": phase,
        "timestamp": timestamp,
        "files_modified": [],
        "files_created": [],
        "commands_executed": [],
        "git_commits": [],
        **fields,
    }


@pytest.fixture
def ws(tmp_path: Path, settings) -> Path:
    root = (tmp_path / "ws").resolve()
    root.mkdir()
    settings.VERSIONS_WORKSPACES = {WS: str(root)}
    return root


@pytest.fixture
def panel(db) -> Client:
    client = Client()
    client.force_login(User.objects.create_superuser("reviewer"))
    return client


def _url(view: str, log: str = BUG_LOG, kind: str = "logs") -> str:
    return reverse(f"versions:{view}", args=[WS, kind, log])


def _dialog(client: Client, log: str = BUG_LOG, kind: str = "logs") -> str:
    response = client.get(_url("workspace_restore", log, kind), headers={"HX-Request": "true"})
    assert response.status_code == 200
    return response.content.decode()


def _expanded(client: Client, log: str = BUG_LOG, kind: str = "logs") -> str:
    response = client.get(_url("workspace_log", log, kind), headers={"HX-Request": "true"})
    assert response.status_code == 200
    return response.content.decode()


def _confirm(client: Client, log: str = BUG_LOG, kind: str = "logs") -> str:
    sha = re.search(r'name="log_sha" value="([0-9a-f]{64})"', _dialog(client, log, kind))
    assert sha
    response = client.post(
        _url("workspace_restore", log, kind), {"log_sha": sha[1]}, headers={"HX-Request": "true"}
    )
    assert response.status_code == 200
    return response.content.decode()


def _outline(html: str) -> str:
    """The human list of the dialog, tags dropped, spaces squeezed."""
    start = html.index("What Confirm restore does")
    end = html.index("As the command line asks it")
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", html[start:end]))


def _file_section(html: str, path: str) -> str:
    sections = html.split('<section class="diff ')
    return next(s for s in sections if f'aria-label="{path}"' in s)


def _bug_phase(ws: Path, **extra: Any) -> None:
    write(ws, "src/app.ts", APP_BUG)
    write(ws, ".rollback/src-app.ts.backup", APP_V1)
    write(ws, "src/new.ts", "export const x = 1;\n")
    write_log(
        ws,
        BUG_LOG,
        _log(
            "bug-fixing",
            "2025-10-18T14:30:00Z",
            files_modified=[{"path": "src/app.ts", "backup": ".rollback/src-app.ts.backup"}],
            files_created=["src/new.ts"],
            **extra,
        ),
    )


def _feature_phase(ws: Path) -> None:
    """A later phase that changes src/app.ts again, backing up what bug-fixing left."""
    write(ws, ".rollback/src-app.ts.2.backup", APP_BUG)
    write(ws, "src/app.ts", APP_FEATURE)
    write_log(
        ws,
        FEATURE_LOG,
        _log(
            "feature",
            "2025-10-18T14:40:00Z",
            files_modified=[{"path": "src/app.ts", "backup": ".rollback/src-app.ts.2.backup"}],
        ),
    )


# ------------------------------------------------------------------- the confirmation dialog


def test_dialog_lists_what_confirm_restore_does_in_the_singular(panel: Client, ws: Path) -> None:
    _bug_phase(
        ws,
        commands_executed=["pnpm build", "npm install left-pad"],
        git_commits=["abc123def456"],
    )
    html = _dialog(panel)
    outline = _outline(html)
    assert "Restore 1 modified file from its backup" in outline
    assert "Delete 1 created file" in outline and "created files" not in outline
    assert "Revert 1 command: pnpm build (removes the build artifacts (dist/))" in outline
    assert "Revert 1 git commit: abc123def456" in outline
    # The command the seed's mapping cannot revert is named, not counted as reverted.
    assert "1 command cannot be reverted automatically; undo it by hand if needed:" in outline
    assert "<li><code>npm install left-pad</code></li>" in html
    assert "Revert 2 commands" not in outline


def test_dialog_lists_what_confirm_restore_does_in_the_plural(panel: Client, ws: Path) -> None:
    for name in ("a", "b"):
        write(ws, f"src/{name}.ts", "new\n")
        write(ws, f".rollback/{name}.backup", "old\n")
    for name in ("c", "d", "e"):
        write(ws, f"src/{name}.ts", "made\n")
    write_log(
        ws,
        BUG_LOG,
        _log(
            "bug-fixing",
            "2025-10-18T14:30:00Z",
            files_modified=[
                {"path": f"src/{n}.ts", "backup": f".rollback/{n}.backup"} for n in ("a", "b")
            ],
            files_created=[f"src/{n}.ts" for n in ("c", "d", "e")],
            commands_executed=["make deploy", "npm install left-pad", "git add src"],
            git_commits=["abc123", "def456"],
        ),
    )
    outline = _outline(_dialog(panel))
    assert "Restore 2 modified files from their backups" in outline
    assert "Delete 3 created files" in outline
    assert "Revert 1 command: git add src (unstages all files (git restore --staged .))" in outline
    assert "Revert 2 git commits, newest first: abc123, def456" in outline
    assert "2 commands cannot be reverted automatically; undo them by hand if needed:" in outline


def test_dialog_says_what_a_missing_backup_or_a_gone_file_means(panel: Client, ws: Path) -> None:
    write(ws, "src/app.ts", APP_BUG)
    write_log(
        ws,
        BUG_LOG,
        _log(
            "bug-fixing",
            "2025-10-18T14:30:00Z",
            files_modified=[{"path": "src/app.ts", "backup": ".rollback/gone.backup"}],
            files_created=["src/never.ts"],
        ),
    )
    outline = _outline(_dialog(panel))
    assert "Leave 1 modified file as it is: no backup was found for src/app.ts" in outline
    assert "Skip 1 created file already gone: src/never.ts" in outline
    assert "Nothing to undo" in outline


def test_dialog_keeps_the_seeds_prompt_verbatim_behind_a_closed_disclosure(
    panel: Client, ws: Path
) -> None:
    _bug_phase(
        ws,
        commands_executed=["pnpm build", "npm install left-pad"],
        git_commits=["abc123def456"],
    )
    html = _dialog(panel)
    assert (
        '<details class="json">\n    <summary>As the command line asks it</summary>\n'
        f'    <pre class="prompt workspace-prompt">{SEED_PROMPT_SINGULAR}</pre>'
    ) in html
    assert "Cannot auto-revert: npm install left-pad (manual intervention required)" in html
    assert ">Cancel</button>" in html and ">Confirm restore</button>" in html


def test_undo_log_dialog_undoes_the_rollback_instead_of_asking_about_the_phase(
    panel: Client, ws: Path
) -> None:
    _bug_phase(ws)
    report = _confirm(panel)
    assert "Rolled back phase “bug-fixing”" in report
    stamp = next((ws / ".rollback-undo").iterdir()).name

    html = _dialog(panel, stamp, "undo")
    assert '<h2 id="dlg-title">Undo the rollback of phase “bug-fixing”</h2>' in html
    assert "This undo log was written when phase “bug-fixing” was rolled back by reviewer" in html
    outline = _outline(html)
    # src/app.ts, src/new.ts and the backup the successful rollback cleaned up.
    assert "Put back 3 files the rollback overwrote or deleted" in outline
    assert "Rollback changes from phase" not in outline
    # The prompt the command line would show stays the seed's, word for word.
    assert "Rollback changes from phase &quot;bug-fixing&quot;?" in html

    listing = panel.get(reverse("versions:workspace", args=[WS])).content.decode()
    assert "Rollback of “bug-fixing”" in listing

    undone = _confirm(panel, stamp, "undo")
    assert "Undid the rollback of phase “bug-fixing”" in undone
    assert (ws / "src/app.ts").read_text() == APP_BUG


# ------------------------------------------------------------------- a later phase's changes


def test_a_file_a_later_phase_changed_again_says_rolling_back_removes_that_too(
    panel: Client, ws: Path
) -> None:
    _bug_phase(ws)
    _feature_phase(ws)
    html = _expanded(panel)
    app = _file_section(html, "src/app.ts")
    assert log_sets.CHANGED_LATER.format(
        later="phase “feature” (.feature-changes.json)"
    ) in app.replace("&quot;", '"')
    assert "// feature" in app  # the diff itself still runs backup → now
    assert "later changes" not in _file_section(html, "src/new.ts")

    outline = _outline(_dialog(panel))
    assert "1 file of this phase was changed again afterwards" in outline
    assert "src/app.ts, by phase “feature” (.feature-changes.json)" in outline

    # The later phase's own log has nothing after it.
    assert "Changed again after this phase" not in _expanded(panel, FEATURE_LOG)


def test_rolling_back_the_earlier_phase_still_restores_its_backup(panel: Client, ws: Path) -> None:
    _bug_phase(ws)
    _feature_phase(ws)
    _confirm(panel)
    assert (ws / "src/app.ts").read_text() == APP_V1
    assert not (ws / "src/new.ts").exists()


def test_a_later_rollback_of_another_phase_is_named_as_that_rollback(
    panel: Client, ws: Path
) -> None:
    # A command it cannot revert: the rollback warns, so it keeps .rollback/ and its backups.
    _bug_phase(ws, commands_executed=["npm install left-pad"])
    _feature_phase(ws)
    _confirm(panel)  # rolls bug-fixing back, and with it the feature's line
    stamp = next((ws / ".rollback-undo").iterdir()).name
    app = _file_section(_expanded(panel, FEATURE_LOG), "src/app.ts")
    undo_log = f".rollback-undo/{stamp}/changes.json"
    assert (
        f"Changed again after this phase by the rollback of phase “bug-fixing” ({undo_log})" in app
    )
    # Rolling bug-fixing back put its own backups back: no later change to warn about there.
    assert "Changed again after this phase" not in _expanded(panel)


def test_a_created_file_a_later_phase_changed_is_flagged_too(panel: Client, ws: Path) -> None:
    _bug_phase(ws)
    write(ws, ".rollback/src-new.ts.backup", "export const x = 1;\n")
    write(ws, "src/new.ts", "export const x = 2;\n")
    write_log(
        ws,
        FEATURE_LOG,
        _log(
            "feature",
            "2025-10-18T14:40:00Z",
            files_modified=[{"path": "src/new.ts", "backup": ".rollback/src-new.ts.backup"}],
        ),
    )
    new = _file_section(_expanded(panel), "src/new.ts")
    assert "rolling back deletes the file, so it removes them too" in new
    assert "phase “feature”" in new


def test_no_warning_once_the_later_change_is_gone(panel: Client, ws: Path) -> None:
    _bug_phase(ws)
    _feature_phase(ws)
    write(ws, "src/app.ts", APP_BUG)  # as bug-fixing left it: the feature change is undone
    assert "Changed again after this phase" not in _expanded(panel)


def test_an_earlier_phase_is_not_a_later_change(panel: Client, ws: Path) -> None:
    _bug_phase(ws)
    write_log(
        ws,
        ".setup-changes.json",
        _log(
            "setup",
            "2025-10-18T14:00:00Z",
            files_modified=[{"path": "src/app.ts", "backup": ".rollback/src-app.ts.backup"}],
        ),
    )
    assert "Changed again after this phase" not in _expanded(panel)


# ------------------------------------------------------------------- the report, the rows


def test_report_json_is_collapsed_and_sections_have_headings(panel: Client, ws: Path) -> None:
    _bug_phase(ws, commands_executed=["npm install left-pad"])
    html = _confirm(panel)
    assert '<details class="json">\n    <summary>Report as JSON</summary>' in html
    assert '<details class="json" open' not in html
    assert '<div class="plan report-sections">\n    <h3>Actions taken</h3>' in html
    assert "<h3>Warnings</h3>" in html
    report = re.search(r'<code class="report-json">(.*?)</code>', html, re.S)
    assert report and json.loads(report[1].replace("&quot;", '"'))["files_restored"] == 1


def test_rows_show_the_log_time_as_the_panel_shows_times(panel: Client, ws: Path) -> None:
    _bug_phase(ws)
    html = panel.get(reverse("versions:workspace", args=[WS])).content.decode()
    assert '<time datetime="2025-10-18T14:30:00+00:00"' in html
    assert (
        '<span class="abs" data-local title="2025-10-18 14:30:00 UTC">2025-10-18 14:30:00 UTC</span>'
        in html
    )
    assert ">2025-10-18T14:30:00Z<" not in html
