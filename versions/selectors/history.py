"""History reads for agents (docs/api.md#history): an artifact's restore points, its source at a
ref, a point with its previous source, and a set's diff as unified diff text — the same JSON-ready
answers for the API and the MCP server. The doors pass an app (or set, or point) they reached
through the services' access check.

Refs, the same a preview accepts: ``draft`` (the current state), ``production`` (the deployment
production serves), ``dp_…`` (a deployment), ``cs_…`` / ``rs_…`` (the state right after that
set), ``rp_…`` (the state just before that point's write).
"""

from __future__ import annotations

import difflib
import re
from datetime import datetime, timedelta
from typing import Any

from django.db.models import Max

from versions import conf
from versions.diffing import line_ops
from versions.errors import InvalidInput, NotFound
from versions.models import App, Artifact, ChangeSet, Deployment, DeploymentEntry, RestorePoint
from versions.selectors.agent import (
    ARTIFACT_NOT_FOUND,
    artifact_summary,
    name_spellings,
    point_out,
)
from versions.selectors.paging import after, newest_first_page
from versions.selectors.panel import blob_sources
from versions.selectors.set_states import set_states
from versions.selectors.states import NOT_STORED, PRUNED, state_at

HISTORY_PER_PAGE = 50
HISTORY_PER_PAGE_MAX = 200
DIFF_CONTEXT = 3

DRAFT = "draft"
PRODUCTION = "production"
REF_UNKNOWN = (
    "“{ref}” is not a ref. Use draft, production, a deployment id (dp_…), a change set id "
    "(cs_… or rs_…: the state right after it) or a restore point id (rp_…: the state just "
    "before it)."
)
REF_NO_PRODUCTION = (
    "App “{slug}” has no production deployment yet: /apps/{slug}/ serves its draft. Read draft, "
    "or promote a state to production first."
)
REF_DEPLOYMENT_NOT_FOUND = "There is no deployment “{ref}” in app “{slug}”."
REF_SET_NOT_FOUND = "There is no change set “{ref}” in app “{slug}”."
REF_POINT_NOT_FOUND = "There is no restore point “{ref}” in app “{slug}”."
REF_SET_EMPTY = (
    "The change set “{ref}” has no restore points left (retention pruned them), so the state "
    "right after it is not known."
)
AT_ABSENT = "The {collection} “{name}” of app “{slug}” did not exist at {ref}."
AT_NOT_STORED = (
    "The source of {collection} “{name}” at {ref} was {size:,} bytes, over the {cap:,}-byte "
    "limit for stored sources, so it was not kept: it cannot be read."
)
AT_PRUNED = (
    "A restore point of {collection} “{name}” from after {ref} was pruned by retention (only "
    "the newest {keep} unpinned points of an app are kept), so its source at {ref} is gone."
)
SOURCE_NOT_KEPT = (
    "The previous source was {size:,} bytes, over the {cap:,}-byte limit for stored sources, "
    "so it was not kept."
)
DIFF_SIDE_UNKNOWN = "# {key}: {reason}\n"

_SET_REF = re.compile(r"^(cs_rp|rs)_[0-9a-z]{1,14}_[0-9a-z]{1,16}$")
_POINT_REF = re.compile(r"^rp_[0-9a-z]{1,14}_[0-9a-z]{1,16}$")
_DEPLOYMENT_REF = re.compile(r"^(production|dp_[0-9a-z]{1,14}_[0-9a-z]{1,16})$")


def _artifact(app: App, collection: str, name: str) -> Artifact:
    """The artifact (a tombstone too: its history is still there), or NotFound."""
    found = Artifact.objects.filter(
        app=app, collection=collection, name__in=name_spellings(name)
    ).first()
    if found is None:
        raise NotFound(ARTIFACT_NOT_FOUND.format(collection=collection, name=name, slug=app.slug))
    return found


def history_point(point: RestorePoint) -> dict[str, Any]:
    """A restore point as the history lists it: the point of docs/api.md#history with who really
    wrote it."""
    return {**point_out(point), "written_by": point.written_by}


def artifact_history(
    app: App,
    collection: str,
    name: str,
    *,
    page: int = 1,
    per_page: int = HISTORY_PER_PAGE,
    cursor: str | None = None,
    limit: int | None = None,
) -> dict[str, Any]:
    """One page of an artifact's restore points, newest first (each the state before a write:
    who asked, who really wrote, which tool, the hashes and line counts): by page number, or
    after ``cursor`` when one is given or ``limit`` is (docs/api.md#cursors)."""
    artifact = _artifact(app, collection, name)
    rows = (
        RestorePoint.objects.filter(artifact=artifact)
        .select_related("app", "artifact", "change_set")
        .order_by("-created_on", "-id")
    )
    total = rows.count()
    if cursor is not None or limit is not None:
        per_page = limit or per_page
        points, next_cursor = newest_first_page(rows, cursor=cursor, limit=per_page)
        page_number: int | None = None
        more = False
    else:
        start = (page - 1) * per_page
        points = list(rows[start : start + per_page])
        more = start + per_page < total
        next_cursor = after(points[-1]) if more and points else None
        page_number = page
    items = []
    for point in points:
        items.append(
            {
                **history_point(point),
                "change_set": point.change_set_id,
                "message": point.change_set.message,
            }
        )
    return {
        "app": app.slug,
        "collection": collection,
        "name": name,
        "page": page_number,
        "per_page": per_page,
        "total": total,
        "next_page": page + 1 if more else None,
        "next_cursor": next_cursor,
        "items": items,
    }


def _ref_moment(app: App, ref: str) -> datetime | None:
    """The moment a ref names (the state of an artifact "at" it is its state at that moment);
    None for ``draft``. NotFound / InvalidInput in words for anything else."""
    if ref == DRAFT:
        return None
    if _SET_REF.match(ref):
        if not ChangeSet.objects.filter(app=app, pk=ref).exists():
            raise NotFound(REF_SET_NOT_FOUND.format(ref=ref, slug=app.slug))
        last = RestorePoint.objects.filter(change_set_id=ref).aggregate(last=Max("created_on"))
        if last["last"] is None:
            raise NotFound(REF_SET_EMPTY.format(ref=ref))
        moment: datetime = last["last"]
        return moment
    if _POINT_REF.match(ref):
        created = (
            RestorePoint.objects.filter(app=app, pk=ref)
            .values_list("created_on", flat=True)
            .first()
        )
        if created is None:
            raise NotFound(REF_POINT_NOT_FOUND.format(ref=ref, slug=app.slug))
        # Points are stamped in whole milliseconds, strictly increasing per artifact: the first
        # point after a moment just before this one is this very point (its "then").
        return created - timedelta(microseconds=1)
    raise InvalidInput(REF_UNKNOWN.format(ref=ref[:200]), field="at")


def _deployment_id(app: App, ref: str) -> str:
    """The deployment ``production`` or ``dp_…`` names, or NotFound in words."""
    if ref == PRODUCTION:
        current = App.objects.filter(pk=app.pk).values_list("production_id", flat=True).first()
        if current is None:
            raise NotFound(REF_NO_PRODUCTION.format(slug=app.slug))
        return str(current)
    if not Deployment.objects.filter(app=app, pk=ref).exists():
        raise NotFound(REF_DEPLOYMENT_NOT_FOUND.format(ref=ref, slug=app.slug))
    return ref


def _artifact_in_deployment(app: App, collection: str, name: str, ref: str) -> dict[str, Any]:
    """An artifact as a deployment holds it: the blob it was promoted with (never pruned)."""
    deployment_id = _deployment_id(app, ref)
    artifact = _artifact(app, collection, name)
    sha = (
        DeploymentEntry.objects.filter(deployment_id=deployment_id, artifact=artifact)
        .values_list("blob_id", flat=True)
        .first()
    )
    if sha is None:
        raise NotFound(AT_ABSENT.format(collection=collection, name=name, slug=app.slug, ref=ref))
    raw = blob_sources([sha])[sha]
    return {
        "app": app.slug,
        "at": ref,
        "collection": collection,
        "name": name,
        "sha256": sha,
        "size": len(raw),
        "source": raw.decode("utf-8"),
    }


def artifact_at(app: App, collection: str, name: str, ref: str) -> dict[str, Any]:
    """An artifact's source at ``ref`` (see the module's refs), with its sha256; NotFound in
    words when it did not exist then, or its source then was not stored or was pruned."""
    if _DEPLOYMENT_REF.match(ref):
        return _artifact_in_deployment(app, collection, name, ref)
    moment = _ref_moment(app, ref)
    artifact = _artifact(app, collection, name)
    words = {"collection": collection, "name": name, "slug": app.slug, "ref": ref}
    if moment is None:
        if artifact.deleted:
            raise NotFound(AT_ABSENT.format(**words))
        return {"app": app.slug, "at": ref, **artifact_summary(artifact), "source": artifact.source}
    state = state_at(artifact, moment, with_source=True)
    if state.status == PRUNED:
        raise NotFound(AT_PRUNED.format(keep=conf.points_per_app(), **words))
    if state.status == NOT_STORED:
        size = state.point.previous_size if state.point is not None else 0
        raise NotFound(AT_NOT_STORED.format(size=size, cap=conf.max_stored_bytes(), **words))
    if state.sha256 == "" or state.source is None:
        raise NotFound(AT_ABSENT.format(**words))
    return {
        "app": app.slug,
        "at": ref,
        "collection": collection,
        "name": name,
        "sha256": state.sha256,
        "size": len(state.source.encode()),
        "source": state.source,
    }


def point_detail(point: RestorePoint) -> dict[str, Any]:
    """A restore point with its previous source ("" when nothing existed; None, with the reason
    in words, when it was over the size cap and not kept)."""
    source = point.previous_source
    return {
        **history_point(point),
        "change_set": point.change_set_id,
        "previous_source": source,
        "previous_source_reason": None
        if source is not None
        else SOURCE_NOT_KEPT.format(size=point.previous_size, cap=conf.max_stored_bytes()),
    }


def _split(text: str) -> list[str]:
    """Lines with their newline kept ("\\n" only: a line diff's lines)."""
    parts = text.split("\n")
    lines = [p + "\n" for p in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1])
    return lines


def _opcodes(old: list[str], new: list[str]) -> list[tuple[str, int, int, int, int]]:
    """difflib-style opcodes from :func:`versions.diffing.line_ops` (fast on big sources)."""
    ops, _method = line_ops(old, new)
    out = []
    i = j = 0
    for op, count in ops:
        if op == "=":
            out.append(("equal", i, i + count, j, j + count))
            i, j = i + count, j + count
        elif op == "-":
            out.append(("delete", i, i + count, j, j))
            i += count
        else:
            out.append(("insert", i, i, j, j + count))
            j += count
    return out or [("equal", 0, 0, 0, 0)]


def _range(start: int, length: int) -> str:
    """A unified diff's hunk range (as ``diff -u`` writes it)."""
    beginning = start + 1
    if length == 1:
        return f"{beginning}"
    if not length:
        beginning -= 1
    return f"{beginning},{length}"


def _line(prefix: str, line: str) -> str:
    if line.endswith("\n"):
        return prefix + line
    return prefix + line + "\n\\ No newline at end of file\n"


def unified_diff(old: str, new: str, old_label: str, new_label: str) -> str:
    """The unified diff text (``diff -u``, 3 lines of context) of two sources; "" if equal."""
    if old == new:
        return ""
    a, b = _split(old), _split(new)
    matcher: difflib.SequenceMatcher[str] = difflib.SequenceMatcher(None, [], [])
    matcher.opcodes = _opcodes(a, b)  # type: ignore[attr-defined]
    out = [f"--- {old_label}\n", f"+++ {new_label}\n"]
    for group in matcher.get_grouped_opcodes(DIFF_CONTEXT):
        first, last = group[0], group[-1]
        old_range = _range(first[1], last[2] - first[1])
        new_range = _range(first[3], last[4] - first[3])
        out.append(f"@@ -{old_range} +{new_range} @@\n")
        for tag, i1, i2, j1, j2 in group:
            if tag == "equal":
                out.extend(_line(" ", line) for line in a[i1:i2])
                continue
            out.extend(_line("-", line) for line in a[i1:i2])
            out.extend(_line("+", line) for line in b[j1:j2])
    return "".join(out)


def set_diff(change_set: ChangeSet, view: str = "set") -> str:
    """A change set's diff as unified diff text: per artifact (by collection and name), before
    the set → right after it (``view="set"``) or → now (``view="now"``). An artifact whose side
    is not known (not stored, pruned) gets one ``#`` line saying why."""
    states = set_states(change_set.id, view)
    parts = []
    for item in states.artifacts:
        key = f"{item.artifact.collection}/{item.artifact.name}"
        if not item.available:
            parts.append(DIFF_SIDE_UNKNOWN.format(key=key, reason=item.reason))
            continue
        before, after = item.before.source or "", item.after.source or ""
        old_label = f"a/{key}" if item.before.sha256 else "/dev/null"
        new_label = f"b/{key}" if item.after.sha256 else "/dev/null"
        parts.append(unified_diff(before, after, old_label, new_label))
    return "".join(parts)
