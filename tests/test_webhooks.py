"""Webhooks managed by an app's owners on its Settings page, and the events the changes store
(docs/architecture.md#notifications): bad input refused in words with nothing saved, every
change in the audit trail, each event stored in the transaction of the change it reports (and
only when something takes it), the signature the API guide's ten lines check, and the address
checks made when sending. Delivery through a real worker: tests/test_webhook_worker.py."""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import socket
import time
from importlib.util import find_spec
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.core import mail
from django.core.management import call_command
from django.db import transaction
from django.utils import timezone
from django_tasks_db.models import DBTaskResult
from webhook_helpers import start_receiver

from versions import ids, messages, services
from versions.errors import StaleWrite
from versions.models import (
    PAGE,
    App,
    AuditEvent,
    EmailSubscription,
    FanOutPending,
    Webhook,
    WebhookDelivery,
    WebhookEvent,
)

pytestmark = pytest.mark.django_db

ROOT = Path(__file__).resolve().parent.parent
SECRET = "s3cret-of-sixteen+"
EVENTS = [
    "change_set.created",
    "review.submitted",
    "comment.created",
    "production.promoted",
    "production.rolled_back",
    "restore.completed",
    "revert.completed",
]


@pytest.fixture(autouse=True)
def quick_hashing(settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    settings.VERSIONS_WEBHOOK_ALLOW_PRIVATE = True
    settings.VERSIONS_WEBHOOK_REQUIRE_HTTPS = False  # as in development (DJANGO_DEBUG=1)


def person(app: App, name: str, role: str, **extra) -> User:
    user = User.objects.create_user(name, password="pw-" + name, **extra)
    services.add_member(app, role=role, username=name, by="setup")
    return user


@pytest.fixture
def owner_client(client, app):
    person(app, "olga", "owner", email="olga@example.com")
    client.force_login(User.objects.get(username="olga"))
    return client


def settings_url(app: App) -> str:
    return f"/apps/{app.slug}/versions/settings/"


def add(client, app: App, **fields):
    data = {"action": "add", "url": "http://127.0.0.1:9/hook", "secret": SECRET}
    data.update(fields)
    data.setdefault("events", ["change_set.created"])
    return client.post(settings_url(app) + "webhooks/", data)


def write(app: App, source: str, run: str = "r1") -> str:
    receipt = services.write_artifact(
        app, PAGE, "index", source, requested_by="ada", tool="t", run_id=run
    )
    return receipt.change_set_id


# --------------------------------------------------------------------------------------------
# Managing webhooks in the panel
# --------------------------------------------------------------------------------------------


def test_an_owner_adds_a_webhook_on_the_settings_page_and_sees_it(owner_client, app):
    answer = add(owner_client, app, events=["change_set.created", "revert.completed"])
    assert answer.status_code == 302, re.findall(r'role="alert"[^<]*', answer.content.decode())
    webhook = Webhook.objects.get()
    assert webhook.url == "http://127.0.0.1:9/hook"
    assert webhook.event_list == ["change_set.created", "revert.completed"]
    page = owner_client.get(settings_url(app)).content.decode()
    assert "Webhooks" in page and "http://127.0.0.1:9/hook" in page
    assert "Recent deliveries: none yet" in page
    assert SECRET not in page  # the secret is never shown again


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        (
            {"url": "ftp://example.com/x"},
            messages.WEBHOOK_URL_NOT_HTTP.format(url="ftp://example.com/x"),
        ),
        (
            {"url": "javascript:alert(1)"},
            messages.WEBHOOK_URL_NOT_HTTP.format(url="javascript:alert(1)"),
        ),
        (
            {"url": "http://127.0.0.1/" + "a" * 2000},
            messages.WEBHOOK_URL_TOO_LONG.format(length=2017, limit=2000),
        ),
        ({"secret": "short"}, messages.WEBHOOK_SECRET_SHORT.format(length=5, least=16, most=200)),
        (
            {"events": ["change_set.created", "app.deleted"]},
            messages.WEBHOOK_EVENT_UNKNOWN.format(event="app.deleted", known=", ".join(EVENTS)),
        ),
        ({"events": []}, messages.WEBHOOK_EVENTS_NONE),
        (
            {"url": "http://no-such-host.invalid/x"},
            messages.WEBHOOK_URL_UNRESOLVED.format(host="no-such-host.invalid"),
        ),
    ],
)
def test_bad_input_is_refused_in_words_and_nothing_is_saved(owner_client, app, fields, message):
    answer = add(owner_client, app, **fields)
    assert answer.status_code == 422
    assert message in answer.content.decode().replace("&quot;", '"').replace("&#x27;", "'")
    assert not Webhook.objects.exists()
    assert not AuditEvent.objects.filter(action="webhook_created").exists()


def test_an_address_on_a_private_network_is_refused_unless_allowed(owner_client, app, settings):
    settings.VERSIONS_WEBHOOK_ALLOW_PRIVATE = False
    for url, address in [
        ("http://127.0.0.1:8000/x", "127.0.0.1"),
        ("http://10.1.2.3/x", "10.1.2.3"),
        ("http://169.254.169.254/latest", "169.254.169.254"),
        ("http://[::1]/x", "::1"),
        ("http://localhost/x", None),
    ]:
        answer = add(owner_client, app, url=url)
        assert answer.status_code == 422, url
        text = answer.content.decode()
        assert "loopback, link-local or private address" in text
        if address:
            assert address in text
    assert not Webhook.objects.exists()


def test_production_takes_https_only(owner_client, app, settings):
    settings.VERSIONS_WEBHOOK_REQUIRE_HTTPS = True  # what DJANGO_DEBUG=0 sets
    answer = add(owner_client, app, url="http://127.0.0.1:9/hook")
    assert answer.status_code == 422
    assert "must be https://" in answer.content.decode()
    assert not Webhook.objects.exists()


def test_people_below_owner_cannot_manage_webhooks(client, app):
    person(app, "rita", "promoter")
    client.force_login(User.objects.get(username="rita"))
    answer = add(client, app)
    assert answer.status_code == 403
    assert not Webhook.objects.exists()
    assert client.get(settings_url(app)).status_code == 403


def test_every_webhook_change_is_in_the_audit_trail(owner_client, app):
    add(owner_client, app)
    webhook = Webhook.objects.get()
    url = settings_url(app) + "webhooks/"
    owner_client.post(
        url,
        {
            "action": "change",
            "id": webhook.id,
            "url": "http://127.0.0.1:10/other",
            "secret": "",
            "events": ["review.submitted"],
        },
    )
    owner_client.post(url, {"action": "disable", "id": webhook.id})
    owner_client.post(url, {"action": "enable", "id": webhook.id})
    write(app, "v1\n")  # no event: the webhook no longer takes change_set.created
    assert not WebhookEvent.objects.exists()
    webhook.refresh_from_db()
    assert (webhook.url, webhook.event_list, webhook.secret) == (
        "http://127.0.0.1:10/other",
        ["review.submitted"],
        SECRET,  # an empty secret keeps it
    )
    owner_client.post(url, {"action": "delete", "id": webhook.id})
    assert not Webhook.objects.exists()
    events = AuditEvent.objects.filter(app=app, action__startswith="webhook_").order_by("seq")
    assert [(e.action, e.actor_name, e.targets) for e in events] == [
        ("webhook_created", "olga", [webhook.id]),
        ("webhook_changed", "olga", [webhook.id]),
        ("webhook_changed", "olga", [webhook.id]),
        ("webhook_changed", "olga", [webhook.id]),
        ("webhook_deleted", "olga", [webhook.id]),
    ]
    assert events[1].details == {
        "url": "http://127.0.0.1:10/other",
        "events": ["review.submitted"],
    }
    assert all(SECRET not in str(e.details) for e in events)


@pytest.mark.django_db(transaction=True)
def test_redeliver_sends_the_event_again_as_a_new_delivery_and_is_recorded(owner_client, app):
    receiver = start_receiver()
    add(owner_client, app, url=receiver.url)
    write(app, "v1\n")
    run_worker()
    first = WebhookDelivery.objects.get()
    assert first.state == "delivered"
    answer = owner_client.post(
        settings_url(app) + "webhooks/",
        {"action": "redeliver", "id": first.id},
        headers={"HX-Request": "true"},
    )
    assert answer.status_code == 200
    assert "Sent again" in answer.content.decode()
    run_worker()
    again = WebhookDelivery.objects.exclude(pk=first.pk).get()
    assert (again.event_id, again.redelivery_of_id, again.state) == (
        first.event_id,
        first.id,
        "delivered",
    )
    one, other = receiver.wait_for(2)
    assert one.body == other.body  # the same event, byte for byte
    assert one.headers["Versions-Delivery"] == first.id
    assert other.headers["Versions-Delivery"] == again.id
    recorded = AuditEvent.objects.get(action="webhook_redelivered")
    assert recorded.targets == [first.webhook_id, first.id, again.id]
    page = owner_client.get(settings_url(app)).content.decode()
    assert page.count('value="redeliver"') == 2 and "Delivered" in page


def test_a_webhook_or_delivery_of_another_app_is_not_found(owner_client, app):
    other = App.objects.create(slug="other", name="Other")
    foreign = services.change_app(
        other,
        webhook={"add": {"url": "http://127.0.0.1:9/x", "secret": SECRET, "events": EVENTS[:1]}},
    )
    webhook = Webhook.objects.get(app=foreign)
    answer = owner_client.post(
        settings_url(app) + "webhooks/", {"action": "delete", "id": webhook.id}
    )
    assert answer.status_code == 404
    assert Webhook.objects.filter(pk=webhook.pk).exists()


# --------------------------------------------------------------------------------------------
# Events: stored with the change, only when something takes them
# --------------------------------------------------------------------------------------------


def _hook(app: App, *events: str, url: str = "http://127.0.0.1:9/x") -> Webhook:
    """Add a webhook; returns the one added (not the newest by time: two added in the same
    millisecond tie on ``created_on``, and the tie once returned the wrong one)."""
    before = list(Webhook.objects.filter(app=app).values_list("pk", flat=True))
    services.change_app(
        app, webhook={"add": {"url": url, "secret": SECRET, "events": list(events)}}
    )
    return Webhook.objects.filter(app=app).exclude(pk__in=before).get()


def queued_tasks_are_due() -> None:
    """Time passes for the queue: every task waiting for later may run now."""
    DBTaskResult.objects.filter(status="READY").update(run_after=timezone.now())


def run_worker() -> None:
    """The worker, here: every task due now, then it stops (``db_worker --batch``)."""
    call_command("db_worker", "--batch", "--no-startup-delay", "--no-reload", verbosity=0)


def test_a_write_without_subscribers_stores_no_event(app):
    write(app, "v1\n")
    assert not WebhookEvent.objects.exists()


def test_a_new_change_set_stores_one_event_with_the_write(app):
    _hook(app, "change_set.created")
    set_id = write(app, "v1\n", run="r1")
    write(app, "v2\n", run="r1")  # joins the set: no new event
    event = WebhookEvent.objects.get()
    assert event.type == "change_set.created"
    assert event.data["changeSet"] == set_id
    assert event.data["requestedBy"] == "ada"
    assert event.data["runId"] == "r1"
    assert event.id.startswith("evt_")


@pytest.mark.django_db(transaction=True)
def test_an_events_delivery_is_queued_in_the_writes_own_transaction(app):
    # On the database queue the app's fan-out task commits with the event or not at all: no
    # second transaction after the write's, no event without a task, no task without its event.
    _hook(app, "change_set.created")
    with pytest.raises(RuntimeError), transaction.atomic():
        write(app, "v1\n", run="r1")
        raise RuntimeError("the write's transaction rolls back")
    assert not WebhookEvent.objects.exists() and not DBTaskResult.objects.exists()
    assert not FanOutPending.objects.exists()
    with transaction.atomic():
        write(app, "v1\n", run="r2")
        assert WebhookEvent.objects.count() == 1
        ours = DBTaskResult.objects.get()  # there before the write's transaction commits
    assert (ours.task_name, ours.task_result.args, ours.status) == (
        "fan_out_app",
        [app.pk],
        "READY",
    )
    # The very row the backend itself makes for that task.
    theirs = DBTaskResult.objects.get(pk=ours.task.enqueue(app.pk).id)
    same = ("status", "args_kwargs", "priority", "task_path", "queue_name", "backend_name")
    same += ("run_after", "worker_ids", "return_value", "exception_class_path", "traceback")
    assert [getattr(ours, f) for f in same] == [getattr(theirs, f) for f in same]


@pytest.mark.django_db(transaction=True)
def test_a_burst_of_writes_queues_one_task_that_delivers_every_event_in_order(app):
    # While the app's fan-out waits for a worker, more events queue no more tasks: the one
    # task fans out every event of the app, oldest first.
    receiver = start_receiver()
    _hook(app, "change_set.created", url=receiver.url)
    sets = [write(app, f"v{i}\n", run=f"r{i}") for i in range(12)]
    assert WebhookEvent.objects.count() == 12
    (queued,) = DBTaskResult.objects.all()
    assert (queued.task_name, queued.task_result.args) == ("fan_out_app", [app.pk])
    run_worker()
    got = receiver.wait_for(12)
    assert [json.loads(r.body)["data"]["changeSet"] for r in got] == sets
    assert set(WebhookDelivery.objects.values_list("state", flat=True)) == {"delivered"}
    # The worker took the mark: the next write queues a task again.
    later = write(app, "v12\n", run="r12")
    assert DBTaskResult.objects.filter(status="READY").count() == 1
    run_worker()
    assert json.loads(receiver.wait_for(13)[-1].body)["data"]["changeSet"] == later


@pytest.mark.django_db(transaction=True)
def test_with_another_queue_the_delivery_is_enqueued_once_the_write_commits(app, settings):
    # A queue outside the database (Redis, RabbitMQ) cannot take part in the write's
    # transaction: its task is enqueued after the commit, so no worker sees an uncommitted event.
    if find_spec("django.tasks"):
        settings.TASKS = {"default": {"BACKEND": "django.tasks.backends.dummy.DummyBackend"}}
        from django.tasks import task_backends
    else:
        settings.TASKS = {"default": {"BACKEND": "django_tasks.backends.dummy.DummyBackend"}}
        from django_tasks import task_backends
    queue = task_backends["default"]
    _hook(app, "change_set.created")
    with transaction.atomic():
        write(app, "v1\n")
        assert queue.results == []
    (queued,) = queue.results
    assert (queued.task.name, queued.args) == ("fan_out", [WebhookEvent.objects.get().id])
    assert not DBTaskResult.objects.exists()


def test_a_write_nobody_listens_to_queues_nothing(app):
    write(app, "v1\n")
    assert not DBTaskResult.objects.exists()


def test_a_refused_write_stores_no_event(app):
    _hook(app, "change_set.created")
    write(app, "v1\n", run="r1")
    with pytest.raises(StaleWrite):
        services.write_artifact(
            app, PAGE, "index", "v2\n", tool="t", run_id="r2", expected_sha256="0" * 64
        )
    assert WebhookEvent.objects.count() == 1


def test_restores_reverts_promotions_and_rollbacks_store_their_events(app):
    _hook(app, *EVENTS)
    first = write(app, "v1\n", run="r1")
    services.promote(app, by="setup")
    second = write(app, "v2\n", run="r2")
    services.promote(app, by="setup")
    services.rollback_production(app, by="setup")
    services.restore_change_set(second, by="setup")
    third = write(app, "v3\n", run="r3")
    services.revert_change_set(third, by="setup")
    services.restore_change_set(second, by="setup", dry_run=True)  # a dry run: no event
    types = list(WebhookEvent.objects.order_by("created_on", "id").values_list("type", flat=True))
    assert types == [
        "change_set.created",
        "production.promoted",
        "change_set.created",
        "production.promoted",
        "production.rolled_back",
        "restore.completed",
        "change_set.created",
        "revert.completed",
    ]
    revert = WebhookEvent.objects.get(type="revert.completed")
    assert revert.data["revertedSet"] == third and revert.data["restoreSet"].startswith("rs_")
    promoted = WebhookEvent.objects.filter(type="production.promoted").last()
    assert promoted.data["deployment"].startswith("dp_")
    assert first


def test_events_made_in_one_millisecond_keep_the_order_they_were_made_in():
    # On a fast machine a restore and the next write report in the same millisecond: the
    # events' ids must still sort in the order they happened (deliveries follow that order).
    made = [
        f"evt_{ids.base36(1_700_000_000_000)}_{ids.ordered_suffix(1_700_000_000_000)}"
        for _ in range(300)
    ]
    assert sorted(made) == made and len(set(made)) == 300
    later = ids.ordered_suffix(1_700_000_000_001)
    assert later.startswith("000")


def test_reviews_and_comments_store_their_events(app):
    _hook(app, "review.submitted", "comment.created")
    set_id = write(app, "line one\nline two\n")
    reviewer = services.actor_for_user(person(app, "rev", "reviewer"))
    review = services.submit_review(set_id, verdict="comment", body="Looks **odd**", actor=reviewer)
    comment = services.add_comment(
        set_id, collection=PAGE, name="index", side="after", line=2, body="why?", actor=reviewer
    )
    services.reply(comment.id, body="because", actor=reviewer)
    events = list(WebhookEvent.objects.order_by("created_on", "id"))
    assert [e.type for e in events] == ["review.submitted", "comment.created", "comment.created"]
    assert events[0].data["review"] == review.id and events[0].data["verdict"] == "comment"
    assert events[1].data["anchor"] == {
        "collection": PAGE,
        "name": "index",
        "side": "after",
        "line": 2,
    }
    assert events[2].data["thread"] == comment.id


@pytest.mark.django_db(transaction=True)
def test_each_active_webhook_taking_the_type_gets_the_event_once(app):
    taking = start_receiver()
    other = start_receiver()
    _hook(app, "change_set.created", url=taking.url)
    _hook(app, "change_set.created", "revert.completed", url=taking.url)
    off = _hook(app, "change_set.created", url=other.url)
    services.change_app(app, webhook={"change": off.id, "active": False})
    _hook(app, "revert.completed", url=other.url)
    write(app, "v1\n")
    run_worker()
    run_worker()
    assert len(taking.wait_for(2)) == 2
    assert other.received == []
    assert WebhookDelivery.objects.count() == 2
    assert set(WebhookDelivery.objects.values_list("state", flat=True)) == {"delivered"}


# --------------------------------------------------------------------------------------------
# Email to members who opt in
# --------------------------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_members_choose_their_emails_and_get_them(client, app, settings):
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    person(app, "vic", "viewer", email="vic@example.com")
    client.force_login(User.objects.get(username="vic"))
    page = client.get(f"/apps/{app.slug}/versions/notifications/")
    assert page.status_code == 200 and "Email me when" in page.content.decode()
    answer = client.post(
        f"/apps/{app.slug}/versions/notifications/",
        {"events": ["change_set.created"]},
        headers={"HX-Request": "true"},
    )
    assert "you get an email when: an agent started a change set" in answer.content.decode()
    assert EmailSubscription.objects.get().event_list == ["change_set.created"]
    assert AuditEvent.objects.filter(action="notifications_changed", actor_name="vic").exists()
    write(app, "v1\n")
    run_worker()
    assert [m.to for m in mail.outbox] == [["vic@example.com"]]
    assert "An agent started a change set" in mail.outbox[0].subject
    # Unknown events are refused; none stops the emails.
    bad = client.post(f"/apps/{app.slug}/versions/notifications/", {"events": ["nope"]})
    assert bad.status_code == 422
    client.post(f"/apps/{app.slug}/versions/notifications/", {})
    assert not EmailSubscription.objects.exists()


# --------------------------------------------------------------------------------------------
# The signature, and the address checked when sending
# --------------------------------------------------------------------------------------------


def _docs_verifier():
    """The ten lines of docs/api.md, "Webhooks", run as they are printed there."""
    text = (ROOT / "docs" / "api.md").read_text(encoding="utf-8")
    code = re.search(r"<!-- verify -->\s*```python\n(.*?)```", text, re.S).group(1)
    assert len(code.strip().splitlines()) <= 10
    scope: dict = {}
    exec(code, scope)  # noqa: S102
    return scope["verify"]


@pytest.mark.django_db(transaction=True)
def test_what_a_receiver_gets_verifies_with_the_ten_lines_of_the_api_guide(app):
    receiver = start_receiver()
    _hook(app, "change_set.created", url=receiver.url)
    set_id = write(app, "v1\n")
    run_worker()
    (got,) = receiver.wait_for(1)
    event = WebhookEvent.objects.get()
    delivery = WebhookDelivery.objects.get()
    assert got.headers["Content-Type"] == "application/json"
    assert got.headers["Versions-Event"] == "change_set.created"
    assert got.headers["Versions-Delivery"] == delivery.id
    body = json.loads(got.body)
    assert list(body) == ["id", "type", "app", "created_on", "data"]
    assert (body["id"], body["type"], body["app"]) == (event.id, "change_set.created", "quotes")
    assert body["data"]["changeSet"] == set_id
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", body["created_on"])
    header = got.headers["Versions-Signature"]
    t = int(re.fullmatch(r"t=(\d+),v1=[0-9a-f]{64}", header).group(1))
    assert abs(t - time.time()) < 60
    verify = _docs_verifier()
    assert verify(SECRET, header, got.body, now=t + 10)
    assert not verify(SECRET, header, got.body + b" ", now=t + 10)
    assert not verify("another-secret-16ch", header, got.body, now=t + 10)
    assert not verify(SECRET, header, got.body, now=t + 3600)  # too old: a replay
    mac = hmac.new(SECRET.encode(), f"{t}.".encode() + got.body, hashlib.sha256).hexdigest()
    assert header == f"t={t},v1={mac}"


@pytest.mark.django_db(transaction=True)
def test_a_name_that_resolves_privately_when_sent_is_not_called(app, settings, monkeypatch):
    # Saved while "hooks.example.com" resolved to a public address; when the worker sends, it
    # resolves to this machine (DNS rebinding): the delivery is refused, the receiver never
    # called, and the log says why.
    receiver = start_receiver()
    port = receiver.server.server_address[1]
    real = socket.getaddrinfo
    answers = {"hooks.example.com": "93.184.216.34"}

    def fake(host, *args, **kwargs):
        return real(answers.get(host, host), *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", fake)
    settings.VERSIONS_WEBHOOK_ALLOW_PRIVATE = False
    _hook(app, "change_set.created", url=f"http://hooks.example.com:{port}/hook")
    answers["hooks.example.com"] = "127.0.0.1"
    write(app, "v1\n")
    run_worker()
    delivery = WebhookDelivery.objects.get()
    (attempt,) = delivery.tries.all()
    assert attempt.status_code is None
    assert "127.0.0.1" in attempt.error and "private" in attempt.error
    assert delivery.state == "pending" and delivery.attempts == 1  # tried again later
    assert receiver.received == []


@pytest.mark.django_db(transaction=True)
def test_a_redirect_is_not_followed(app):
    receiver = start_receiver(default="redirect")
    _hook(app, "change_set.created", url=receiver.url)
    write(app, "v1\n")
    run_worker()
    assert [r.path for r in receiver.wait_for(1)] == ["/hook"]
    (attempt,) = WebhookDelivery.objects.get().tries.all()
    assert attempt.status_code == 302
    assert WebhookDelivery.objects.get().state == "pending"  # a failure: tried again later


@pytest.mark.parametrize(
    ("address", "public"),
    [
        ("93.184.216.34", True),
        ("[2606:2800:220:1:248:1893:25c8:1946]", True),
        ("127.0.0.1", False),
        ("10.0.0.1", False),
        ("172.16.5.4", False),
        ("192.168.1.1", False),
        ("169.254.169.254", False),
        ("100.64.0.1", False),
        ("0.0.0.0", False),
        ("[::1]", False),
        ("[fe80::1]", False),
        ("[fd00::1]", False),
        ("[::ffff:127.0.0.1]", False),
    ],
)
def test_which_addresses_a_webhook_may_name(owner_client, app, settings, address, public):
    settings.VERSIONS_WEBHOOK_ALLOW_PRIVATE = False
    answer = add(owner_client, app, url=f"http://{address}/hook")
    assert (answer.status_code == 302) is public, answer.content.decode()[-600:]
    assert Webhook.objects.exists() is public


# --------------------------------------------------------------------------------------------
# Retries for 24 hours, then the webhook is turned off and its owners told
# --------------------------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_a_failing_delivery_backs_off_for_24_hours_then_the_webhook_is_turned_off(app, settings):
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    person(app, "olga", "owner", email="olga@example.com")
    person(app, "vic", "viewer", email="vic@example.com")
    receiver = start_receiver(default=500)
    webhook = _hook(app, "change_set.created", url=receiver.url)
    write(app, "v1\n")
    delays = []
    for _ in range(20):
        run_worker()
        delivery = WebhookDelivery.objects.get()
        if delivery.state != "pending":
            break
        last = delivery.tries.order_by("attempted_on").last()
        delay = delivery.next_attempt_on - last.attempted_on
        delays.append(round(delay.total_seconds()))
        # Let that much time pass: everything stored moves back by it.
        WebhookDelivery.objects.filter(pk=delivery.pk).update(
            created_on=delivery.created_on - delay, next_attempt_on=timezone.now()
        )
        failing = Webhook.objects.get().failing_since
        Webhook.objects.update(failing_since=failing - delay)
        queued_tasks_are_due()
    assert delays[:8] == [10, 30, 90, 270, 810, 2430, 7290, 21870]
    assert sum(delays) == pytest.approx(24 * 3600, abs=5)  # the last try at 24 hours
    delivery = WebhookDelivery.objects.get()
    assert delivery.state == "failed" and delivery.attempts == len(delays) + 1 >= 8
    assert len(receiver.received) == delivery.attempts
    webhook.refresh_from_db()
    assert not webhook.active and "failed for 24 hours" in webhook.disabled_reason
    assert AuditEvent.objects.filter(action="webhook_disabled", targets=[webhook.id]).exists()
    (told,) = mail.outbox
    assert told.to == ["olga@example.com"]  # the owners, not every member
    assert webhook.url in told.body and "disabled" in told.subject
    # Turned off, it takes no more events; an owner turns it on again.
    write(app, "v2\n", run="r2")
    run_worker()
    assert WebhookDelivery.objects.count() == 1
    services.change_app(app, webhook={"change": webhook.id, "active": True})
    webhook.refresh_from_db()
    assert webhook.active and webhook.failing_since is None and not webhook.disabled_reason


@pytest.mark.django_db(transaction=True)
def test_a_settled_try_withdraws_the_task_waiting_for_its_lease(app):
    # The task that would send again had the worker died mid-try is not needed once the try
    # is settled; left queued, every worker looking for work would pass it until it ran.
    receiver = start_receiver(answers=[500])
    _hook(app, "change_set.created", url=receiver.url)
    write(app, "v1\n")
    run_worker()  # the first try fails: what waits is its retry alone
    delivery = WebhookDelivery.objects.get()
    (waiting,) = DBTaskResult.objects.filter(status="READY")
    assert waiting.run_after == delivery.next_attempt_on
    WebhookDelivery.objects.update(next_attempt_on=timezone.now())
    queued_tasks_are_due()
    run_worker()  # the retry succeeds: nothing waits
    assert WebhookDelivery.objects.get().state == "delivered"
    assert not DBTaskResult.objects.filter(status="READY").exists()


@pytest.mark.django_db(transaction=True)
def test_one_success_forgets_the_failures(app):
    receiver = start_receiver(answers=[500])
    webhook = _hook(app, "change_set.created", url=receiver.url)
    write(app, "v1\n")
    run_worker()
    webhook.refresh_from_db()
    assert webhook.failing_since is not None
    WebhookDelivery.objects.update(next_attempt_on=timezone.now())
    queued_tasks_are_due()
    run_worker()
    webhook.refresh_from_db()
    assert webhook.failing_since is None and webhook.active


@pytest.mark.django_db(transaction=True)
def test_an_event_whose_enqueue_was_lost_is_sent_with_the_next_one(app, settings):
    # The app's fan-out task was lost two minutes ago (a worker killed before it began): the
    # event is stored and the app marked as queued, no task names it. The next event finds
    # the mark a minute old and queues a task again, which sends both.
    settings.VERSIONS_WEBHOOK_RESCUE_SECONDS = 0
    receiver = start_receiver()
    _hook(app, "change_set.created", url=receiver.url)
    lost = write(app, "v1\n", run="r1")
    DBTaskResult.objects.all().delete()
    two_minutes_ago = timezone.now() - timezone.timedelta(minutes=2)
    WebhookEvent.objects.update(created_on=two_minutes_ago)
    FanOutPending.objects.update(since=two_minutes_ago)
    later = write(app, "v2\n", run="r2")
    assert DBTaskResult.objects.count() == 1
    run_worker()
    run_worker()
    got = receiver.wait_for(2)
    assert sorted(json.loads(r.body)["data"]["changeSet"] for r in got) == sorted([lost, later])


def test_a_person_without_an_email_address_is_told_how_to_get_one(client, app, admin_user):
    """No address, no email: a member is told to ask an admin; a superuser (who is the admin)
    is shown where to add it, their own account in the admin."""
    person(app, "vic", "viewer")
    client.force_login(User.objects.get(username="vic"))
    page = client.get(f"/apps/{app.slug}/versions/notifications/").content.decode()
    assert "Your account has no email address yet: ask an admin to add one" in page
    admin_user.email = ""
    admin_user.save()
    client.force_login(admin_user)
    page = client.get(f"/apps/{app.slug}/versions/notifications/").content.decode()
    assert "ask an admin" not in page
    link = f'<a href="/admin/auth/user/{admin_user.pk}/change/">your account in the admin</a>'
    assert f"Your account has no email address yet: add one to {link}" in page
    assert client.get(f"/admin/auth/user/{admin_user.pk}/change/").status_code == 200
