"""Workspace change sets (versions.workspace.log_sets and .lock), called directly: listing a workspace's
changes logs, the backup→current sides of their files, later-change detection, and `Restore all`
refused in words (refused log, stale confirmation, a rollback already running)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from rollback_helpers import phase_log, snapshot, write, write_log

from versions import messages, services
from versions.errors import Conflict, Forbidden, InvalidInput, NotFound, StaleWrite
from versions.terms import (
    VIEW,
)
from versions.workspace import lock, log_sets

WS = "demo"
LOG = ".bug-changes.json"
LATER_LOG = ".feature-changes.json"
V1 = "export const VERSION = '1.0.0';\n"
V2 = "export const VERSION = '1.0.1';\n"
V3 = V2 + "// feature\n"
REVIEWER = services.Actor.command("reviewer")


@pytest.fixture
def ws(tmp_path: Path, settings) -> Path:
    """A registered workspace folder "demo" (no git needed: the logs list no commits)."""
    root = (tmp_path / "ws").resolve()
    root.mkdir()
    settings.VERSIONS_WORKSPACES = {WS: str(root), "missing": str(tmp_path / "nowhere")}
    return root


def _phase(root: Path) -> Path:
    """Phase "bug-fixing": app.ts 1.0.0 → 1.0.1 (backup kept), helper.ts created."""
    write(root, ".rollback/app.ts.backup", V1)
    write(root, "src/app.ts", V2)
    write(root, "src/helper.ts", "export const helper = 1;\n")
    return phase_log(
        root,
        LOG,
        files_modified=[{"path": "src/app.ts", "backup": ".rollback/app.ts.backup"}],
        files_created=["src/helper.ts"],
    )


def _later_phase(root: Path) -> Path:
    """Phase "feature", an hour later, changing app.ts again (its backup: as bug-fixing left it)."""
    write(root, ".rollback/app.ts.feature.backup", V2)
    write(root, "src/app.ts", V3)
    return phase_log(
        root,
        LATER_LOG,
        phase="feature",
        timestamp="2025-10-18T15:30:00Z",
        files_modified=[{"path": "src/app.ts", "backup": ".rollback/app.ts.feature.backup"}],
    )


def _state(name: str = LOG, kind: str = log_sets.LOGS) -> log_sets.LogState:
    return log_sets.open_log(workspace=WS, kind=kind, log=name)


# ------------------------------------------------------------------------------ listing


def test_list_logs_finds_changes_logs_and_counter_logs_newest_first(ws: Path, outside) -> None:
    older = _phase(ws)
    os.utime(older, (1_000_000, 1_000_000))
    _later_phase(ws)
    write_log(ws, "notes.json", {"not": "a changes log by name"})
    (ws / ".linked-changes.json").symlink_to(older)  # a symlink is never listed
    undo = ws / log_sets.UNDO_DIR / "20251018T150000Z"
    undo.mkdir(parents=True)
    write_log(undo, log_sets.UNDO_LOG_NAME, {"metadata": {}})
    os.utime(undo / log_sets.UNDO_LOG_NAME, (2_000_000, 2_000_000))

    refs = log_sets.list_logs(workspace=log_sets.get_workspace(name=WS))

    assert [(r.kind, r.name) for r in refs] == [
        (log_sets.LOGS, LATER_LOG),
        (log_sets.UNDO, "20251018T150000Z"),
        (log_sets.LOGS, LOG),
    ]
    assert refs[1].label == f"{log_sets.UNDO_DIR}/20251018T150000Z/{log_sets.UNDO_LOG_NAME}"


def test_an_unknown_workspace_or_log_is_not_found_in_words(ws: Path) -> None:
    _phase(ws)
    with pytest.raises(NotFound) as no_ws:
        log_sets.get_workspace(name="elsewhere")
    assert no_ws.value.message == log_sets.NO_WORKSPACE
    with pytest.raises(NotFound) as no_log:
        log_sets.open_log(workspace=WS, kind=log_sets.LOGS, log="../" + LOG)
    assert no_log.value.message == log_sets.NO_LOG


def test_a_workspace_whose_folder_is_missing_lists_nothing_and_says_why(ws: Path) -> None:
    listing = log_sets.workspace_listing(name="missing")
    assert listing.rows == []
    assert listing.missing == log_sets.NO_FOLDER.format(folder=listing.ws.folder)
    assert log_sets.workspace_listing(name=WS).missing == ""


def test_workspace_cards_count_changes_logs_and_undo_logs(ws: Path) -> None:
    _phase(ws)
    _later_phase(ws)
    cards = {card.ws.name: card for card in log_sets.workspace_cards()}
    assert (cards[WS].log_count, cards[WS].undo_count) == (2, 0)
    assert (cards["missing"].log_count, cards["missing"].last) == (0, None)


# ------------------------------------------------------------------------------ file sides


def test_read_side_tells_text_missing_binary_too_big_and_folders_apart(
    ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(ws, "a.txt", "hello\n")
    (ws / "img.bin").write_bytes(b"\x89PNG\x00")
    (ws / "dir").mkdir()
    assert log_sets.read_side(path=ws / "a.txt", root=ws).text == "hello\n"
    assert log_sets.read_side(path=ws / "gone.txt", root=ws).state == "missing"
    assert log_sets.read_side(path=ws / "img.bin", root=ws).state == "binary"
    assert log_sets.read_side(path=ws / "dir", root=ws).state == "folder"
    monkeypatch.setattr(log_sets, "MAX_SHOWN_BYTES", 3)
    assert log_sets.read_side(path=ws / "a.txt", root=ws).state == "too_big"


def test_a_symlink_out_of_the_workspace_is_neither_shown_nor_hashed(
    ws: Path, outside: Path
) -> None:
    (ws / "link.txt").symlink_to(outside / "secret.txt")
    assert log_sets.read_side(path=ws / "link.txt", root=ws).state == "special"
    assert log_sets.content_digest(path=ws / "link.txt", root=ws) is None
    assert log_sets.content_digest(path=ws / "nothing.txt", root=ws) == log_sets.MISSING


def test_file_diffs_run_from_the_backup_to_the_file_now(ws: Path) -> None:
    _phase(ws)
    page = log_sets.files_page(state=_state())
    modified, created = page.diffs
    assert (page.total, page.next_start) == (2, None)
    assert (modified.status, modified.old, modified.new) == ("changed", V1, V2)
    assert (created.status, created.message) == ("added", log_sets.CREATED)

    write(ws, "src/app.ts", V1)
    (ws / "src/helper.ts").unlink()
    modified, created = log_sets.files_page(state=_state()).diffs
    assert (modified.status, modified.message) == ("identical", log_sets.SAME_AS_BACKUP)
    assert (created.status, created.message) == ("absent", log_sets.CREATED_GONE)

    (ws / "src/app.ts").unlink()
    assert log_sets.file_diff(state=_state(), file_id="m0").message == log_sets.GONE_NOW


def test_a_modified_file_without_its_backup_says_so(ws: Path) -> None:
    _phase(ws)
    (ws / ".rollback/app.ts.backup").unlink()
    diff = log_sets.file_diff(state=_state(), file_id="m0")
    assert diff.status == "no_backup"
    assert diff.message == log_sets.NO_BACKUP.format(backup=".rollback/app.ts.backup")


def test_a_file_the_log_does_not_list_is_not_found(ws: Path) -> None:
    _phase(ws)
    for file_id in ("m1", "c1", "x0", "m0/../c0"):
        with pytest.raises(NotFound) as caught:
            log_sets.file_diff(state=_state(), file_id=file_id)
        assert caught.value.message == log_sets.NO_FILE


def test_a_diff_page_for_sides_that_changed_since_is_stale(ws: Path) -> None:
    _phase(ws)
    seen = log_sets.file_diff(state=_state(), file_id="m0").key
    assert log_sets.diff_page(state=_state(), file_id="m0", page=1, seen_key=seen).key == seen
    write(ws, "src/app.ts", V3)
    with pytest.raises(StaleWrite) as caught:
        log_sets.diff_page(state=_state(), file_id="m0", page=1, seen_key=seen)
    assert caught.value.message == log_sets.CHANGED_SINCE
    with pytest.raises(StaleWrite) as context:
        log_sets.diff_context(
            state=_state(), file_id="m0", seen_key=seen, old_start=1, new_start=1, count=1
        )
    assert context.value.message == log_sets.CHANGED_SINCE


# ------------------------------------------------------------------------------ later changes


def test_a_later_phase_that_changed_a_file_again_is_named(ws: Path) -> None:
    _phase(ws)
    _later_phase(ws)
    state = _state()

    later = log_sets.later_changes(state=state)

    target = str(ws / "src/app.ts")
    assert list(later) == [target]
    (item,) = later[target]
    assert item.description == log_sets.LATER_PHASE.format(phase="feature", label=LATER_LOG)
    (diff, _) = log_sets.files_page(state=state).diffs
    assert diff.later_note == log_sets.CHANGED_LATER.format(later=item.description)
    outline = log_sets.rollback_outline(state=state)
    assert outline is not None
    assert outline.changed_later == [("src/app.ts", item.description)]
    # The later phase itself has no later change to warn of.
    assert log_sets.later_changes(state=_state(LATER_LOG)) == {}


@pytest.mark.parametrize("now", [V2, V1], ids=["as-this-phase-left-it", "as-its-backup"])
def test_a_later_change_no_longer_on_disk_is_not_a_later_change(ws: Path, now: str) -> None:
    _phase(ws)
    _later_phase(ws)
    write(ws, "src/app.ts", now)  # rolling back removes nothing a later phase did
    assert log_sets.later_changes(state=_state()) == {}


# ------------------------------------------------------------------------------ Restore all


def test_restore_all_rolls_back_and_lists_the_undo_log(ws: Path) -> None:
    _phase(ws)
    state = _state()

    outcome = log_sets.rollback_log(state=state, log_sha=state.sha256, actor=REVIEWER)

    assert outcome.error == ""
    assert outcome.report is not None and outcome.report["success"] is True
    assert json.loads(outcome.report_json) == outcome.report
    assert (ws / "src/app.ts").read_text() == V1
    assert not (ws / "src/helper.ts").exists()
    assert outcome.undo_ref is not None and outcome.undo_ref.kind == log_sets.UNDO
    assert outcome.undo_ref.requested_by == "reviewer"
    assert outcome.state.ref.rolled_back_by == [outcome.undo_ref]


def test_an_actor_who_may_not_restore_cannot_roll_back_and_nothing_is_done(ws: Path) -> None:
    _phase(ws)
    before = snapshot(ws)
    viewer = services.Actor("viewer", "user", everywhere=frozenset({VIEW}))
    with pytest.raises(Forbidden) as dialog:
        log_sets.log_for_rollback(workspace=WS, kind=log_sets.LOGS, log=LOG, actor=viewer)
    state = _state()
    with pytest.raises(Forbidden) as confirm:
        log_sets.rollback_log(state=state, log_sha=state.sha256, actor=viewer)
    message = messages.NO_WORKSPACE_ROLLBACK.format(who=viewer.who)
    assert dialog.value.message == confirm.value.message == message
    assert snapshot(ws) == before


def test_a_stale_confirmation_is_refused_and_nothing_is_done(ws: Path) -> None:
    _phase(ws)
    before = snapshot(ws)
    state = _state()
    with pytest.raises(StaleWrite) as caught:
        log_sets.rollback_log(state=state, log_sha="0" * 64, actor=REVIEWER)
    assert caught.value.message == log_sets.STALE_LOG
    assert snapshot(ws) == before


def test_a_refused_log_cannot_be_rolled_back(ws: Path) -> None:
    write(ws, LOG, "{not json")
    state = _state()
    assert state.refused
    with pytest.raises(InvalidInput) as caught:
        log_sets.rollback_log(state=state, log_sha=state.sha256, actor=REVIEWER)
    assert caught.value.message == log_sets.REFUSED


def test_the_lock_refuses_a_second_rollback_while_one_runs(ws: Path) -> None:
    log = _phase(ws)
    before = snapshot(ws)
    state = _state()

    with lock.changes_log_lock(path=log), pytest.raises(Conflict) as caught:
        log_sets.rollback_log(state=state, log_sha=state.sha256, actor=REVIEWER)
    assert caught.value.message == lock.BUSY
    assert snapshot(ws) == before
    assert not (ws / log_sets.UNDO_DIR).exists()
    # Once the first one has ended, the lock is free again.
    assert log_sets.rollback_log(state=state, log_sha=state.sha256, actor=REVIEWER).report


def test_a_rollback_that_stops_with_an_error_says_where_to_look(
    ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _phase(ws)
    state = _state()

    def disk_full(*args: Any, **kwargs: Any) -> Any:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(log_sets, "rollback", disk_full)
    outcome = log_sets.rollback_log(state=state, log_sha=state.sha256, actor=REVIEWER)
    assert outcome.report is None
    assert outcome.error == log_sets.STOPPED.format(
        error="No space left on device", undo=f"{log_sets.UNDO_DIR}/"
    )
    assert outcome.state is state
