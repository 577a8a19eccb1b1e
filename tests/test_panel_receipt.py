"""The panel's receipts and small controls say each thing once, and only what applies."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from versions import services
from versions.models import App, ChangeSet, RestorePoint
from versions.views.actions import NO_NAME, REMOVED_NAME

HX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def turn(app: App) -> str:
    """The app with a first version and one agent turn; the turn's change set id."""
    for name, source in (("index", "<h1>Quotes</h1>\n"), ("App", ".a { color: #333; }\n")):
        collection = "pltf_page" if name == "index" else "pltf_stylesheet"
        services.write_artifact(
            app, collection, name, source, requested_by="setup", tool="t", run_id="init"
        )
    agent = {"requested_by": "rvaid", "tool": "agent:write", "run_id": "turn"}
    first = services.write_artifact(app, "pltf_page", "index", "<h1>Approved</h1>\n", **agent)
    services.write_artifact(app, "pltf_stylesheet", "App", ".a { color: red; }\n", **agent)
    return first.change_set_id


@pytest.fixture
def boss(db) -> Client:
    client = Client()
    client.force_login(User.objects.create_superuser("boss", "boss@example.com", "pw-123456"))
    return client


def _url(name: str, *args: str) -> str:
    return reverse(f"versions:{name}", args=("quotes", *args))


def test_clearing_a_name_that_was_never_set_says_there_was_none(boss: Client, turn: str) -> None:
    point = RestorePoint.objects.filter(change_set_id=turn).first()
    assert point is not None
    for url in (_url("name_change_set", turn), _url("name_point", point.id)):
        assert NO_NAME in boss.post(url, {"name": ""}, **HX).content.decode()
        assert "Name saved." in boss.post(url, {"name": "Approve all"}, **HX).content.decode()
        assert REMOVED_NAME in boss.post(url, {"name": "  "}, **HX).content.decode()


def test_a_restore_set_shows_no_release_history_it_cannot_take_part_in(
    boss: Client, turn: str
) -> None:
    services.mark_release(turn, by="boss")
    rs = services.restore_change_set(turn, by="boss").set_id
    assert "Release history" in boss.get(_url("change_set", turn), **HX).content.decode()
    html = boss.get(_url("change_set", rs), **HX).content.decode()
    assert "Release history" not in html and "Mark as release" not in html


def test_receipt_page_says_each_thing_once_and_links_its_points(boss: Client, turn: str) -> None:
    receipt = services.restore_change_set(turn, by="boss")
    html = boss.get(_url("receipt", receipt.set_id)).content.decode()
    main = html.split('<main id="main"', 1)[1].split("<details", 1)[0]  # without the JSON
    assert main.count(f"<code>{receipt.set_id}</code>") == 1
    assert main.count(f"<code>{turn}</code>") == 1
    assert "Receipt JSON" not in main and html.count("Receipt as JSON") == 1
    for item in receipt.as_dict()["items"]:
        for point_id in (item["pointId"], item["counterPointId"]):
            assert f'href="{_url("restore_point", point_id)}"' in main
    assert "Undo this restore" in main and "Undone" not in main


def test_receipt_page_of_an_undone_restore_names_the_undo_instead_of_offering_it(
    boss: Client, turn: str
) -> None:
    first = services.restore_change_set(turn, by="boss").set_id
    undo = services.restore_change_set(first, by="boss").set_id
    assert ChangeSet.objects.get(id=undo).restored_from_id == first
    html = boss.get(_url("receipt", first)).content.decode()
    assert "<strong>Undone</strong> by" in html and f'href="{_url("receipt", undo)}"' in html
    assert "Undo this restore" not in html
    assert "Undo this restore" in boss.get(_url("receipt", undo)).content.decode()


def test_undoing_a_restore_in_its_row_leaves_one_undo_button_the_receipts(
    boss: Client, turn: str
) -> None:
    rs = services.restore_change_set(turn, by="boss").set_id
    html = boss.post(_url("restore_change_set", rs), {"ret": f"set:{rs}"}, **HX).content.decode()
    row = html.split('<div id="dialog-slot"', 1)[0]
    assert "Restored. Receipt" in row
    assert row.count(">Undo this restore</button>") == 1


def test_restore_to_release_is_no_primary_action_when_nothing_differs(
    boss: Client, turn: str
) -> None:
    services.mark_release(turn, by="boss")
    html = boss.get(_url("since_release")).content.decode()
    assert "0 artifacts differ" in html and "Nothing to restore." in html
    assert '<button type="button" disabled' in html
    assert 'class="primary">Restore to release' not in html
    dialog = boss.get(_url("restore_to_release"), **HX).content.decode()
    assert "Nothing to restore" in dialog
    assert 'class="primary">Confirm restore' not in dialog and ">Confirm restore<" in dialog


def test_a_restore_lists_its_artifacts_in_the_order_of_the_set_it_restored(app: App, boss):
    for name in ("a", "b", "c"):  # artifact ids ascend a < b < c
        services.write_artifact(app, "pltf_page", name, f"{name} 1\n", requested_by="s", tool="t")
    agent = {"requested_by": "rvaid", "tool": "t", "run_id": "turn"}
    turn = None
    for name in ("c", "a", "b"):  # the turn writes them in another order
        receipt = services.write_artifact(app, "pltf_page", name, f"{name} 2\n", **agent)
        turn = turn or receipt.change_set_id
    restored = services.restore_change_set(turn, by="boss")
    assert [item.name for item in restored.items] == ["c", "a", "b"]
    for set_id in (turn, restored.set_id):
        page = boss.get(_url("change_set", set_id)).content.decode()
        listed = [page.index(f'aria-label="{name} (Page)"') for name in ("c", "a", "b")]
        assert listed == sorted(listed), set_id
