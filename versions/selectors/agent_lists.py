"""The agent's other reads (docs/api.md#cursors, docs/api.md#compare, docs/api.md#me): keyset pages
of an app's artifacts, deployments and reviews, the ``release`` ref, a comparison of two refs with
line counts or as unified diff text, and who a token is — the same JSON-ready answers for the API
and the MCP server. The doors pass an app they reached through the services' access check.
"""

from __future__ import annotations

from typing import Any

from django.db.models import Q

from versions.diffing import count_line_changes
from versions.errors import NotFound
from versions.models import App, Artifact, Deployment, RestorePoint, Review
from versions.selectors.agent import artifact_summary, iso_utc
from versions.selectors.compare import FileChange, compare, split_refs
from versions.selectors.history import unified_diff
from versions.selectors.paging import decode_cursor, encode_cursor, newest_first_page
from versions.selectors.panel import blob_sources
from versions.selectors.production import deployment_out
from versions.selectors.production import production_overview as _overview
from versions.selectors.reviews import review_dict
from versions.terms import PROMOTE, RESTORE, VIEW, WRITE

RELEASE = "release"
NO_RELEASE = (
    "App “{slug}” has no release yet, so “release” names no state. Mark a change set as the "
    "release in the panel first, or use draft, production, dp_…, cs_…, rs_… or rp_…."
)
LIST_MAX = 200


def named_ref(app: App, ref: str) -> str:
    """``ref`` with ``release`` replaced by the id of the app's release set (NotFound in words
    when it has none); every other ref as it is."""
    if ref != RELEASE:
        return ref
    release = App.objects.filter(pk=app.pk).values_list("release_set_id", flat=True).first()
    if release is None:
        raise NotFound(NO_RELEASE.format(slug=app.slug))
    return str(release)


def artifact_page(
    app: App, *, include_deleted: bool = False, cursor: str | None = None, limit: int | None = None
) -> dict[str, Any]:
    """The app's artifacts by collection and name (without sources): all of them, or a keyset
    page of ``limit`` after ``cursor`` (the collection and name of the last one given)."""
    rows = Artifact.objects.filter(app=app)
    if not include_deleted:
        rows = rows.live()
    if cursor is not None:
        collection, name = decode_cursor(cursor, 2)
        rows = rows.filter(Q(collection__gt=collection) | Q(collection=collection, name__gt=name))
    rows = rows.order_by("collection", "name")
    if limit is None and cursor is None:
        found = list(rows)
        more = False
    else:
        size = limit or LIST_MAX
        found = list(rows[: size + 1])
        more = len(found) > size
        found = found[:size]
    last = found[-1] if more and found else None
    return {
        "app": app.slug,
        "artifacts": [artifact_summary(a) for a in found],
        "next_cursor": encode_cursor(last.collection, last.name) if last else None,
    }


def deployment_page(
    app: App, *, cursor: str | None = None, limit: int | None = None
) -> dict[str, Any]:
    """The app's production, its deployments newest first (all, or a keyset page of ``limit``
    after ``cursor``) and the history of production (its newest events)."""
    if cursor is None and limit is None:
        return {**_overview(app), "next_cursor": None}
    overview = _overview(app)
    rows = Deployment.objects.filter(app=app)
    found, next_cursor = newest_first_page(rows, cursor=cursor, limit=limit or LIST_MAX)
    overview["deployments"] = [deployment_out(d, overview["production"]) for d in found]
    overview["next_cursor"] = next_cursor
    return overview


def review_page(
    app: App, *, cursor: str | None = None, limit: int | None = None, verdict: str | None = None
) -> dict[str, Any]:
    """The reviews people gave the app's change sets, newest first (a keyset page of ``limit``
    after ``cursor``), each with its set and whether later writes joined that set since."""
    rows = Review.objects.filter(app=app)
    if verdict is not None:
        rows = rows.filter(verdict=verdict)
    found, next_cursor = newest_first_page(rows, cursor=cursor, limit=limit or LIST_MAX)
    set_ids = {r.change_set_id for r in found}
    points: dict[str, set[str]] = {i: set() for i in set_ids}
    for set_id, point_id in RestorePoint.objects.filter(change_set_id__in=set_ids).values_list(
        "change_set_id", "id"
    ):
        points[set_id].add(point_id)
    items = [
        {
            **review_dict(r, not points[r.change_set_id] <= set(r.points or [])),
            "changeSetId": r.change_set_id,
        }
        for r in found
    ]
    return {"app": app.slug, "next_cursor": next_cursor, "items": items}


def _file_out(file: FileChange, sources: dict[str, bytes]) -> dict[str, Any]:
    left, right = file.left.sha256, file.right.sha256
    added = removed = None
    if file.available:
        before = sources.get(left or "", b"").decode()
        after = sources.get(right or "", b"").decode()
        added, removed = count_line_changes(before, after)
    return {
        "collection": file.artifact.collection,
        "name": file.artifact.name,
        "change": file.change,
        "from": left,
        "to": right,
        "lines_added": added,
        "lines_removed": removed,
        "available": file.available,
        "reason": file.reason,
    }


def _sources(files: list[FileChange]) -> dict[str, bytes]:
    return blob_sources(
        sha for f in files if f.available for sha in (f.left.sha256, f.right.sha256) if sha
    )


def comparison(app: App, base: str, head: str) -> dict[str, Any]:
    """What differs from ref ``base`` to ref ``head``: per artifact its change, both hashes and
    the lines added and removed (null, with the reason, when a side is not known), and totals."""
    found = compare(app, named_ref(app, base), named_ref(app, head))
    sources = _sources(found.files)
    files = [_file_out(f, sources) for f in found.files]
    return {
        "app": app.slug,
        "base": base,
        "head": head,
        "base_label": found.left.label,
        "head_label": found.right.label,
        "files": files,
        "total_files": len(files),
        "lines_added": sum(f["lines_added"] or 0 for f in files),
        "lines_removed": sum(f["lines_removed"] or 0 for f in files),
    }


def comparison_diff(app: App, base: str, head: str) -> str:
    """The same comparison as unified diff text; an artifact whose side is not known gets one
    ``#`` line saying why."""
    found = compare(app, named_ref(app, base), named_ref(app, head))
    sources = _sources(found.files)
    parts = []
    for f in found.files:
        key = f"{f.artifact.collection}/{f.artifact.name}"
        if not f.available:
            parts.append(f"# {key}: {f.reason}\n")
            continue
        before = sources.get(f.left.sha256 or "", b"").decode()
        after = sources.get(f.right.sha256 or "", b"").decode()
        old_label = f"a/{key}" if f.left.sha256 else "/dev/null"
        new_label = f"b/{key}" if f.right.sha256 else "/dev/null"
        parts.append(unified_diff(before, after, old_label, new_label))
    return "".join(parts)


def split_compare(refs: str) -> tuple[str, str]:
    """``base...head`` → (base, head), or NotFound in words."""
    return split_refs(refs)


# What ``/me`` and ``whoami`` say a token may do on each app, in this order.
ABILITIES = (VIEW, WRITE, RESTORE, PROMOTE)


def whoami(actor: Any, app: App | None = None) -> dict[str, Any]:
    """Who a token's actor is: its user, its label and prefix, when it expires and was last
    used, and each app it reaches with what it may do there (as the actor's own access rules
    say); ``app``: the one an MCP session serves."""
    token = actor.token
    apps = [
        {
            "slug": each.slug,
            "name": each.name,
            "may": [action for action in ABILITIES if actor.may(action, each)],
        }
        for each in token.apps.order_by("slug")
        if actor.sees(each)
    ]
    answer = {
        "user": token.user.get_username(),
        "token": {
            "prefix": token.prefix,
            "label": token.label,
            "created_on": iso_utc(token.created_on),
            "expires_on": iso_utc(token.expires_on) or None,
            "last_used_on": iso_utc(token.last_used_on) or None,
            "can_promote": token.can_promote,
        },
        "apps": apps,
    }
    if app is not None:
        answer["app"] = app.slug
    return answer
