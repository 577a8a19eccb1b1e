"""Portable backups (docs/operations.md#dump-load): ``dump_app`` writes one app's whole history
to an archive, ``load_app`` puts it into another Versions byte for byte, ids kept, and the app's
audit events keep verifying there."""

from __future__ import annotations

import hashlib
import json
import os
import uuid
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
import zstandard
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.management import call_command
from django.core.management.base import CommandError
from manage_helpers import manage

from versions import messages as portable
from versions import services
from versions.audit_chain import GENESIS
from versions.errors import Conflict, InvalidInput
from versions.models import (
    App,
    AppCheck,
    AppMembership,
    AppProtection,
    Artifact,
    ArtifactLock,
    AuditChainHead,
    AuditEvent,
    Blob,
    ChangeSet,
    Comment,
    Deployment,
    DeploymentEntry,
    DeploymentEvent,
    PromotionPolicy,
    ReleaseMark,
    RestorePoint,
    Review,
    SweepDebt,
)
from versions.terms import APP_DUMPED, APP_LOADED

ROOT = Path(__file__).resolve().parent.parent
PAGE, STYLE = "pltf_page", "pltf_stylesheet"

# Builds an app with every kind of history: full copies, compressed copies and deltas, a named
# set, the release mark, a restore set with its receipt, a promotion, members by user and group,
# audit events, and a second app whose events interleave in the chain.
FILL = """
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from versions import services
from versions.models import App

def fill():
    get_user_model().objects.create_user("rita", password="x")
    Group.objects.create(name="ops")
    services.add_app("shop", "Shop")
    services.add_app("other", "Other")
    services.add_member("shop", role="restorer", username="rita")
    services.add_member("shop", role="viewer", group="ops")
    services.add_member("other", role="viewer", username="rita")
    rule = "".join(f".rule-{i} {{ padding: {i}px; margin: {i % 7}px; }}\\n" for i in range(400))
    first = None
    for n in range(6):
        receipt = services.write_artifact(
            "shop", "pltf_stylesheet", "site", rule + f"/* v{n} */\\n", requested_by="agent",
            tool="t", run_id=f"run-{n}",
        )
        services.write_artifact(
            "shop", "pltf_page", "index", f"<h1>Shop {n} é€😀</h1>\\n", requested_by="agent",
            tool="t", run_id=f"run-{n}",
        )
        services.write_artifact("other", "pltf_page", "index", f"o{n}\\n", tool="t")
        first = first or receipt
    services.write_artifact("shop", "pltf_page", "gone", "bye\\n", tool="t", run_id="run-x")
    services.delete_artifact("shop", "pltf_page", "gone", tool="t", run_id="run-x")
    services.name_change_set(first.change_set_id, "Before the sale", by="rita")
    services.mark_release(first.change_set_id, by="rita")
    services.repack_blobs(app_id=App.objects.get(slug="shop").pk)
    services.promote("shop", by="rita", note="first")
    services.restore_change_set(receipt.change_set_id, by="rita")
    services.name_change_set(first.change_set_id, "Before the big sale", by="rita")
    services.promote("shop", by="rita", note="second")
    rita = services.actor_for_user(get_user_model().objects.get(username="rita"))
    services.submit_review(first.change_set_id, verdict="approve", body="Fine **by me**", actor=rita)

fill()
"""

# What the round trip must keep: every artifact's source sha256, every change set's receipt,
# every audit event of the app as the chain hashes it.
FACTS = """
import hashlib, json
from versions.models import App, Artifact, ChangeSet, DeploymentEvent, Review
from versions import selectors

app = App.objects.get(slug="shop")
facts = {
    "sources": {
        f"{a.collection}/{a.name}": hashlib.sha256(a.source.encode()).hexdigest()
        for a in Artifact.objects.filter(app=app)
    },
    "sha256": {f"{a.collection}/{a.name}": a.sha256 for a in Artifact.objects.filter(app=app)},
    "receipts": {cs.id: cs.receipt for cs in ChangeSet.objects.filter(app=app)},
    "promotions": {str(e.pk): e.receipt for e in DeploymentEvent.objects.filter(app=app)},
    "reviews": [
        [r.id, r.change_set_id, r.verdict, r.body, r.author_name, r.points]
        for r in Review.objects.filter(app=app).order_by("id")
    ],
    "events": [
        e for e in selectors.audit_export(app) if e["action"] not in ("app_dumped", "app_loaded")
    ],
}
for e in facts["events"]:
    e.pop("origin_chain", None)
open(OUT, "w").write(json.dumps(facts, sort_keys=True))
"""


def _pg_server_url() -> str | None:
    """The PostgreSQL server to make a scratch database on, or None when none answers."""
    import psycopg

    url = os.environ.get("VERSIONS_TEST_PG_SERVER", "postgres://postgres@127.0.0.1:5432/postgres")
    try:
        with psycopg.connect(url, connect_timeout=3):
            return url
    except psycopg.OperationalError:
        return None


def _facts(database_url: str, out: Path) -> dict[str, Any]:
    manage(database_url, "shell", "-c", f"OUT = {str(out)!r}\n" + FACTS)
    return json.loads(out.read_text())


# The full round trip: SQLite → PostgreSQL, through the commands.


def test_an_app_dumped_on_sqlite_loads_into_postgresql_with_every_byte_receipt_and_event(
    tmp_path,
):
    server = _pg_server_url()
    if server is None:
        pytest.skip("PostgreSQL is unreachable (set VERSIONS_TEST_PG_SERVER)")
    import psycopg

    sqlite_url = f"sqlite:///{tmp_path / 'source.sqlite3'}"
    manage(sqlite_url, "migrate", "-v0")
    manage(sqlite_url, "shell", "-c", FILL)
    archive = tmp_path / "shop.vapp"
    dumped = manage(sqlite_url, "dump_app", "shop", str(archive))
    assert "Wrote shop" in dumped.stdout
    before = _facts(sqlite_url, tmp_path / "before.json")

    name = f"versions_portable_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(server, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        pg_url = server.rsplit("/", 1)[0] + f"/{name}"
        manage(pg_url, "migrate", "-v0")
        loaded = manage(pg_url, "load_app", str(archive))
        assert "Loaded shop" in loaded.stdout
        after = _facts(pg_url, tmp_path / "after.json")
        verified = manage(pg_url, "verify_audit", check=False)
        again = manage(pg_url, "load_app", str(archive), check=False)
    finally:
        with psycopg.connect(server, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    assert after["sources"] == before["sources"]
    assert after["sha256"] == before["sha256"]
    assert {k: v for k, v in after["sha256"].items() if v} == {
        k: v for k, v in after["sources"].items() if k != "pltf_page/gone"
    }
    assert len(after["sources"]) == 3
    assert after["receipts"] == before["receipts"]
    assert any(r for r in after["receipts"].values()), "a restore set's receipt came along"
    assert after["promotions"] == before["promotions"] and len(after["promotions"]) == 2
    assert after["events"] == before["events"] and len(after["events"]) >= 6
    assert after["reviews"] == before["reviews"] and len(after["reviews"]) == 1
    assert verified.returncode == 0, verified.stderr
    assert "events loaded with 1 app(s) from other Versions intact" in verified.stdout
    assert again.returncode == 1
    assert portable.LOAD_SLUG_EXISTS.format(slug="shop") in again.stderr


# On one database: the app is dumped, everything of it (and the chain) removed, then loaded.


def _history(app: App) -> None:
    user = get_user_model().objects.create_user("rita", password="x")
    Group.objects.create(name="ops")
    services.add_member(app, role="restorer", username=user.username)
    services.add_member(app, role="viewer", group="ops")
    big = "".join(f".rule-{i} {{ padding: {i}px; }}\n" for i in range(300))
    first = None
    for n in range(5):
        r = services.write_artifact(
            app, STYLE, "site", big + f"/* {n} */\n", tool="t", run_id=f"r{n}"
        )
        services.write_artifact(app, PAGE, "index", f"<p>{n} é😀</p>\n", tool="t", run_id=f"r{n}")
        first = first or r
    services.name_change_set(first.change_set_id, "Launch", by="rita")
    services.mark_release(first.change_set_id, by="rita")
    services.repack_blobs(app_id=app.pk)
    services.promote(app, by="rita", note="go")
    services.restore_change_set(r.change_set_id, by="rita")
    services.write_artifact(app, STYLE, "site", big + "/* after */\n", tool="t", run_id="r9")
    # What people said and set: a review, a resolved thread with a reply, the app's settings.
    owner = get_user_model().objects.create_user("olga", password="x")
    services.add_member(app, role="owner", username=owner.username)
    olga = services.actor_for_user(owner)
    services.submit_review(first.change_set_id, verdict="request_changes", body="*No.*", actor=olga)
    thread = services.add_comment(
        first.change_set_id,
        collection=PAGE,
        name="index",
        side="after",
        line=1,
        body="Say **why**",
        actor=olga,
    )
    services.reply(thread.id, body="Because.", actor=olga)
    services.resolve_thread(thread.id, actor=olga)
    protection = {"required_approvals": 2, "block_on_changes_requested": True}
    services.change_app(app, actor=olga, protection={**protection, "dismiss_stale": False})
    services.promotion.add_check(app, actor=olga, name="Home", path="/", expect_text="é")
    services.promotion.set_watch(app, actor=olga, rollback_error_rate=7, watch_minutes=15)
    services.promotion.lock_artifact(app, actor=olga, collection=PAGE, name="index", reason="ok")
    services.promotion.freeze_production(app, actor=olga, reason="Sale week")


MODELS = (
    App,
    Artifact,
    ChangeSet,
    RestorePoint,
    ReleaseMark,
    Deployment,
    DeploymentEntry,
    DeploymentEvent,
    Review,
    Comment,
    AppProtection,
    PromotionPolicy,
    AppCheck,
    ArtifactLock,
)
# Rows that get this database's ids when loaded: compared without them.
NEW_IDS = (AppCheck, ArtifactLock)


def _snapshot(app_id: int) -> dict[str, Any]:
    rows: dict[str, Any] = {}
    for model in MODELS:
        key = {App: "pk", DeploymentEntry: "deployment__app_id"}.get(model, "app_id")
        query = model.objects.filter(**{key: app_id})
        found = list(query.order_by("pk").values())
        if model in NEW_IDS:
            found = [{k: v for k, v in r.items() if k != "id"} for r in found]
        rows[model.__name__] = found
    shas = {a["blob_id"] for a in rows["Artifact"] if a["blob_id"]}
    shas |= {p["previous_blob_id"] for p in rows["RestorePoint"] if p["previous_blob_id"]}
    rows["Blob"] = sorted((b.sha256, bytes(b.data), b.base_id, b.raw) for b in Blob.objects.all())
    rows["members"] = sorted(
        (str(m.user or ""), str(m.group or ""), m.role, m.created_on)
        for m in AppMembership.objects.filter(app_id=app_id)
    )
    rows["events"] = [
        (e.id, e.chain_seq, e.action, e.prev_hash, e.hash, e.document("shop"))
        for e in AuditEvent.objects.filter(app_id=app_id)
        .exclude(action__in=[APP_DUMPED, APP_LOADED])
        .order_by("seq")
    ]
    rows["referenced"] = shas
    return rows


def _forget_everything(app_id: int) -> None:
    """What a fresh Versions looks like: no app, no blob, no audit event."""
    AuditEvent.objects.all().delete()
    AuditChainHead.objects.update(seq=0, hash=GENESIS)
    App.objects.filter(pk=app_id).update(release_set=None, production=None)
    AppMembership.objects.all().delete()
    SweepDebt.objects.all().delete()
    DeploymentEvent.objects.all().delete()
    DeploymentEntry.objects.all().delete()
    Deployment.objects.all().delete()
    ReleaseMark.objects.all().delete()
    RestorePoint.objects.all().delete()
    ChangeSet.objects.all().delete()
    Artifact.objects.all().delete()
    App.objects.all().delete()
    Blob.objects.filter(base__isnull=False).delete()
    Blob.objects.all().delete()


def _verify() -> str:
    out = StringIO()
    call_command("verify_audit", stdout=out)
    return out.getvalue()


@pytest.fixture
def dumped(db, tmp_path):
    app = App.objects.create(slug="shop", name="Shop")
    _history(app)
    assert Blob.objects.filter(base__isnull=False).exists(), "the history holds deltas"
    before = _snapshot(app.pk)
    assert all(before[model.__name__] for model in MODELS), "the history holds every kind"
    archive = tmp_path / "shop.vapp"
    report = services.dump_app("shop", archive)
    return app.pk, before, archive, report


def test_a_round_trip_on_one_database_gives_back_every_row_byte_and_event(dumped):
    app_id, before, archive, report = dumped
    dump_event = AuditEvent.objects.get(id=report.event_id)
    assert dump_event.action == APP_DUMPED
    assert dump_event.details["sha256"] == hashlib.sha256(archive.read_bytes()).hexdigest()
    _forget_everything(app_id)

    loaded = services.load_app(archive)

    after = _snapshot(app_id)
    for key in before:
        assert after[key] == before[key], key
    load = AuditEvent.objects.get(id=loaded.event_id)
    assert load.action == APP_LOADED and load.seq == 1
    assert load.details["events"] == len(before["events"])
    assert load.details["archive"]["sha256"] == report.sha256
    assert _verify().splitlines() == [
        "1 events, chain intact",
        f"{len(before['events'])} events loaded with 1 app(s) from other Versions intact",
    ]
    # New rows get ids after the loaded ones.
    assert services.add_app("next", "Next")[0].pk > app_id


def test_reviews_and_threads_load_without_their_author_where_no_such_user_is(dumped):
    """An author is found by username on the other side; where none is, the review and the
    thread keep the name they were written under, and still read as before."""
    app_id, before, archive, _ = dumped
    _forget_everything(app_id)
    get_user_model().objects.filter(username="olga").delete()
    services.load_app(archive)
    (review,) = Review.objects.filter(app_id=app_id)
    assert review.author is None and review.author_name == "olga"
    assert review.body == "*No.*" and review.verdict == "request_changes"
    thread = Comment.objects.get(app_id=app_id, thread__isnull=True)
    assert thread.author is None and thread.resolved and thread.replies.count() == 1
    assert [c.body for c in Comment.objects.filter(app_id=app_id)] == ["Say **why**", "Because."]


def test_restore_all_of_a_loaded_change_set_gives_back_its_bytes(dumped):
    app_id, before, archive, _ = dumped
    _forget_everything(app_id)
    services.load_app(archive)
    app = App.objects.get(pk=app_id)
    site = Artifact.objects.get(app=app, name="site")
    # The newest agent turn's set: Restore all puts back what it replaced (a delta, loaded).
    newest = (
        ChangeSet.objects.filter(app=app, kind=ChangeSet.CHANGE).order_by("-created_on").first()
    )
    assert newest is not None
    wanted = RestorePoint.objects.get(change_set=newest, artifact=site).previous_blob.raw  # type: ignore[union-attr]

    receipt = services.restore_change_set(newest.id, by="rita")

    site.refresh_from_db()
    assert site.source.encode() == wanted
    assert receipt.set_id and receipt.set_id.startswith("rs_")
    assert "chain intact" in _verify()


def test_loading_onto_an_existing_slug_is_refused_and_writes_nothing(dumped):
    _, _, archive, _ = dumped
    counts = _counts()

    with pytest.raises(Conflict) as refused:
        services.load_app(archive)

    assert refused.value.message == portable.LOAD_SLUG_EXISTS.format(slug="shop")
    assert _counts() == counts
    with pytest.raises(CommandError, match="There is already an app “shop” here"):
        call_command("load_app", str(archive))


def test_an_id_of_the_archive_taken_by_another_app_is_refused_and_writes_nothing(dumped):
    app_id, _, archive, _ = dumped
    _forget_everything(app_id)
    App.objects.create(pk=app_id, slug="squatter", name="Squatter")
    counts = _counts()

    with pytest.raises(Conflict) as refused:
        services.load_app(archive)

    assert refused.value.message == portable.LOAD_ID_TAKEN.format(kind="app", id=app_id)
    assert _counts() == counts


def _counts() -> dict[str, int]:
    models = (*MODELS, Blob, AppMembership, AuditEvent, SweepDebt)
    return {m.__name__: m.objects.count() for m in models}


def _rewrite(archive: Path, change) -> Path:
    lines = zstandard.ZstdDecompressor().decompressobj().decompress(archive.read_bytes())
    changed = archive.with_name("changed.vapp")
    changed.write_bytes(zstandard.ZstdCompressor().compress(change(lines)))
    return changed


@pytest.mark.parametrize(
    "damage, words",
    [
        (lambda raw: raw[: len(raw) // 2], "damaged or cut short"),
        (lambda raw: raw[:-40] + b"\x00" * 40, "damaged or cut short"),
        (lambda raw: b"not an archive at all", "is not a Versions app archive"),
    ],
    ids=["truncated", "bytes overwritten", "another file"],
)
def test_a_damaged_archive_is_refused_and_writes_nothing(dumped, damage, words):
    app_id, _, archive, _ = dumped
    _forget_everything(app_id)
    archive.write_bytes(damage(archive.read_bytes()))
    counts = _counts()

    with pytest.raises(InvalidInput, match=words):
        services.load_app(archive)

    assert _counts() == counts
    with pytest.raises(CommandError, match="nothing was loaded"):
        call_command("load_app", str(archive))


def test_a_row_changed_inside_the_archive_is_refused_by_its_checksum(dumped):
    app_id, _, archive, _ = dumped
    _forget_everything(app_id)
    changed = _rewrite(archive, lambda raw: raw.replace(b'"Launch"', b'"Lunch!"', 1))
    counts = _counts()

    with pytest.raises(InvalidInput) as refused:
        services.load_app(changed)

    assert "its checksum does not match" in refused.value.message
    assert _counts() == counts


def test_an_archive_of_an_unknown_format_version_is_refused_in_words(dumped):
    app_id, _, archive, _ = dumped
    _forget_everything(app_id)
    changed = _rewrite(archive, lambda raw: raw.replace(b'"version": 1', b'"version": 7', 1))
    counts = _counts()

    with pytest.raises(InvalidInput) as refused:
        services.load_app(changed)

    assert refused.value.message == portable.LOAD_UNKNOWN_VERSION.format(
        file=changed.name, version=7, known=1
    )
    assert _counts() == counts


def test_a_loaded_event_altered_afterwards_is_named_by_verify_audit(dumped):
    app_id, before, archive, _ = dumped
    _forget_everything(app_id)
    services.load_app(archive)
    victim = AuditEvent.objects.filter(origin_seq__isnull=False).order_by("seq")[1]
    AuditEvent.objects.filter(pk=victim.pk).update(reason="nothing happened")

    with pytest.raises(CommandError) as broken:
        _verify()

    assert f"Loaded event {victim.id}" in str(broken.value)
    assert "was altered" in str(broken.value)


def test_a_loaded_event_removed_afterwards_is_found_missing(dumped):
    app_id, before, archive, _ = dumped
    _forget_everything(app_id)
    loaded = services.load_app(archive)
    AuditEvent.objects.filter(origin_seq__isnull=False).order_by("-seq").first().delete()  # type: ignore[union-attr]

    with pytest.raises(CommandError) as broken:
        _verify()

    expected = len(before["events"])
    assert f"by event {loaded.event_id} were changed: it loaded {expected}, " in str(broken.value)


def test_dumping_an_unknown_app_is_refused_in_words(db, tmp_path):
    with pytest.raises(CommandError, match="nope"):
        call_command("dump_app", "nope", str(tmp_path / "x.vapp"))
    assert not (tmp_path / "x.vapp").exists()
