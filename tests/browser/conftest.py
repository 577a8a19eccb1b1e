"""Playwright (sync) driving Debian's Chromium against pytest-django's live server."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

# The sync Playwright API runs an event loop in this thread; Django's ORM calls from the test
# body are still synchronous and safe here.
os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]
PASSWORD = "correct-horse-battery"


@pytest.fixture(scope="session")
def browser() -> Iterator:
    if not Path(CHROMIUM).exists():
        pytest.fail(f"Chromium is needed at {CHROMIUM} for the browser tests")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        chromium = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


class PageProblems:
    """What must never happen on a page: a JS dialog (XSS), a script error, anything the
    Content-Security-Policy refused (an inline script, style or handler the panel relied on)."""

    def __init__(self) -> None:
        self.dialogs: list[str] = []
        self.errors: list[str] = []
        self.csp: list[str] = []

    def on_console(self, message) -> None:
        if "Content Security Policy" in message.text:
            self.csp.append(f"{message.text} ({message.location.get('url', '')})")

    def assert_none_refused(self) -> None:
        assert self.csp == [], f"the Content-Security-Policy refused: {self.csp}"


@pytest.fixture
def problems() -> PageProblems:
    return PageProblems()


class InFlight:
    """The requests a browser context has sent and not yet seen answered (any of its pages)."""

    def __init__(self, context) -> None:
        self.pending: set = set()
        context.on("request", lambda request: self.pending.add(request))
        context.on("requestfinished", lambda request: self.pending.discard(request))
        context.on("requestfailed", lambda request: self.pending.discard(request))


def _settle(page, in_flight: InFlight, timeout_ms: int = 5_000) -> None:
    """Wait until the context's requests are answered (at most ``timeout_ms``), so no request
    still runs on the live server while the test's database is flushed: a test may end right
    after an action whose refreshes are still loading (SQLite then reported "database table
    is locked" in the flush, and the next test found the rows left behind)."""
    waited = 0
    while in_flight.pending and waited < timeout_ms and not page.is_closed():
        page.wait_for_timeout(25)
        waited += 25


def _new_page(browser, problems: PageProblems, width: int = 1280, height: int = 900, **options):
    context = browser.new_context(viewport={"width": width, "height": height}, **options)
    context.in_flight = InFlight(context)
    page = context.new_page()
    page.set_default_timeout(10_000)

    def on_dialog(dialog) -> None:
        problems.dialogs.append(f"{dialog.type}: {dialog.message}")
        dialog.dismiss()

    page.on("dialog", on_dialog)
    page.on("pageerror", lambda exc: problems.errors.append(str(exc)))
    context.on("console", problems.on_console)  # every page of the context, frames included
    return context, page


def _close(context, page) -> None:
    _settle(page, context.in_flight)
    context.close()


# The page fixtures ask for ``transactional_db`` so that they close (after their requests are
# answered) before the test's database is flushed.
@pytest.fixture
def page(browser, live_server, transactional_db, problems: PageProblems) -> Iterator:
    context, pg = _new_page(browser, problems)
    yield pg
    _close(context, pg)
    assert problems.dialogs == [], f"a JavaScript dialog opened: {problems.dialogs}"
    assert problems.errors == [], f"script errors on the page: {problems.errors}"
    problems.assert_none_refused()


@pytest.fixture
def phone_page(browser, live_server, transactional_db, problems: PageProblems) -> Iterator:
    context, pg = _new_page(browser, problems, width=390, height=844)
    yield pg
    _close(context, pg)
    assert problems.dialogs == [], f"a JavaScript dialog opened: {problems.dialogs}"
    problems.assert_none_refused()


@pytest.fixture
def make_user(transactional_db):
    from django.contrib.auth.models import Permission, User

    def make(username: str, *codenames: str, superuser: bool = False) -> User:
        if superuser:
            return User.objects.create_superuser(username, f"{username}@example.com", PASSWORD)
        user = User.objects.create_user(username, password=PASSWORD)
        user.user_permissions.add(
            *Permission.objects.filter(content_type__app_label="versions", codename__in=codenames)
        )
        return user

    return make


@pytest.fixture
def sign_in(live_server):
    """Sign in through the login form, as a person does."""

    def do(page, username: str) -> None:
        page.goto(f"{live_server.url}/")
        assert "/accounts/login/" in page.url
        page.get_by_label("Username").fill(username)
        page.get_by_label("Password").fill(PASSWORD)
        page.get_by_role("button", name="Sign in").click()
        page.wait_for_url(f"{live_server.url}/")

    return do


@pytest.fixture
def demo_signed_in(make_user, sign_in):
    """The demo app loaded and ``page`` signed in as a superuser; returns the demo's agent
    turn (the change set a person reviews and restores)."""
    from versions.management.commands.load_demo import DEMO_SLUG, load_demo
    from versions.models import ChangeSet

    def do(page, username: str = "rvaid"):
        load_demo()
        make_user(username, superuser=True)
        sign_in(page, username)
        return ChangeSet.objects.get(app__slug=DEMO_SLUG, run_id="demo-agent-turn-1")

    return do


class Demo:
    """The demo app with its second app (``second``) and its accounts (owner ``demo``,
    reviewer), loaded; ``turn`` is the id of the agent's turn a person reviews."""

    def __init__(self, live_server) -> None:
        from versions.management.commands.load_demo import (
            DEMO_SLUG,
            SECOND_SLUG,
            demo_accounts,
            load_demo,
            load_second_app,
        )
        from versions.models import ChangeSet

        load_demo()
        load_second_app()
        demo_accounts()
        self.url = live_server.url
        self.slug, self.second = DEMO_SLUG, SECOND_SLUG
        self.turn = ChangeSet.objects.get(app__slug=DEMO_SLUG, run_id="demo-agent-turn-1").id

    def sign_in(self, page, username: str, password: str) -> None:
        """Sign in through the login form, as a person does."""
        page.goto(f"{self.url}/")
        page.get_by_label("Username").fill(username)
        page.get_by_label("Password").fill(password)
        page.get_by_role("button", name="Sign in").click()
        page.wait_for_url(f"{self.url}/")

    def as_owner(self, page) -> None:
        from versions.management.commands.load_demo import DEMO_PASSWORD, DEMO_USER

        self.sign_in(page, DEMO_USER, DEMO_PASSWORD)

    def as_reviewer(self, page) -> None:
        from versions.management.commands.load_demo import REVIEWER_PASSWORD, REVIEWER_USER

        self.sign_in(page, REVIEWER_USER, REVIEWER_PASSWORD)


@pytest.fixture
def demo(transactional_db, live_server) -> Demo:
    return Demo(live_server)


# axe-core (the npm package, installed by `make install` into .venv/node) checks each panel page
# and state for accessibility problems; serious and critical ones fail the test.
AXE_JS = Path(sys.prefix) / "node" / "node_modules" / "axe-core" / "axe.min.js"


@pytest.fixture(scope="session")
def axe_source() -> str:
    if not AXE_JS.exists():
        pytest.fail(f"axe-core is needed at {AXE_JS}: run `make install`")
    return AXE_JS.read_text(encoding="utf-8")


@pytest.fixture
def axe(axe_source: str):
    """``axe(page, what)``: run axe-core on the page as it is now and fail on any serious or
    critical violation, or any heading-order one (headings in order,
    docs/architecture.md#reviewing)."""

    def check(page, what: str) -> None:
        if not page.evaluate("typeof window.axe !== 'undefined'"):
            page.evaluate(axe_source)
        found = page.evaluate(
            """async () => {
                const r = await axe.run(document, {resultTypes: ['violations']});
                return r.violations.map(v => ({
                    id: v.id, impact: v.impact, help: v.help,
                    nodes: v.nodes.slice(0, 5).map(n => n.target.join(' ') + ': ' +
                        (n.failureSummary || '').replace(/\\s+/g, ' ').slice(0, 160)),
                    count: v.nodes.length,
                }));
            }"""
        )
        bad = [
            v for v in found if v["impact"] in ("serious", "critical") or v["id"] == "heading-order"
        ]
        assert not bad, f"axe-core on {what}: " + "; ".join(
            f"{v['id']} ({v['impact']}, {v['count']} nodes): {v['help']} — {v['nodes']}"
            for v in bad
        )

    return check


SIZES = {"desktop": (1280, 900), "phone": (390, 844)}


@pytest.fixture(params=list(SIZES))
def sized_page(request, browser, live_server, transactional_db, problems):
    """A page at 1280 and at 390 px (a test using it runs at both), in a time zone that is
    not UTC, failing the test on any script error."""
    width, height = SIZES[request.param]
    context, page = _new_page(browser, problems, width, height, timezone_id="Asia/Tokyo")
    yield page
    _close(context, page)
    assert problems.errors == [], problems.errors
    problems.assert_none_refused()


@pytest.fixture
def demo_sets(make_user, sign_in):
    """The demo loaded and ``page`` signed in as a superuser; returns (the agent's turn, the
    demo's first set)."""
    from versions.management.commands.load_demo import DEMO_SLUG, load_demo
    from versions.models import ChangeSet

    def do(page):
        load_demo()
        make_user("rvaid", superuser=True)
        sign_in(page, "rvaid")
        agent = ChangeSet.objects.get(app__slug=DEMO_SLUG, run_id="demo-agent-turn-1")
        setup = ChangeSet.objects.filter(app__slug=DEMO_SLUG).exclude(pk=agent.pk).get()
        return agent, setup

    return do
