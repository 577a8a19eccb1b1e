"""Revert this set through the doors (docs/architecture.md#revert): the panel's button and dialog,
the API's endpoint; Restore all's dialog names the later work it would also undo."""

from __future__ import annotations

import re

import pytest
from api_helpers import ApiClient, make_token, make_user
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from versions import services
from versions.models import App, Artifact, ChangeSet

BASE = "".join(f"line {i}\n" for i in range(1, 9))


def _history(app: App) -> dict:
    services.write_artifact(
        app, "pltf_page", "doc", BASE, requested_by="setup", tool="t", run_id="0"
    )
    turn = services.write_artifact(
        app,
        "pltf_page",
        "doc",
        BASE.replace("line 2\n", "line two\n"),
        requested_by="agent-a",
        tool="t",
        run_id="1",
    )
    later = services.write_artifact(
        app,
        "pltf_page",
        "doc",
        BASE.replace("line 2\n", "line two\n").replace("line 7\n", "line seven\n"),
        requested_by="agent-b",
        tool="t",
        run_id="2",
    )
    return {"turn": turn.change_set_id, "later": later.change_set_id}


def _source(app: App) -> str:
    return Artifact.objects.get(app=app, name="doc").source


@pytest.fixture
def boss() -> Client:
    client = Client()
    client.force_login(User.objects.create_superuser("boss", password=None))
    return client


def test_the_panel_offers_revert_this_set_and_reverts_with_a_receipt(app, boss):
    ids = _history(app)
    expanded = boss.get(
        reverse("versions:change_set", args=["quotes", ids["turn"]]), HTTP_HX_REQUEST="true"
    )
    assert "Revert this set" in expanded.content.decode()
    url = reverse("versions:revert_change_set", args=["quotes", ids["turn"]])
    dialog = boss.get(url, HTTP_HX_REQUEST="true").content.decode()
    assert "Revert this set" in dialog and ">Confirm revert</button>" in dialog
    done = boss.post(url, {"ret": f"set:{ids['turn']}"}, HTTP_HX_REQUEST="true")
    assert done.status_code == 200 and "Reverted" in done.content.decode()
    assert _source(app) == BASE.replace("line 7\n", "line seven\n")
    rs = ChangeSet.objects.filter(kind=ChangeSet.RESTORE).get()
    assert rs.receipt["kind"] == "revert" and rs.receipt["revertedSet"] == ids["turn"]


def test_the_revert_dialog_speaks_of_revert_only_and_its_button_confirms_the_revert(app, boss):
    ids = _history(app)  # a later set changed the same artifact
    url = reverse("versions:revert_change_set", args=["quotes", ids["turn"]])
    for dialog in (
        boss.get(url, HTTP_HX_REQUEST="true").content.decode(),
        boss.get(url).content.decode(),  # the dialog as a page, without JavaScript
    ):
        assert "this set's changes taken back, later work kept" in dialog
        assert "This also undoes later work" not in dialog
        assert "also undoes" not in dialog and "instead" not in dialog
        assert ">Confirm revert</button>" in dialog and "Confirm restore" not in dialog
        assert "so this revert can itself be undone" in dialog and "Restoring…" not in dialog
    fields = dict(re.findall(r'<input type="hidden" name="(ret|expected)" value="([^"]*)"', dialog))
    done = boss.post(url, fields)
    assert done.status_code == 302 and _source(app) == BASE.replace("line 7\n", "line seven\n")


def test_restore_alls_dialog_names_the_later_sets_it_would_also_undo(app, boss):
    ids = _history(app)
    url = reverse("versions:restore_change_set", args=["quotes", ids["turn"]])
    dialog = boss.get(url, HTTP_HX_REQUEST="true").content.decode()
    assert "This also undoes later work" in dialog
    assert (
        f'also undoes <a href="/apps/quotes/versions/change-sets/{ids["later"]}/"><code>{ids["later"]}</code></a>'
        in dialog
    )
    assert "by agent-b" in dialog
    assert ">Confirm restore</button>" in dialog and "Confirm revert" not in dialog


def test_the_api_reverts_and_refuses_a_conflict_with_nothing_written(app):
    ids = _history(app)
    make_user("rvaid", can_restore=True)
    api = ApiClient(make_token("rvaid", "quotes"))
    # A later set that changes the same line as the turn: a conflict, nothing written.
    services.write_artifact(
        app,
        "pltf_page",
        "doc",
        _source(app).replace("line two\n", "line 2, again\n"),
        requested_by="agent-c",
        tool="t",
        run_id="3",
    )
    before = _source(app)
    refused = api.post(f"/change-sets/{ids['turn']}/revert", {})
    assert refused.status_code == 409 and refused.json()["kind"] == "preflight_failed"
    assert _source(app) == before
    dry = api.post(f"/change-sets/{ids['later']}/revert", {"dry_run": True})
    assert dry.status_code == 200 and dry.json()["kind"] == "dry_run"
    done = api.post(f"/change-sets/{ids['later']}/revert", {})
    assert done.status_code == 200 and done.json()["kind"] == "revert"
    assert "line seven" not in _source(app) and "line 2, again" in _source(app)


def test_a_reverted_or_restored_set_names_what_acted_on_it_in_the_api_and_the_panel(app, boss):
    ids = _history(app)
    make_user("rvaid", can_restore=True)
    api = ApiClient(make_token("rvaid", "quotes"))
    untouched = api.get(f"/change-sets/{ids['later']}").json()
    assert untouched["revertedBy"] is None and untouched["restoredBy"] is None
    reverted = api.post(f"/change-sets/{ids['turn']}/revert", {}).json()["setId"]
    restored = api.post(f"/change-sets/{ids['later']}/restore", {}).json()["setId"]
    turn = api.get(f"/change-sets/{ids['turn']}").json()
    assert turn["revertedBy"] == reverted and turn["restoredBy"] is None
    later = api.get(f"/change-sets/{ids['later']}").json()
    assert later["restoredBy"] == restored and later["revertedBy"] is None
    receipt = reverse("versions:receipt", args=["quotes", reverted])
    page = boss.get(reverse("versions:change_set", args=["quotes", ids["turn"]])).content.decode()
    assert f'Reverted by <a href="{receipt}"><code>{reverted}</code></a>' in page
    assert "Restored by" not in page
    page = boss.get(reverse("versions:change_set", args=["quotes", ids["later"]])).content.decode()
    receipt = reverse("versions:receipt", args=["quotes", restored])
    assert f'Restored by <a href="{receipt}"><code>{restored}</code></a>' in page
    assert "Reverted by" not in page


def test_a_token_without_the_restore_permission_may_not_revert(app):
    ids = _history(app)
    make_user("agent")
    api = ApiClient(make_token("agent", "quotes"))
    assert api.post(f"/change-sets/{ids['turn']}/revert", {}).status_code == 403


def test_an_expanded_set_shows_what_it_did_by_default_and_then_to_now_on_request(app, boss):
    ids = _history(app)  # the turn changed line 2; a later set changed line 7
    url = reverse("versions:change_set", args=["quotes", ids["turn"]])
    own = boss.get(url, HTTP_HX_REQUEST="true").content.decode()
    assert "What this set did, per artifact" in own
    assert "seven" not in own  # the later set's edit is not part of this set
    assert (
        'title="Lines added and removed by this set"><span class="add">+1</span> <span class="del">−1</span>'
        in own
    )
    now = boss.get(url + "?view=now", HTTP_HX_REQUEST="true").content.decode()
    assert "Then → now, per artifact" in now and "seven" in now
    assert '<span class="add">+2</span> <span class="del">−2</span>' in now


def test_the_api_gives_a_sets_diff_in_either_view(app):
    ids = _history(app)
    make_user("rvaid")
    api = ApiClient(make_token("rvaid", "quotes"))
    own = api.get(f"/change-sets/{ids['turn']}", view="set").json()["diff"]
    now = api.get(f"/change-sets/{ids['turn']}", view="now").json()["diff"]
    assert (own["view"], own["lines_added"], own["lines_removed"]) == ("set", 1, 1)
    assert (now["view"], now["lines_added"], now["lines_removed"]) == ("now", 2, 2)
    assert own["artifacts"] == [
        {
            "collection": "pltf_page",
            "name": "doc",
            "change": "changed",
            "lines_added": 1,
            "lines_removed": 1,
            "reason": None,
        }
    ]
    assert api.get(f"/change-sets/{ids['turn']}", view="later").status_code == 422
