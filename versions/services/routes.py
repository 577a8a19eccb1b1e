"""The route-save path (docs/architecture.md#live-app): the one function every route write and
restore goes through.

A route source is a JSON spec, data and never code: ``{"method": "GET", "path":
"/quotes/{id}", "status": 200, "headers": {...}, "body": <JSON>}``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db import transaction
from django.db.models import F

from versions.errors import Conflict, InvalidSpec
from versions.models import API_ROUTE, App, Artifact
from versions.services._store import repoint

METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS")
_PARAM = re.compile(r"^\{([A-Za-z_][A-Za-z0-9_]{0,63})\}$")
_SEGMENT = re.compile(r"^[A-Za-z0-9._~!$&'()*+,;=:@-]+$")

ROUTE_NOT_JSON = "The route spec is not valid JSON: {detail}."
ROUTE_NOT_OBJECT = "The route spec must be a JSON object with method, path, status and body."
ROUTE_BAD_METHOD = "The route method must be one of {methods} (got {method})."
ROUTE_BAD_PATH = (
    "The route path must start with “/” and hold only URL-safe segments or {{param}} "
    "placeholders (got {path})."
)
ROUTE_BAD_STATUS = "The route status must be a whole number from 200 to 599 (got {status})."
ROUTE_DOT_SEGMENT = (
    "The route path may not hold a “.” or “..” segment: a browser removes them before it "
    "asks, so no request could reach the route (got {path})."
)
ROUTE_BAD_HEADERS = "The route headers must be an object of text names to text values."
ROUTE_HEADER_NOT_ALLOWED = (
    "A route spec may not set the header “{name}”: it may set Content-Type, Cache-Control, "
    "ETag, Last-Modified, Expires, Vary, Content-Language, Retry-After, a relative Location "
    "and X-… headers."
)
ROUTE_HEADER_FOR_THE_PROXY = (
    "A route spec may not set the header “{name}”: a proxy in front of the server acts on it "
    "(it could make the proxy serve a file of the server or another address)."
)
ROUTE_HEADER_VALUE_NOT_VISIBLE = (
    "The value of the route header “{name}” may hold only visible ASCII characters and spaces "
    "(found {char} at {pos})."
)
ROUTE_HEADERS_TOO_LARGE = (
    "The route headers are {size:,} bytes in all; a route may send at most {limit:,} bytes "
    "of headers."
)
ROUTE_LOCATION_NOT_RELATIVE = (
    "The route header Location must be a path on this site, like “/quotes/42” (got {value})."
)
ROUTE_TOO_DEEP = "The route body is nested more than {depth} levels deep."
# The headers a route spec may set. The live app is served on the panel's origin, so anything
# that acts on the origin (cookies, Clear-Site-Data, CSP, HSTS, authentication prompts, CORS)
# or on the connection stays ours; an off-site Location would make the panel an open redirect.
ALLOWED_HEADERS = frozenset(
    {
        "content-type",
        "cache-control",
        "etag",
        "last-modified",
        "expires",
        "vary",
        "content-language",
        "retry-after",
        "location",
    }
)
_CUSTOM_HEADER = "x-"
# Response headers that a proxy or platform in front of the server reads and acts on (nginx,
# Apache and lighttpd file sending, LiteSpeed, Perlbal, Envoy, Next.js and hosting platforms),
# and the request-side headers a proxy trusts: never set by agent-written data.
_PROXY_HEADER_PREFIXES = (
    "x-accel-",
    "x-sendfile",
    "x-lighttpd-",
    "x-litespeed-",
    "x-reproxy-",
    "x-envoy-",
    "x-middleware-",
    "x-vercel-",
    "x-nf-",
    "x-amzn-",
    "x-forwarded-",
    "x-original-",
)
_PROXY_HEADERS = frozenset(
    {
        "x-accel",
        "x-real-ip",
        "x-rewrite-url",
        "x-matched-path",
        "x-permitted-cross-domain-policies",
    }
)
MAX_HEADER_BYTES = 8192
# Past a few dozen headers, clients and proxies give up on a response (many cap the count):
# a route of 500 one-byte headers fits in 8 KB and still breaks them.
MAX_HEADERS = 50
ROUTE_TOO_MANY_HEADERS = "The route sets {count} headers; a route may set at most {limit}."
_NOT_CUSTOM = frozenset({"x-content-type-options", "x-frame-options", "x-xss-protection"})
_VISIBLE = re.compile(r"[\x20-\x7e]*")
_TOKEN = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,100}$")  # RFC 9110 field names
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
MAX_BODY_DEPTH = 32
ROUTE_DUPLICATE_PARAM = "The route path names the parameter {{{name}}} twice."
ROUTE_AMBIGUOUS = (
    "Another live route of this app already answers {key}: “{other}”. "
    "Two routes with the same method and path would be ambiguous."
)


@dataclass(frozen=True)
class RouteSpec:
    """A parsed, valid route spec."""

    method: str
    path: str
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    body: Any = None

    @property
    def segments(self) -> list[str]:
        return [s for s in self.path.strip("/").split("/") if s]

    @property
    def key(self) -> str:
        """'METHOD /a/{}/b': routes with equal keys are ambiguous, whatever their param names."""
        shape = ["{}" if _PARAM.match(s) else s for s in self.segments]
        return f"{self.method} /" + "/".join(shape)


def parse_route_spec(source: str) -> RouteSpec:
    """The spec in ``source``, or an InvalidInput (status 422) saying what is wrong."""
    try:
        data = json.loads(source)
    except (ValueError, RecursionError) as exc:
        raise InvalidSpec(ROUTE_NOT_JSON.format(detail=exc), field="source")
    if not isinstance(data, dict):
        raise InvalidSpec(ROUTE_NOT_OBJECT, field="source")
    method = data.get("method", "GET")
    if not isinstance(method, str) or method.upper() not in METHODS:
        raise InvalidSpec(
            ROUTE_BAD_METHOD.format(methods=", ".join(METHODS), method=json.dumps(method)),
            field="source",
        )
    path = data.get("path")
    if not isinstance(path, str) or not path.startswith("/") or len(path) > 300:
        raise InvalidSpec(ROUTE_BAD_PATH.format(path=json.dumps(path)), field="source")
    names: set[str] = set()
    for segment in [s for s in path.strip("/").split("/") if s]:
        if segment in (".", ".."):
            raise InvalidSpec(ROUTE_DOT_SEGMENT.format(path=json.dumps(path)), field="source")
        param = _PARAM.match(segment)
        if param:
            if param.group(1) in names:
                raise InvalidSpec(ROUTE_DUPLICATE_PARAM.format(name=param.group(1)), field="source")
            names.add(param.group(1))
        elif not _SEGMENT.match(segment):
            raise InvalidSpec(ROUTE_BAD_PATH.format(path=json.dumps(path)), field="source")
    status = data.get("status", 200)
    if not isinstance(status, int) or isinstance(status, bool) or not 200 <= status <= 599:
        raise InvalidSpec(ROUTE_BAD_STATUS.format(status=json.dumps(status)), field="source")
    headers = data.get("headers", {}) or {}
    if not isinstance(headers, dict) or not all(
        isinstance(k, str)
        and isinstance(v, str)
        and not any(c in k + v for c in "\r\n\x00")
        and k.strip()
        for k, v in headers.items()
    ):
        raise InvalidSpec(ROUTE_BAD_HEADERS, field="source")
    if len(headers) > MAX_HEADERS:
        raise InvalidSpec(
            ROUTE_TOO_MANY_HEADERS.format(count=len(headers), limit=MAX_HEADERS), field="source"
        )
    for name, value in headers.items():
        problem = header_problem(name, value)
        if problem:
            raise InvalidSpec(problem, field="source")
    size = sum(len(name) + len(value) for name, value in headers.items())
    if size > MAX_HEADER_BYTES:
        raise InvalidSpec(
            ROUTE_HEADERS_TOO_LARGE.format(size=size, limit=MAX_HEADER_BYTES), field="source"
        )
    if _depth(data.get("body")) > MAX_BODY_DEPTH:
        raise InvalidSpec(ROUTE_TOO_DEEP.format(depth=MAX_BODY_DEPTH), field="source")
    return RouteSpec(
        method=method.upper(), path=path, status=status, headers=headers, body=data.get("body")
    )


def header_problem(name: str, value: str) -> str | None:
    """Why a route spec may not send header ``name: value``, or None when it may."""
    lower = name.lower()
    custom = lower.startswith(_CUSTOM_HEADER) and lower not in _NOT_CUSTOM
    if not _TOKEN.match(name) or not (lower in ALLOWED_HEADERS or custom):
        return ROUTE_HEADER_NOT_ALLOWED.format(name=name)
    if lower in _PROXY_HEADERS or lower.startswith(_PROXY_HEADER_PREFIXES):
        return ROUTE_HEADER_FOR_THE_PROXY.format(name=name)
    if lower == "location":
        # Browsers drop tabs and spaces from URLs and read "\\" as "/": "/\\t/evil.example" or
        # "/\\evil.example" would leave the site, so neither is allowed in a Location.
        odd = any(ord(c) <= 32 or ord(c) == 127 or c == "\\" for c in value)
        if odd or _SCHEME.match(value) or value.startswith("//"):
            return ROUTE_LOCATION_NOT_RELATIVE.format(value=json.dumps(value))
    if not _VISIBLE.fullmatch(value):
        pos, char = next((i, c) for i, c in enumerate(value) if not _VISIBLE.fullmatch(c))
        return ROUTE_HEADER_VALUE_NOT_VISIBLE.format(
            name=name, char=f"U+{ord(char):04X}", pos=pos + 1
        )
    return None


def _depth(value: Any) -> int:
    """How deeply ``value`` nests lists and objects (0 for a scalar), without recursion."""
    deepest = 0
    stack = [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, (list, dict)):
            deepest = max(deepest, level)
            if level > MAX_BODY_DEPTH:
                break
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, level + 1) for child in children)
    return deepest


def find_ambiguity(app_id: int, key: str, *, exclude_pk: int | None) -> Artifact | None:
    """Another live route of the app with the same method and path shape, if any."""
    others = Artifact.objects.filter(app_id=app_id, route_key=key, deleted=False)
    if exclude_pk is not None:
        others = others.exclude(pk=exclude_pk)
    return others.only("name").first()


def check_route_source(app_id: int, artifact_pk: int | None, source: str) -> RouteSpec:
    """Validate a route source for saving under ``artifact_pk``: spec valid and unambiguous."""
    spec = parse_route_spec(source)
    other = find_ambiguity(app_id, spec.key, exclude_pk=artifact_pk)
    if other is not None:
        raise Conflict(ROUTE_AMBIGUOUS.format(key=spec.key, other=other.name), field="source")
    return spec


def bump_generation_after_commit(app_id: int) -> None:
    """Tell every server (at its next request) that the app's route table changed."""
    transaction.on_commit(
        lambda: App.objects.filter(pk=app_id).update(route_generation=F("route_generation") + 1)
    )


def save_route(
    artifact: Artifact,
    *,
    sha: str | None,
    source: str | None,
    size: int,
    by: str,
    now: datetime,
) -> None:
    """Write a route artifact (``sha`` None deletes it): validate, refuse ambiguity, write, bump.

    Must be called inside the writer's transaction, with the artifact row locked.
    """
    assert artifact.collection == API_ROUTE
    key = None
    if sha is not None:
        assert source is not None
        key = check_route_source(artifact.app_id, artifact.pk, source).key
    repoint(artifact, sha=sha, size=size, by=by, now=now, route_key=key)
    bump_generation_after_commit(artifact.app_id)
