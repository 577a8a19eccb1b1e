"""Webhooks delivered by a real worker process (docs/operations.md#worker): ``manage.py
db_worker`` in a subprocess, against the test's database (on SQLite a file database of its
own, since the test database lives in memory), sending to a receiver on 127.0.0.1.

A receiver that answers 500 first gets the event again; one that hangs is cut at the timeout
and gets it again; a worker killed while it sends loses nothing: the next worker sends it.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from urllib.parse import quote

import pytest
from django.db import connection, connections, transaction
from django_tasks_db.models import DBTaskResult
from webhook_helpers import start_receiver

from versions import services
from versions.models import (
    PAGE,
    App,
    DeliveryAttempt,
    FanOutPending,
    Webhook,
    WebhookDelivery,
    WebhookEvent,
)

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

ROOT = Path(__file__).resolve().parent.parent
SECRET = "worker-test-secret-0123"
TIMEOUT = 1.0  # seconds a receiver has to answer
RETRY = 0.3  # seconds before the first retry


def _postgres_url() -> str:
    s = connection.settings_dict
    auth = quote(s["USER"] or "", safe="")
    if s.get("PASSWORD"):
        auth += ":" + quote(s["PASSWORD"], safe="")
    return f"postgres://{auth}@{s['HOST'] or '127.0.0.1'}:{s['PORT'] or 5432}/{s['NAME']}"


@pytest.fixture(scope="module")
def migrated_sqlite(tmp_path_factory):
    """A migrated SQLite file, made once for the module (each test copies it)."""
    if connection.vendor != "sqlite":
        return None
    path = tmp_path_factory.mktemp("worker-db") / "template.sqlite3"
    subprocess.run(
        [sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"],
        cwd=ROOT,
        env={**os.environ, "DATABASE_URL": f"sqlite:///{path}"},
        check=True,
    )
    return path


@pytest.fixture
def database_url(transactional_db, migrated_sqlite, tmp_path):
    """The URL the worker opens: the test database on PostgreSQL; on SQLite a file database
    this test's own connection is pointed at for the test's length."""
    if connection.vendor != "sqlite":
        yield _postgres_url()
        return
    path = tmp_path / "worker.sqlite3"
    shutil.copy(migrated_sqlite, path)
    saved_connection, saved_name = connection.connection, connection.settings_dict["NAME"]
    connection.connection = None  # the in-memory test database stays open, set aside
    connection.settings_dict["NAME"] = str(path)
    try:
        yield f"sqlite:///{path}"
    finally:
        connection.close()
        connection.settings_dict["NAME"] = saved_name
        connection.connection = saved_connection


@pytest.fixture
def workers(database_url):
    """Start worker processes; every one still running is stopped at the end."""
    started: list[subprocess.Popen] = []
    env = {
        **os.environ,
        "DATABASE_URL": database_url,
        "DJANGO_DEBUG": "1",
        "VERSIONS_WEBHOOK_ALLOW_PRIVATE": "1",
        "VERSIONS_WEBHOOK_TIMEOUT_SECONDS": str(TIMEOUT),
        "VERSIONS_WEBHOOK_RETRY_SECONDS": str(RETRY),
    }

    def start() -> subprocess.Popen:
        proc = subprocess.Popen(
            [
                sys.executable,
                "manage.py",
                "db_worker",
                "--interval",
                "0.05",
                "--no-startup-delay",
                "--no-reload",
                "-v",
                "0",
            ],
            cwd=ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        started.append(proc)
        return proc

    yield start
    for proc in started:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    for proc in started:
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture
def app_with_hook(database_url, settings):
    settings.VERSIONS_WEBHOOK_ALLOW_PRIVATE = True
    settings.VERSIONS_WEBHOOK_REQUIRE_HTTPS = False
    app = App.objects.create(slug="quotes", name="Quote approvals")

    def hook(url: str) -> Webhook:
        services.change_app(
            app,
            webhook={"add": {"url": url, "secret": SECRET, "events": ["change_set.created"]}},
        )
        return Webhook.objects.get(app=app)

    return app, hook


def write(app: App, source: str, run: str) -> str:
    receipt = services.write_artifact(app, PAGE, "index", source, tool="t", run_id=run)
    return receipt.change_set_id


def settled(timeout: float = 90.0) -> WebhookDelivery:
    """The one delivery, once it is no longer pending."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = WebhookDelivery.objects.first()
        if found is not None and found.state != WebhookDelivery.PENDING:
            return found
        time.sleep(0.05)
    raise AssertionError(f"still pending: {list(WebhookDelivery.objects.values())}")


def test_a_worker_process_delivers_the_event_signed_after_the_write_commits(app_with_hook, workers):
    app, hook = app_with_hook
    receiver = start_receiver()
    hook(receiver.url)
    workers()
    set_id = write(app, "v1\n", "r1")
    (got,) = receiver.wait_for(1)
    body = json.loads(got.body)
    assert body["type"] == "change_set.created" and body["data"]["changeSet"] == set_id
    assert got.headers["Versions-Event"] == "change_set.created"
    assert got.headers["Versions-Signature"].startswith("t=")
    delivery = settled()
    assert delivery.state == "delivered"
    assert got.headers["Versions-Delivery"] == delivery.id
    (attempt,) = DeliveryAttempt.objects.all()
    assert attempt.status_code == 200
    assert len(attempt.response_excerpt) == 1024  # the answer's first 1 KB (it sent 3 KB)


def test_a_receiver_answering_500_first_gets_the_event_again(app_with_hook, workers):
    app, hook = app_with_hook
    receiver = start_receiver(answers=[500])
    hook(receiver.url)
    workers()
    write(app, "v1\n", "r1")
    first, second = receiver.wait_for(2)
    assert first.body == second.body
    assert first.headers["Versions-Delivery"] == second.headers["Versions-Delivery"]
    assert second.at - first.at >= RETRY * 0.9  # after the backoff
    delivery = settled()
    assert (delivery.state, delivery.attempts) == ("delivered", 2)
    tries = list(delivery.tries.order_by("attempted_on"))
    assert [t.status_code for t in tries] == [500, 200]
    assert tries[0].response_excerpt.startswith("answer 500:")


def test_a_receiver_that_hangs_is_cut_at_the_timeout_and_tried_again(app_with_hook, workers):
    app, hook = app_with_hook
    receiver = start_receiver(answers=["hang"], hang_seconds=60)
    hook(receiver.url)
    workers()
    write(app, "v1\n", "r1")
    receiver.wait_for(2)
    delivery = settled()
    assert delivery.state == "delivered"
    cut, answered = delivery.tries.order_by("attempted_on")
    assert cut.status_code is None and cut.error == f"No answer within {TIMEOUT:g} seconds."
    # Cut at the timeout, long before the receiver would have answered (60 s).
    assert TIMEOUT * 0.9 <= cut.duration_ms / 1000 < 20
    assert answered.status_code == 200


def test_a_worker_killed_while_sending_loses_no_event(app_with_hook, workers):
    app, hook = app_with_hook
    # The first try never gets an answer while the worker lives: it is killed mid-send.
    receiver = start_receiver(answers=["hang"], hang_seconds=60)
    hook(receiver.url)
    first = workers()
    write(app, "v1\n", "r1")
    receiver.wait_for(1)
    first.kill()  # SIGKILL: no clean-up, the delivery stays leased to a dead worker
    first.wait(10)
    assert WebhookDelivery.objects.get().state == "pending"
    workers()  # another worker: it sends again once the dead one's lease runs out
    got = receiver.wait_for(2, timeout=120)
    assert len(got) == 2
    assert got[0].body == got[1].body
    assert got[0].headers["Versions-Delivery"] == got[1].headers["Versions-Delivery"]
    delivery = settled()
    assert delivery.state == "delivered"
    assert [t.status_code for t in delivery.tries.all()] == [200]  # the dead try left no log


def test_a_burst_written_with_no_worker_is_one_task_a_worker_delivers_in_order(
    app_with_hook, workers
):
    app, hook = app_with_hook
    receiver = start_receiver()
    hook(receiver.url)
    sets = [write(app, f"v{i}\n", f"r{i}") for i in range(10)]
    (queued,) = DBTaskResult.objects.all()  # one task for the app, not one per event
    assert queued.task_name == "fan_out_app"
    workers()
    got = receiver.wait_for(10)
    assert [json.loads(r.body)["data"]["changeSet"] for r in got] == sets
    deadline = time.monotonic() + 30
    while WebhookDelivery.objects.exclude(state="delivered").exists():
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert WebhookDelivery.objects.count() == 10


def test_a_worker_killed_after_taking_the_apps_mark_loses_no_event(app_with_hook, workers):
    app, hook = app_with_hook
    # The first event's POST hangs: its worker has taken the app's mark and fanned that event
    # out, not the two after it, when it is killed.
    receiver = start_receiver(answers=["hang"], hang_seconds=60)
    hook(receiver.url)
    sets = [write(app, f"v{i}\n", f"r{i}") for i in range(3)]
    first = workers()
    receiver.wait_for(1)
    first.kill()
    first.wait(10)
    assert not FanOutPending.objects.exists()
    assert WebhookEvent.objects.filter(fanned_out=False).count() == 2
    # The next event queues a task again (no mark): it finds the two left behind.
    sets.append(write(app, "v3\n", "r3"))
    workers()
    got = receiver.wait_for(5, timeout=120)  # the first event twice: its lease ran out
    received = [json.loads(r.body)["data"]["changeSet"] for r in got]
    assert sorted(received) == sorted([sets[0], *sets])
    assert [s for s in received if s != sets[0]] == sets[1:]  # in order


def test_writers_racing_a_worker_lose_no_event_and_send_none_twice(app_with_hook, workers):
    # Writers in threads start sets while two workers drain the app's fan-out: every event
    # reaches each webhook exactly once, whether its write made the app's mark or found it.
    app, hook = app_with_hook
    receiver = start_receiver()
    hook(receiver.url)
    services.change_app(
        app,
        webhook={
            "add": {
                "url": receiver.url + "?second",
                "secret": SECRET,
                "events": ["change_set.created"],
            }
        },
    )
    workers()
    workers()
    made: list[str] = []
    lock = threading.Lock()

    def writer(w: int) -> None:
        try:
            for i in range(10):
                set_id = write(app, f"{w} {i}\n", f"w{w}-{i}")
                with lock:
                    made.append(set_id)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(made) == 40
    receiver.wait_for(80, timeout=120)
    deadline = time.monotonic() + 30
    while WebhookDelivery.objects.exclude(state="delivered").exists():
        assert time.monotonic() < deadline
        time.sleep(0.05)
    time.sleep(1)  # time for a second sending, were there one
    per_hook = {(json.loads(r.body)["data"]["changeSet"], r.path) for r in receiver.received}
    assert len(receiver.received) == 80 and len(per_hook) == 80
    assert {set_id for set_id, _ in per_hook} == set(made)
    assert not WebhookEvent.objects.filter(fanned_out=False).exists()


def test_a_write_that_found_the_mark_is_waited_for_by_the_task_that_takes_it(
    app_with_hook, workers
):
    # PostgreSQL (SQLite's writers and worker share one write lock): a write that found the
    # app's mark queued no task. The worker taking the mark waits for that write's commit
    # before it reads the app's events, and so fans its event out too.
    if connection.vendor != "postgresql":
        pytest.skip("row locks: PostgreSQL")
    app, hook = app_with_hook
    receiver = start_receiver()
    hook(receiver.url)
    first = write(app, "v1\n", "r1")  # marks the app, queues its task
    wrote, release = threading.Event(), threading.Event()
    second: list[str] = []

    def writer() -> None:
        try:
            with transaction.atomic():
                second.append(write(app, "v2\n", "r2"))  # finds the mark: no task
                wrote.set()
                release.wait(120)
        finally:
            connections.close_all()

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        assert wrote.wait(60)
        assert DBTaskResult.objects.count() == 1
        workers()
        deadline = time.monotonic() + 90
        with connection.cursor() as cursor:  # the worker's delete of the mark waits
            while True:
                cursor.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                    "AND query LIKE %s",
                    [f'DELETE FROM "{FanOutPending._meta.db_table}"%'],
                )
                if cursor.fetchone()[0]:
                    break
                assert time.monotonic() < deadline, "the worker never waited for the write"
                time.sleep(0.02)
    finally:
        release.set()
        thread.join()
    got = receiver.wait_for(2)
    assert [json.loads(r.body)["data"]["changeSet"] for r in got] == [first, *second]


def _descendants(pid: int) -> set[int]:
    found: set[int] = set()
    try:
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        return found
    for child in map(int, children):
        found |= {child} | _descendants(child)
    return found


def _alive(pid: int) -> bool:
    try:
        status = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return status.rsplit(")", 1)[1].split()[0] != "Z"


@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="reads /proc (Linux)")
@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT])
def test_serve_starts_the_server_and_workers_together_and_stops_them_together(database_url, stop):
    import socket
    import urllib.request

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    env = {**os.environ, "DATABASE_URL": database_url, "DJANGO_DEBUG": "1"}
    serve = subprocess.Popen(
        [sys.executable, "manage.py", "serve", f"127.0.0.1:{port}", "--workers", "2"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/accounts/login/", timeout=5)
                break
            except OSError:
                assert serve.poll() is None and time.monotonic() < deadline
                time.sleep(0.2)
        family = _descendants(serve.pid)
        commands = [Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0") for pid in family]
        assert sum(b"db_worker" in c for c in commands) >= 2
        assert any(b"runserver" in c for c in commands)
        serve.send_signal(stop)
        serve.wait(30)
        deadline = time.monotonic() + 20
        while any(_alive(pid) for pid in family) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert [pid for pid in family if _alive(pid)] == []
    finally:
        if serve.poll() is None:
            serve.kill()
            serve.wait()
