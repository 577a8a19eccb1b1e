"""The live app (docs/architecture.md#live-app): an app's artifacts served as a running app.

Pages at ``/apps/<slug>/`` (``index``) and ``/apps/<slug>/p/<page>``, stylesheets and frontend
modules at ``/apps/<slug>/assets/<name>.css|.js``, API routes from JSON route specs at
``/apps/<slug>/api/<path>``. Server scripts are stored and versioned, never served or run.

Everything here is agent-written and untrusted: every response carries a CSP ``sandbox``
header, so the served app runs in an opaque origin that cannot read the panel's cookies or call
the panel with the user's session.

Once an app has a production deployment (docs/architecture.md#environments), ``/apps/<slug>/``
serves it, byte for byte, whatever agents write to the draft afterwards; without one it serves the
draft as before. Previews serve any state below ``/apps/<slug>/at/<ref>/`` with the same paths:
``production`` to anyone, every other state only to a signed-in person who may view the app's
versions or to the holder of a signed, expiring link — which sits in the path
(``/apps/<slug>/at/<ref>/s/<signature>/…``) so the sandboxed page's relative links to its own
assets and routes, sent without cookies, carry it too.

Route tables are cached per process and per app, and reloaded when the app's
``route_generation`` moved: the route-save path bumps it after every committed route write or
restore, a promotion or rollback moves it with the production pointer, and each live request
reads it (one small query), so a change made through any server reaches every server at its
next request.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import json
import logging
import re
import secrets
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.core import signing
from django.db.models import OuterRef, Subquery
from django.http import HttpRequest, HttpResponse
from django.utils.timezone import now
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_http_methods

from versions import conf, services
from versions.errors import InvalidInput, NotFound
from versions.models import (
    FRONTEND_MODULE,
    PAGE,
    STYLESHEET,
    App,
    Artifact,
    Blob,
    DeploymentEntry,
)
from versions.request_meta import request_meta
from versions.services import (
    RouteSpec,
    parse_route_spec,
)
from versions.terms import (
    DRAFT,
    PRODUCTION,
    ROLLOUT_COOKIE,
)

logger = logging.getLogger(__name__)

CSP = "sandbox allow-scripts allow-forms"
CONTENT_TYPES = {
    PAGE: "text/html; charset=utf-8",
    STYLESHEET: "text/css; charset=utf-8",
    FRONTEND_MODULE: "text/javascript; charset=utf-8",
}
ASSET_COLLECTIONS = {"css": STYLESHEET, "js": FRONTEND_MODULE}
NOT_FOUND = "Not found."
METHOD_NOT_ALLOWED = "This route does not answer {method}."
ROUTE_FAILED = "This route could not be served. The error was logged on the server."
MISSING_IN_STATE = "Not found: “{name}” is missing from this state. {reason}"
# A page or asset the state does not hold: it did not exist yet then, or was deleted.
ABSENT_IN_STATE = "Not found: this state has no “{name}”: it did not exist then, or was deleted."
_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]{0,63})\}")
_PARAM_SEGMENT = re.compile(r"^\{([A-Za-z_][A-Za-z0-9_]{0,63})\}$")


def _sandboxed(response: HttpResponse) -> HttpResponse:
    response["Content-Security-Policy"] = CSP
    response["X-Content-Type-Options"] = "nosniff"
    response["Referrer-Policy"] = "no-referrer"
    # The panel frames previews of the app (sandboxed, beside their diff); no other site may.
    response["X-Frame-Options"] = "SAMEORIGIN"
    if conf.live_cors():
        # The sandbox gives the app's own page an opaque origin ("null"), so its fetch() of its
        # own API routes, or an ES module of its own, is a cross-origin read; a browser tells
        # it from another site's by nothing it sends. So the live app, which is public, is
        # readable from any origin — never with credentials (VERSIONS_LIVE_CORS=0 turns it
        # off, and with it the pages' reads of their own routes).
        response["Access-Control-Allow-Origin"] = "*"
    return response


# Paths of the live app: /apps/<slug> and everything under it but the panel's own pages.
_LIVE_PATH = re.compile(r"^/apps/[^/]+(?:/|$)")


def _is_panel_view(request: HttpRequest) -> bool:
    match = getattr(request, "resolver_match", None)
    return match is not None and not match.func.__module__.startswith(__name__)


def sandbox_middleware(get_response: Callable[[HttpRequest], HttpResponse]) -> Callable[..., Any]:
    """Middleware: every answer under ``/apps/<slug>/`` that the panel did not make carries the
    sandbox — Django's own 404s (``/p/``, ``/assets/x.txt``, ``/other``), the 301 that adds a
    slash to ``/apps/<slug>``, a 500 — not only the live views' own answers."""

    def middleware(request: HttpRequest) -> HttpResponse:
        response = get_response(request)
        if _LIVE_PATH.match(request.path_info) and not _is_panel_view(request):
            _sandboxed(response)
        return response

    return middleware


def _live_reads(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """A live page or asset: GET and HEAD only, and every answer sandboxed — a 405 too."""
    reads_only = require_http_methods(["GET", "HEAD"])(view)

    @functools.wraps(view)
    def sandboxed_view(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        return _sandboxed(reads_only(request, *args, **kwargs))

    return csrf_exempt(sandboxed_view)


def _not_found(message: str = NOT_FOUND) -> HttpResponse:
    return _sandboxed(HttpResponse(message, status=404, content_type="text/plain; charset=utf-8"))


def _etag_matches(request: HttpRequest, etag: str) -> bool:
    header = request.headers.get("If-None-Match")
    if not header:
        return False
    if header.strip() == "*":
        return True
    # If-None-Match uses the weak comparison (RFC 9110 §13.1.2).
    tags = [t.strip().removeprefix("W/") for t in header.split(",")]
    return etag in tags


# --------------------------------------------------------------------------------------------
# Which deployment serves a visitor: production, or a rollout's candidate
# (docs/architecture.md#safe-promotion)
# --------------------------------------------------------------------------------------------

_COOKIE_SALT = "versions.live.rollout"
_LOCAL_HOSTS = ("localhost", "127.0.0.1", "[::1]")


@dataclass(frozen=True, slots=True)
class Serving:
    """The deployment that answers this request (None: the draft), the cookie to pin the
    visitor with (None: already pinned, or no rollout) and whether its answers are watched."""

    app_id: int
    deployment: str | None
    pin: str | None = None
    rollout: bool = False
    watched: bool = False

    @classmethod
    def of(
        cls,
        request: HttpRequest,
        app_id: int,
        production: str | None,
        candidate: str | None,
        share: int,
        watch_until: Any,
    ) -> Serving:
        """A visitor pinned by a valid ``versions_dp`` cookie to this app's production or
        candidate keeps it; any other (none, forged, another app's, a finished rollout's) is
        drawn again: the candidate for ``share`` percent of visitors."""
        if candidate is None or production is None:
            watched = production is not None and watch_until is not None and watch_until > now()
            return cls(app_id, production, watched=watched)
        pinned = _unsign(request.COOKIES.get(ROLLOUT_COOKIE, ""))
        if pinned in (production, candidate):
            deployment, pin = pinned, None
        else:
            # Drawn at random on the visitor's first request, and remembered by a fingerprint
            # for their requests that carry no cookie (the sandboxed page's own fetch).
            drawn = candidate if secrets.randbelow(100) < share else production
            deployment = services.promotion.pin_visitor(
                app_id, candidate, _fingerprint(request), drawn
            )
            pin = deployment
        watched = deployment == candidate or (watch_until is not None and watch_until > now())
        return cls(app_id, deployment, pin, rollout=True, watched=watched)

    def finish(self, request: HttpRequest, response: HttpResponse, slug: str) -> HttpResponse:
        """The answer, pinned and counted."""
        if self.rollout:
            response["Vary"] = "Cookie"
        if self.pin is not None:
            # The sandboxed page has an opaque origin, so its own assets and routes are
            # cross-site requests: only a SameSite=None cookie (which must be Secure; browsers
            # treat localhost as secure) reaches them. Plain http elsewhere falls back to Lax.
            secure = request.is_secure() or request.get_host().split(":")[0] in _LOCAL_HOSTS
            response.set_cookie(
                ROLLOUT_COOKIE,
                signing.get_cookie_signer(salt=_COOKIE_SALT).sign(self.pin),
                path=f"/apps/{slug}/",
                httponly=True,
                secure=secure,
                samesite="None" if secure else "Lax",
            )
        if self.watched and self.deployment is not None:
            try:
                services.promotion.count_answer(self.app_id, self.deployment, response.status_code)
            except Exception:  # the watch never breaks serving; it is logged
                logger.exception("the watch of %s could not count an answer", self.deployment)
        return response


def _fingerprint(request: HttpRequest) -> str:
    """A visitor's address and user agent, hashed with the site's secret (never stored as
    they are)."""
    meta = request_meta(request)
    text = f"{meta.get('address', '')}\n{meta.get('user_agent', '')}"
    return hmac.new(settings.SECRET_KEY.encode(), text.encode(), hashlib.sha256).hexdigest()


def _unsign(raw: str) -> str | None:
    if not raw or len(raw) > 200:
        return None
    try:
        return signing.get_cookie_signer(salt=_COOKIE_SALT).unsign(raw)
    except signing.BadSignature:
        return None


_APP_SERVING = ("pk", "production_id", "candidate_id", "rollout_share", "watch_until")


def _live_blob(
    request: HttpRequest, slug: str, collection: str, name: str
) -> tuple[str | None, Serving | None]:
    """The blob ``/apps/<slug>/`` serves this visitor for an artifact — production's when the
    app has a production deployment (a rollout's candidate's for its share of visitors), else
    the draft's — and who serves it; one query when the artifact exists."""
    held = DeploymentEntry.objects.filter(
        deployment_id=OuterRef("app__production_id"), artifact_id=OuterRef("pk")
    ).values("blob_id")[:1]
    held_by_candidate = DeploymentEntry.objects.filter(
        deployment_id=OuterRef("app__candidate_id"), artifact_id=OuterRef("pk")
    ).values("blob_id")[:1]
    row = (
        Artifact.objects.filter(app__slug=slug, collection=collection, name=name)
        .annotate(held=Subquery(held), candidate_held=Subquery(held_by_candidate))
        .values_list(
            "blob_id",
            "deleted",
            "held",
            "candidate_held",
            *(f"app__{field}" for field in _APP_SERVING),
        )
        .first()
    )
    if row is None:  # no such artifact: the answer is a 404, still the visitor's deployment's
        app_row = App.objects.filter(slug=slug).values_list(*_APP_SERVING).first()
        return None, Serving.of(request, *app_row) if app_row is not None else None
    blob_id, deleted, held_blob, candidate_blob, *app_row = row
    serving = Serving.of(request, *app_row)
    if serving.deployment is None:
        return (None if deleted else blob_id), serving
    if serving.deployment == app_row[2]:  # the candidate
        return candidate_blob, serving
    return held_blob, serving


def _serve_blob(request: HttpRequest, blob_id: str, collection: str) -> HttpResponse:
    """The bytes of blob ``blob_id`` as ``collection`` is served, with its strong ETag (the
    sha256), or a 304 when the client has them."""
    etag = f'"{blob_id}"'
    if _etag_matches(request, etag):
        response = HttpResponse(status=304)
    else:
        blob = Blob.objects.filter(sha256=blob_id).first()
        if blob is None:  # swept between the two reads: the artifact moved on
            return _not_found()
        response = HttpResponse(blob.raw, content_type=CONTENT_TYPES[collection])
    response["ETag"] = etag
    # Always revalidate: a restore must show at the next load, not when a cache expires.
    response["Cache-Control"] = "no-cache"
    return response  # sandboxed by _live_reads


def _serve_artifact(request: HttpRequest, slug: str, collection: str, name: str) -> HttpResponse:
    blob_id, serving = _live_blob(request, slug, collection, name)
    response = _serve_blob(request, blob_id, collection) if blob_id else _not_found()
    return serving.finish(request, response, slug) if serving is not None else response


@_live_reads
def index(request: HttpRequest, slug: str) -> HttpResponse:
    """The app's page ``index``."""
    return _serve_artifact(request, slug, PAGE, "index")


@_live_reads
def page(request: HttpRequest, slug: str, page: str) -> HttpResponse:
    """One of the app's pages."""
    return _serve_artifact(request, slug, PAGE, page)


@_live_reads
def asset(request: HttpRequest, slug: str, name: str, ext: str) -> HttpResponse:
    """A stylesheet (``.css``) or frontend module (``.js``)."""
    return _serve_artifact(request, slug, ASSET_COLLECTIONS[ext], name)


# --------------------------------------------------------------------------------------------
# API routes
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LiveRoute:
    """A route of the table: its spec and its path split into literals and parameters."""

    name: str
    spec: RouteSpec
    segments: tuple[tuple[str, bool], ...]  # (literal or param name, is_param)

    def match(self, parts: list[str]) -> dict[str, str] | None:
        if len(parts) != len(self.segments):
            return None
        params: dict[str, str] = {}
        for part, (segment, is_param) in zip(parts, self.segments, strict=True):
            if is_param:
                params[segment] = part
            elif part != segment:
                return None
        return params

    @property
    def specificity(self) -> tuple[int, ...]:
        """Sort key: literal segments win over parameters, leftmost first."""
        return tuple(1 if is_param else 0 for _, is_param in self.segments)


@dataclass(frozen=True)
class RouteTable:
    generation: int
    routes: tuple[LiveRoute, ...]
    # The deployment the table was read from (None: the draft).
    production: str | None = None

    def find(self, method: str, parts: list[str]) -> tuple[LiveRoute | None, set[str]]:
        """The best route for ``method`` and path ``parts``, and the methods the path has."""
        allowed: set[str] = set()
        best: LiveRoute | None = None
        for route in self.routes:
            if route.match(parts) is None:
                continue
            allowed.add(route.spec.method)
            if route.spec.method == method and (
                best is None or route.specificity < best.specificity
            ):
                best = route
        return best, allowed


# Keyed by (app pk, app created_on): a pk reused by another app (a restored database, tests)
# never finds the old app's table.
_tables: dict[tuple[int, Any], RouteTable] = {}
_tables_lock = threading.Lock()
# How many times this process loaded a route table (tests read it).
loads = {"count": 0}


def _table_of(
    app_id: int, sources: list[tuple[str, str]], generation: int, production: str | None = None
) -> RouteTable:
    """A route table of (name, route source) pairs; a source that is not a valid spec (saved
    before the rules tightened) is not served."""
    routes: list[LiveRoute] = []
    for name, source in sources:
        try:
            spec = parse_route_spec(source)
        except InvalidInput:
            logger.warning("route %s of app %s is not a valid spec", name, app_id)
            continue
        segments = tuple(
            (m.group(1), True) if (m := _PARAM_SEGMENT.match(s)) else (s, False)
            for s in spec.segments
        )
        routes.append(LiveRoute(name=name, spec=spec, segments=segments))
    loads["count"] += 1
    return RouteTable(generation=generation, routes=tuple(routes), production=production)


def _load_table(app: App, generation: int, production: str | None) -> RouteTable:
    ref = PRODUCTION if production is not None else DRAFT
    return _table_of(app.pk, services.route_sources(app, ref), generation, production)


def route_table(
    app_id: int,
    generation: int,
    created_on: Any = None,
    production: str | None = None,
    slug: str = "",
) -> RouteTable:
    """The app's live route table (production's, else the draft's), reloaded when its
    generation or its production deployment moved since this process read it."""
    key = (app_id, created_on)
    table = _tables.get(key)
    if table is not None and table.generation == generation and table.production == production:
        return table
    with _tables_lock:
        table = _tables.get(key)
        if table is None or table.generation != generation or table.production != production:
            app = App(pk=app_id, slug=slug, created_on=created_on, production_id=production)
            table = _load_table(app, generation, production)
            _tables[key] = table
    return table


def _substitute(value: Any, params: dict[str, str]) -> Any:
    """``{param}`` in every string of ``value`` replaced by the path parameter."""
    if isinstance(value, str):
        return _PLACEHOLDER.sub(lambda m: params.get(m.group(1), m.group(0)), value)
    if isinstance(value, list):
        return [_substitute(v, params) for v in value]
    if isinstance(value, dict):
        return {k: _substitute(v, params) for k, v in value.items()}
    return value


def _route_response(route: LiveRoute, params: dict[str, str], method: str) -> HttpResponse:
    spec = route.spec
    # Only the headers routes.header_problem allows: a spec with any other is not served.
    headers = dict(spec.headers or {})
    content_type = next((v for k, v in headers.items() if k.lower() == "content-type"), None)
    body = _substitute(spec.body, params)
    if spec.status in (204, 304) or method == "HEAD":
        content = b""
    elif isinstance(body, str) and content_type and "json" not in content_type.lower():
        content = body.encode("utf-8")
    else:
        content = json.dumps(body, ensure_ascii=False).encode("utf-8")
    response = HttpResponse(
        content, status=spec.status, content_type=content_type or "application/json"
    )
    for key, value in headers.items():
        if key.lower() != "content-type":
            response[key] = value
    return response


def _preflight(request: HttpRequest, allowed: set[str]) -> HttpResponse:
    """The answer to a browser's CORS preflight for a path the table has routes for: the app's
    page may send them (a JSON POST from the page is preflighted, its origin being opaque)."""
    response = HttpResponse(status=204)
    methods = ", ".join(sorted(allowed | {"OPTIONS"}))
    response["Allow"] = methods
    response["Access-Control-Allow-Methods"] = methods
    asked = request.headers.get("Access-Control-Request-Headers", "")
    if asked:
        response["Access-Control-Allow-Headers"] = asked
    response["Access-Control-Max-Age"] = "600"
    return response


def _answer_route(request: HttpRequest, table: RouteTable, slug: str, path: str) -> HttpResponse:
    """The answer of ``table`` to a request for ``path``: the matching route, a CORS preflight,
    a 405 or a 404 — sandboxed."""
    method = (request.method or "GET").upper()
    parts = [p for p in path.split("/") if p]
    route, allowed = table.find(method, parts)
    if route is None and method == "HEAD":
        route, allowed = table.find("GET", parts)
    if route is None and method == "OPTIONS" and allowed:
        return _sandboxed(_preflight(request, allowed))
    if route is None:
        if allowed:
            response = HttpResponse(
                METHOD_NOT_ALLOWED.format(method=method),
                status=405,
                content_type="text/plain; charset=utf-8",
            )
            response["Allow"] = ", ".join(sorted(allowed))
            return _sandboxed(response)
        return _not_found()
    params = route.match(parts) or {}
    try:
        response = _route_response(route, params, method)
    except Exception:  # a spec no rule foresaw: an answer in words, sandboxed all the same
        logger.exception("route %s of app %s could not be served", route.name, slug)
        response = HttpResponse(ROUTE_FAILED, status=500, content_type="text/plain; charset=utf-8")
    return _sandboxed(response)


@csrf_exempt
def api(request: HttpRequest, slug: str, path: str) -> HttpResponse:
    """An API route of the app: the route spec whose method and path match, as data."""
    found = (
        App.objects.filter(slug=slug)
        .values_list("route_generation", "created_on", *_APP_SERVING)
        .first()
    )
    if found is None:
        return _not_found()
    generation, created_on, app_id, production, candidate, *_ = found
    serving = Serving.of(request, *found[2:])
    if serving.rollout and serving.deployment == candidate and candidate is not None:
        table = _deployment_table(App(pk=app_id, slug=slug, created_on=created_on), candidate)
    else:
        table = route_table(app_id, generation, created_on, production, slug=slug)
    return serving.finish(request, _answer_route(request, table, slug, path), slug)


# --------------------------------------------------------------------------------------------
# Previews: /apps/<slug>/at/<ref>/…
# --------------------------------------------------------------------------------------------

# Route tables of deployments, which never change (a few, most recent kept).
_deployment_tables: dict[tuple[int, Any, str], RouteTable] = {}
_DEPLOYMENT_TABLES_KEPT = 64


def _preview_app(request: HttpRequest, slug: str, ref: str, sig: str | None) -> App | HttpResponse:
    """The app whose state ``ref`` the request may see, or the 404 in words it gets instead
    (the services decide who may: :func:`versions.services.check_preview`)."""
    app = App.objects.filter(slug=slug).first()
    if app is None:
        return _not_found()
    user = getattr(request, "user", None)
    actor = services.actor_for_user(user) if user is not None and user.is_authenticated else None
    try:
        services.check_preview(app, ref, actor=actor, signature=sig)
    except NotFound as exc:
        return _not_found(f"Not found. {exc.message}")
    return app


def _serve_state(
    request: HttpRequest, slug: str, ref: str, sig: str | None, collection: str, name: str
) -> HttpResponse:
    app = _preview_app(request, slug, ref, sig)
    if isinstance(app, HttpResponse):
        return app
    try:
        entry = services.state_entry(app, ref, collection, name)
    except NotFound as exc:
        return _not_found(f"Not found. {exc.message}")
    if entry is None or entry.sha256 == "":
        return _not_found(ABSENT_IN_STATE.format(name=name))
    if entry.sha256 is None:
        return _not_found(MISSING_IN_STATE.format(name=name, reason=entry.reason or ""))
    return _serve_blob(request, entry.sha256, collection)


@_live_reads
def at_index(request: HttpRequest, slug: str, ref: str, sig: str | None = None) -> HttpResponse:
    """The page ``index`` of the state ``ref`` names."""
    return _serve_state(request, slug, ref, sig, PAGE, "index")


@_live_reads
def at_page(
    request: HttpRequest, slug: str, ref: str, page: str, sig: str | None = None
) -> HttpResponse:
    """A page of the state ``ref`` names."""
    return _serve_state(request, slug, ref, sig, PAGE, page)


@_live_reads
def at_asset(
    request: HttpRequest, slug: str, ref: str, name: str, ext: str, sig: str | None = None
) -> HttpResponse:
    """A stylesheet or frontend module of the state ``ref`` names."""
    return _serve_state(request, slug, ref, sig, ASSET_COLLECTIONS[ext], name)


def _preview_table(app: App, ref: str) -> RouteTable:
    """The route table of the state ``ref`` names (``NotFound`` as the state's)."""
    if ref in (PRODUCTION, DRAFT):
        found = App.objects.filter(pk=app.pk).values_list("route_generation", "production_id")
        generation, production = found.get()
        if ref == PRODUCTION:
            if production is None:
                services.route_sources(app, ref)  # raises NotFound in words
            return route_table(app.pk, generation, app.created_on, production, slug=app.slug)
        key = (-app.pk, app.created_on)  # the draft's own table, beside the live one
        table = _tables.get(key)
        if table is None or table.generation != generation:
            table = _table_of(app.pk, services.route_sources(app, ref), generation)
            with _tables_lock:
                _tables[key] = table
        return table
    if ref.startswith("dp_"):
        return _deployment_table(app, ref)
    return _table_of(app.pk, services.route_sources(app, ref), 0)


def _deployment_table(app: App, ref: str) -> RouteTable:
    """The route table of deployment ``ref`` (it never changes: kept, a few at most)."""
    dp_key = (app.pk, app.created_on, ref)
    table = _deployment_tables.get(dp_key)
    if table is None:
        table = _table_of(app.pk, services.route_sources(app, ref), 0, ref)
        with _tables_lock:
            if len(_deployment_tables) >= _DEPLOYMENT_TABLES_KEPT:
                _deployment_tables.pop(next(iter(_deployment_tables)))
            _deployment_tables[dp_key] = table
    return table


@csrf_exempt
def at_api(
    request: HttpRequest, slug: str, ref: str, path: str, sig: str | None = None
) -> HttpResponse:
    """An API route of the state ``ref`` names."""
    app = _preview_app(request, slug, ref, sig)
    if isinstance(app, HttpResponse):
        return app
    try:
        table = _preview_table(app, ref)
    except NotFound as exc:
        return _not_found(f"Not found. {exc.message}")
    return _answer_route(request, table, slug, path)
