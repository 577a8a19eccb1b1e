"""Workspaces in the panel (docs/architecture.md#workspace-rollback) through Django's test client:
logs listed as change sets, backup→current diffs, Restore all with the seed's prompt, the report,
permissions, CSRF, 404s."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest
from django.contrib.auth.models import Permission, User
from django.test import Client
from django.urls import reverse

from versions.workspace import ChangesTracker, lock, log_sets

LOG = ".bug-changes.json"
PHASE = "bug-fixing"
XSS = "<script>alert(1)</script><img src=x onerror=alert(2)>"
APP_V1 = "def total(items):\n    return sum(items)\n\n\nprint('ready')\n"
APP_V2 = "def total(items):\n    return sum(i.price for i in items)\n\n\nprint('ready')\n"
UTIL_V1 = "".join(f"line {i}\n" for i in range(60))
UTIL_V2 = UTIL_V1.replace("line 30\n", f"line 30 {XSS}\n")
HELPER = "def helper():\n    return 42\n"
NOTES_V1 = "# Notes\n"
NOTES_V2 = "# Notes\n\nThe phase wrote this and committed it.\n"


# ------------------------------------------------------------------------------- fixtures


def git(root: Path, *args: str) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    result = subprocess.run(
        ["git", *args], cwd=root, capture_output=True, text=True, env=env, check=False
    )
    assert result.returncode == 0, f"git {' '.join(args)}: {result.stderr}"
    return result.stdout.strip()


def write(root: Path, rel: str, text: str | bytes) -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


def snapshot(root: Path, *, ignore: tuple[str, ...] = ()) -> dict[str, bytes]:
    """Every file (relative path → bytes), without .git, .rollback-undo and `ignore`."""
    files: dict[str, bytes] = {}
    for current, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d not in {".git", ".rollback-undo"}]
        for name in filenames:
            rel = (Path(current) / name).relative_to(root).as_posix()
            if rel not in ignore:
                files[rel] = (Path(current) / name).read_bytes()
    return files


def make_repo(root: Path) -> Path:
    root.mkdir(parents=True)
    git(root, "init", "-q", "-b", "main")
    git(root, "config", "user.email", "panel-tests@example.com")
    git(root, "config", "user.name", "Panel Tests")
    git(root, "config", "commit.gpgsign", "false")
    (root / ".git" / "info").mkdir(parents=True, exist_ok=True)
    (root / ".git" / "info" / "exclude").write_text(
        ".rollback/\n.rollback-undo/\n*changes*.json\n", encoding="utf-8"
    )
    write(root, "src/app.py", APP_V1)
    write(root, "src/util.py", UTIL_V1)
    write(root, "docs/notes.md", NOTES_V1)
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "initial")
    return root.resolve()


def run_phase(root: Path) -> ChangesTracker:
    """A worker's phase, tracked: two files modified, one created, a command, a commit."""
    tracker = ChangesTracker(root / LOG, PHASE)
    tracker.record_modify(root / "src/app.py")
    write(root, "src/app.py", APP_V2)
    tracker.record_modify(root / "src/util.py")
    write(root, "src/util.py", UTIL_V2)
    write(root, "src/new_helper.py", HELPER)
    tracker.record_create(root / "src/new_helper.py")
    tracker.record_command("pytest -x")
    write(root, "docs/notes.md", NOTES_V2)
    git(root, "add", "docs/notes.md")
    git(root, "commit", "-q", "-m", "phase: notes")
    tracker.record_commit(git(root, "rev-parse", "HEAD"))
    return tracker


@pytest.fixture
def repo(tmp_path: Path, settings) -> Path:
    root = make_repo(tmp_path / "work")
    settings.VERSIONS_WORKSPACES = {"bugfix": str(root)}
    return root


@pytest.fixture
def phase(repo: Path) -> dict[str, bytes]:
    """The tree before the phase; the phase is then run and tracked."""
    # first gitignores .rollback/ (docs/architecture.md#workspace-rollback), which stays
    ChangesTracker(repo / LOG, PHASE)
    before = snapshot(repo, ignore=(LOG,))
    run_phase(repo)
    return before


def _user(username: str, *codenames: str) -> User:
    user = User.objects.create_user(username)  # force_login: no password to hash
    perms = Permission.objects.filter(content_type__app_label="versions", codename__in=codenames)
    user.user_permissions.add(*perms)
    return user


@pytest.fixture
def restorer(db) -> Client:
    client = Client()
    client.force_login(_user("restorer", "view_changeset", "restore_changeset"))
    return client


@pytest.fixture
def viewer(db) -> Client:
    client = Client()
    client.force_login(_user("viewer", "view_changeset"))
    return client


def _log_url(name: str = LOG, *, kind: str = "logs", ws: str = "bugfix") -> str:
    return reverse("versions:workspace_log", args=[ws, kind, name])


def _restore_url(name: str = LOG, *, kind: str = "logs") -> str:
    return reverse("versions:workspace_restore", args=["bugfix", kind, name])


def _log_sha(client: Client, name: str = LOG, *, kind: str = "logs") -> str:
    html = client.get(_restore_url(name, kind=kind)).content.decode()
    match = re.search(r'name="log_sha" value="([0-9a-f]{64})"', html)
    assert match, html
    return match.group(1)


def _confirm(client: Client, name: str = LOG, *, kind: str = "logs", htmx: bool = True):
    sha = _log_sha(client, name, kind=kind)
    headers = {"HX-Request": "true"} if htmx else {}
    return client.post(_restore_url(name, kind=kind), {"log_sha": sha}, headers=headers)


def _without_backups(files: dict[str, bytes]) -> dict[str, bytes]:
    return {k: v for k, v in files.items() if not k.startswith(".rollback/")}


def _report(html: str) -> dict:
    match = re.search(r'<code class="report-json">(.*?)</code>', html, re.S)
    assert match, html
    import html as html_lib

    return json.loads(html_lib.unescape(match.group(1)))


# ------------------------------------------------------------------------------- listing


def test_login_is_required(client: Client, phase) -> None:
    response = client.get(reverse("versions:workspace", args=["bugfix"]))
    assert response.status_code == 302
    assert response["Location"].startswith("/accounts/login/")


def test_home_lists_registered_workspaces_with_their_logs(viewer: Client, phase, repo) -> None:
    html = viewer.get("/").content.decode()
    assert 'id="workspaces"' in html
    assert reverse("versions:workspace", args=["bugfix"]) in html
    assert str(repo) in html
    assert "1 changes log" in html


def test_home_says_when_a_workspace_folder_is_missing(viewer: Client, settings, tmp_path) -> None:
    settings.VERSIONS_WORKSPACES = {"gone": str(tmp_path / "nowhere")}
    html = viewer.get("/").content.decode()
    assert "gone" in html and "Folder not found." in html
    page = viewer.get(reverse("versions:workspace", args=["gone"])).content.decode()
    assert "does not exist" in page


def test_how_to_register_a_workspace_is_shown_only_to_who_runs_the_server(
    viewer: Client, admin_client: Client, settings
) -> None:
    """With no workspace registered, a superuser's home page shows how to register one (an
    environment variable of the server); anyone else's has no Workspaces section, and the
    workspaces page tells them there are none, not how to configure the server."""
    settings.VERSIONS_WORKSPACES = {}
    home = viewer.get("/").content.decode()
    assert 'id="workspaces"' not in home and "VERSIONS_WORKSPACES" not in home
    page = viewer.get(reverse("versions:workspaces")).content.decode()
    assert "No workspaces are registered on this server." in page
    assert "VERSIONS_WORKSPACES" not in page
    home = admin_client.get("/").content.decode()
    assert 'id="workspaces"' in home and "Set <code>VERSIONS_WORKSPACES</code>" in home
    page = admin_client.get(reverse("versions:workspaces")).content.decode()
    assert "Set <code>VERSIONS_WORKSPACES</code>" in page


def test_a_person_without_apps_is_told_to_ask_an_owner_not_to_run_commands(
    admin_client: Client,
) -> None:
    """The empty apps list tells a superuser how to load the demo or connect an agent (server
    commands); anyone else is told how an app reaches their list."""
    nobody = Client()
    nobody.force_login(_user("newcomer", "view_changeset"))
    html = nobody.get("/").content.decode()
    assert "No apps yet" in html and "Ask an owner of an app to add you" in html
    assert "manage.py" not in html
    html = admin_client.get("/").content.decode()
    assert "python manage.py load_demo" in html and "Ask an owner" not in html


def test_workspace_lists_each_changes_log_as_a_change_set_row(viewer: Client, phase, repo) -> None:
    write(repo, ".refactor-changes.json", "{not json")
    write(repo, "notes.json", "{}")  # not a changes log: not listed
    html = viewer.get(reverse("versions:workspace", args=["bugfix"])).content.decode()
    assert html.count('class="row set workspace-log"') == 2
    assert f"<code>{LOG}</code>" in html and "<code>.refactor-changes.json</code>" in html
    assert "notes.json" not in html
    assert PHASE in html
    # Counts of the seed's fields, and the broken log says why in words.
    row = html[html.index(f"<code>{LOG}</code>") :]
    assert "<dt>Files modified</dt><dd>2</dd>" in row
    assert "<dt>Files created</dt><dd>1</dd>" in row
    assert "<dt>Git commits</dt><dd>1</dd>" in row
    assert "Invalid JSON in changes log" in html


def test_listing_skips_symlinked_logs_and_logs_in_subfolders(
    viewer: Client, phase, repo, tmp_path
) -> None:
    outside = write(tmp_path, "outside/.evil-changes.json", (repo / LOG).read_text())
    (repo / ".linked-changes.json").symlink_to(outside)
    write(repo, "sub/.deep-changes.json", (repo / LOG).read_text())
    html = viewer.get(reverse("versions:workspace", args=["bugfix"])).content.decode()
    assert ".linked-changes.json" not in html and ".deep-changes.json" not in html
    assert viewer.get(_log_url(".linked-changes.json")).status_code == 404


# ------------------------------------------------------------------------------- expanded


def test_expanded_log_shows_backup_to_current_diffs(viewer: Client, phase) -> None:
    response = viewer.get(_log_url(), headers={"HX-Request": "true"})
    assert response.status_code == 200
    html = response.content.decode()
    assert html.lstrip().startswith('<li class="row set workspace-log expanded"')
    assert html.count('<section class="diff ') == 3
    app = html[html.index('aria-label="src/app.py"') :]
    app = app[: app.index("</section>")]
    assert "s-changed" in app and ".rollback/src-app.py.backup" in app
    assert 'class="l-removed"' in app and 'class="l-added"' in app
    assert "i.price" in app
    created = html[html.index('aria-label="src/new_helper.py"') :]
    assert "s-added" in created[:600] and "return 42" in created
    # Commands (never run) and commits are listed.
    assert "<code>pytest -x</code>" in html and "Cannot auto-revert" in html
    assert re.search(r"<li><code>[0-9a-f]{40}</code></li>", html)


def test_expanded_log_full_page_works_without_htmx(viewer: Client, phase) -> None:
    html = viewer.get(_log_url()).content.decode()
    assert "<!doctype html>" in html
    assert "All changes logs" in html and 'aria-label="src/app.py"' in html


def test_collapsed_row_fragment(viewer: Client, phase) -> None:
    html = viewer.get(_log_url() + "?collapsed=1", headers={"HX-Request": "true"}).content.decode()
    assert 'aria-expanded="false"' in html and 'section class="diff' not in html


def test_diffs_escape_file_text_and_log_text(viewer: Client, repo) -> None:
    tracker = ChangesTracker(repo / LOG, f"phase {XSS}")
    tracker.record_modify(repo / "src/util.py")
    write(repo, "src/util.py", UTIL_V2)
    tracker.record_command(f"echo {XSS}")
    html = viewer.get(_log_url()).content.decode()
    assert "<script>alert(1)</script>" not in html
    assert "onerror=alert(2)>" not in html.replace("&gt;", "")
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html


def test_missing_backup_is_said_in_words(viewer: Client, phase, repo) -> None:
    (repo / ".rollback/src-app.py.backup").unlink()
    html = viewer.get(_log_url()).content.decode()
    assert "Backup not found: .rollback/src-app.py.backup" in html
    assert "s-no_backup" in html
    # And the rollback would warn about it (the seed's warning).
    assert "Backup not found: .rollback/src-app.py.backup (file not restored)" in html


def test_binary_and_oversized_files_are_described_not_shown(
    viewer: Client, repo, monkeypatch
) -> None:
    write(repo, "img.bin", b"\x89PNG\x00\x01\x02")
    write(repo, "big.txt", "x" * 5000 + "\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "assets")
    tracker = ChangesTracker(repo / LOG, PHASE)
    tracker.record_modify(repo / "img.bin")
    write(repo, "img.bin", b"\x89PNG\x00\x09")
    tracker.record_modify(repo / "big.txt")
    write(repo, "big.txt", "y" * 5000 + "\n")
    monkeypatch.setattr(log_sets, "MAX_SHOWN_BYTES", 4096)
    html = viewer.get(_log_url()).content.decode()
    assert "The backup is binary (7 bytes), so it is not shown as text." in html
    assert "over the 4.0 KB shown in the panel, so the diff is not shown." in html
    assert "x" * 200 not in html


def test_created_file_gone_and_created_folder(viewer: Client, repo) -> None:
    tracker = ChangesTracker(repo / LOG, PHASE)
    write(repo, "tmp/out.txt", "out\n")
    tracker.record_create(repo / "tmp")
    write(repo, "gone.txt", "x\n")
    tracker.record_create(repo / "gone.txt")
    (repo / "gone.txt").unlink()
    html = viewer.get(_log_url()).content.decode()
    assert log_sets.CREATED_FOLDER in html
    assert log_sets.CREATED_GONE in html


def test_more_hunks_and_unchanged_lines_load_on_demand(viewer: Client, repo, monkeypatch) -> None:
    many = "".join(f"row {i}\n" for i in range(400))
    write(repo, "many.txt", many)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "many")
    tracker = ChangesTracker(repo / LOG, PHASE)
    tracker.record_modify(repo / "many.txt")
    write(repo, "many.txt", many.replace("0\n", "0 changed\n"))  # 40 hunks
    html = viewer.get(_log_url()).content.decode()
    assert "Show more hunks" in html
    match = re.search(r'hx-get="([^"]*/diff/page/\?page=2&amp;now=[0-9a-f]+)"', html)
    assert match
    more = viewer.get(match.group(1).replace("&amp;", "&")).content.decode()
    assert "@@ -208,7 +208,7 @@" in more and "row 210" in more and "changed</ins>" in more
    gap = re.search(r'hx-get="([^"]*/diff/context/\?[^"]*)"', html)
    assert gap
    rows = viewer.get(gap.group(1).replace("&amp;", "&")).content.decode()
    assert 'class="l-context"' in rows
    # After the file changes, an old page answers that the diff is stale.
    write(repo, "many.txt", many)
    stale = viewer.get(match.group(1).replace("&amp;", "&")).content.decode()
    assert log_sets.CHANGED_SINCE in stale


def test_a_log_with_many_files_shows_them_a_page_at_a_time(
    viewer: Client, repo, monkeypatch
) -> None:
    monkeypatch.setattr(log_sets, "FILES_PER_PAGE", 4)
    tracker = ChangesTracker(repo / LOG, PHASE)
    for i in range(7):
        write(repo, f"pages/p{i}.txt", f"page {i} before\n")
        tracker.record_modify(repo / f"pages/p{i}.txt")
        write(repo, f"pages/p{i}.txt", f"page {i} after\n")
    for i in range(3):
        write(repo, f"made/n{i}.txt", f"made {i}\n")
        tracker.record_create(repo / f"made/n{i}.txt")

    html = viewer.get(_log_url()).content.decode()
    shown = re.findall(r'<span class="aname">([^<]+)</span>', html)
    assert shown == [f"pages/p{i}.txt" for i in range(4)]
    assert "4 of 10 files shown" in html and "Show the next 4 files" in html

    pages = [html]
    while match := re.search(r'hx-get="([^"]*/files/\?start=\d+)"', pages[-1]):
        pages.append(viewer.get(match.group(1)).content.decode())
    names = [n for page in pages for n in re.findall(r'<span class="aname">([^<]+)</span>', page)]
    assert names == [f"pages/p{i}.txt" for i in range(7)] + [f"made/n{i}.txt" for i in range(3)]
    assert 'aria-label="pages/p6.txt"' in pages[1] and "made 2" in pages[2]
    assert "Show the next 2 files" in pages[1] and "10 of 10" not in pages[2]
    assert len(pages) == 3


# ------------------------------------------------------------------------------- 404s


@pytest.mark.parametrize(
    "path",
    [
        "/workspaces/nope/",
        "/workspaces/bugfix/logs/nope-changes.json/",
        "/workspaces/bugfix/logs/../",
        "/workspaces/bugfix/logs/..%2F..%2Fetc%2Fpasswd/",
        "/workspaces/bugfix/logs/%2Fetc%2Fpasswd/",
        "/workspaces/bugfix/logs/src%2Fapp.py/",
        "/workspaces/bugfix/logs/README.md/",
        "/workspaces/bugfix/other/.bug-changes.json/",
        "/workspaces/bugfix/undo/..%2F..%2F/",
        "/workspaces/bugfix/undo/../",
        "/workspaces/bugfix/logs/.bug-changes.json%00/",
        "/workspaces/bugfix/logs/.bug-changes.json/files/m9/diff/page/",
        "/workspaces/bugfix/logs/.bug-changes.json/files/..%2F/diff/page/",
        "/workspaces/bugfix/logs/.bug-changes.json/files/x1/diff/context/",
        "/workspaces/bugfix/logs/..%2F.bug-changes.json/restore/",
        "/workspaces/bugfix/logs/..%2F.bug-changes.json/files/",
    ],
)
def test_unknown_names_and_traversal_attempts_answer_404(
    restorer: Client, phase, repo, path: str
) -> None:
    before = snapshot(repo)
    assert restorer.get(path).status_code == 404
    assert restorer.post(path, {"log_sha": "0" * 64}).status_code in (404, 405)
    assert snapshot(repo) == before


# ------------------------------------------------------------------------------- permissions


def test_without_restore_permission_no_button_and_403(viewer: Client, phase, repo) -> None:
    html = viewer.get(_log_url()).content.decode()
    assert "Restore all" not in html
    # Where the button would be, the person is told why it is not there.
    assert (
        "Rolling a workspace back needs the restore permission on every app: ask an admin."
    ) in html
    after_phase = snapshot(repo)
    assert viewer.get(_restore_url()).status_code == 403
    response = viewer.post(_restore_url(), {"log_sha": "0" * 64})
    assert response.status_code == 403
    assert snapshot(repo) == after_phase


def test_without_view_permission_403(phase, db) -> None:
    client = Client()
    client.force_login(_user("nobody"))
    assert client.get(reverse("versions:workspace", args=["bugfix"])).status_code == 403
    assert client.get(_log_url()).status_code == 403


def test_post_without_csrf_token_is_refused(phase, repo, db) -> None:
    client = Client(enforce_csrf_checks=True)
    client.force_login(_user("r2", "view_changeset", "restore_changeset"))
    after_phase = snapshot(repo)
    sha = _log_sha(client)
    response = client.post(_restore_url(), {"log_sha": sha}, headers={"HX-Request": "true"})
    assert response.status_code == 403
    assert snapshot(repo) == after_phase
    # With the token the dialog carries, the same request works.
    dialog = client.get(_restore_url(), headers={"HX-Request": "true"}).content.decode()
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', dialog).group(1)
    ok = client.post(
        _restore_url(),
        {"log_sha": sha, "csrfmiddlewaretoken": token},
        headers={"HX-Request": "true"},
    )
    assert ok.status_code == 200


def test_get_never_rolls_back(restorer: Client, phase, repo) -> None:
    after_phase = snapshot(repo)
    restorer.get(_restore_url())
    restorer.get(_restore_url(), headers={"HX-Request": "true"})
    assert snapshot(repo) == after_phase


# ------------------------------------------------------------------------------- Restore all


def test_dialog_shows_the_seeds_confirmation_summary(restorer: Client, phase) -> None:
    html = restorer.get(_restore_url(), headers={"HX-Request": "true"}).content.decode()
    assert html.lstrip().startswith('<dialog class="confirm" id="restore-dialog"')
    prompt = (
        f"Rollback changes from phase &quot;{PHASE}&quot;?\n\nChanges to revert:\n"
        "- Files modified: 2\n- Files created: 1\n- Commands executed: 1\n- Git commits: 1\n\n"
        "This action will:\n1. Restore 2 files from backups\n2. Delete 1 created files\n"
        "3. Revert 1 commands\n4. Revert 1 git commits\n\nProceed with rollback? (yes/no)"
    )
    assert f'<pre class="prompt workspace-prompt">{prompt}</pre>' in html
    assert ">Cancel</button>" in html and ">Confirm restore</button>" in html
    assert "Cannot auto-revert: pytest -x (manual intervention required)" in html


def test_confirm_page_works_without_htmx(restorer: Client, phase) -> None:
    html = restorer.get(_restore_url()).content.decode()
    assert "<!doctype html>" in html and "Confirm restore" in html and ">Cancel</a>" in html


def test_confirm_restore_rolls_back_and_shows_the_report(
    restorer: Client, phase: dict[str, bytes], repo
) -> None:
    response = _confirm(restorer)
    assert response.status_code == 200
    html = response.content.decode()
    assert 'id="dialog-slot" hx-swap-oob="true"' in html
    report = _report(html)
    assert report["success"] is True and report["phase"] == PHASE
    assert report["files_restored"] == 2 and report["files_deleted"] == 1
    assert report["git_commits_reverted"] == 1
    assert report["warnings"] == ["Cannot auto-revert: pytest -x (manual intervention required)"]
    assert "Restored src/app.py from .rollback/src-app.py.backup" in html
    assert "Deleted src/new_helper.py" in html
    assert "Cannot auto-revert: pytest -x" in html
    assert report["undo_log"].startswith(str(repo / ".rollback-undo"))
    assert "Open the undo log" in html
    # Byte for byte the tree before the phase (the log itself aside); the commit is reverted.
    # `.rollback/` stays: the seed removes it only when nothing warned, and `pytest -x` did.
    assert _without_backups(snapshot(repo, ignore=(LOG,))) == phase
    assert (repo / ".rollback/src-app.py.backup").read_text() == APP_V1
    assert git(repo, "status", "--porcelain", "--untracked-files=no") == ""


def test_confirm_without_htmx_renders_the_report_page(
    restorer: Client, phase: dict[str, bytes], repo
) -> None:
    response = _confirm(restorer, htmx=False)
    html = response.content.decode()
    assert response.status_code == 200 and "<!doctype html>" in html
    assert _report(html)["files_restored"] == 2
    assert _without_backups(snapshot(repo, ignore=(LOG,))) == phase


def test_stale_confirmation_does_nothing(restorer: Client, phase, repo) -> None:
    sha = _log_sha(restorer)
    ChangesTracker(repo / LOG, PHASE).record_command("pnpm build")  # the log changes meanwhile
    after = snapshot(repo)
    response = restorer.post(_restore_url(), {"log_sha": sha}, headers={"HX-Request": "true"})
    assert response.status_code == 409
    assert log_sets.STALE_LOG in response.content.decode()
    assert snapshot(repo) == after


def test_refused_log_has_no_restore_and_touches_nothing(restorer: Client, repo, tmp_path) -> None:
    victim = write(tmp_path, "victim.txt", "keep me\n")
    data = {
        "phase": PHASE,
        "timestamp": "2025-10-18T14:30:00Z",
        "files_modified": [],
        "files_created": ["../victim.txt"],
        "commands_executed": [],
        "git_commits": ["--upload-pack=touch /tmp/x"],
    }
    write(repo, LOG, json.dumps(data))
    html = restorer.get(_log_url()).content.decode()
    assert "would be refused" in html and "Restore all" not in html
    assert "&#x27;..&#x27; escapes the workspace" in html or "escapes the workspace" in html
    dialog = restorer.get(_restore_url(), headers={"HX-Request": "true"}).content.decode()
    assert "Confirm restore" not in dialog
    sha = re.search(r'name="log_sha" value="([0-9a-f]{64})"', dialog).group(1)
    response = restorer.post(_restore_url(), {"log_sha": sha}, headers={"HX-Request": "true"})
    assert response.status_code == 422
    assert victim.read_text() == "keep me\n"


def test_the_rollback_can_itself_be_rolled_back_from_its_undo_log(
    restorer: Client, phase: dict[str, bytes], repo
) -> None:
    # The phase's state, then roll it back, then roll the rollback back via the undo log row.
    head_after_phase = git(repo, "rev-parse", "HEAD")
    after_phase = snapshot(repo, ignore=(LOG,))
    report = _report(_confirm(restorer).content.decode())
    stamp = Path(report["undo_log"]).parent.name
    listing = restorer.get(reverse("versions:workspace", args=["bugfix"])).content.decode()
    assert f".rollback-undo/{stamp}/changes.json" in listing
    assert "rolled back" in listing
    undo = _confirm(restorer, stamp, kind="undo")
    assert undo.status_code == 200
    undo_report = _report(undo.content.decode())
    assert undo_report["success"] is True and undo_report["errors"] == []
    now = snapshot(repo, ignore=(LOG,))
    # The phase's files are back (the .rollback/ backups too); the revert commit is reverted.
    assert _without_backups(now) == _without_backups(after_phase)
    assert git(repo, "rev-parse", "HEAD") != head_after_phase
    assert (repo / "docs/notes.md").read_text() == NOTES_V2


def test_a_second_confirmation_while_one_runs_is_refused(restorer: Client, phase, repo) -> None:
    import fcntl

    sha = _log_sha(restorer)
    after_phase = snapshot(repo)
    with open(repo / LOG, "rb") as held:
        fcntl.flock(held.fileno(), fcntl.LOCK_EX)
        response = restorer.post(_restore_url(), {"log_sha": sha}, headers={"HX-Request": "true"})
    assert response.status_code == 409
    assert lock.BUSY in response.content.decode()
    assert snapshot(repo) == after_phase


def test_a_rollback_from_the_panel_records_who_asked(
    restorer: Client, phase: dict[str, bytes], repo, caplog
) -> None:
    with caplog.at_level("INFO", logger="versions.workspace.log_sets"):
        report = _report(_confirm(restorer).content.decode())
    undo_log = json.loads(Path(report["undo_log"]).read_text())
    assert undo_log["metadata"]["requested_by"] == "restorer"
    assert any(
        "workspace rollback" in r.getMessage() and "by restorer: success" in r.getMessage()
        for r in caplog.records
    )
    listing = restorer.get(reverse("versions:workspace", args=["bugfix"])).content.decode()
    assert "Rolled back by</dt><dd>restorer</dd>" in listing
