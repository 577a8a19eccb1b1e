"""The audit trail: one hash chain of events, appended in the action's transaction; the check
(``verify_audit``) names the first event altered, inserted or missing; the export writes JSON
lines."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command
from django.db import connection, transaction

from versions import services
from versions.audit_chain import GENESIS, canonical_json, event_document, event_hash
from versions.models import App, AuditChainHead, AuditEvent

pytestmark = pytest.mark.django_db


@pytest.fixture
def app():
    return App.objects.create(slug="shop", name="Shop")


@pytest.fixture
def trail(app):
    """Four events: two on the app, two on the instance."""
    olga = User.objects.create_user("olga", password=None)
    actor = services.actor_for_user(olga)
    services.record("member_added", actor=actor, app=app, targets=["user:1"], reason="new hire")
    services.record("signed_in", actor=actor, request_meta={"address": "203.0.113.9"})
    services.record("set_named", actor=None, app=app, targets=["cs_rp_1_a"], details={"n": "é"})
    services.record("signed_out", actor=actor)
    return list(AuditEvent.objects.order_by("seq"))


def _verify() -> str:
    out = StringIO()
    call_command("verify_audit", stdout=out)
    return out.getvalue()


def _broken() -> str:
    with pytest.raises(CommandError) as caught:
        _verify()
    assert caught.value.returncode == 1
    return str(caught.value)


def _sql(statement: str, params: list[object]) -> None:
    with connection.cursor() as cursor:
        cursor.execute(statement, params)


def test_each_event_is_hashed_onto_the_one_before_it(trail, app):
    assert [e.seq for e in trail] == [1, 2, 3, 4]
    assert trail[0].prev_hash == GENESIS
    for before, event in zip(trail, trail[1:]):
        assert event.prev_hash == before.hash
    first = trail[0]
    assert first.id.startswith("ae_") and len(first.id.split("_")[2]) == 8
    document = {
        "id": first.id,
        "seq": 1,
        "app": "shop",
        "actor": {"kind": "user", "name": "olga"},
        "action": "member_added",
        "targets": ["user:1"],
        "reason": "new hire",
        "details": {},
        "address": "",
        "user_agent": "",
        "created_on": first.created_on.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
    }
    assert first.document("shop") == document
    # The recipe, spelled out: sha256 of prev_hash + sorted, spaceless UTF-8 JSON.
    import hashlib

    raw = json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert first.hash == hashlib.sha256((GENESIS + raw).encode("utf-8")).hexdigest()
    assert canonical_json(trail[2].document("shop")).count("é".encode()) == 1
    assert AuditChainHead.objects.get().seq == 4


def test_an_intact_chain_is_reported_with_its_count(trail):
    assert _verify().strip() == "4 events, chain intact"


def test_a_changed_event_is_named_as_altered(trail):
    _sql("UPDATE versions_auditevent SET reason = %s WHERE seq = 1", ["no reason"])
    message = _broken()
    assert f"Event {trail[0].id} (#1) was altered" in message


def test_a_changed_event_with_its_hash_recomputed_is_still_found(trail):
    event = trail[1]
    event.address = "198.51.100.1"
    forged = event_hash(event.prev_hash, event.document(None))
    _sql(
        "UPDATE versions_auditevent SET address = %s, hash = %s WHERE seq = 2",
        [event.address, forged],
    )
    message = _broken()
    assert f"Event {trail[1].id} (#2) was altered" in message


def test_a_deleted_event_is_named_as_missing(trail):
    _sql("DELETE FROM versions_auditevent WHERE seq = 2", [])
    message = _broken()
    assert f"Event #2 is missing: event {trail[2].id} (#3) follows" in message


def test_a_deleted_latest_event_is_named_as_missing(trail):
    _sql("DELETE FROM versions_auditevent WHERE seq = 4", [])
    assert "Event #4 is missing" in _broken()


def _shift_after(seq: int) -> None:
    """Make room for a forged event after ``seq`` (two steps: seq is unique)."""
    _sql("UPDATE versions_auditevent SET seq = -seq WHERE seq > %s", [seq])
    _sql("UPDATE versions_auditevent SET seq = 1 - seq WHERE seq < 0", [])


def _insert(seq: int, prev_hash: str, *, recipe: bool) -> str:
    """Insert an event by hand at ``seq`` (its hash made with the recipe, or made up)."""
    ident = "ae_zzzzzzzz_forged00"
    created = AuditEvent.objects.get(seq=1).created_on
    document = event_document(
        id=ident,
        seq=seq,
        app=None,
        actor_kind="user",
        actor_name="mallory",
        action="member_added",
        targets=[],
        reason="",
        details={},
        address="",
        user_agent="",
        created_on=created,
    )
    digest = event_hash(prev_hash, document) if recipe else "f" * 64
    _sql(
        "INSERT INTO versions_auditevent (id, seq, app_id, actor_kind, actor_name, "
        "actor_user_id, actor_token_id, action, targets, reason, details, address, "
        "user_agent, created_on, prev_hash, hash) VALUES "
        "(%s, %s, NULL, 'user', 'mallory', NULL, NULL, 'member_added', '[]', '', '{}', '', "
        "'', %s, %s, %s)",
        [ident, seq, created, prev_hash, digest],
    )
    return ident


def test_an_inserted_event_made_with_the_recipe_is_named_as_inserted(trail):
    _shift_after(2)
    forged = _insert(3, trail[1].hash, recipe=True)
    message = _broken()
    assert f"Event {forged} (#3) was inserted" in message


def test_an_inserted_event_with_a_made_up_hash_is_named_as_inserted(trail):
    _shift_after(1)
    forged = _insert(2, trail[0].hash, recipe=False)
    assert f"Event {forged} (#2) was inserted" in _broken()


def test_an_event_inserted_after_the_latest_is_named_as_inserted(trail):
    forged = _insert(5, trail[3].hash, recipe=True)
    message = _broken()
    assert f"Event {forged} (#5) was inserted" in message and "latest event (#4)" in message


def test_an_empty_trail_is_intact():
    assert _verify().strip() == "0 events, chain intact"


def test_an_event_is_recorded_in_the_actions_transaction(app):
    with pytest.raises(RuntimeError), transaction.atomic():
        services.record("member_added", actor=None, app=app)
        raise RuntimeError("the action failed")
    assert not AuditEvent.objects.exists()
    services.record("member_added", actor=None, app=app)
    assert AuditEvent.objects.get().seq == 1
    assert _verify().strip() == "1 events, chain intact"


def test_the_export_writes_json_lines_filtered_by_app_and_time(trail, app):
    out = StringIO()
    call_command("export_audit", stdout=out)
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [line["seq"] for line in lines] == [1, 2, 3, 4]
    assert lines[1]["address"] == "203.0.113.9" and lines[1]["app"] is None
    assert lines[2]["details"] == {"n": "é"}
    assert all(
        line["hash"]
        == event_hash(line["prev_hash"], {k: v for k, v in line.items() if "hash" not in k})
        for line in lines
    )
    out = StringIO()
    call_command("export_audit", "--app", "shop", stdout=out)
    assert [json.loads(line)["action"] for line in out.getvalue().splitlines()] == [
        "member_added",
        "set_named",
    ]
    later = trail[2].created_on.isoformat()
    out = StringIO()
    call_command("export_audit", "--since", later, stdout=out)
    assert [json.loads(line)["seq"] for line in out.getvalue().splitlines()] == [3, 4]
    with pytest.raises(CommandError, match="There is no app"):
        call_command("export_audit", "--app", "nope", stdout=StringIO())
    with pytest.raises(CommandError, match="ISO date"):
        call_command("export_audit", "--since", "yesterday", stdout=StringIO())
