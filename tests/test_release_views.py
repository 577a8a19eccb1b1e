"""The Since release tab through Django's test client: diffs, dialog, receipt, permissions."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth.models import Permission, User
from django.test import Client
from django.urls import reverse

from versions import services
from versions.messages import (
    NOOP_MESSAGE,
)
from versions.models import App, Artifact, ChangeSet, RestorePoint
from versions.selectors import NO_RELEASE
from versions.views.release import ADDED_SINCE, REMOVED_SINCE

XSS = "</textarea><script>alert(1)</script><img src=x onerror=alert(2)>"
PAGE_V1 = "<h1>Quotes</h1>\n" + "".join(f"<li>row {i}</li>\n" for i in range(30))
PAGE_V2 = PAGE_V1.replace("row 12", "row twelve")
PAGE_V3 = PAGE_V2.replace("row 20", f"row {XSS}")


def _user(username: str, *codenames: str) -> User:
    user = User.objects.create_user(username, password="pw-123456")
    perms = Permission.objects.filter(content_type__app_label="versions", codename__in=codenames)
    user.user_permissions.add(*perms)
    return user


def _client(user: User, *, csrf: bool = False) -> Client:
    client = Client(enforce_csrf_checks=csrf)
    client.force_login(user)
    return client


def _write(app: App, name: str, source: str | None, run: str, coll: str = "pltf_page") -> str:
    if source is None:
        r = services.delete_artifact(app, coll, name, requested_by="agent", tool="t", run_id=run)
    else:
        r = services.write_artifact(
            app, coll, name, source, requested_by="agent", tool="t", run_id=run
        )
    return r.change_set_id


@pytest.fixture
def reviewed(app: App) -> dict:
    """A release (index, about, App), then turns: index changed twice, a module created,
    about deleted, the stylesheet changed and changed back."""
    release = _write(app, "index", PAGE_V1, "r")
    _write(app, "about", "About\n", "r")
    _write(app, "App", "a { }\n", "r", "pltf_stylesheet")
    services.mark_release(release, by="rvaid")
    t1 = _write(app, "index", PAGE_V2, "t1")
    _write(app, "App", "a { color: red }\n", "t1", "pltf_stylesheet")
    _write(app, "helper", "export {};\n", "t1", "pltf_frontend_module")
    t2 = _write(app, "index", PAGE_V3, "t2")
    _write(app, "about", None, "t2")
    _write(app, "App", "a { }\n", "t2", "pltf_stylesheet")
    return {"app": app, "release": release, "turns": [t1, t2]}


def _url(app: App, name: str = "since_release") -> str:
    return reverse(f"versions:{name}", args=[app.slug])


def test_since_release_page_shows_the_cumulative_diffs(reviewed):
    app = reviewed["app"]
    client = _client(_user("viewer", "view_changeset"))
    html = client.get(_url(app)).content.decode()
    assert ">Since release</a>" in html
    assert re.search(r'aria-current="page"[^>]*>Since release<', html)
    sections = re.findall(r'<section class="diff diff-(\w+)"[^>]*aria-label="([^"(]+) \(', html)
    assert sorted((name.strip(), status) for status, name in sections) == [
        ("about", "removed"),
        ("helper", "added"),
        ("index", "changed"),
    ]
    # The cumulative diff: v1's "row 12" and v3's escaped line, in one diff.
    assert re.search(r'l-removed">.{0,200}row <del class="w-del">12</del>', html)
    assert re.search(r'l-added">.{0,200}row <ins class="w-ins">twelve</ins>', html)
    assert "<script>alert(1)" not in html and "&lt;script&gt;alert(1)" in html
    assert ADDED_SINCE in html and REMOVED_SINCE in html
    assert "3 artifacts differ" in html
    for set_id in reviewed["turns"]:
        assert f'id="set-{set_id}"' in html
    assert html.index(reviewed["turns"][1]) < html.index(reviewed["turns"][0])
    # A viewer sees no Restore to release button.
    assert "Restore to release</button>" not in html


def test_fragment_for_htmx_is_the_tab_body(reviewed):
    client = _client(_user("viewer", "view_changeset"))
    html = client.get(_url(reviewed["app"]), HTTP_HX_REQUEST="true").content.decode()
    assert html.lstrip().startswith('<div id="tab-body"')
    assert "<html" not in html


def test_no_release_says_so_and_offers_to_mark_one(app):
    _write(app, "index", PAGE_V1, "t")
    client = _client(_user("restorer", "view_changeset", "restore_changeset"))
    html = client.get(_url(app)).content.decode()
    assert "No release marked" in html
    assert NO_RELEASE.format(slug=app.slug) in html
    assert f'href="{reverse("versions:change_sets", args=[app.slug])}"' in html
    assert "Restore to release</button>" not in html


def test_login_and_permissions_are_enforced(reviewed):
    app = reviewed["app"]
    assert "/accounts/login/" in Client().get(_url(app))["Location"]
    nobody = _client(_user("nobody"))
    assert nobody.get(_url(app)).status_code == 403
    viewer = _client(_user("viewer", "view_changeset"))
    assert viewer.get(_url(app, "restore_to_release")).status_code == 403
    points = RestorePoint.objects.count()
    assert viewer.post(_url(app, "restore_to_release")).status_code == 403
    assert RestorePoint.objects.count() == points


def test_csrf_is_required_for_restore(reviewed):
    app = reviewed["app"]
    client = _client(_user("restorer", "view_changeset", "restore_changeset"), csrf=True)
    points = RestorePoint.objects.count()
    assert client.post(_url(app, "restore_to_release")).status_code == 403
    assert RestorePoint.objects.count() == points


def test_dialog_confirm_receipt_noop_and_undo(reviewed):
    app = reviewed["app"]
    client = _client(_user("restorer", "view_changeset", "restore_changeset"))
    page = client.get(_url(app)).content.decode()
    assert "Restore to release</button>" in page
    carried = re.findall(r'name="expected" value="([^"]+)"', page)
    assert len(carried) == 3

    dialog = client.get(
        _url(app, "restore_to_release"), {"expected": carried}, HTTP_HX_REQUEST="true"
    ).content.decode()
    assert '<dialog class="confirm" id="restore-dialog"' in dialog
    assert "Restore to release" in dialog and reviewed["release"] in dialog
    assert ">Cancel</button>" in dialog and ">Confirm restore</button>" in dialog
    for name in ("index", "helper", "about"):
        assert f"<strong>{name}</strong>" in dialog
    assert RestorePoint.objects.filter(kind="counter").count() == 0  # a dry run

    confirm = re.findall(r'name="expected" value="([^"]+)"', dialog)
    response = client.post(
        _url(app, "restore_to_release"), {"expected": confirm}, HTTP_HX_REQUEST="true"
    )
    assert response.status_code == 200
    html = response.content.decode()
    rs = ChangeSet.objects.get(app=app, kind=ChangeSet.RESTORE)
    assert rs.receipt["scope"] == "since_release"
    assert rs.receipt["restoredFromSet"] == reviewed["release"]
    assert f"<code>{rs.id}</code>" in html and "Restored." in html
    assert "Undo this restore" in html
    assert 'id="dialog-slot" hx-swap-oob="true"' in html
    assert "Every artifact matches its state at the release" in html
    assert Artifact.objects.get(app=app, name="index").source == PAGE_V1
    assert Artifact.objects.get(app=app, name="helper").deleted
    assert Artifact.objects.get(app=app, name="about").source == "About\n"

    # A second confirm: the noop sentence, nothing written.
    again = client.post(_url(app, "restore_to_release"), HTTP_HX_REQUEST="true")
    assert NOOP_MESSAGE in again.content.decode()
    assert ChangeSet.objects.filter(kind=ChangeSet.RESTORE).count() == 1

    # Undo this restore: the restore set's own dialog and confirm (the panel's views).
    undo = client.post(
        reverse("versions:restore_change_set", args=[app.slug, rs.id]), {"ret": "page"}
    )
    assert undo.status_code == 302
    assert Artifact.objects.get(app=app, name="index").source == PAGE_V3
    assert Artifact.objects.get(app=app, name="about").deleted


def test_a_refused_preflight_shows_every_finding(reviewed):
    app = reviewed["app"]
    client = _client(_user("restorer", "view_changeset", "restore_changeset"))
    index = Artifact.objects.get(app=app, name="index")
    stale = f"pltf_page/index={index.sha256}"
    _write(app, "index", "changed meanwhile\n", "t3")
    points = RestorePoint.objects.count()
    response = client.post(
        _url(app, "restore_to_release"), {"expected": [stale]}, HTTP_HX_REQUEST="true"
    )
    assert response.status_code == 409
    html = response.content.decode()
    assert "pre-flight refused" in html and "changed since you reviewed it" in html
    assert RestorePoint.objects.count() == points


def test_full_page_flow_without_javascript(reviewed):
    app = reviewed["app"]
    client = _client(_user("restorer", "view_changeset", "restore_changeset"))
    confirm_page = client.get(_url(app, "restore_to_release")).content.decode()
    assert "<html" in confirm_page and "Confirm restore" in confirm_page
    assert f'href="{_url(app)}"' in confirm_page  # Cancel goes back to the tab
    response = client.post(_url(app, "restore_to_release"), {"ret": "page"})
    rs = ChangeSet.objects.get(app=app, kind=ChangeSet.RESTORE)
    assert response.status_code == 302
    assert response["Location"] == reverse("versions:receipt", args=[app.slug, rs.id])


def test_restore_to_release_says_it_changes_the_draft_only_when_the_app_has_production(reviewed):
    """Found in use: Restore all, Restore and Revert said "This changes the draft only.
    Production still serves dp_…" in their dialogs and receipts; Restore to release, the one
    a person reaches for when production looks wrong, said neither."""
    app = reviewed["app"]
    deployment = services.promote(app, by="rvaid", ref=reviewed["turns"][0]).deployment_id
    notice = f"Production still serves {deployment}; promote to ship this."
    client = _client(_user("restorer", "view_changeset", "restore_changeset"))
    dialog = client.get(_url(app, "restore_to_release"), HTTP_HX_REQUEST="true").content.decode()
    assert f"This changes the draft only. {notice}" in dialog
    done = client.post(_url(app, "restore_to_release"), HTTP_HX_REQUEST="true").content.decode()
    assert "Restored." in done and notice in done
    again = client.post(_url(app, "restore_to_release"), HTTP_HX_REQUEST="true").content.decode()
    assert NOOP_MESSAGE in again and notice not in again  # nothing written: nothing to ship


def test_restore_to_release_when_production_serves_the_release_offers_no_promotion(reviewed):
    """With production serving the release, Restore to release brings the draft back to just
    what production serves: the dialog and the receipt say there is nothing to promote."""
    app = reviewed["app"]
    deployment = services.promote(app, by="rvaid", ref=reviewed["release"]).deployment_id
    held = f"Production still serves {deployment}, just what the draft holds"
    client = _client(_user("restorer", "view_changeset", "restore_changeset"))
    dialog = client.get(_url(app, "restore_to_release"), HTTP_HX_REQUEST="true").content.decode()
    assert f"This changes the draft only. {held} afterwards: there is nothing to promote." in dialog
    assert "promote to ship this" not in dialog
    done = client.post(_url(app, "restore_to_release"), HTTP_HX_REQUEST="true").content.decode()
    assert "Restored." in done and f"{held} now: there is nothing to promote." in done
    assert "promote to ship this" not in done
