"""The restore flow of the panel (docs/architecture.md#restore-flow): one path for Restore all, Undo
this restore, Restore and Restore to release — the dialog from a dry run, Confirm restore, the
receipt.

A thin adapter over :func:`versions.services.run_restore`: the dialog shows the engine's dry
run; the confirmation posts back the sha256 of every artifact as the person saw it ("now"), so a
change made in between is refused by the engine's pre-flight instead of being overwritten
unseen. Access is the services' (a ``Forbidden`` becomes the panel's 403 in
:func:`~versions.views._common.panel_view`).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.template.loader import render_to_string
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods

from versions import selectors, services
from versions.errors import InvalidInput, PreflightFailed
from versions.models import App, ChangeSet
from versions.terms import (
    POINT,
    REVERT,
    SET,
)
from versions.views._common import actor_of, app_of, is_fragment, panel_view, perms
from versions.views.pages import expanded_set_context, point_context, receipt_page_context

# Receipt kinds of a restore that wrote and stored a restore set.
WROTE = ("restore", "revert")
ERROR = "error"  # the request itself was refused (shown in the dialog, nothing ran)
_RETURN_RE = re.compile(r"^(set|point):[a-z0-9_]{1,48}$")


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


def _keys_of(receipt: services.RestoreReceipt) -> list[str]:
    keys = []
    for entry in [*receipt.items, *receipt.skipped, *receipt.findings]:
        key = f"{entry.collection}/{entry.name}"
        if key not in keys:
            keys.append(key)
    return keys


@dataclass
class Flow:
    """One restore as the panel shows it: what is restored, and where its dialog and result go.

    ``after`` renders the confirmed restore's receipt in place (htmx); ``page`` is the full page
    of the dialog for a plain GET.
    """

    kind: str
    app: App
    ident: str | None
    title: str
    ret: str
    action: str
    cancel_url: str
    target: str
    dialog_template: str = "versions/partials/_restore_dialog.html"
    page_template: str = "versions/restore_confirm_page.html"
    after: Callable[[HttpRequest, Flow, services.RestoreReceipt], HttpResponse] | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def _receipt(
    request: HttpRequest, flow: Flow, *, dry_run: bool, expected: dict[str, str]
) -> services.RestoreReceipt:
    """The engine's receipt: a refused pre-flight's receipt is shown, not raised."""
    try:
        receipt = services.run_restore(
            flow.kind,
            flow.ident,
            actor=actor_of(request),
            app=flow.app,
            dry_run=dry_run,
            expected=expected or None,
        )
    except PreflightFailed as exc:
        return exc.receipt  # type: ignore[no-any-return]
    except InvalidInput as exc:
        return services.RestoreReceipt(kind=ERROR, restored_from="", message=exc.message)
    return receipt


def restore_flow(request: HttpRequest, flow: Flow) -> HttpResponse:
    """GET: the confirmation dialog (a dry run). POST: Confirm restore, then the receipt."""
    params = request.POST if request.method == "POST" else request.GET
    expected = parse_expected(params.getlist("expected"))
    if request.method == "POST":
        data = _receipt(request, flow, dry_run=False, expected=expected)
        assert flow.after is not None
        return flow.after(request, flow, data)
    data = _receipt(request, flow, dry_run=True, expected=expected)
    keys = _keys_of(data)
    now = selectors.artifact_shas(flow.app, keys)
    ctx = {
        "app": flow.app,
        "title": flow.title,
        # Revert's dialog speaks of Revert only: no word of Restore all's later-work warning.
        "is_revert": flow.kind == REVERT,
        "data": data,
        "carry": [(k, expected.get(k, now.get(k, ""))) for k in keys],
        "ret": flow.ret,
        "target": flow.target,
        "action": flow.action,
        "cancel_url": flow.cancel_url,
        "production_notice": notice_before(flow.app, data),
        **perms(request, flow.app),
        **flow.extra,
    }
    if is_fragment(request):
        return render(request, flow.dialog_template, ctx)
    return render(request, flow.page_template, ctx)


# --------------------------------------------------------------------------------------------
# A change set (Restore all, and Undo this restore on a restore set) and one point (Restore)
# --------------------------------------------------------------------------------------------


def _set_flow(request: HttpRequest, slug: str, set_id: str, *, kind: str) -> HttpResponse:
    """The restore flow of a whole set: Restore all (Undo this restore for a restore set), or
    Revert this set."""
    app = app_of(request, slug)
    cs = selectors.change_set_row(app, set_id)
    params = request.POST if request.method == "POST" else request.GET
    ret = _return_to(params.get("ret"), f"set:{cs.id}")
    if kind == REVERT:
        title, url_name = "Revert this set", "versions:revert_change_set"
    else:
        title = "Undo this restore" if cs.kind == ChangeSet.RESTORE else "Restore all"
        url_name = "versions:restore_change_set"
    flow = Flow(
        kind=kind,
        app=app,
        ident=cs.id,
        title=title,
        ret=ret,
        action=reverse(url_name, args=[app.slug, cs.id]),
        cancel_url=reverse("versions:change_set", args=[app.slug, cs.id]),
        target="#" + ret.replace(":", "-"),
        after=_after_restore,
        extra={"cs": cs},
    )
    return restore_flow(request, flow)


@require_http_methods(["GET", "POST"])
@panel_view
def restore_change_set(request: HttpRequest, slug: str, set_id: str) -> HttpResponse:
    """Restore all of a set (Undo this restore for a restore set): dialog, then confirm."""
    return _set_flow(request, slug, set_id, kind=SET)


@require_http_methods(["GET", "POST"])
@panel_view
def revert_change_set(request: HttpRequest, slug: str, set_id: str) -> HttpResponse:
    """Revert this set (docs/architecture.md#revert): take back what the set did, keep later
    work."""
    return _set_flow(request, slug, set_id, kind=REVERT)


@require_http_methods(["GET", "POST"])
@panel_view
def restore_point(request: HttpRequest, slug: str, point_id: str) -> HttpResponse:
    """Restore one point: dialog, then confirm."""
    app = app_of(request, slug)
    point = selectors.get_point(app, point_id)
    params = request.POST if request.method == "POST" else request.GET
    ret = _return_to(params.get("ret"), f"point:{point.id}")
    flow = Flow(
        kind=POINT,
        app=app,
        ident=point.id,
        title="Restore",
        ret=ret,
        action=reverse("versions:restore_point_restore", args=[app.slug, point.id]),
        cancel_url=reverse("versions:restore_point", args=[app.slug, point.id]),
        target="#" + ret.replace(":", "-"),
        after=_after_restore,
        extra={"point": point},
    )
    return restore_flow(request, flow)


# --------------------------------------------------------------------------------------------
# After confirming: the receipt in place
# --------------------------------------------------------------------------------------------


def notice_before(app: App, plan: services.RestoreReceipt) -> selectors.ProductionNotice:
    """A dialog's word on production, of the draft as the plan would leave it: "Production
    still serves dp_…; promote to ship this", or that the draft then holds what it serves."""
    if not plan.items:
        return selectors.ProductionNotice()
    deleted = {(i.collection, i.name) for i in plan.items if getattr(i, "action", "") == "delete"}
    planned = {
        (i.collection, i.name): None if (i.collection, i.name) in deleted else i.sha256
        for i in plan.items
    }
    return selectors.production_notice(app, planned)


def notice_after(app: App, receipt: services.RestoreReceipt) -> selectors.ProductionNotice:
    """A receipt's word on production after a restore that wrote (of the draft as it is)."""
    if receipt.outcome not in WROTE:
        return selectors.ProductionNotice()
    return selectors.production_notice(app)


def _after_restore(request: HttpRequest, flow: Flow, data: services.RestoreReceipt) -> HttpResponse:
    """The receipt in place of the expanded set or point (or the receipt page)."""
    app, ret = flow.app, flow.ret
    kind = data.outcome
    if not is_fragment(request):
        if kind in WROTE and data.set_id:
            return redirect(reverse("versions:receipt", args=[app.slug, data.set_id]))
        ctx = {"app": app, "receipt": data, **perms(request, app)}
        return render(request, "versions/restore_result_page.html", ctx)
    what, _, ident = ret.partition(":")
    if what == "point":
        point = selectors.get_point(app, ident)
        ctx = point_context(
            request, app, point, receipt=data, ret=ret, production_notice=notice_after(app, data)
        )
        template = "versions/partials/_point_expanded.html"
    else:
        # After a restore the set shows then → now: every restored artifact "matches then".
        ctx = expanded_set_context(
            request,
            app,
            ident,
            view=selectors.NOW_VIEW,
            receipt=data,
            ret=ret,
            production_notice=notice_after(app, data),
        )
        template = "versions/partials/_set_expanded.html"
    html = str(render_to_string(template, ctx, request=request))
    # Close the dialog, and put the new restore set on top of the list when it is shown.
    html += '<div id="dialog-slot" hx-swap-oob="true"></div>'
    if kind in WROTE and data.set_id and what == "set":
        new_set = selectors.change_set_row(app, data.set_id)
        row = render_to_string(
            "versions/partials/_set_row.html",
            {"app": app, "cs": new_set, "fresh": True, **perms(request, app)},
            request=request,
        )
        html += f'<div hx-swap-oob="afterbegin:#set-list-items">{row}</div>'
    status = 409 if kind == "preflight_failed" else 200
    return HttpResponse(html, status=status)


@require_GET
@panel_view
def receipt(request: HttpRequest, slug: str, set_id: str) -> HttpResponse:
    """The human view of a restore set's receipt."""
    app = app_of(request, slug)
    rs = selectors.restore_set(app, set_id)
    return render(request, "versions/receipt_page.html", receipt_page_context(request, app, rs))


@require_GET
@panel_view
def receipt_json(request: HttpRequest, slug: str, set_id: str) -> HttpResponse:
    """A restore set's receipt as JSON (docs/api.md#receipts)."""
    app = app_of(request, slug)
    rs = selectors.restore_set(app, set_id)
    return JsonResponse(rs.receipt or {}, json_dumps_params={"ensure_ascii": False, "indent": 2})
