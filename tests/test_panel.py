"""The Versions panel through Django's test client: pages, fragments, permissions, CSRF."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission, User
from django.test import Client
from django.urls import reverse

from versions import services
from versions.models import App

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
