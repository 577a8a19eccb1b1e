"""``demo_agent_turn``: play one agent turn against a running server, through the agent API.

The "agent" reads the demo app's page and stylesheet, changes both with one ``run_id`` and the
hashes it read (so a concurrent edit would be refused, not overwritten), and prints the change
set it made. Open the panel while it runs and a new change set appears, ready to Restore all.

It speaks plain HTTP with the standard library only, like any external agent would:

    python manage.py demo_agent_turn --url http://127.0.0.1:8000 --token <token>

Without ``--token`` (or ``$VERSIONS_API_TOKEN``) it creates a token for ``--user`` (default:
the demo sign-in) in the local database, which must be the one the server uses.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import urllib.error
import urllib.parse
import urllib.request
from datetime import UTC, datetime
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

TOKEN_ENV = "VERSIONS_API_TOKEN"
DEFAULT_APP = "quote-approvals"
PAGE = ("pltf_page", "index")
STYLESHEET = ("pltf_stylesheet", "App")
NOTICE = re.compile(r'\n?  <p class="agent-notice">.*?</p>', re.S)
NOTICE_RULE = re.compile(r"\n/\* agent-notice \*/\n\.agent-notice \{.*?\}\n", re.S)
# A different accent each turn, so every turn really changes the stylesheet.
ACCENTS = ["#2563eb", "#0f766e", "#b45309", "#7c3aed", "#be123c"]


class AgentApiError(Exception):
    def __init__(self, status: int, body: dict[str, Any]) -> None:
        super().__init__(body.get("message") or f"HTTP {status}")
        self.status = status
        self.body = body


class Command(BaseCommand):
    help = (
        "Play one agent turn against a running Versions server through the agent API: change "
        "the demo app's page and stylesheet in one change set."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--url", default="http://127.0.0.1:8000", help="The running server.")
        parser.add_argument("--app", default=DEFAULT_APP, metavar="SLUG")
        parser.add_argument("--token", default=None, help=f"An agent token; default: ${TOKEN_ENV}.")
        parser.add_argument(
            "--user",
            default="demo",
            help="Without a token: create one for this user in the local database.",
        )
        parser.add_argument("--message", default=None, help="The notice the agent adds.")

    def handle(self, *args: Any, **options: Any) -> None:
        base = options["url"].rstrip("/")
        if not base.startswith(("http://", "https://")):
            raise CommandError("--url must be an http:// or https:// address.")
        slug = options["app"]
        token = options["token"] or os.environ.get(TOKEN_ENV) or self._local_token(options, slug)
        now = datetime.now(UTC)
        # One run_id per turn: every write of this turn joins one change set.
        run_id = f"demo-agent-turn-{now:%Y%m%dT%H%M%S}-{secrets.token_hex(4)}"
        message = options["message"] or (
            "Quotes over $10,000 now need a second approver "
            f"(agent turn at {now:%H:%M:%S}.{now.microsecond // 1000:03d} UTC)."
        )

        def call(method: str, collection: str, name: str, body: Any = None) -> dict[str, Any]:
            path = "/".join(urllib.parse.quote(part, safe="") for part in (collection, name))
            return _request(
                method,
                f"{base}/api/v1/apps/{urllib.parse.quote(slug)}/artifacts/{path}",
                token,
                body,
            )

        try:
            page = call("GET", *PAGE)
            sheet = call("GET", *STYLESHEET)
            self.stdout.write(f"Agent read {PAGE[1]} ({page['sha256'][:12]}) and {STYLESHEET[1]}.")
            receipts = [
                call(
                    "PUT",
                    *PAGE,
                    {
                        "source": with_notice(page["source"], message),
                        "expected_sha256": page["sha256"],
                        "tool": "demo-agent:write_page",
                        "run_id": run_id,
                    },
                ),
                call(
                    "PUT",
                    *STYLESHEET,
                    {
                        "source": with_notice_rule(sheet["source"]),
                        "expected_sha256": sheet["sha256"],
                        "tool": "demo-agent:write_stylesheet",
                        "run_id": run_id,
                    },
                ),
            ]
        except AgentApiError as exc:
            extra = ""
            if exc.body.get("current_sha256"):
                extra = f" (current sha256 {exc.body['current_sha256'][:12]})"
            raise CommandError(f"The API answered {exc.status}: {exc}{extra}")
        except urllib.error.URLError as exc:
            raise CommandError(f"Cannot reach {base}: {exc.reason}. Is the server running?")

        for receipt in receipts:
            self.stdout.write(
                f"  wrote {receipt['artifact']['name']}: +{receipt['linesAdded']} "
                f"-{receipt['linesRemoved']} lines, restore point {receipt['restorePointId']}"
            )
        set_id = receipts[0]["changeSetId"]
        self.stdout.write(self.style.SUCCESS(f"Change set {set_id}"))
        self.stdout.write(f"See it in the panel: {base}/apps/{slug}/versions/")

    def _local_token(self, options: dict[str, Any], slug: str) -> str:
        from versions.errors import VersionsError
        from versions.services import create_agent_token

        try:
            token, _row = create_agent_token(
                options["user"], [slug], label="demo_agent_turn (created automatically)"
            )
        except VersionsError as exc:
            raise CommandError(
                f"{exc.message} Pass --token (python manage.py create_agent_token …) or --user."
            )
        self.stdout.write(f"Created an agent token for {options['user']} in the local database.")
        return token


def _request(method: str, url: str, token: str, body: Any = None) -> dict[str, Any]:
    data = json.dumps(body).encode("utf-8") if body is not None else None
    request = urllib.request.Request(  # noqa: S310 - the URL scheme is checked in handle()
        url,
        data=data,
        method=method,
        headers={
            "Authorization": f"Bearer {token}",
            "Content-Type": "application/json",
            "Accept": "application/json",
        },
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310
            return json.load(response)  # type: ignore[no-any-return]
    except urllib.error.HTTPError as error:
        try:
            payload = json.load(error)
        except ValueError:
            payload = {"message": error.reason}
        raise AgentApiError(error.code, payload if isinstance(payload, dict) else {})


def with_notice(page: str, message: str) -> str:
    """The page with the agent's notice at the top of <main> (replacing an earlier one)."""
    from html import escape

    page = NOTICE.sub("", page)
    notice = f'\n  <p class="agent-notice">{escape(message)}</p>'
    match = re.search(r"<main[^>]*>", page)
    if match is None:
        match = re.search(r"<body[^>]*>", page)
    if match is None:
        return page + notice + "\n"
    return page[: match.end()] + notice + page[match.end() :]


def with_notice_rule(stylesheet: str) -> str:
    """The stylesheet with a rule for the notice, in the next accent colour."""
    earlier = NOTICE_RULE.search(stylesheet)
    current = re.search(r"solid (#[0-9a-f]{6})", earlier.group(0)) if earlier else None
    position = ACCENTS.index(current.group(1)) if current and current.group(1) in ACCENTS else -1
    accent = ACCENTS[(position + 1) % len(ACCENTS)]
    stylesheet = NOTICE_RULE.sub("\n", stylesheet).rstrip("\n") + "\n"
    return (
        stylesheet
        + "\n/* agent-notice */\n.agent-notice {\n"
        + f"  border-left: 4px solid {accent};\n  padding: 0.5rem 1rem;\n"
        + "  background: #f8fafc;\n  font-weight: 600;\n}\n"
    )
