"""Load the demo app (a made-up quote-approval tool) through the capture service.

Its history is real: the first version of every artifact, promoted to production, then one
agent turn that changed the page and the stylesheet in the draft. So a new user sees a real
change set on first start, and production (``/apps/quote-approvals/``) unaffected by the turn
until they promote it; the draft is at ``/apps/quote-approvals/at/draft/``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand

from versions import selectors, services
from versions.models import App
from versions.terms import REVIEW

DEMO_SLUG = "quote-approvals"
DEMO_NAME = "Quote approvals (demo)"
DEMO_USER = "demo"
DEMO_PASSWORD = "demo-versions"  # noqa: S105 - a local demo sign-in, printed to the person
# A second demo account: a reviewer of the quote-approvals app only (docs/architecture.md#access),
# to see the difference a role makes: one app listed, no restore buttons, the other app a 404.
REVIEWER_USER = "reviewer"
REVIEWER_PASSWORD = "demo-reviewer"  # noqa: S105 - a local demo sign-in, printed to the person
# A second made-up app, which the reviewer has no role on.
SECOND_SLUG = "staff-directory"
SECOND_NAME = "Staff directory (demo)"
SECOND = [
    ("pltf_page", "index", "staff/index.html"),
    ("pltf_stylesheet", "App", "staff/App.css"),
]
FIXTURES = Path(settings.BASE_DIR) / "fixtures" / "demo"

# (collection, artifact name, fixture file)
INITIAL = [
    ("pltf_page", "index", "before/index.html"),
    ("pltf_stylesheet", "App", "before/App.css"),
    ("pltf_frontend_module", "quotes", "before/quotes.js"),
    ("pltf_api_route", "list-quotes", "before/list-quotes.json"),
    ("pltf_api_route", "quote-by-id", "before/quote-by-id.json"),
    ("pltf_server_script", "approve", "before/approve.js"),
]
PRODUCTION_NOTE = "The first version, reviewed before the agent's turn."
AGENT_TURN = [
    ("pltf_page", "index", "agent_turn/index.html", "devzone-agent:write_page"),
    ("pltf_stylesheet", "App", "agent_turn/App.css", "devzone-agent:write_stylesheet"),
]
# What the agent was asked and did (docs/api.md#turn-messages).
AGENT_MESSAGE = (
    "Asked: “make approving quotes quicker”. Added an Approve all button to the header, a "
    "danger style for it, and a hint that quotes are approved automatically after 24 hours."
)
# The reviewer's review of that turn, and a question on one line of the page
# (docs/architecture.md#reviews).
DEMO_REVIEW = (
    "The **Approve all** button is welcome, but it needs a confirmation before it approves "
    "everything.\n\nQuotes are *never* approved automatically: please take that hint out."
)
DEMO_LINE = "Every quote is approved automatically after 24 hours."
DEMO_COMMENT = "Where does the 24 hours come from? Nothing in `approve` does this."


def _read(relative: str) -> str:
    return (FIXTURES / relative).read_text(encoding="utf-8")


def load_demo(*, with_agent_turn: bool = True) -> App:
    """Create the demo app and its history; does nothing if it exists already."""
    app, created = services.add_app(DEMO_SLUG, DEMO_NAME, exist_ok=True)
    if not created:
        return app
    for collection, name, path in INITIAL:
        services.write_artifact(
            app,
            collection,
            name,
            _read(path),
            requested_by="setup",
            tool="fixtures:load_demo",
            run_id="demo-initial-version",
        )
    services.promote(app, by="setup", note=PRODUCTION_NOTE)
    if with_agent_turn:
        for collection, name, path, tool in AGENT_TURN:
            services.write_artifact(
                app,
                collection,
                name,
                _read(path),
                requested_by="rvaid",
                tool=tool,
                run_id="demo-agent-turn-1",
                message=AGENT_MESSAGE,
            )
    return app


def demo_review() -> None:
    """The reviewer's review of the demo turn (changes requested) and a thread on the line
    of the page that says quotes are approved automatically; once, when the demo has none."""
    app = App.objects.filter(slug=DEMO_SLUG).first()
    reviewer = get_user_model().objects.filter(username=REVIEWER_USER).first()
    if app is None or reviewer is None:
        return
    turns = [
        c
        for c in selectors.change_set_page(app, None).object_list
        if c.run_id == "demo-agent-turn-1"
    ]
    if not turns or turns[0].reviews.exists():
        return
    actor = services.actor_for_user(reviewer)
    if not actor.may(REVIEW, app):
        return  # a "reviewer" made by hand, without the role here: no demo review
    services.submit_review(turns[0].id, verdict="request_changes", body=DEMO_REVIEW, actor=actor)
    page = _read("agent_turn/index.html").split("\n")
    line = next((i for i, text in enumerate(page, 1) if DEMO_LINE in text), None)
    if line is not None:
        services.add_comment(
            turns[0].id,
            collection="pltf_page",
            name="index",
            side="after",
            line=line,
            body=DEMO_COMMENT,
            actor=actor,
        )


def load_second_app() -> App:
    """The second made-up app (a staff directory); does nothing if it exists already."""
    app, created = services.add_app(SECOND_SLUG, SECOND_NAME, exist_ok=True)
    if created:
        for collection, name, path in SECOND:
            services.write_artifact(
                app,
                collection,
                name,
                _read(path),
                requested_by="setup",
                tool="fixtures:load_demo",
                run_id="demo-staff-initial",
            )
    return app


def demo_accounts() -> list[tuple[str, str]]:
    """The demo superuser (owner of both apps) and the reviewer of the demo app only; made
    only on an empty user table. Returns the (username, password) pairs it made."""
    users = get_user_model().objects
    if users.exists():
        return []
    users.create_superuser(DEMO_USER, email="", password=DEMO_PASSWORD)
    users.create_user(REVIEWER_USER, email="", password=REVIEWER_PASSWORD)
    owner = services.Actor.command("load_demo")
    for slug in (DEMO_SLUG, SECOND_SLUG):
        services.add_member(slug, role="owner", username=DEMO_USER, actor=owner)
    services.add_member(DEMO_SLUG, role="reviewer", username=REVIEWER_USER, actor=owner)
    return [(DEMO_USER, DEMO_PASSWORD), (REVIEWER_USER, REVIEWER_PASSWORD)]


class Command(BaseCommand):
    help = (
        "Load the demo app (quote approvals): its first version in production, a real agent "
        "turn in the draft, and a demo sign-in."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument(
            "--no-user", action="store_true", help="Do not create the demo sign-in."
        )
        parser.add_argument(
            "--address",
            default="127.0.0.1:8000",
            help="host:port the panel will be served on (for the sign-in link it prints).",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        existed = App.objects.filter(slug=DEMO_SLUG).exists()
        load_demo()
        load_second_app()
        if existed:
            self.stdout.write(f"The demo app “{DEMO_SLUG}” is already loaded.")
        else:
            self.stdout.write(self.style.SUCCESS(f"Loaded the demo app “{DEMO_SLUG}”."))
        if options["no_user"]:
            return
        made = demo_accounts()
        if not existed:
            demo_review()
        if made:
            self.stdout.write(
                f"Sign in at http://{options['address']}/accounts/login/ as “{DEMO_USER}” with the "
                f"password “{DEMO_PASSWORD}” (a local demo account; create your own with "
                f"`python manage.py createsuperuser`), or as “{REVIEWER_USER}” with "
                f"“{REVIEWER_PASSWORD}”: a reviewer of the quote approvals app only."
            )
