"""Notifications: how soon a receiver hears of a write, and what webhooks add to the write.

Run: ``.venv/bin/python tests/perf/bench_notify.py`` (DATABASE_URL selects PostgreSQL). Prints
its figures last as one line of JSON:

- ``delivery_p99_ms`` — the 99th percentile, over 200 events written by 8 concurrent writers
  (threads, each write starting a change set, so each one an event; each writer starts one
  every 100 ms, 80 events a second in all), of the time from the write's commit to the moment
  a local receiver (its own process) got the webhook; two ``db_worker`` processes deliver
  (``--interval 0.05``), the writes starting once both poll the queue (not while they are
  still starting: seconds). Goal ≤ 1,000 ms. ``burst_p99_ms``: the same with the writers back to
  back (what a backlog adds).
- ``write_overhead`` — a write to an app with 3 webhooks subscribed to ``change_set.created``
  over the same write to an app with none (medians of 640 writes each, taken one and one in
  turn; each write starts a set, so each one stores an event and enqueues its delivery).
  Goal ≤ 1.1.
- ``joining_write_overhead`` — the same for writes that join their agent's turn (no event):
  both sides do the same work, so its distance from 1.0 is the measurement's own noise.

Each side writes to ``APPS`` apps in turn, so that each app stays below its retention limit
(200 points: no write prunes) while the medians rest on enough writes to be stable: with 160
writes a side and rounds of 40, identical work measured 0.79–1.13 (docs/performance.md#notify-lean).
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _setup import ROOT, setup_django  # noqa: E402

EVENTS = 200
WRITERS = 8
WORKERS = 2
# Each writer starts a set every PAUSE seconds (8 writers: 80 events a second); the burst
# figure has them write back to back, as fast as the database takes them.
PAUSE = 0.1
# The overhead's writes: WRITES a side, spread over APPS apps a side (each below its retention
# limit), a subscribed and a plain write one after the other.
WRITES = 640
APPS = 4
SECRET = "bench-secret-0123456789"

RECEIVER = r"""
import sys, time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        at = time.time()
        self.send_response(204)
        self.end_headers()
        sys.stdout.write(f"{at} {body.decode()}\n")
        sys.stdout.flush()

server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
sys.stdout.write(f"{server.server_address[1]}\n")
sys.stdout.flush()
server.serve_forever()
"""


def start_receiver() -> tuple[subprocess.Popen, int, dict[str, float]]:
    """A receiver in its own process; returns it, its port and {change set id: receipt time}."""
    proc = subprocess.Popen(
        [sys.executable, "-c", RECEIVER], stdout=subprocess.PIPE, text=True, bufsize=1
    )
    assert proc.stdout is not None
    port = int(proc.stdout.readline())
    received: dict[str, float] = {}

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            at, body = line.split(" ", 1)
            received[json.loads(body)["data"]["changeSet"]] = float(at)

    threading.Thread(target=read, daemon=True).start()
    return proc, port, received


def start_workers(n: int) -> list[subprocess.Popen]:
    """``n`` workers, returned once every one polls the queue: a worker takes seconds to start
    (Django, and the URLconf its system checks import), which the latency must not include."""
    env = {
        **os.environ,
        "DJANGO_DEBUG": "1",  # an http:// receiver on this machine (https only with 0)
        "VERSIONS_WEBHOOK_ALLOW_PRIVATE": "1",
    }
    command = [sys.executable, str(ROOT / "manage.py"), "db_worker", "--no-reload"]
    # -v 1: a worker says "Starting worker" as it begins to poll (and logs each task after),
    # to a file of its own (a pipe would need reading all along).
    command += ["--interval", "0.05", "--no-startup-delay", "-v", "1"]
    folder = Path(tempfile.mkdtemp(prefix="bench-workers-"))
    procs = []
    for i in range(n):
        with open(folder / f"{i}.log", "w") as log:  # the worker keeps its own descriptor
            procs.append(subprocess.Popen(command, cwd=ROOT, env=env, stdout=log))
    deadline = time.monotonic() + 120
    for i, proc in enumerate(procs):
        while "Starting worker" not in (folder / f"{i}.log").read_text():
            assert proc.poll() is None and time.monotonic() < deadline, "a worker did not start"
            time.sleep(0.05)
    shutil.rmtree(folder)  # the workers write on to their open (now nameless) files
    return procs


def alternating_medians(
    first: Callable[[int], object], second: Callable[[int], object], *, n: int, offset: int = 0
) -> tuple[float, float]:
    """Median ms of ``first(i)`` and ``second(i)`` over ``n`` calls each, one of each in turn,
    each going first every other time (so drift in the machine's load hits both alike), after a
    few calls of each to warm up."""
    for i in range(3):
        first(offset - 1 - i)
        second(offset - 1 - i)
    times: tuple[list[float], list[float]] = ([], [])
    pairs = list(zip((first, second), times, strict=True))
    for i in range(n):
        for func, func_ms in pairs if i % 2 else reversed(pairs):  # each goes first in turn
            start = time.perf_counter()
            func(offset + i)
            func_ms.append((time.perf_counter() - start) * 1000)
    return statistics.median(times[0]), statistics.median(times[1])


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def delivery_latency(app_slug: str, pause: float) -> list[float]:
    """Commit-to-receipt times (ms) of EVENTS writes from WRITERS threads, each pausing
    ``pause`` seconds between its writes."""
    from django.db import connections

    from versions import services
    from versions.models import PAGE

    receiver, port, received = start_receiver()
    services.change_app(
        app_slug,
        webhook={
            "add": {
                "url": f"http://127.0.0.1:{port}/hook",
                "secret": SECRET,
                "events": ["change_set.created"],
            }
        },
    )
    workers = start_workers(WORKERS)
    committed: dict[str, float] = {}
    lock = threading.Lock()
    try:

        def writer(w: int) -> None:
            try:
                for i in range(EVENTS // WRITERS):
                    receipt = services.write_artifact(
                        app_slug, PAGE, f"w{w}", f"{w} {i}\n", tool="bench", run_id=f"{w}-{i}"
                    )
                    at = time.time()
                    with lock:
                        committed[receipt.change_set_id] = at
                    time.sleep(pause)
            finally:
                connections.close_all()

        threads = [threading.Thread(target=writer, args=(w,)) for w in range(WRITERS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        deadline = time.monotonic() + 120
        while len(received) < len(committed) and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        for proc in [*workers, receiver]:
            proc.terminate()
        for proc in [*workers, receiver]:
            proc.wait(30)
    missing = set(committed) - set(received)
    assert not missing, f"{len(missing)} events never arrived"
    return [(received[k] - committed[k]) * 1000 for k in committed]


def main() -> None:
    vendor = setup_django()
    from django.conf import settings

    from versions import services
    from versions.models import PAGE, App

    settings.VERSIONS_WEBHOOK_ALLOW_PRIVATE = True
    settings.VERSIONS_WEBHOOK_REQUIRE_HTTPS = False
    # The latency first, on an empty queue (the overhead's writes below leave theirs queued).
    App.objects.create(slug="latency", name="Latency")
    latencies = delivery_latency("latency", PAUSE)
    App.objects.create(slug="burst", name="Burst")
    burst = delivery_latency("burst", 0)
    subscribed = [
        App.objects.create(slug=f"subscribed-{k}", name="Subscribed") for k in range(APPS)
    ]
    plain = [App.objects.create(slug=f"plain-{k}", name="Plain") for k in range(APPS)]
    for app in subscribed:
        for n in range(3):
            services.change_app(
                app,
                webhook={
                    "add": {
                        "url": f"http://127.0.0.1:9/hook{n}",  # never called: no worker runs
                        "secret": SECRET,
                        "events": ["change_set.created", "review.submitted"],
                    }
                },
            )

    def new_set(apps: list[App]):
        return lambda i: services.write_artifact(
            apps[i % APPS], PAGE, "index", f"v{i}\n", tool="bench", run_id=f"run-{i}"
        )

    def joining(apps: list[App]):
        return lambda i: services.write_artifact(
            apps[i % APPS], PAGE, "joined", f"j{i}\n", tool="bench", run_id="one-turn"
        )

    # Below the retention limit (200 points an app): every write captures without pruning.
    hooked_ms, plain_ms = alternating_medians(new_set(subscribed), new_set(plain), n=WRITES)
    join_hooked, join_plain = alternating_medians(
        joining(subscribed), joining(plain), n=WRITES // 8, offset=10_000
    )
    p50, p99 = statistics.median(latencies), percentile(latencies, 0.99)
    burst_p99 = percentile(burst, 0.99)
    print(
        f"{vendor}: a write starting a set: 3 webhooks {hooked_ms:.3f} ms, none {plain_ms:.3f} ms"
    )
    print(f"{vendor}: a write joining its turn: {join_hooked:.3f} ms, none {join_plain:.3f} ms")
    print(f"{vendor}: commit to receipt, {len(latencies)} events: p50 {p50:.0f}, p99 {p99:.0f} ms")
    print(f"{vendor}: the same, writers back to back: p99 {burst_p99:.0f} ms")
    print(
        json.dumps(
            {
                "bench": "notify",
                "db": vendor,
                "events": len(latencies),
                "writers": WRITERS,
                "workers": WORKERS,
                "delivery_p50_ms": round(p50, 1),
                "delivery_p99_ms": round(p99, 1),
                "burst_p99_ms": round(burst_p99, 1),
                "write_ms": round(hooked_ms, 3),
                "plain_write_ms": round(plain_ms, 3),
                "write_overhead": round(hooked_ms / plain_ms, 2),
                "joining_write_overhead": round(join_hooked / join_plain, 2),
            }
        )
    )


if __name__ == "__main__":
    main()
