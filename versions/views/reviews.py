"""Reviews on a change set's page (docs/architecture.md#reviews): the Review box, the reviews
and line comment threads (bodies as sanitised Markdown), replies, Resolve and Reopen. Thin
adapters over ``services.submit_review``, ``add_comment``, ``reply`` and ``resolve_thread``,
which check who may do what and keep the audit trail."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from versions import selectors, services
from versions.errors import InvalidInput, NotFound
from versions.forms import ReviewForm
from versions.models import App, ChangeSet, Review
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


def _section(request: HttpRequest, app: App, change_set: ChangeSet, **extra: Any) -> HttpResponse:
    """The reviews section again (htmx), or back to the set's page."""
    status = 422 if extra.get("review_error") else 200
    if not is_fragment(request) and status == 200:
        return redirect(reverse("versions:change_set", args=[app.slug, change_set.id]) + "#reviews")
    ctx = {"app": app, "cs": change_set, **reviews_context(request, app, change_set), **extra}
    if not is_fragment(request):
        return render(request, "versions/reviews_page.html", ctx, status=status)
    return render(request, "versions/partials/_set_reviews.html", ctx, status=status)


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
    return _section(request, app, change_set, review_status=SUBMITTED.format(verdict=words))


@require_POST
@panel_view
def add_comment(request: HttpRequest, slug: str, set_id: str) -> HttpResponse:
    """Start a thread on one line of the set's diff."""
    app, change_set = _set(request, slug, set_id)
    collection, _, name = request.POST.get("artifact", "").partition("/")
    line = request.POST.get("line", "")
    try:
        services.add_comment(
            change_set,
            collection=collection,
            name=name,
            side=request.POST.get("side", ""),
            line=int(line) if line.isdigit() else 0,
            body=request.POST.get("body", ""),
            actor=actor_of(request),
        )
    except (InvalidInput, NotFound) as exc:
        return _section(request, app, change_set, review_error=exc.message, posted=request.POST)
    return _section(request, app, change_set, review_status=COMMENTED)


@require_POST
@panel_view
def reply(request: HttpRequest, slug: str, set_id: str, comment_id: str) -> HttpResponse:
    """Reply in a thread of the set."""
    app, change_set = _set(request, slug, set_id)
    try:
        services.reply(
            comment_id, body=request.POST.get("body", ""), actor=actor_of(request), app=app
        )
    except InvalidInput as exc:
        return _section(request, app, change_set, review_error=exc.message)
    return _section(request, app, change_set, review_status=REPLIED)


@require_POST
@panel_view
def resolve(request: HttpRequest, slug: str, set_id: str, comment_id: str) -> HttpResponse:
    """``Resolve`` a thread of the set, or ``Reopen`` it (``resolved=0``)."""
    app, change_set = _set(request, slug, set_id)
    resolved = request.POST.get("resolved", "1") != "0"
    services.resolve_thread(comment_id, resolved=resolved, actor=actor_of(request), app=app)
    return _section(request, app, change_set, review_status=RESOLVED if resolved else REOPENED)
