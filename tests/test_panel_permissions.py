"""Permissions and CSRF of the panel: the server answers 403 and writes nothing."""

from __future__ import annotations

from urllib.parse import quote

import pytest
from django.contrib.auth.models import Permission, User
from django.test import Client
from django.urls import reverse

from versions import services
from versions.models import App, AuditEvent, ChangeSet, ReleaseMark, RestorePoint

PASSWORD = "pw-123456"


def _user(username: str, *codenames: str) -> User:
    user = User.objects.create_user(username, password=PASSWORD)
    user.user_permissions.add(
        *Permission.objects.filter(content_type__app_label="versions", codename__in=codenames)
    )
    return user


@pytest.fixture
def turn(app: App) -> dict:
    services.write_artifact(
        app, "pltf_page", "index", "<p>one</p>\n", requested_by="setup", tool="t", run_id="a"
    )
    r = services.write_artifact(
        app, "pltf_page", "index", "<p>two</p>\n", requested_by="agent", tool="t", run_id="b"
    )
    return {"set_id": r.change_set_id, "point_id": r.restore_point_id}


def _client(user: User, *, csrf: bool = False) -> Client:
    client = Client(enforce_csrf_checks=csrf)
    client.force_login(user)
    return client


def _state() -> tuple:
    return (
        RestorePoint.objects.count(),
        ChangeSet.objects.count(),
        ReleaseMark.objects.count(),
        tuple(ChangeSet.objects.order_by("id").values_list("name", flat=True)),
        tuple(RestorePoint.objects.order_by("id").values_list("name", flat=True)),
    )


def test_a_signed_in_user_without_view_permission_gets_403_in_words(app: App, turn: dict) -> None:
    client = _client(_user("nobody"))
    response = client.get(reverse("versions:change_sets", args=["quotes"]))
    assert response.status_code == 403
    assert "may not view change sets" in response.content.decode()


def test_the_403_of_a_person_who_may_view_nothing_offers_no_loop_back_to_itself(
    app: App, turn: dict
) -> None:
    response = _client(_user("nobody")).get(reverse("versions:home"))
    assert response.status_code == 403
    page = response.content.decode()
    assert "may not view change sets" in page
    assert "Back to the apps" not in page  # that link would lead to this same 403
    assert "Signed in as <strong>nobody</strong>" in page and "sign out" in page


def test_an_in_page_request_after_the_session_expired_sends_the_page_to_sign_in(
    app: App, turn: dict
) -> None:
    """Not the sign-in page swapped into the panel: htmx follows HX-Redirect with the whole
    page, and the sign-in comes back to the page the person was on."""
    panel = reverse("versions:change_sets", args=["quotes"])
    expanded = reverse("versions:change_set", args=["quotes", turn["set_id"]])
    restore = reverse("versions:restore_change_set", args=["quotes", turn["set_id"]])
    before = _state()
    for method, url in (("get", expanded), ("post", restore)):
        response = getattr(Client(), method)(
            url,
            HTTP_HX_REQUEST="true",
            HTTP_HX_CURRENT_URL=f"http://testserver{panel}?page=2",
        )
        assert response.status_code == 204
        assert response["HX-Redirect"] == "/accounts/login/?next=" + quote(f"{panel}?page=2")
    elsewhere = Client().get(
        expanded, HTTP_HX_REQUEST="true", HTTP_HX_CURRENT_URL="https://evil.example/x"
    )
    assert elsewhere["HX-Redirect"] == "/accounts/login/?next=/"
    assert _state() == before
    plain = Client().get(expanded)  # a plain navigation still gets Django's redirect
    assert plain.status_code == 302 and plain["Location"].startswith("/accounts/login/?next=")


@pytest.mark.parametrize(
    ("next_url", "lands_on"),
    [
        ("/apps/quotes/versions/", "/apps/quotes/versions/"),
        ("/apps/quotes/api/go", "/"),  # the live app: agent-written, may redirect anywhere
        ("/apps/quotes/", "/"),
        ("https://evil.example/", "/"),
        ("/no/such/page/", "/"),
    ],
)
def test_signing_in_leads_only_into_the_panel(app: App, next_url: str, lands_on: str) -> None:
    _user("viewer", "view_changeset")
    client = Client()
    response = client.post(
        f"/accounts/login/?next={quote(next_url)}",
        {"username": "viewer", "password": PASSWORD},
    )
    assert response.status_code == 302
    assert response["Location"] == lands_on


def test_viewer_sees_no_restore_name_or_mark_controls(app: App, turn: dict) -> None:
    client = _client(_user("viewer", "view_changeset"))
    html = client.get(
        reverse("versions:change_set", args=["quotes", turn["set_id"]])
    ).content.decode()
    assert turn["set_id"] in html
    for label in ("Restore all", "Save name", "Mark as release", "Undo this restore"):
        assert label not in html, label
    html = client.get(
        reverse("versions:restore_point", args=["quotes", turn["point_id"]])
    ).content.decode()
    assert ">Restore</button>" not in html and "Save name" not in html


def test_editor_without_restore_permission_names_but_cannot_restore(app: App, turn: dict) -> None:
    client = _client(_user("editor", "view_changeset", "change_changeset"))
    html = client.get(
        reverse("versions:change_set", args=["quotes", turn["set_id"]])
    ).content.decode()
    assert "Save name" in html and "Mark as release" in html
    assert "Restore all" not in html


@pytest.mark.parametrize(
    ("name", "key", "data"),
    [
        ("restore_change_set", "set_id", {}),
        ("restore_point_restore", "point_id", {}),
    ],
)
def test_forged_restore_post_without_permission_is_403_and_writes_nothing(
    app: App, turn: dict, name: str, key: str, data: dict
) -> None:
    client = _client(_user("editor", "view_changeset", "change_changeset"))
    before = _state()
    source = app.artifacts.get(name="index").source
    url = reverse(f"versions:{name}", args=["quotes", turn[key]])
    assert client.get(url).status_code == 403  # the dialog, too
    response = client.post(url, data, HTTP_HX_REQUEST="true")
    assert response.status_code == 403
    assert _state() == before
    assert app.artifacts.get(name="index").source == source


@pytest.mark.parametrize(
    ("name", "key"),
    [
        ("name_change_set", "set_id"),
        ("mark_release", "set_id"),
        ("unmark_release", "set_id"),
        ("name_point", "point_id"),
    ],
)
def test_naming_and_marking_without_change_permission_is_403(
    app: App, turn: dict, name: str, key: str
) -> None:
    client = _client(_user("viewer", "view_changeset"))
    before = _state()
    response = client.post(reverse(f"versions:{name}", args=["quotes", turn[key]]), {"name": "x"})
    assert response.status_code == 403
    assert _state() == before


def test_post_without_csrf_token_is_403_and_writes_nothing(
    app: App, turn: dict, django_user_model
) -> None:
    admin = django_user_model.objects.create_superuser("boss", "b@example.com", PASSWORD)
    client = _client(admin, csrf=True)
    before = _state()
    source = app.artifacts.get(name="index").source
    for url, data in [
        (reverse("versions:restore_change_set", args=["quotes", turn["set_id"]]), {}),
        (reverse("versions:restore_point_restore", args=["quotes", turn["point_id"]]), {}),
        (reverse("versions:name_change_set", args=["quotes", turn["set_id"]]), {"name": "x"}),
        (reverse("versions:mark_release", args=["quotes", turn["set_id"]]), {}),
    ]:
        refused = client.post(url, data, HTTP_HX_REQUEST="true")
        assert refused.status_code == 403
        assert "form has expired or was not sent from the panel" in refused.content.decode()
        assert refused["X-Versions-Error"].startswith("This page's form has expired")
    assert _state() == before
    # A plain form POST (no htmx) gets a page that says what happened and leads back.
    panel = reverse("versions:change_sets", args=["quotes"])
    plain = client.post(
        reverse("versions:name_change_set", args=["quotes", turn["set_id"]]),
        {"name": "x"},
        HTTP_REFERER=f"http://testserver{panel}",
    ).content.decode()
    assert "<h1>This form expired</h1>" in plain
    assert f'<a href="http://testserver{panel}">Back to the page</a>' in plain
    assert _state() == before
    assert app.artifacts.get(name="index").source == source
    # With the token from the page's hx-headers the same POST goes through.
    page = client.get(reverse("versions:change_sets", args=["quotes"])).content.decode()
    assert 'hx-headers=\'{"X-CSRFToken": "' in page
    token = client.cookies["csrftoken"].value
    response = client.post(
        reverse("versions:name_change_set", args=["quotes", turn["set_id"]]),
        {"name": "Reviewed"},
        HTTP_HX_REQUEST="true",
        HTTP_X_CSRFTOKEN=token,
    )
    assert response.status_code == 200
    assert ChangeSet.objects.get(id=turn["set_id"]).name == "Reviewed"


def test_restore_with_a_drifted_expected_hash_is_refused_and_lists_the_finding(
    app: App, turn: dict, django_user_model
) -> None:
    admin = django_user_model.objects.create_superuser("boss", "b@example.com", PASSWORD)
    client = _client(admin)
    url = reverse("versions:restore_change_set", args=["quotes", turn["set_id"]])
    seen = app.artifacts.get(name="index").sha256
    # Someone else writes after the person opened the dialog.
    services.write_artifact(
        app, "pltf_page", "index", "<p>three</p>\n", requested_by="other", tool="t"
    )
    before = _state()
    response = client.post(
        url,
        {"expected": f"pltf_page/index={seen}", "ret": f"set:{turn['set_id']}"},
        HTTP_HX_REQUEST="true",
    )
    html = response.content.decode()
    assert response.status_code == 409
    assert "Nothing was written" in html and "changed since you reviewed it" in html
    assert _state() == before
    assert AuditEvent.objects.filter(action="preflight_failed").exists()
