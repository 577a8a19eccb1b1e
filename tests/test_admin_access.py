"""The admin writes as the signed-in person, through the services, which decide
(docs/architecture.md).

Django's own admin permissions only open the forms; what may be written is the services'
decision on the person's actor: a viewer of an app cannot write it, add apps or revoke its
tokens, whatever admin permissions they hold; the refusal is shown in words, nothing saved.
"""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission
from django.test import Client

from versions import services
from versions.models import PAGE, AgentToken, App, AppMembership, Artifact, RestorePoint

PASSWORD = "x" * 20


def staff(django_user_model, name: str, *codenames: str):
    """A staff user holding the given admin (model) permissions, and no Versions permission."""
    user = django_user_model.objects.create_user(name, password=PASSWORD, is_staff=True)
    user.user_permissions.add(*Permission.objects.filter(codename__in=codenames))
    return user


def signed_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def page_text(response) -> str:
    return response.content.decode()


@pytest.fixture
def viewer(app, django_user_model):
    """A staff member with every admin permission on artifacts, apps and tokens, and only the
    viewer role on the app (so the app has members, and an owner)."""
    owner = django_user_model.objects.create_user("olivia")
    services.add_member(app, role="owner", username=owner.username, by="setup")
    user = staff(
        django_user_model,
        "vera",
        "add_artifact",
        "change_artifact",
        "view_artifact",
        "add_app",
        "change_app",
        "view_app",
        "change_agenttoken",
        "view_agenttoken",
    )
    services.add_member(app, role="viewer", username=user.username, by="setup")
    return user


def add_page(client: Client, app: App, source: str):
    return client.post(
        "/admin/versions/artifact/add/",
        {"app": app.pk, "collection": PAGE, "name": "index", "source": source},
        follow=True,
    )


def test_a_viewer_cannot_write_an_artifact_through_the_admin(app, viewer):
    response = add_page(signed_in(viewer), app, "<h1>by hand</h1>\n")
    text = page_text(response)
    assert response.status_code == 200
    assert "User “vera” may not write to app “quotes”; nothing was written." in text
    assert "That needs the role “owner” on this app (or higher)." in text
    assert "was added successfully" not in text
    assert not Artifact.objects.exists() and not RestorePoint.objects.exists()


def test_an_owner_writes_through_the_admin_as_themselves(app, viewer):
    membership = AppMembership.objects.get(app=app, user=viewer)
    services.change_role(app, membership.pk, "owner", by="setup")
    response = add_page(signed_in(viewer), app, "<h1>by hand</h1>\n")
    assert "was added successfully" in page_text(response)
    point = RestorePoint.objects.get()
    assert (point.requested_by, point.written_by, point.tool) == ("vera", "user:vera", "admin")
    assert Artifact.objects.get().source == "<h1>by hand</h1>"  # the form strips the end


def test_only_a_superuser_adds_an_app_and_a_viewer_cannot_rename_one(
    app, viewer, django_user_model
):
    client = signed_in(viewer)
    added = client.post("/admin/versions/app/add/", {"slug": "new", "name": "New"}, follow=True)
    assert "User “vera” may not add apps" in page_text(added)
    assert not App.objects.filter(slug="new").exists()

    renamed = client.post(f"/admin/versions/app/{app.pk}/change/", {"name": "Renamed"}, follow=True)
    assert "User “vera” may not manage the members or agent tokens of app “quotes”." in (
        page_text(renamed)
    )
    assert App.objects.get(pk=app.pk).name != "Renamed"

    root = django_user_model.objects.create_superuser("root", password=PASSWORD)
    done = signed_in(root).post(
        "/admin/versions/app/add/", {"slug": "new", "name": "New"}, follow=True
    )
    assert "was added successfully" in page_text(done)
    assert App.objects.get(slug="new").name == "New"


def test_a_viewer_cannot_revoke_the_apps_tokens_through_the_admin(app, viewer):
    _token, row = services.create_agent_token("olivia", [app.slug])
    response = signed_in(viewer).post(
        "/admin/versions/agenttoken/",
        {"action": "revoke_selected", "_selected_action": [row.pk]},
        follow=True,
    )
    assert "User “vera” may not manage the members or agent tokens of app “quotes”." in (
        page_text(response)
    )
    assert not AgentToken.objects.get(pk=row.pk).revoked


def test_the_browsers_icon_request_finds_no_icon_not_a_404(client, db):
    """The admin's pages name no icon, so browsers ask for /favicon.ico: an empty answer, not
    a 404 in the console."""
    answer = client.get("/favicon.ico")
    assert answer.status_code == 204 and answer.content == b""
