"""Read replicas under load: 16 clients against two gunicorn servers, without and then with a
hot standby (docs/operations.md#read-replicas, docs/performance.md#read-replicas).

Run: ``.venv/bin/python tests/perf/bench_replicas.py`` (as root or as a user who may run
``initdb``; the PostgreSQL server binaries must be installed). It makes its own primary and
streaming standby (tests/replica_helpers.py), migrates the primary, fills a few apps with
history through the services, then runs the same load twice for ``--seconds`` each:

1. two servers (``--workers`` each) on the primary alone;
2. the same two servers started with ``DATABASE_REPLICA_URLS`` naming the standby.

The load: ``--clients`` threads, each one a visitor of a live app, a person reading panel pages
or an agent reading history and writing now and then (one request in ``--write-every``), spread
over both servers. It prints, per phase, the requests, the errors (any answer but 2xx/3xx, or
no answer), requests per second, and what each server's ``pg_stat_database`` counted for the
database: transactions and rows read (``tup_returned + tup_fetched``). ``primary_read_share``
is the primary's rows read over both servers' (1.0 without a standby). The last line is JSON.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from replica_helpers import (  # noqa: E402
    DATABASE,
    Browser,
    Clusters,
    make_clusters,
    manage,
    start_server,
    why_no_replication,
)

PASSWORD = "pw-bench-123456"
APPS = 6

FILL = """
from django.contrib.auth import get_user_model
from versions.models import App
from versions import services
owner = get_user_model().objects.create_superuser("owner", "owner@example.com", "{password}")
slugs = []
for a in range({apps}):
    app = App.objects.create(slug=f"app{{a}}", name=f"App {{a}}")
    slugs.append(app.slug)
    for turn in range(20):
        for n in range(3):
            body = "".join(f"<li>row {{i}} of turn {{turn}}</li>\\n" for i in range(40 + n))
            services.write_artifact(
                app, "pltf_page", ("index", "about", "help")[n], body,
                requested_by="bench", tool="t:bench", run_id=f"turn-{{turn}}",
            )
for a in range(4):
    token, _ = services.create_agent_token("owner", slugs)
    print("TOKEN=" + token)
"""


def counters(clusters: Clusters, port: int) -> dict[str, int]:
    with clusters.connect(port, "postgres") as conn:
        conn.execute("SELECT pg_stat_clear_snapshot()")
        row = conn.execute(
            "SELECT xact_commit + xact_rollback, tup_returned + tup_fetched "
            "FROM pg_stat_database WHERE datname = %s",
            [DATABASE],
        ).fetchone()
    assert row is not None
    return {"transactions": int(row[0]), "rows_read": int(row[1])}


KINDS = ("visitor", "person", "agent", "visitor")


def browsers_for(bases: list[str], clients: int) -> list[Browser]:
    """One browser a client, spread over the servers; the people among them signed in."""
    browsers = []
    for number in range(clients):
        browser = Browser(bases[number % len(bases)])
        if KINDS[number % 4] == "person":
            browser.sign_in("owner", PASSWORD)
        browsers.append(browser)
    return browsers


def run_load(
    browsers: list[Browser], tokens: list[str], seconds: float, write_every: int
) -> dict[str, float]:
    stop = time.monotonic() + seconds
    done = {"requests": 0, "errors": 0, "writes": 0}
    lock = threading.Lock()
    failures: list[str] = []

    def client(number: int) -> None:
        browser = browsers[number]
        kind = KINDS[number % 4]
        token = tokens[number % len(tokens)]
        rng = random.Random(number)
        n = 0
        while time.monotonic() < stop:
            slug = f"app{rng.randrange(APPS)}"
            n += 1
            write = False
            if kind == "visitor":
                path, method, body, auth = f"/apps/{slug}/p/about", "GET", None, None
            elif kind == "person":
                page = rng.choice(["", "points/", "activity/"])
                path, method, body, auth = f"/apps/{slug}/versions/{page}", "GET", None, None
            elif n % write_every == 0:
                write = True
                path, method, auth = f"/api/v1/apps/{slug}/artifacts/pltf_page/help", "PUT", token
                body = {"source": f"<p>load {number} {n}</p>", "run_id": f"load-{number}"}
            else:
                path, method, body, auth = (
                    f"/api/v1/apps/{slug}/artifacts/pltf_page/index/history",
                    "GET",
                    None,
                    token,
                )
            try:
                status, text = browser.request(path, method=method, body=body, token=auth)
                ok = status < 400
            except OSError as exc:
                status, text, ok = 0, str(exc), False
            with lock:
                done["requests"] += 1
                done["writes"] += write
                if not ok:
                    done["errors"] += 1
                    if len(failures) < 5:
                        failures.append(f"{method} {path}: {status} {text[:200]}")

    threads = [threading.Thread(target=client, args=(i,)) for i in range(len(browsers))]
    started = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.monotonic() - started
    for failure in failures:
        print("  error:", failure)
    return {**done, "per_second": round(done["requests"] / elapsed, 1)}


def phase(
    clusters: Clusters,
    tokens: list[str],
    *,
    replicas: bool,
    args: argparse.Namespace,
) -> dict[str, object]:
    servers = [
        start_server(clusters, workers=args.workers, replicas=replicas, DATABASE_CONN_MAX_AGE="60")
        for _ in range(2)
    ]
    try:
        # Every worker reads once, and the people sign in, before the counting starts; their
        # sign-in (a write) pins them to the primary for VERSIONS_REPLICA_PIN_SECONDS (5).
        bases = [s.base for s in servers]
        run_load(browsers_for(bases, 4), tokens, 2, 10**9)
        browsers = browsers_for(bases, args.clients)
        clusters.wait_caught_up()
        time.sleep(6)
        before = {p: counters(clusters, p) for p in (clusters.primary_port, clusters.standby_port)}
        load = run_load(browsers, tokens, args.seconds, args.write_every)
    finally:
        for server in servers:
            server.stop()  # the servers' backends end and report their counts
    time.sleep(1.5)
    after = {p: counters(clusters, p) for p in (clusters.primary_port, clusters.standby_port)}
    primary = {
        k: after[clusters.primary_port][k] - before[clusters.primary_port][k]
        for k in after[clusters.primary_port]
    }
    standby = {
        k: after[clusters.standby_port][k] - before[clusters.standby_port][k]
        for k in after[clusters.standby_port]
    }
    rows = primary["rows_read"] + standby["rows_read"]
    return {
        **load,
        "primary": primary,
        "standby": standby,
        "primary_read_share": round(primary["rows_read"] / rows, 3) if rows else None,
        "primary_transaction_share": round(
            primary["transactions"] / (primary["transactions"] + standby["transactions"]), 3
        ),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--workers", type=int, default=2, help="gunicorn workers per server")
    parser.add_argument("--write-every", type=int, default=10, help="an agent's nth request writes")
    args = parser.parse_args()
    reason = why_no_replication()
    if reason:
        sys.exit(f"bench_replicas cannot run here: {reason}")
    clusters = make_clusters(max_connections=100)
    try:
        manage(clusters.primary_url, "migrate", "--noinput")
        out = manage(clusters.primary_url, "shell", "-c", FILL.format(password=PASSWORD, apps=APPS))
        tokens = re.findall(r"TOKEN=(\S+)", out)
        clusters.wait_caught_up()
        without = phase(clusters, tokens, replicas=False, args=args)
        print("primary alone:", json.dumps(without))
        with_standby = phase(clusters, tokens, replicas=True, args=args)
        print("with a standby:", json.dumps(with_standby))
    finally:
        clusters.remove()
    figures = {
        "date": datetime.now(UTC).strftime("%Y-%m-%d"),
        "clients": args.clients,
        "servers": 2,
        "workers_per_server": args.workers,
        "seconds": args.seconds,
        "errors": without["errors"] + with_standby["errors"],  # type: ignore[operator]
        "per_second_primary_alone": without["per_second"],
        "per_second_with_standby": with_standby["per_second"],
        "primary_read_share_alone": without["primary_read_share"],
        "primary_read_share_with_standby": with_standby["primary_read_share"],
        "primary_transaction_share_with_standby": with_standby["primary_transaction_share"],
    }
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
