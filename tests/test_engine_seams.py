"""Seams of the one engine, each through the door where it was found.

- A Restore all dialog that would write nothing (the set was already restored) names no later
  set it "also undoes": nothing is taken away from an artifact that is not written.
- The API lists a set's pruned points in its change-set list as its detail does, and a dry run
  of a set retention emptied is refused exactly as the restore is (409, same problem).
"""

from __future__ import annotations

import pytest
from api_helpers import ApiClient, make_token, make_user
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from versions import services
from versions.models import App, Artifact, ChangeSet, RestorePoint

PAGE = "pltf_page"
HX = {"HTTP_HX_REQUEST": "true"}


def write(app: App, source: str, name: str = "index", run: str = "") -> str:
    receipt = services.write_artifact(
        app, PAGE, name, source, requested_by="agent", tool="t", run_id=run
    )
    return receipt.change_set_id


@pytest.fixture
def boss(db) -> Client:
    client = Client()
    client.force_login(User.objects.create_superuser("boss", "b@example.com", "pw-123456"))
    return client


def test_a_restore_all_dialog_that_writes_nothing_names_no_later_set(app: App, boss: Client):
    write(app, "v0\n", run="setup")
    turn = write(app, "v1\n", run="turn-1")
    later = write(app, "v2\n", run="turn-2")
    url = reverse("versions:restore_change_set", args=[app.slug, turn])
    ret = {"ret": f"set:{turn}"}

    first = boss.get(url, ret, **HX).content.decode()
    assert "This also undoes later work" in first and later in first  # the first one does

    boss.post(url, ret, **HX)  # Restore all: index back to v0, behind a restore set
    restore_set = ChangeSet.objects.get(kind=ChangeSet.RESTORE).id
    assert Artifact.objects.get(app=app, name="index").source == "v0\n"

    again = boss.get(url, ret, **HX).content.decode()
    assert "Every artifact already matches the state before this set" in again
    assert "also undoes" not in again
    assert restore_set not in again and later not in again


def test_a_restore_all_dialog_names_no_later_set_whose_work_is_gone_already(app: App, boss: Client):
    """A later set that was reverted (or written back) left nothing on the artifact: Restore
    all takes nothing of it away, so the dialog does not say it "also undoes" it — nor the
    revert. A later set whose work is still there is named."""
    write(app, "v0\n", run="setup")
    write(app, "a0\n", name="about", run="setup")
    turn = write(app, "v1\n", run="turn-1")
    write(app, "a1\n", name="about", run="turn-1")
    reverted = write(app, "v2\n", run="turn-2")
    revert = services.revert_change_set(reverted, by="boss").set_id
    kept = write(app, "a2\n", name="about", run="turn-3")
    assert Artifact.objects.get(app=app, name="index").source == "v1\n"  # what turn-1 left
    url = reverse("versions:restore_change_set", args=[app.slug, turn])

    dialog = boss.get(url, {"ret": f"set:{turn}"}, **HX).content.decode()

    assert "This also undoes later work" in dialog and kept in dialog
    assert reverted not in dialog and revert not in dialog
    preview = services.restore_change_set(turn, by="p", dry_run=True).as_dict()
    assert preview["laterChanges"] == [{"name": "about", "collection": PAGE, "sets": [kept]}]


def test_a_restore_all_dry_run_lists_later_sets_only_for_what_it_writes(app: App):
    write(app, "v0\n", run="setup")
    write(app, "a0\n", name="about", run="setup")
    turn = services.write_artifact(
        app, PAGE, "index", "v1\n", requested_by="agent", tool="t", run_id="turn-1"
    ).change_set_id
    write(app, "a1\n", name="about", run="turn-1")
    later = write(app, "a2\n", name="about", run="turn-2")
    write(app, "a1\n", name="about", run="turn-3")  # about back to what the set left
    services.write_artifact(app, PAGE, "about", "a0\n", requested_by="p", tool="t", run_id="x")

    preview = services.restore_change_set(turn, by="p", dry_run=True).as_dict()

    assert [i["name"] for i in preview["items"]] == ["index"]
    assert [s["name"] for s in preview["skipped"]] == ["about"]
    assert "laterChanges" not in preview and later not in str(preview)


# --- a set retention emptied (PostgreSQL: the pruner leaves it to the next batch) ----------


@pytest.fixture
def emptied(settings) -> tuple[App, str]:
    """An app at its limit of 2 whose oldest set's only point was pruned: (app, that set)."""
    settings.VERSIONS_POINTS_PER_APP = 2
    settings.VERSIONS_SWEEP_BATCH = 16
    app = App.objects.create(slug="pruned", name="Pruned")
    write(app, "v0\n")
    gone = write(app, "v1\n")
    write(app, "v2\n")
    write(app, "v3\n", run="kept")  # prunes the first two writes' points
    assert not RestorePoint.objects.filter(change_set_id=gone).exists()
    assert ChangeSet.objects.filter(id=gone).exists()  # owed to the next batch
    return app, gone


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_the_api_lists_a_sets_pruned_points_as_its_detail_does(emptied):
    app, gone = emptied
    make_user("owner", can_restore=True, is_superuser=True)
    api = ApiClient(make_token("owner", app.slug))

    listed = {s["id"]: s for s in api.get(f"/apps/{app.slug}/change-sets").json()["items"]}
    detail = api.get(f"/change-sets/{gone}").json()
    assert listed[gone]["pruned"] == detail["pruned"] and len(detail["pruned"]) == 1
    assert listed[gone]["points"] == 0
    [kept] = [s for s in listed.values() if s["run_id"] == "kept"]
    assert kept["pruned"] == [] and kept["points"] == 1


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_dry_run_of_an_emptied_set_is_refused_as_the_restore_is(emptied):
    app, gone = emptied
    make_user("owner", can_restore=True, is_superuser=True)
    api = ApiClient(make_token("owner", app.slug))

    for action in ("restore", "revert"):
        dry = api.post(f"/change-sets/{gone}/{action}", {"dry_run": True})
        real = api.post(f"/change-sets/{gone}/{action}")

        assert (dry.status_code, real.status_code) == (409, 409), (action, dry.content)
        assert dry.json()["error"] == real.json()["error"] == "preflight_failed"
        assert dry.json()["findings"] == real.json()["findings"]
        assert dry.json()["message"] == real.json()["message"]
    assert Artifact.objects.get(app=app).source == "v3\n"
