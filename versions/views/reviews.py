"""Reviews on a change set's page (docs/architecture.md#reviews): the Review box, the reviews
and line comment threads (bodies as sanitised Markdown), replies, Resolve and Reopen. Thin
adapters over ``services.submit_review``, ``add_comment``, ``reply`` and ``resolve_thread``,
which check who may do what and keep the audit trail."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from urllib.parse import urlencode

from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from versions import selectors, services
from versions.errors import InvalidInput, NotFound
from versions.forms import ReviewForm
from versions.messages import BAD_SIDE, COMMENT_NOT_FOUND, NO_SET_FOR_LINE
from versions.models import App, ChangeSet, Comment, Review
from versions.views._common import actor_of, app_of, is_fragment, panel_view, perms

SUBMITTED = "Your review was submitted: {verdict}."
COMMENTED = "Your comment was added."
REPLIED = "Your reply was added."
RESOLVED = "The thread was resolved."
REOPENED = "The thread was reopened."
VERDICT_WORDS = dict(Review.VERDICT_CHOICES)


def reviews_context(request: HttpRequest, app: App, change_set: ChangeSet) -> dict[str, Any]:
    """What the reviews section of a set's page shows: its state, its reviews (each with
    whether it is stale), its threads, the Review box and the line comment form."""
    state = selectors.review_states([change_set.id], selectors.protection_of(app))[change_set.id]
    artifacts = list(
        change_set.points.values_list("artifact__collection", "artifact__name").distinct()
    )
    return {
        "review_state": state if change_set.kind == ChangeSet.CHANGE else None,
        "set_reviews": selectors.reviews(change_set),
        "threads": selectors.threads(change_set),
        "review_form": ReviewForm(initial={"verdict": Review.COMMENT}),
        "comment_artifacts": sorted(set(artifacts)),
        **perms(request, app),
    }


def line_notes(
    request: HttpRequest,
    app: App,
    diffs: list[Any],
    *,
    left: Callable[[Any], str | None],
    right: Callable[[Any], str | None],
    set_id: Callable[[Any], str | None] = lambda d: None,
    view: Callable[[Any], str] = lambda d: "",
    layout: str = "",
) -> None:
    """Give each diff shown (a set's ``DiffView`` or a compare's ``FileView``) its line
    comments (``notes``): line numbers that open the comment form where the person may
    review, and the threads under their lines (one ``selectors.line_threads`` call)."""
    shown = [d for d in diffs if d.page is not None]
    if not shown:
        return
    can = perms(request, app).get("can_review", False)
    found = selectors.line_threads(app, [(d.artifact.pk, left(d), right(d)) for d in shown])
    base = reverse("versions:line_comment", args=[app.slug])
    for d in shown:
        art = d.artifact
        query = {
            "artifact": f"{art.collection}/{art.name}",
            "left": left(d) or "",
            "right": right(d) or "",
        }
        if set_id(d):
            query["set"] = set_id(d) or ""
        if view(d):
            query["view"] = view(d)
        if layout == "split":
            query["layout"] = layout
        url = f"{base}?{urlencode(query)}" if can else ""
        d.notes = selectors.LineNotes(url, found.get(art.pk, {}), shown_in=set_id(d) or "")


def _target(request: HttpRequest, app: App) -> dict[str, Any]:
    """Where a clicked line number's comment goes: the set (given for a set's own view, else
    the set that wrote the state shown), the side, the blob and the line, in words."""
    query = request.GET if request.method == "GET" else request.POST
    collection, _, name = query.get("artifact", "").partition("/")
    side = query.get("side", "")
    if side not in (Comment.BEFORE, Comment.AFTER):
        raise InvalidInput(BAD_SIDE.format(side=side[:20]), field="side")
    sha = query.get("left" if side == Comment.BEFORE else "right", "")
    line = query.get("line", "")
    set_id = query.get("set", "")
    if query.get("view") == "now" and side == Comment.AFTER:
        set_id = ""  # "now" is the current state, not the set's own result
    if not set_id:
        found = selectors.comment_target(app, collection, name, sha)
        if found is None:
            raise InvalidInput(NO_SET_FOR_LINE.format(collection=collection, name=name))
        set_id, side = found
    change_set = selectors.change_set_row(app, set_id)
    number = int(line) if line.isdigit() else 0
    return {
        "cs": change_set,
        "collection": collection,
        "name": name,
        "side": side,
        "sha": sha,
        "line": number,
        "line_text": selectors.line_of_state(app, collection, name, sha, number),
    }


@require_GET
@panel_view
def line_comment(request: HttpRequest, slug: str) -> HttpResponse:
    """The comment form of one clicked diff line: a row under the line (htmx), or a page."""
    app = app_of(request, slug)
    try:
        target = _target(request, app)
    except (InvalidInput, NotFound) as exc:
        if is_fragment(request):
            return render(
                request,
                "versions/partials/_line_comment_form.html",
                {"app": app, "form_error": exc.message, "colspan": _cols(request)},
                status=422,
            )
        raise
    ctx = {
        "app": app,
        **target,
        "colspan": _cols(request),
        "shown_in": _shown_in(request),
        **perms(request, app),
    }
    if is_fragment(request):
        return render(request, "versions/partials/_line_comment_form.html", ctx)
    return render(request, "versions/line_comment_page.html", {**ctx, "tab": "sets"})


def _shown_in(request: HttpRequest) -> str:
    """The set whose diff a clicked line or a thread is shown in ("" in a compare's): the
    line's link names it (``set``), the forms carry it on (``shown_in``)."""
    query = request.GET if request.method == "GET" else request.POST
    return str(query.get("shown_in", query.get("set", "")))[:40]


def _cols(request: HttpRequest) -> int:
    return 4 if request.GET.get("layout", request.POST.get("layout")) == "split" else 3


def _section(request: HttpRequest, app: App, change_set: ChangeSet, **extra: Any) -> HttpResponse:
    """The reviews section again (htmx), or back to the set's page."""
    status = 422 if extra.get("review_error") else 200
    if not is_fragment(request) and status == 200:
        anchor = extra.get("anchor", "reviews")
        return redirect(
            reverse("versions:change_set", args=[app.slug, change_set.id]) + f"#{anchor}"
        )
    ctx = {"app": app, "cs": change_set, **reviews_context(request, app, change_set), **extra}
    if not is_fragment(request):
        return render(request, "versions/reviews_page.html", ctx, status=status)
    if extra.get("badge"):
        # A verdict changes the set's status: the badge in its head above follows (out of band).
        selectors.attach_review_states(app, [change_set])
    return render(request, "versions/partials/_set_reviews_response.html", ctx, status=status)


def _set(request: HttpRequest, slug: str, set_id: str) -> tuple[App, ChangeSet]:
    app = app_of(request, slug)
    return app, selectors.change_set_row(app, set_id)


@require_POST
@panel_view
def submit_review(request: HttpRequest, slug: str, set_id: str) -> HttpResponse:
    """Submit the Review box: a verdict and a body."""
    app, change_set = _set(request, slug, set_id)
    verdict = request.POST.get("verdict", "")
    try:
        services.submit_review(
            change_set, verdict=verdict, body=request.POST.get("body", ""), actor=actor_of(request)
        )
    except InvalidInput as exc:
        return _section(request, app, change_set, review_error=exc.message, posted=request.POST)
    words = VERDICT_WORDS.get(verdict, verdict)
    return _section(
        request, app, change_set, review_status=SUBMITTED.format(verdict=words), badge=True
    )


@require_POST
@panel_view
def add_comment(request: HttpRequest, slug: str, set_id: str) -> HttpResponse:
    """Start a thread on one line of the set's diff."""
    app, change_set = _set(request, slug, set_id)
    collection, _, name = request.POST.get("artifact", "").partition("/")
    line = request.POST.get("line", "")
    inline = request.POST.get("inline") == "1"
    try:
        comment = services.add_comment(
            change_set,
            collection=collection,
            name=name,
            side=request.POST.get("side", ""),
            line=int(line) if line.isdigit() else 0,
            body=request.POST.get("body", ""),
            actor=actor_of(request),
            sha256=request.POST.get("sha256") or None,
        )
    except (InvalidInput, NotFound) as exc:
        if inline or request.POST.get("page") == "1":
            ctx = {
                "app": app,
                "cs": change_set,
                "collection": collection,
                "name": name,
                "side": request.POST.get("side", ""),
                "sha": request.POST.get("sha256", ""),
                "line": int(line) if line.isdigit() else 0,
                "line_text": request.POST.get("line_text"),
                "body": request.POST.get("body", ""),
                "form_error": exc.message,
                "colspan": _cols(request),
                "shown_in": _shown_in(request),
                **perms(request, app),
            }
            if is_fragment(request):
                return render(request, "versions/partials/_line_comment_form.html", ctx, status=422)
            return render(request, "versions/line_comment_page.html", ctx, status=422)
        return _section(request, app, change_set, review_error=exc.message, posted=request.POST)
    if inline and is_fragment(request):
        return _thread_rows(request, app, change_set, comment.id)
    return _section(
        request, app, change_set, review_status=COMMENTED, anchor=f"thread-{comment.id}"
    )


def _thread(app: App, change_set: ChangeSet, root_id: str) -> Any:
    return next(t for t in selectors.threads(change_set) if t.comment.id == root_id)


def _thread_rows(
    request: HttpRequest, app: App, change_set: ChangeSet, root_id: str
) -> HttpResponse:
    """A new thread as the row under its line (it replaces the comment form's row)."""
    ctx = {
        "app": app,
        "cs": change_set,
        "threads": [_thread(app, change_set, root_id)],
        "colspan": _cols(request),
        "shown_in": _shown_in(request),
        **perms(request, app),
    }
    return render(request, "versions/partials/_line_threads.html", ctx)


def _inline_thread(
    request: HttpRequest, app: App, change_set: ChangeSet, root_id: str, **extra: Any
) -> HttpResponse:
    """One thread again, where it shows under its line (htmx)."""
    ctx = {
        "app": app,
        "cs": change_set,
        "thread": _thread(app, change_set, root_id),
        "inline": True,
        "shown_in": _shown_in(request),
        **perms(request, app),
        **extra,
    }
    return render(request, "versions/partials/_thread.html", ctx, status=422 if extra else 200)


@require_POST
@panel_view
def reply(request: HttpRequest, slug: str, set_id: str, comment_id: str) -> HttpResponse:
    """Reply in a thread of the set."""
    app, change_set = _set(request, slug, set_id)
    inline = request.POST.get("inline") == "1" and is_fragment(request)
    try:
        answer = services.reply(
            comment_id, body=request.POST.get("body", ""), actor=actor_of(request), app=app
        )
    except InvalidInput as exc:
        if inline:
            return _inline_thread(
                request, app, change_set, _root_of(change_set, comment_id), error=exc.message
            )
        return _section(request, app, change_set, review_error=exc.message)
    if inline:
        return _inline_thread(request, app, change_set, answer.thread_id or answer.id)
    return _section(request, app, change_set, review_status=REPLIED, anchor=f"comment-{answer.id}")


def _root_of(change_set: ChangeSet, comment_id: str) -> str:
    for t in selectors.threads(change_set):
        if t.comment.id == comment_id or any(r.id == comment_id for r in t.replies):
            return t.comment.id
    raise NotFound(COMMENT_NOT_FOUND.format(id=comment_id))


@require_POST
@panel_view
def resolve(request: HttpRequest, slug: str, set_id: str, comment_id: str) -> HttpResponse:
    """``Resolve`` a thread of the set, or ``Reopen`` it (``resolved=0``)."""
    app, change_set = _set(request, slug, set_id)
    resolved = request.POST.get("resolved", "1") != "0"
    root = services.resolve_thread(comment_id, resolved=resolved, actor=actor_of(request), app=app)
    if request.POST.get("inline") == "1" and is_fragment(request):
        return _inline_thread(request, app, change_set, root.id)
    return _section(
        request,
        app,
        change_set,
        review_status=RESOLVED if resolved else REOPENED,
        anchor=f"thread-{root.id}",
    )
