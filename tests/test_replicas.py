"""Read replicas against a real hot standby (docs/operations.md#read-replicas).

The set-up makes its own PostgreSQL primary and a streaming standby of it (``initdb``,
``pg_basebackup -R``; tests/replica_helpers.py), migrates the primary, and runs the site under
gunicorn with ``DATABASE_REPLICA_URLS`` naming the standby. The tests talk to it over HTTP only,
as a person in a browser, a visitor of the live app and an agent with a token. Pausing the
standby's replay (``pg_wal_replay_pause``) makes it visibly behind, so a read that came from it
shows the older state.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from replica_helpers import (
    Browser,
    Clusters,
    Server,
    make_clusters,
    manage,
    start_server,
    why_no_replication,
)

pytestmark = [pytest.mark.slow]  # its own PostgreSQL clusters, whatever DATABASE_URL says

MAX_LAG = 6.0  # the servers' VERSIONS_REPLICA_MAX_LAG_SECONDS
CHECK = 0.2  # VERSIONS_REPLICA_CHECK_SECONDS
PIN = 2.0  # VERSIONS_REPLICA_PIN_SECONDS
PASSWORD = "pw-replica-123456"

SETUP = """
from django.contrib.auth import get_user_model
from versions.models import App
from versions import services
get_user_model().objects.create_superuser("owner", "owner@example.com", "{password}")
App.objects.create(slug="quotes", name="Quotes")
token, _ = services.create_agent_token("owner", ["quotes"], can_promote=True)
print("TOKEN=" + token)
"""


@dataclass
class Site:
    clusters: Clusters
    server: Server
    token: str
    person: Browser

    def write(self, source: str, run_id: str) -> dict:
        status, body = Browser(self.server.base).request(
            "/api/v1/apps/quotes/artifacts/pltf_page/index",
            method="PUT",
            body={"source": source, "run_id": run_id},
            token=self.token,
        )
        assert status in (200, 201), body
        return json.loads(body)

    def visitor_sees(self) -> str:
        status, body = Browser(self.server.base).request("/apps/quotes/")
        assert status == 200, body
        return body

    def settled(self) -> None:
        """The standby has replayed everything, and every pin made so far has run out."""
        self.clusters.wait_caught_up()
        time.sleep(PIN + 0.2)


@pytest.fixture(scope="module")
def site() -> Iterator[Site]:
    reason = why_no_replication()
    if reason:
        pytest.skip(reason)
    clusters = make_clusters()
    server = None
    try:
        manage(clusters.primary_url, "migrate", "--noinput")
        out = manage(clusters.primary_url, "shell", "-c", SETUP.format(password=PASSWORD))
        token = re.search(r"TOKEN=(\S+)", out).group(1)  # type: ignore[union-attr]
        server = start_server(
            clusters,
            VERSIONS_REPLICA_MAX_LAG_SECONDS=str(MAX_LAG),
            VERSIONS_REPLICA_CHECK_SECONDS=str(CHECK),
            VERSIONS_REPLICA_PIN_SECONDS=str(PIN),
        )
        person = Browser(server.base)
        person.sign_in("owner", PASSWORD)
        yield Site(clusters, server, token, person)
    finally:
        if server is not None:
            server.stop()
        clusters.remove()


@pytest.fixture
def paused(site: Site) -> Iterator[None]:
    """The standby stops replaying (it keeps receiving) until the test ends."""
    site.clusters.pause_replay()
    try:
        yield
    finally:
        site.clusters.resume_replay()
        site.clusters.wait_caught_up()


def test_reads_of_the_live_app_are_answered_by_the_standby(site: Site) -> None:
    site.write("<p>standby one</p>", "standby-1")
    site.settled()
    before = site.clusters.transactions(site.clusters.standby_port)
    for _ in range(10):
        assert "standby one" in site.visitor_sees()
    deadline = time.monotonic() + 5  # the standby's backends report their counts as they end
    while site.clusters.transactions(site.clusters.standby_port) < before + 10:
        assert time.monotonic() < deadline, "the live app's reads did not reach the standby"
        time.sleep(0.1)

    # And what the visitor saw is the standby's state: with its replay paused, a new write is
    # not seen until the standby replays it.
    site.clusters.pause_replay()
    try:
        site.write("<p>standby two</p>", "standby-2")
        assert "standby one" in site.visitor_sees()
    finally:
        site.clusters.resume_replay()
    deadline = time.monotonic() + MAX_LAG
    while "standby two" not in site.visitor_sees():
        assert time.monotonic() < deadline
        time.sleep(0.05)


def test_a_persons_own_restore_shows_on_their_next_page(site: Site) -> None:
    site.write("<p>before the turn</p>", "restore-base")
    turn = site.write("<p>after the turn</p>", "restore-turn")
    site.settled()
    site.clusters.pause_replay()
    try:
        status, page = site.person.request(
            f"/apps/quotes/versions/change-sets/{turn['changeSetId']}/restore/",
            method="POST",
            form={"csrfmiddlewaretoken": site.person.cookie("csrftoken") or ""},
        )
        # The next page is the restore's receipt: the restore set exists only on the primary.
        assert status == 200, page
        assert "Undo this restore" in page
        status, live = site.person.request("/apps/quotes/")
        assert status == 200 and "before the turn" in live
        # A visitor, who wrote nothing, reads the standby: it has not replayed the restore yet.
        assert "after the turn" in site.visitor_sees()
    finally:
        site.clusters.resume_replay()
    site.clusters.wait_caught_up()
    assert "before the turn" in site.visitor_sees()


def test_an_agents_own_write_shows_in_its_next_history_read(site: Site, paused: None) -> None:
    receipt = site.write("<p>agent wrote this</p>", "history-own")
    status, body = Browser(site.server.base).request(
        "/api/v1/apps/quotes/artifacts/pltf_page/index/history", token=site.token
    )
    assert status == 200, body
    assert receipt["restorePointId"] in [item["id"] for item in json.loads(body)["items"]]


def test_the_live_app_follows_a_promotion_within_the_lag_bound(site: Site) -> None:
    api = Browser(site.server.base)

    def promote() -> None:
        status, body = api.request(
            "/api/v1/apps/quotes/deployments", method="POST", body={}, token=site.token
        )
        assert status in (200, 201), body

    site.write("<p>release A</p>", "promote-a")
    promote()
    site.write("<p>draft B</p>", "promote-b")  # the live app serves production: still A
    site.settled()
    assert "release A" in site.visitor_sees()
    site.clusters.pause_replay()
    try:
        promote()
        promoted = time.monotonic()
        # The standby has not replayed the promotion: the live app still serves A from it …
        assert "release A" in site.visitor_sees()
        # … and serves B once the standby is further behind than the bound allows.
        while "draft B" not in site.visitor_sees():
            assert time.monotonic() - promoted < MAX_LAG + CHECK + 2, "still serving release A"
            time.sleep(0.1)
    finally:
        site.clusters.resume_replay()
    site.clusters.wait_caught_up()
    assert "draft B" in site.visitor_sees()


def test_a_stopped_standby_costs_one_retry_never_an_error(site: Site) -> None:
    # A server that trusts its last check for a minute: the stopped standby is found by the
    # request that tries it, not by a check.
    trusting = start_server(
        site.clusters,
        VERSIONS_REPLICA_MAX_LAG_SECONDS=str(MAX_LAG),
        VERSIONS_REPLICA_CHECK_SECONDS="60",
        VERSIONS_REPLICA_PIN_SECONDS=str(PIN),
    )
    try:
        site.settled()
        served = site.visitor_sees()
        visitor = Browser(trusting.base)
        person = Browser(trusting.base)
        person.sign_in("owner", PASSWORD)
        time.sleep(PIN + 0.2)
        assert visitor.request("/apps/quotes/")[1] == served  # the standby, checked
        site.clusters.stop("standby")
        for browser, path, token in (
            (visitor, "/apps/quotes/", None),
            (person, "/apps/quotes/versions/", None),
            (visitor, "/api/v1/apps/quotes/artifacts/pltf_page/index/history", site.token),
            (visitor, "/apps/quotes/", None),
        ):
            status, body = browser.request(path, token=token)
            assert status == 200, body
        assert visitor.request("/apps/quotes/")[1] == served
        # The server that checks often skips it without trying.
        assert site.visitor_sees() == served
        retries = trusting.log_text().count("retried on the primary")
        assert retries == 1, trusting.log_text()
    finally:
        trusting.stop()
        if not site.clusters.running("standby"):
            site.clusters.start("standby")
        site.clusters.wait_caught_up()
