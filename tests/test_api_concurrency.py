"""Twenty agents write the same artifact at once over HTTP, all from the same base hash."""

from __future__ import annotations

import hashlib
import json
import threading
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import pytest
from api_helpers import make_token, make_user

from versions import services
from versions.models import App, Artifact, RestorePoint

WRITERS = 20


def put(url: str, token: str, body: dict, barrier: threading.Barrier) -> tuple[int, dict]:
    request = urllib.request.Request(
        url,
        data=json.dumps(body).encode(),
        method="PUT",
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )
    barrier.wait(timeout=30)
    try:
        with urllib.request.urlopen(request, timeout=120) as response:  # noqa: S310
            return response.status, json.load(response)
    except urllib.error.HTTPError as error:
        return error.code, json.load(error)


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_twenty_concurrent_writers_with_one_base_hash_one_lands_nineteen_refused(live_server):
    app = App.objects.create(slug="quotes", name="Quotes")
    make_user("rvaid")
    token = make_token("rvaid", "quotes")
    base = services.write_artifact(
        app, "pltf_page", "index", "<h1>base</h1>\n", requested_by="setup", tool="fixtures"
    ).sha256
    url = f"{live_server.url}/api/v1/apps/quotes/artifacts/pltf_page/index"
    barrier = threading.Barrier(WRITERS)
    bodies = [
        {"source": f"<h1>writer {n}</h1>\n", "expected_sha256": base, "run_id": f"writer-{n}"}
        for n in range(WRITERS)
    ]
    with ThreadPoolExecutor(WRITERS) as pool:
        results = list(pool.map(lambda body: put(url, token, body, barrier), bodies))

    statuses = sorted(status for status, _ in results)
    assert statuses == [200] + [409] * (WRITERS - 1), statuses
    (winner,) = [body for status, body in results if status == 200]
    refused = [body for status, body in results if status == 409]
    assert all(body["error"] == "stale_write" for body in refused)
    assert all(body["current_sha256"] == winner["sha256"] for body in refused)

    # No lost update: the artifact holds the winner's bytes, and history has exactly one
    # capture after the base, whose previous state is the base.
    artifact = Artifact.objects.get(app=app, name="index")
    assert artifact.sha256 == winner["sha256"]
    assert hashlib.sha256(artifact.source.encode()).hexdigest() == winner["sha256"]
    captures = RestorePoint.objects.filter(artifact=artifact).order_by("created_on")
    assert captures.count() == 2
    last = captures.last()
    assert last.id == winner["restorePointId"]
    assert last.previous_sha256 == base
    assert last.previous_source == "<h1>base</h1>\n"
    assert last.tool == "api"
