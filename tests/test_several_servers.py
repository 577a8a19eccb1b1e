"""Several servers sharing one PostgreSQL database (docs/architecture.md#live-app): a route saved,
then restored, through one server is served in its new form by the other at its next request, no
restart.

Two real gunicorn processes (one worker each, so one route-table cache each) serve the test
database; the test talks to them over HTTP only: the agent API on one, the live app on both.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from urllib.parse import quote

import pytest
from django.contrib.auth import get_user_model
from django.db import connection

from versions.models import App
from versions.services import (
    create_agent_token,
)

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True), pytest.mark.slow]

ROOT = Path(__file__).resolve().parent.parent
GUNICORN = Path(sys.executable).parent / "gunicorn"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def database_url() -> str:
    s = connection.settings_dict
    auth = quote(s["USER"] or "", safe="")
    if s.get("PASSWORD"):
        auth += ":" + quote(s["PASSWORD"], safe="")
    return f"postgres://{auth}@{s['HOST'] or '127.0.0.1'}:{s['PORT'] or 5432}/{s['NAME']}"


def request(url: str, *, method: str = "GET", body: dict | None = None, token: str | None = None):
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=20) as response:
            return response.status, response.read(), dict(response.headers)
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read(), dict(exc.headers)


@pytest.fixture
def servers():
    env = {
        **os.environ,
        "DATABASE_URL": database_url(),
        "DJANGO_DEBUG": "0",
        "DJANGO_SECRET_KEY": "several-servers-test-" + "k" * 50,  # production needs its own key
        "DJANGO_ALLOWED_HOSTS": "127.0.0.1,localhost",
    }
    procs, bases = [], []
    try:
        for _ in range(2):
            port = free_port()
            procs.append(
                subprocess.Popen(
                    [
                        str(GUNICORN),
                        "versions_site.wsgi",
                        "--bind",
                        f"127.0.0.1:{port}",
                        "--workers",
                        "1",
                        "--log-level",
                        "warning",
                    ],
                    cwd=ROOT,
                    env=env,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.PIPE,
                )
            )
            bases.append(f"http://127.0.0.1:{port}")
        for proc, base in zip(procs, bases, strict=True):
            deadline = time.monotonic() + 30
            while True:
                try:
                    request(f"{base}/apps/none/")
                    break
                except OSError:
                    if proc.poll() is not None or time.monotonic() > deadline:
                        raise RuntimeError(proc.stderr.read().decode() if proc.stderr else "")
                    time.sleep(0.1)
        yield bases
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def test_a_route_saved_then_restored_through_one_server_reaches_the_other(servers):
    one, other = servers
    App.objects.create(slug="quotes", name="Quotes")
    get_user_model().objects.create_user("owner", is_superuser=True)
    token, _ = create_agent_token("owner", ["quotes"])
    api = f"{one}/api/v1"

    def save(body_value, run_id):
        spec = {"method": "GET", "path": "/quotes/{id}", "body": {"id": "{id}", "v": body_value}}
        status, body, _ = request(
            f"{api}/apps/quotes/artifacts/pltf_api_route/quote",
            method="PUT",
            body={"source": json.dumps(spec), "run_id": run_id},
            token=token,
        )
        assert status in (200, 201), body
        return json.loads(body)

    def served(base):
        status, body, headers = request(f"{base}/apps/quotes/api/quotes/7")
        assert headers.get("Content-Security-Policy") == "sandbox allow-scripts allow-forms"
        return status, (json.loads(body) if status == 200 else None)

    save("v1", "setup")
    # Both servers load their route tables now.
    assert served(one) == (200, {"id": "7", "v": "v1"})
    assert served(other) == (200, {"id": "7", "v": "v1"})

    receipt = save("v2", "turn")
    assert served(other) == (200, {"id": "7", "v": "v2"})

    status, body, _ = request(
        f"{api}/change-sets/{receipt['changeSetId']}/restore", method="POST", body={}, token=token
    )
    assert status == 200, body
    restored = json.loads(body)
    assert restored["kind"] == "restore"
    assert served(other) == (200, {"id": "7", "v": "v1"})
    assert served(one) == (200, {"id": "7", "v": "v1"})

    # And the other way round: undo through the other server, seen by the first.
    status, body, _ = request(
        f"{other}/api/v1/change-sets/{restored['setId']}/restore",
        method="POST",
        body={},
        token=token,
    )
    assert status == 200, body
    assert served(one) == (200, {"id": "7", "v": "v2"})

    # A deletion reaches every server too.
    status, body, _ = request(
        f"{api}/apps/quotes/artifacts/pltf_api_route/quote", method="DELETE", token=token
    )
    assert status == 200, body
    assert served(other) == (404, None)
