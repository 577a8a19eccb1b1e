"""What stands between a state and production besides its artifacts
(docs/architecture.md#safe-promotion): checks run on the state before it ships, a production
freeze, a rollout already running. Each is a pre-flight rule of the one engine's move plans
(:class:`~versions.services.deployments.PromotePlan` and the rollout plans), never a second
path; this module holds the rules and what they read.

Checks run in-process: a built-in check reads the state's sources, an app's HTTP check sends
a request to the state's preview through the URL configuration — the very views that serve
``/apps/<slug>/at/<ref>/`` — with no network and no socket.
"""

from __future__ import annotations

import posixpath
import re
import unicodedata
from datetime import datetime
from html.parser import HTMLParser
from typing import Any
from urllib.parse import unquote

from django.http import HttpRequest
from django.urls import Resolver404, resolve
from django.utils import timezone

from versions import messages as words
from versions.errors import Forbidden, InvalidInput
from versions.models import (
    API_ROUTE,
    FRONTEND_MODULE,
    PAGE,
    STYLESHEET,
    App,
    AppCheck,
    PromotionPolicy,
)
from versions.services import refs as states
from versions.services.audit import Command, record
from versions.services.engine import Move, Request
from versions.services.receipts import CheckResult, Finding
from versions.services.routes import parse_route_spec
from versions.terms import CHECKS_OVERRIDDEN, MANAGE

# The paths a check may request, as below /apps/<slug>/.
_CHECK_PATH = re.compile(r"^/$|^/p/[^/]+$|^/assets/[^/]+\.(?:css|js)$|^/api/[^?#]+$")
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]*:")
_ASSET = re.compile(r"^assets/([^/]+)\.(css|js)$")
_ASSET_COLLECTIONS = {"css": STYLESHEET, "js": FRONTEND_MODULE}


# --------------------------------------------------------------------------------------------
# An app's HTTP checks: what owners may save
# --------------------------------------------------------------------------------------------


def clean_check_path(path: object) -> str:
    """A check's path, below the app's root; ``InvalidInput`` in words for one that would
    leave the app (``..``, ``//host``, a scheme, a query, backslashes, encoded dots)."""
    text = path if isinstance(path, str) else ""
    decoded = unquote(text)
    parts = decoded.split("/")
    escapes = (
        not text
        or len(text) > 300
        or not _CHECK_PATH.match(text)
        or "\\" in decoded
        or "//" in decoded
        or any(part in (".", "..") for part in parts)
        or any(unicodedata.category(c) in ("Cc", "Cs", "Zl", "Zp") for c in decoded)
        or posixpath.normpath(decoded) != decoded.rstrip("/")
        and decoded != "/"
    )
    if escapes:
        raise InvalidInput(words.CHECK_PATH_ESCAPES.format(path=str(path)[:120]), field="path")
    return text


def clean_check(
    *, name: object, method: object, path: object, expect_status: object, expect_text: object
) -> dict[str, Any]:
    """The fields of an HTTP check, each refused in words when it is not acceptable."""
    if (
        not isinstance(name, str)
        or not name.strip()
        or len(name.strip()) > 80
        or any(unicodedata.category(c) in ("Cc", "Cs") for c in name)
    ):
        raise InvalidInput(words.CHECK_BAD_NAME, field="name")
    if method not in (AppCheck.GET, AppCheck.HEAD):
        raise InvalidInput(words.CHECK_BAD_METHOD.format(method=str(method)[:20]), field="method")
    if isinstance(expect_status, str) and expect_status.strip().isdigit():
        expect_status = int(expect_status)
    if (
        isinstance(expect_status, bool)
        or not isinstance(expect_status, int)
        or not (100 <= expect_status <= 599)
    ):
        raise InvalidInput(
            words.CHECK_BAD_STATUS.format(status=str(expect_status)[:20]), field="expect_status"
        )
    text = expect_text if expect_text is not None else ""
    if (
        not isinstance(text, str)
        or len(text) > 200
        or any(unicodedata.category(c) in ("Cc", "Cs") for c in text)
    ):
        raise InvalidInput(words.CHECK_BAD_TEXT, field="expect_text")
    return {
        "name": " ".join(name.split()),
        "method": method,
        "path": clean_check_path(path),
        "expect_status": expect_status,
        "expect_text": text,
    }


# --------------------------------------------------------------------------------------------
# Running checks
# --------------------------------------------------------------------------------------------


def _preview_answer(app: App, ref: str, method: str, path: str) -> tuple[int, bytes]:
    """The answer of the state's preview to ``method path``, in-process: the request goes
    through the URL configuration to the view that serves ``/apps/<slug>/at/<ref>/…``."""
    url = states.preview_url(app, ref) + path.lstrip("/")
    request = HttpRequest()
    request.method = method
    request.path = request.path_info = url
    request.META = {
        "REQUEST_METHOD": method,
        "SERVER_NAME": "versions-check",
        "SERVER_PORT": "80",
        "PATH_INFO": url,
    }
    try:
        match = resolve(url)
    except Resolver404:
        return 404, b""
    response = match.func(request, *match.args, **match.kwargs)
    return response.status_code, bytes(response.content)


def run_http_check(app: App, ref: str, check: AppCheck) -> CheckResult:
    """One HTTP check against the state ``ref`` names: its status, then its text."""
    try:
        status, body = _preview_answer(app, ref, check.method, check.path)
    except Exception as exc:  # a state no rule foresaw: the check fails, in words
        return CheckResult(check.name, False, words.CHECK_CRASHED.format(error=type(exc).__name__))
    if status != check.expect_status:
        detail = words.CHECK_WRONG_STATUS.format(status=status, expected=check.expect_status)
        return CheckResult(check.name, False, detail)
    if check.expect_text and check.expect_text not in body.decode("utf-8", "replace"):
        detail = words.CHECK_TEXT_MISSING.format(status=status, text=check.expect_text)
        return CheckResult(check.name, False, detail)
    return CheckResult(check.name, True, words.CHECK_PASSED.format(status=status))


def run_http_checks(app: App, ref: str) -> list[CheckResult]:
    """Every HTTP check of the app against the state ``ref`` names, by name."""
    return [run_http_check(app, ref, check) for check in AppCheck.objects.filter(app=app)]


class _PageParser(HTMLParser):
    """Reads a page as a browser would, noting what no browser can read as intended (a raw
    text element or comment never closed, an end tag that closes nothing open) and every
    ``href`` / ``src`` it references."""

    VOID = frozenset(
        "area base br col embed hr img input link meta param source track wbr".split()  # noqa: SIM905
    )
    # End tags a browser accepts without a matching start (or with implied ones).
    LENIENT = frozenset(
        [
            "p",
            "br",
            "li",
            "dt",
            "dd",
            "option",
            "tr",
            "td",
            "th",
            "tbody",
            "thead",
            "tfoot",
            "html",
            "head",
            "body",
        ]
    )

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.open: list[str] = []
        self.problem: str | None = None
        self.refs: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for key, value in attrs:
            if key in ("href", "src") and value:
                self.refs.append(value.strip())
        if tag not in self.VOID:
            self.open.append(tag)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for key, value in attrs:
            if key in ("href", "src") and value:
                self.refs.append(value.strip())

    def handle_endtag(self, tag: str) -> None:
        if tag in self.open:
            while self.open and self.open.pop() != tag:
                pass
        elif tag not in self.LENIENT and tag not in self.VOID and self.problem is None:
            self.problem = words.PAGE_STRAY_END.format(tag=tag, line=self.getpos()[0])

    def finish(self) -> None:
        cdata = getattr(self, "cdata_elem", None)
        if cdata and self.problem is None:
            self.problem = words.PAGE_UNCLOSED.format(tag=cdata)
        elif self.rawdata.lstrip().startswith("<!--") and self.problem is None:
            self.problem = words.PAGE_UNCLOSED.format(tag="!--")
        self.close()


def _asset_key(page: str, ref: str) -> tuple[str, str] | None:
    """The (collection, name) of the asset a relative reference of ``page`` names, if any."""
    if not ref or ref.startswith(("/", "#", "\\")) or _SCHEME.match(ref):
        return None
    ref = ref.split("#", 1)[0].split("?", 1)[0]
    base = "" if page == "index" else "p/"
    resolved = posixpath.normpath(posixpath.join(base, unquote(ref)))
    found = _ASSET.match(resolved)
    if not found:
        return None
    return _ASSET_COLLECTIONS[found.group(2)], found.group(1)


def builtin_checks(state: states.AppState) -> tuple[list[CheckResult], list[Finding]]:
    """The built-in checks of a state: route specs valid and unique, pages parse as HTML,
    assets pages reference by relative paths exist. Route problems are findings of the
    promotion's own rule already; the others are findings here."""
    findings: list[Finding] = []
    present = state.present
    routes = [e for e in present if e.collection == API_ROUTE]
    pages = [e for e in present if e.collection == PAGE]
    texts = states.blob_texts({e.sha256 for e in routes + pages if e.sha256})
    problems, keys = 0, set()
    for entry in routes:
        try:
            key = parse_route_spec(texts.get(entry.sha256 or "", "")).key
        except InvalidInput:
            problems += 1
            continue
        problems += key in keys
        keys.add(key)
    s = "" if len(routes) == 1 else "s"
    route_check = CheckResult(
        words.BUILTIN_ROUTES,
        not problems,
        words.BUILTIN_ROUTES_BAD.format(count=problems, s="" if problems == 1 else "s")
        if problems
        else words.BUILTIN_ROUTES_OK.format(count=len(routes), s=s),
    )
    have = {(e.collection, e.name) for e in present}
    page_problems: list[str] = []
    asset_problems: list[str] = []
    asset_refs = 0
    for entry in pages:
        parser = _PageParser()
        parser.feed(texts.get(entry.sha256 or "", ""))
        parser.finish()
        if parser.problem:
            detail = words.BUILTIN_PAGES_BAD.format(page=entry.name, problem=parser.problem)
            page_problems.append(detail)
            findings.append(Finding(entry.name, PAGE, detail))
        for ref in parser.refs:
            asset = _asset_key(entry.name, ref)
            if asset is None:
                continue
            asset_refs += 1
            if asset not in have:
                detail = words.BUILTIN_ASSETS_BAD.format(page=entry.name, ref=ref[:200])
                asset_problems.append(detail)
                findings.append(Finding(entry.name, PAGE, detail))
    s = "" if len(pages) == 1 else "s"
    page_check = CheckResult(
        words.BUILTIN_PAGES,
        not page_problems,
        " ".join(page_problems) or words.BUILTIN_PAGES_OK.format(count=len(pages), s=s),
    )
    s = "" if asset_refs == 1 else "s"
    asset_check = CheckResult(
        words.BUILTIN_ASSETS,
        not asset_problems,
        " ".join(asset_problems) or words.BUILTIN_ASSETS_OK.format(count=asset_refs, s=s),
    )
    return [route_check, page_check, asset_check], findings


def checks_of_state(
    app: App, state: states.AppState, ref: str
) -> tuple[list[CheckResult], list[Finding]]:
    """Every check of the state a promotion would ship: built in, then the app's HTTP
    checks against its preview (``ref``), with a finding per failure."""
    results, findings = builtin_checks(state)
    for result in run_http_checks(app, ref):
        results.append(result)
        if not result.ok:
            findings.append(
                Finding(
                    result.name,
                    words.CHECK_COLLECTION,
                    words.FINDING_CHECK_FAILED.format(name=result.name, detail=result.detail),
                )
            )
    return results, findings


def rule_checks(move: Move, request: Request, *, override_reason: str) -> list[Finding]:
    """The checks of the state the move ships pass (the results go on ``move.checks``, then
    on the deployment and the receipt); an owner's reason promotes past failing ones, kept in
    the audit trail."""
    if move.state is None or move.noop:
        return []
    app = move.state.app
    move.checks, findings = checks_of_state(app, move.state, move.state.ref)
    if not findings or not override_reason:
        return findings
    actor = request.actor
    if actor is not None and (actor.token is not None or not actor.may(MANAGE, app)):
        raise Forbidden(words.CHECKS_OVERRIDE_NOT_OWNER.format(slug=app.slug))
    if not request.dry_run:
        record(
            CHECKS_OVERRIDDEN,
            actor=actor if actor is not None else Command(request.by or "command"),
            app=app,
            targets=[f.name for f in findings],
            reason=override_reason,
            details={"findings": [f"{f.name}: {f.reason}" for f in findings]},
        )
    return []


# --------------------------------------------------------------------------------------------
# Freeze and running rollouts
# --------------------------------------------------------------------------------------------


def policy_of(app: App | int) -> PromotionPolicy:
    """The app's watch settings and freeze (the defaults when it has no row)."""
    app_id = app if isinstance(app, int) else app.pk
    found = PromotionPolicy.objects.filter(app_id=app_id).first()
    return found if found is not None else PromotionPolicy(app_id=app_id)


def frozen(policy: PromotionPolicy, now: datetime | None = None) -> bool:
    """Whether the policy's freeze holds at ``now`` (a freeze with an end lifts by itself)."""
    if policy.frozen_on is None:
        return False
    return policy.frozen_until is None or policy.frozen_until > (now or timezone.now())


def frozen_words(app: App, policy: PromotionPolicy) -> str:
    until = policy.frozen_until
    return words.FROZEN.format(
        slug=app.slug,
        since=f"{policy.frozen_on:%Y-%m-%d %H:%M} UTC" if policy.frozen_on else "",
        by=policy.frozen_by or "an owner",
        reason=policy.frozen_reason,
        until=words.FROZEN_UNTIL.format(until=f"{until:%Y-%m-%d %H:%M} UTC") if until else "",
    )


PRODUCTION_FINDING = "production"


def rule_not_frozen(move: Move, request: Request) -> list[Finding]:
    """Nothing is promoted — by hand, schedule or rollout — while production is frozen."""
    if move.noop:
        return []
    app = move.state.app if move.state is not None else None
    if app is None:
        return []
    policy = policy_of(app)
    if not frozen(policy):
        return []
    return [Finding(app.slug, PRODUCTION_FINDING, frozen_words(app, policy))]


def rule_no_rollout(move: Move, request: Request) -> list[Finding]:
    """A promotion or a new rollout waits until the running rollout completes or aborts: two
    rollouts at once are impossible."""
    app = move.state.app if move.state is not None else None
    if app is None or app.candidate_id is None:
        return []
    return [
        Finding(
            app.slug,
            PRODUCTION_FINDING,
            words.ROLLOUT_ALREADY_RUNNING.format(
                candidate=app.candidate_id, share=app.rollout_share
            ),
        )
    ]
