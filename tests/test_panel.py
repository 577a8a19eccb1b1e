"""The Versions panel through Django's test client: pages, fragments, permissions, CSRF."""

from __future__ import annotations

import json
import re
from io import StringIO

import pytest
from django.contrib.auth.models import Permission, User
from django.core.management import call_command
from django.test import Client
from django.test.utils import override_settings
from django.urls import reverse

from versions import services
from versions.models import App, ChangeSet

XSS = "</textarea><script>alert(1)</script><img src=x onerror=alert(2)>"
PAGE_V1 = "<h1>Quotes</h1>\n<p>Waiting for approval.</p>\n" + "".join(
    f"<li>row {i}</li>\n" for i in range(40)
)
PAGE_V2 = PAGE_V1.replace("Waiting for approval.", "Approved automatically after 24 hours.")
CSS_V1 = "".join(f".c{i} {{ color: #333; }}\n" for i in range(60))
CSS_V2 = CSS_V1.replace(".c30 { color: #333; }", ".c30 { color: red; }")


def _user(username: str, *codenames: str, superuser: bool = False) -> User:
    if superuser:
        return User.objects.create_superuser(username, f"{username}@example.com", "pw-123456")
    user = User.objects.create_user(username, password="pw-123456")
    perms = Permission.objects.filter(content_type__app_label="versions", codename__in=codenames)
    user.user_permissions.add(*perms)
    return user


@pytest.fixture
def demo(app: App) -> dict:
    """The app with a first version and one agent turn changing the page and the stylesheet."""
    services.write_artifact(
        app, "pltf_page", "index", PAGE_V1, requested_by="setup", tool="t:setup", run_id="init"
    )
    services.write_artifact(
        app, "pltf_stylesheet", "App", CSS_V1, requested_by="setup", tool="t:setup", run_id="init"
    )
    r1 = services.write_artifact(
        app,
        "pltf_page",
        "index",
        PAGE_V2,
        requested_by="rvaid",
        tool="devzone-agent:write_page",
        run_id="turn-1",
    )
    services.write_artifact(
        app,
        "pltf_stylesheet",
        "App",
        CSS_V2,
        requested_by="rvaid",
        tool="devzone-agent:write_stylesheet",
        run_id="turn-1",
    )
    return {"app": app, "set_id": r1.change_set_id, "point_id": r1.restore_point_id}


@pytest.fixture
def admin_client(db) -> Client:
    client = Client()
    client.force_login(_user("boss", superuser=True))
    return client


@pytest.fixture
def viewer_client(db) -> Client:
    client = Client()
    client.force_login(_user("viewer", "view_changeset"))
    return client


def _url(name: str, *args: str) -> str:
    return reverse(f"versions:{name}", args=args)


def test_login_required_redirects_to_sign_in(client: Client, demo: dict) -> None:
    response = client.get(_url("change_sets", "quotes"))
    assert response.status_code == 302
    assert response["Location"].startswith("/accounts/login/")


def test_sign_in_page_has_username_and_password(client: Client, db) -> None:
    html = client.get("/accounts/login/").content.decode()
    assert 'name="username"' in html and 'name="password"' in html


def test_home_lists_apps_and_workspaces_section(admin_client: Client, demo: dict) -> None:
    html = admin_client.get("/").content.decode()
    assert "Quote approvals" in html
    assert 'id="workspaces"' in html or "Workspaces" in html


def test_change_sets_tab_shows_rows(admin_client: Client, demo: dict) -> None:
    html = admin_client.get(_url("change_sets", "quotes")).content.decode()
    assert "Change sets" in html and "Restore points" in html
    assert demo["set_id"] in html
    assert "Unnamed" in html
    assert "devzone-agent:write_page" in html


def test_expanded_set_shows_both_diffs(admin_client: Client, demo: dict) -> None:
    response = admin_client.get(
        _url("change_set", "quotes", demo["set_id"]), HTTP_HX_REQUEST="true"
    )
    html = response.content.decode()
    assert response.status_code == 200
    assert html.lstrip().startswith(f'<li class="row set expanded" id="set-{demo["set_id"]}"')
    assert "Approved automatically after 24 hours" in html
    assert '<ins class="w-ins">red</ins>' in html
    assert "Restore all" in html and "Save name" in html and "Mark as release" in html
    assert "unchanged lines" in html


def test_xss_source_is_text_everywhere(admin_client: Client, app: App) -> None:
    services.write_artifact(
        app, "pltf_page", XSS[:60].replace("/", "-"), "safe\n", requested_by=XSS, tool=XSS
    )
    r = services.write_artifact(
        app, "pltf_page", XSS[:60].replace("/", "-"), XSS + "\n", requested_by=XSS, tool=XSS
    )
    pages = [
        admin_client.get(_url("change_sets", "quotes")),
        admin_client.get(_url("change_set", "quotes", r.change_set_id)),
        admin_client.get(_url("restore_points", "quotes")),
        admin_client.get(_url("restore_point", "quotes", r.restore_point_id)),
    ]
    for response in pages:
        html = response.content.decode()
        assert response.status_code == 200
        assert "<script>alert" not in html
        assert "<img src=x" not in html
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html


def test_restore_all_without_htmx_redirects_to_the_receipt_page_and_json(
    admin_client: Client, demo: dict
) -> None:
    url = _url("restore_change_set", "quotes", demo["set_id"])
    confirm = admin_client.get(url)  # the confirmation as a page when JavaScript is off
    html = confirm.content.decode()
    assert confirm.status_code == 200
    assert "Confirm restore" in html and "Cancel" in html and "index" in html and "App" in html
    response = admin_client.post(url)
    assert response.status_code == 302
    rs = ChangeSet.objects.get(kind="restore")
    assert response["Location"] == _url("receipt", "quotes", rs.id)
    page = admin_client.get(response["Location"]).content.decode()
    assert "Undo this restore" in page and rs.receipt["items"][0]["counterPointId"] in page
    data = json.loads(admin_client.get(_url("receipt_json", "quotes", rs.id)).content)
    assert data == rs.receipt
    assert set(data) >= {
        "setId",
        "kind",
        "restoredFromSet",
        "items",
        "skipped",
        "created_by",
        "created_on",
    }
    assert {"name", "collection", "pointId", "counterPointId", "chars"} <= set(data["items"][0])


def test_htmx_confirm_shows_receipt_in_place_then_the_noop_sentence(
    admin_client: Client, demo: dict
) -> None:
    url = _url("restore_change_set", "quotes", demo["set_id"])
    hx = {"HTTP_HX_REQUEST": "true"}
    dialog = admin_client.get(url, {"ret": f"set:{demo['set_id']}"}, **hx).content.decode()
    assert dialog.lstrip().startswith('<dialog class="confirm" id="restore-dialog"')
    assert f'hx-target="#set-{demo["set_id"]}"' in dialog
    expected = [
        line.split('value="')[1].split('"')[0]
        for line in dialog.splitlines()
        if 'name="expected"' in line
    ]
    assert expected and all("=" in e for e in expected)
    first = admin_client.post(
        url, {"ret": f"set:{demo['set_id']}", "expected": expected}, **hx
    ).content.decode()
    assert first.lstrip().startswith(f'<li class="row set expanded" id="set-{demo["set_id"]}"')
    assert "Restored." in first and 'id="dialog-slot" hx-swap-oob="true"' in first
    assert 'hx-swap-oob="afterbegin:#set-list-items"' in first
    second = admin_client.post(url, {"ret": f"set:{demo['set_id']}"}, **hx).content.decode()
    assert (
        "Every artifact already matched the state before this set — nothing was written." in second
    )
    assert ChangeSet.objects.filter(kind="restore").count() == 1


def test_diff_pages_and_gap_expanders_load_on_demand(admin_client: Client, app: App) -> None:
    old = "".join(f"line {i}\n" for i in range(3000))
    new = "".join(f"line {i}{' changed' if i % 50 == 0 else ''}\n" for i in range(3000))
    services.write_artifact(app, "pltf_stylesheet", "Big", old, requested_by="a", tool="t")
    r = services.write_artifact(app, "pltf_stylesheet", "Big", new, requested_by="a", tool="t")
    hx = {"HTTP_HX_REQUEST": "true"}
    html = admin_client.get(
        _url("restore_point", "quotes", r.restore_point_id), **hx
    ).content.decode()
    assert "Show more hunks" in html and html.count('<tbody class="hunk">') == 20
    sha = app.artifacts.get(name="Big").sha256
    more = admin_client.get(
        _url("diff_page", "quotes", r.restore_point_id), {"page": 2, "now": sha}, **hx
    ).content.decode()
    assert more.count('<tbody class="hunk">') == 20 and "Show more hunks" in more
    ctx = admin_client.get(
        _url("diff_context", "quotes", r.restore_point_id),
        {"old": 5, "new": 5, "count": 43, "now": sha},
        **hx,
    ).content.decode()
    assert ctx.startswith('<tbody class="ctx">') and ctx.count("<tr") == 43
    # the line numbers (links that open a line comment form, for a person who may review)
    assert re.search(
        r'<td class="ln">(<a [^>]*>)?5(</a>)?</td><td class="ln">(<a [^>]*>)?5(</a>)?</td>', ctx
    )
    stale = admin_client.get(
        _url("diff_context", "quotes", r.restore_point_id),
        {"old": 5, "new": 5, "count": 43, "now": "0" * 64},
        **hx,
    ).content.decode()
    assert "changed since the diff was shown" in stale


@override_settings(VERSIONS_MAX_STORED_BYTES=10)
def test_not_stored_added_and_tombstone_are_explained_in_words(
    admin_client: Client, app: App
) -> None:
    created = services.write_artifact(
        app, "pltf_page", "new", "a fresh page\n", requested_by="a", tool="t"
    )
    services.write_artifact(app, "pltf_page", "big", "x" * 50 + "\n", requested_by="a", tool="t")
    big = services.write_artifact(app, "pltf_page", "big", "y\n", requested_by="a", tool="t")
    services.write_artifact(app, "pltf_page", "gone", "short\n", requested_by="a", tool="t")
    gone = services.delete_artifact(app, "pltf_page", "gone", requested_by="a", tool="t")
    hx = {"HTTP_HX_REQUEST": "true"}

    def point(pid: str) -> str:
        return admin_client.get(_url("restore_point", "quotes", pid), **hx).content.decode()

    assert "Created by this change" in point(created.restore_point_id)
    assert "over the 10 bytes storage limit, so it was not stored" in point(big.restore_point_id)
    assert 'title="Over the 10 bytes limit:' in point(big.restore_point_id)  # the badge's words
    assert "now a tombstone" in point(gone.restore_point_id)


@override_settings(VERSIONS_POINTS_PER_APP=2)
def test_a_pruned_state_is_explained_with_the_apps_own_limit(admin_client: Client, app: App):
    def write(name: str, run_id: str = "") -> str:
        receipt = services.write_artifact(
            app, "pltf_page", name, f"{name}\n", requested_by="a", tool="t", run_id=run_id
        )
        return receipt.change_set_id

    turn = write("x", "r")
    write("z")
    write("y", "r")
    write("w")  # 4 points, 2 kept: the turn lost its point of x (the oldest)
    page = admin_client.get(_url("change_set", "quotes", turn)).content.decode()
    assert "was pruned by retention (an app keeps its newest 2 unpinned points)" in page


@pytest.mark.django_db
def test_load_demo_prints_a_sign_in_that_works_at_the_address_served(client: Client) -> None:
    """``make run HOST=…`` passes its address on: the printed link and sign-in are right."""
    out = StringIO()
    call_command("load_demo", address="127.0.0.1:8011", stdout=out)
    printed = out.getvalue()
    assert "http://127.0.0.1:8011/accounts/login/" in printed
    username, password = re.search(r"as “([^”]+)” with the password “([^”]+)”", printed).groups()
    signed_in = client.post(
        reverse("login"), {"username": username, "password": password}, follow=True
    )
    assert signed_in.context["user"].username == username
    assert client.get(reverse("versions:change_sets", args=["quote-approvals"])).status_code == 200
