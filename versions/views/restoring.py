"""Restore all / Restore: the confirmation dialog (from a dry run), confirming, receipts.

Thin adapters over ``versions.services.restore``: the dialog shows the engine's dry run; the
confirmation posts back the sha256 of every artifact as the person saw it ("now"), so a change
made in between is refused by the engine's pre-flight instead of being overwritten unseen.
"""

from __future__ import annotations

import re
from typing import Any

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.template.loader import render_to_string
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods

from versions import selectors
from versions.errors import PreflightFailed, VersionsError
from versions.models import ChangeSet
from versions.views._common import (
    NO_RESTORE,
    RESTORE_PERM,
    forbidden,
    is_fragment,
    panel_view,
    perms,
)
from versions.views.pages import expanded_set_context, point_context, receipt_page_context

NOOP_SENTENCE = "Every artifact already matched the state before this set — nothing was written."
_RETURN_RE = re.compile(r"^(set|point):[a-z0-9_]{1,48}$")


def _engine() -> Any:
    from versions.services import restore

    return restore


def parse_expected(values: list[str]) -> dict[str, str]:
    """``["collection/name=sha", …]`` → ``{"collection/name": sha}`` (sha "" = absent)."""
    out: dict[str, str] = {}
    for value in values:
        key, sep, sha = value.rpartition("=")
        if sep and "/" in key and re.fullmatch(r"[0-9a-f]{0,64}", sha):
            out[key] = sha
    return out


def _return_to(value: str | None, default: str) -> str:
    return value if value and (_RETURN_RE.match(value) or value == "page") else default


def _as_dict(receipt: Any) -> dict[str, Any]:
    return receipt.as_dict() if hasattr(receipt, "as_dict") else dict(receipt)


def _keys_of(data: dict[str, Any]) -> list[str]:
    keys = []
    for group in ("items", "skipped", "findings"):
        for entry in data.get(group) or []:
            key = f"{entry.get('collection')}/{entry.get('name')}"
            if key not in keys:
                keys.append(key)
    return keys


def _dialog(request: HttpRequest, ctx: dict[str, Any]) -> HttpResponse:
    ctx["target"] = "#" + ctx["ret"].replace(":", "-")
    if ctx.get("cs") is not None:
        ctx["cancel_url"] = reverse("versions:change_set", args=[ctx["app"].slug, ctx["cs"].id])
    else:
        ctx["cancel_url"] = reverse(
            "versions:restore_point", args=[ctx["app"].slug, ctx["point"].id]
        )
    if is_fragment(request):
        return render(request, "versions/partials/_restore_dialog.html", ctx)
    return render(request, "versions/restore_confirm_page.html", ctx)


# --------------------------------------------------------------------------------------------
# A change set (Restore all, and Undo this restore on a restore set)
# --------------------------------------------------------------------------------------------


@require_http_methods(["GET", "POST"])
@panel_view
def restore_change_set(request: HttpRequest, slug: str, set_id: str) -> HttpResponse:
    """GET: the confirmation dialog (a dry run). POST: Confirm restore."""
    if not request.user.has_perm(RESTORE_PERM):
        return forbidden(request, NO_RESTORE)
    app = selectors.get_app(slug)
    cs = selectors.change_set_row(app, set_id)
    params = request.POST if request.method == "POST" else request.GET
    ret = _return_to(params.get("ret"), f"set:{cs.id}")
    expected = parse_expected(params.getlist("expected"))
    by = request.user.get_username()
    if request.method == "GET":
        try:
            data = _as_dict(
                _engine().restore_change_set(cs.id, by=by, dry_run=True, expected=expected or None)
            )
        except PreflightFailed as exc:
            data = _as_dict(exc.receipt)
        except VersionsError as exc:
            data = {"kind": "error", "findings": [], "message": exc.message}
        keys = _keys_of(data)
        now = selectors.artifact_shas(app, keys)
        carry = [(k, expected.get(k, now.get(k, ""))) for k in keys]
        ctx = {
            "app": app,
            "cs": cs,
            "title": "Undo this restore" if cs.kind == ChangeSet.RESTORE else "Restore all",
            "data": data,
            "carry": carry,
            "ret": ret,
            "action": reverse("versions:restore_change_set", args=[app.slug, cs.id]),
            **perms(request),
        }
        return _dialog(request, ctx)
    try:
        data = _as_dict(_engine().restore_change_set(cs.id, by=by, expected=expected or None))
    except PreflightFailed as exc:
        data = _as_dict(exc.receipt)
    except VersionsError as exc:
        data = {"kind": "error", "message": exc.message, "written": 0}
    return _after_restore(request, app, ret, data)


# --------------------------------------------------------------------------------------------
# One restore point (Restore)
# --------------------------------------------------------------------------------------------


@require_http_methods(["GET", "POST"])
@panel_view
def restore_point(request: HttpRequest, slug: str, point_id: str) -> HttpResponse:
    """GET: the confirmation dialog. POST: Confirm restore of one point."""
    if not request.user.has_perm(RESTORE_PERM):
        return forbidden(request, NO_RESTORE)
    app = selectors.get_app(slug)
    point = selectors.get_point(app, point_id)
    params = request.POST if request.method == "POST" else request.GET
    ret = _return_to(params.get("ret"), f"point:{point.id}")
    key = f"{point.artifact.collection}/{point.artifact.name}"
    expected = parse_expected(params.getlist("expected"))
    by = request.user.get_username()
    if request.method == "GET":
        try:
            data = _as_dict(
                _engine().restore_point(
                    point.id, by=by, dry_run=True, expected_sha256=expected.get(key)
                )
            )
        except PreflightFailed as exc:
            data = _as_dict(exc.receipt)
        except VersionsError as exc:
            data = {"kind": "error", "findings": [], "message": exc.message}
        carry = [(key, expected.get(key, point.artifact.sha256))]
        ctx = {
            "app": app,
            "point": point,
            "title": "Restore",
            "data": data,
            "carry": carry,
            "ret": ret,
            "action": reverse("versions:restore_point_restore", args=[app.slug, point.id]),
            **perms(request),
        }
        return _dialog(request, ctx)
    try:
        data = _as_dict(_engine().restore_point(point.id, by=by, expected_sha256=expected.get(key)))
    except PreflightFailed as exc:
        data = _as_dict(exc.receipt)
    except VersionsError as exc:
        data = {"kind": "error", "message": exc.message, "written": 0}
    return _after_restore(request, app, ret, data)


# --------------------------------------------------------------------------------------------
# After confirming: the receipt in place
# --------------------------------------------------------------------------------------------


def _after_restore(request: HttpRequest, app: Any, ret: str, data: dict[str, Any]) -> HttpResponse:
    kind = data.get("kind")
    if not is_fragment(request):
        if kind == "restore" and data.get("setId"):
            return redirect(reverse("versions:receipt", args=[app.slug, data["setId"]]))
        ctx = {"app": app, "receipt": data, **perms(request)}
        return render(request, "versions/restore_result_page.html", ctx)
    what, _, ident = ret.partition(":")
    if what == "point":
        point = selectors.get_point(app, ident)
        ctx = point_context(request, app, point, receipt=data, ret=ret)
        template = "versions/partials/_point_expanded.html"
    else:
        ctx = expanded_set_context(request, app, ident, receipt=data, ret=ret)
        template = "versions/partials/_set_expanded.html"
    html = str(render_to_string(template, ctx, request=request))
    # Close the dialog, and put the new restore set on top of the list when it is shown.
    html += '<div id="dialog-slot" hx-swap-oob="true"></div>'
    if kind == "restore" and data.get("setId") and what == "set":
        new_set = selectors.change_set_row(app, data["setId"])
        row = render_to_string(
            "versions/partials/_set_row.html",
            {"app": app, "cs": new_set, "fresh": True, **perms(request)},
            request=request,
        )
        html += f'<div hx-swap-oob="afterbegin:#set-list-items">{row}</div>'
    status = 409 if kind == "preflight_failed" else 200
    return HttpResponse(html, status=status)


@require_GET
@panel_view
def receipt(request: HttpRequest, slug: str, set_id: str) -> HttpResponse:
    """The human view of a restore set's receipt."""
    app = selectors.get_app(slug)
    rs = selectors.restore_set(app, set_id)
    return render(request, "versions/receipt_page.html", receipt_page_context(request, app, rs))


@require_GET
@panel_view
def receipt_json(request: HttpRequest, slug: str, set_id: str) -> HttpResponse:
    """A restore set's receipt as JSON (SPEC §4)."""
    app = selectors.get_app(slug)
    rs = selectors.restore_set(app, set_id)
    return JsonResponse(rs.receipt or {}, json_dumps_params={"ensure_ascii": False, "indent": 2})
