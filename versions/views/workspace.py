"""Workspaces in the panel (docs/architecture.md#workspace-rollback): thin adapters over
`versions.workspace.log_sets`, which lists the changes logs, reads their file sides, checks who may
roll back and rolls back; these views render it. `panel_view` turns its NotFound and Forbidden into
the panel's 404 and 403."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.template.loader import render_to_string
from django.views.decorators.http import require_GET, require_http_methods

from versions.errors import Conflict, InvalidInput, StaleWrite
from versions.views._common import (
    actor_of,
    int_param,
    is_fragment,
    list_refresh,
    panel_view,
    perms,
)
from versions.workspace import log_sets


def _stale(request: HttpRequest, exc: StaleWrite) -> HttpResponse:
    return render(request, "versions/partials/_diff_stale.html", {"message": exc.message})


@require_GET
@panel_view
def workspaces(request: HttpRequest) -> HttpResponse:
    """Every registered workspace (the same cards as on the home page)."""
    ctx = {"workspace_cards": log_sets.workspace_cards()}
    return render(request, "versions/workspace_list.html", ctx)


@require_GET
@panel_view
def workspace(request: HttpRequest, name: str) -> HttpResponse:
    """One workspace: its changes logs as change-set rows, newest first."""
    listing = log_sets.workspace_listing(name=name)
    refresh = list_refresh(request)
    ctx = {
        "ws": listing.ws,
        "rows": listing.rows,
        "missing": listing.missing,
        "max_logs": log_sets.MAX_LOGS,
        "refresh_url": refresh["refresh_url"],
        # Rows are "log-<key>"; panel.js names an open one by its key.
        "open_ids": {f"log-{key}" for key in refresh["open_ids"]},
        **perms(request),
    }
    return render(request, "versions/workspace_page.html", ctx)


def _log_context(request: HttpRequest, state: log_sets.LogState, **extra: Any) -> dict[str, Any]:
    return {
        "ws": state.ref.workspace,
        "ref": state.ref,
        "st": state,
        "files": log_sets.files_page(state=state, start=0),
        "expanded": True,
        **perms(request),
        **extra,
    }


@require_GET
@panel_view
def workspace_log(request: HttpRequest, name: str, kind: str, log: str) -> HttpResponse:
    """One changes log expanded (or collapsed, for htmx ``?collapsed=1``), or its own page."""
    state = log_sets.open_log(workspace=name, kind=kind, log=log)
    if is_fragment(request) and request.GET.get("collapsed"):
        ctx = {"ws": state.ref.workspace, "st": state, "ref": state.ref, **perms(request)}
        return render(request, "versions/partials/_workspace_log_row.html", ctx)
    ctx = _log_context(request, state)
    if is_fragment(request):
        return render(request, "versions/partials/_workspace_log_expanded.html", ctx)
    return render(request, "versions/workspace_log_page.html", ctx)


@require_GET
@panel_view
def workspace_files(request: HttpRequest, name: str, kind: str, log: str) -> HttpResponse:
    """The next page of a log's file diffs, from ``?start=`` (behind "Show the next files")."""
    state = log_sets.open_log(workspace=name, kind=kind, log=log)
    files = log_sets.files_page(state=state, start=int_param(request.GET.get("start")))
    ctx = {"ref": state.ref, "files": files}
    return render(request, "versions/partials/_workspace_files.html", ctx)


@require_GET
@panel_view
def workspace_diff_page(
    request: HttpRequest, name: str, kind: str, log: str, file_id: str
) -> HttpResponse:
    """The next page of hunks of one file's backup→current diff."""
    state = log_sets.open_log(workspace=name, kind=kind, log=log)
    try:
        diff = log_sets.diff_page(
            state=state,
            file_id=file_id,
            page=int_param(request.GET.get("page"), 1),
            seen_key=request.GET.get("now"),
        )
    except StaleWrite as exc:
        return _stale(request, exc)
    return render(request, "versions/partials/_workspace_diff_page.html", {"diff": diff})


@require_GET
@panel_view
def workspace_diff_context(
    request: HttpRequest, name: str, kind: str, log: str, file_id: str
) -> HttpResponse:
    """Unchanged lines behind an "N unchanged lines" expander."""
    state = log_sets.open_log(workspace=name, kind=kind, log=log)
    try:
        context = log_sets.diff_context(
            state=state,
            file_id=file_id,
            seen_key=request.GET.get("now"),
            old_start=int_param(request.GET.get("old")),
            new_start=int_param(request.GET.get("new")),
            count=int_param(request.GET.get("count")),
        )
    except StaleWrite as exc:
        return _stale(request, exc)
    ctx = {"diff": context.diff, "rows": context.rows, "rest": context.rest}
    return render(request, "versions/partials/_workspace_diff_context.html", ctx)


@require_http_methods(["GET", "POST"])
@panel_view
def workspace_restore(request: HttpRequest, name: str, kind: str, log: str) -> HttpResponse:
    """GET: the dialog with the seed's confirmation summary. POST: Confirm restore, the report."""
    actor = actor_of(request)
    state = log_sets.log_for_rollback(workspace=name, kind=kind, log=log, actor=actor)
    if request.method == "GET":
        ctx = {
            "ws": state.ref.workspace,
            "ref": state.ref,
            "st": state,
            "outline": log_sets.rollback_outline(state=state),
            **perms(request),
        }
        if is_fragment(request):
            return render(request, "versions/partials/_workspace_dialog.html", ctx)
        return render(request, "versions/workspace_confirm_page.html", ctx)

    try:
        outcome = log_sets.rollback_log(
            state=state, log_sha=request.POST.get("log_sha"), actor=actor
        )
    except (StaleWrite, Conflict) as exc:  # Conflict first: it is an InvalidInput too
        return _after(request, state, {"error": exc.message}, status=409)
    except InvalidInput as exc:
        return _after(request, state, {"error": exc.message}, status=422)
    if outcome.error:
        return _after(request, outcome.state, {"error": outcome.error})
    # The log as it is after the rollback, with the report above its diffs.
    extra = {
        "report": outcome.report,
        "report_json": outcome.report_json,
        "undo_ref": outcome.undo_ref,
    }
    return _after(request, outcome.state, extra)


def _after(
    request: HttpRequest, state: log_sets.LogState, extra: dict[str, Any], status: int = 200
) -> HttpResponse:
    ctx = _log_context(request, state, **extra)
    if not is_fragment(request):
        return render(request, "versions/workspace_report_page.html", ctx, status=status)
    html = str(
        render_to_string("versions/partials/_workspace_log_expanded.html", ctx, request=request)
    )
    html += '<div id="dialog-slot" hx-swap-oob="true"></div>'  # close the dialog
    return HttpResponse(html, status=status)
