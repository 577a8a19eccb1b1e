"""Reviews, line comments and protection (docs/architecture.md#reviews): people with the role
``reviewer`` or higher approve a change set, request changes or comment, and comment on diff
lines; agents read all of it and reply to comments, never review. Owners set what promoting
needs (:func:`set_protection`); the promotion's pre-flight rule that enforces it lives with the
promotion (:func:`versions.services.deployments.rule_protected`).

Every action is kept in the audit trail, in its own transaction.
"""

from __future__ import annotations

import re
import unicodedata
from datetime import datetime

from django.db import transaction

from versions import diffing, ids
from versions.errors import Forbidden, InvalidInput, NotFound
from versions.messages import (
    ADDRESS_UNKNOWN,
    ADDRESSES_NOT_LIST,
    BAD_LINE,
    BAD_SIDE,
    BODY_HAS_CONTROL,
    BODY_NOT_TEXT,
    BODY_TOO_LONG,
    COMMENT_BODY_EMPTY,
    COMMENT_NOT_FOUND,
    LINE_CHANGED_SINCE,
    NOT_IN_SET,
    PROTECTION_BAD_APPROVALS,
    REVIEW_BODY_NEEDED,
    SIDE_NOT_AVAILABLE,
    TOKEN_CANNOT_REVIEW,
    UNKNOWN_VERDICT,
)
from versions.models import App, AppProtection, ChangeSet, Comment, RestorePoint, Review
from versions.selectors.set_states import set_states
from versions.services.access import Actor, app_for, set_for
from versions.services.audit import record
from versions.services.webhooks import emit
from versions.terms import (
    COMMENT_ADDED,
    COMMENT_REPLIED,
    MANAGE,
    PROTECTION_CHANGED,
    REVIEW,
    REVIEW_SUBMITTED,
    REVIEW_SUBMITTED_EVENT,
    THREAD_ADDRESSED,
    THREAD_REOPENED,
    THREAD_RESOLVED,
    VIEW,
)
from versions.terms import (
    COMMENT_CREATED as COMMENT_CREATED_EVENT,
)

_COMMENT_ID = re.compile(r"^cm_[0-9a-z]{1,14}_[0-9a-z]{8}$")
# The threads one write may say it answers.
ADDRESSES_MAX = 20


def _new_id(prefix: str) -> str:
    return f"{prefix}_{ids.base36(ids.now_ms())}_{ids.random_suffix()}"


def _now() -> datetime:
    return ids.ms_to_datetime(ids.now_ms())


def clean_body(body: object, *, required: bool) -> str:
    """A review's or comment's Markdown body, or ``InvalidInput`` in words: text, at most
    10,000 characters, no control characters but line breaks and tabs."""
    if body is None:
        body = ""
    if not isinstance(body, str):
        raise InvalidInput(BODY_NOT_TEXT, field="body")
    body = body.replace("\r\n", "\n").strip()
    if len(body) > Review.BODY_MAX:
        raise InvalidInput(
            BODY_TOO_LONG.format(limit=Review.BODY_MAX, count=len(body)), field="body"
        )
    if any(c not in "\n\t" and unicodedata.category(c) in ("Cc", "Cs") for c in body):
        raise InvalidInput(BODY_HAS_CONTROL, field="body")
    if required and not body:
        raise InvalidInput(COMMENT_BODY_EMPTY, field="body")
    return body


def _person(actor: Actor) -> None:
    """Reviews, line comments and resolving are people's: tokens and commands are refused."""
    if actor.token is not None or actor.user is None:
        raise Forbidden(TOKEN_CANNOT_REVIEW)


def submit_review(
    change_set: ChangeSet | str, *, verdict: str, body: str = "", actor: Actor
) -> Review:
    """Review ``change_set`` as it is now (its point ids): ``approve``, ``request_changes`` or
    ``comment`` (those two need a body). ``NotFound`` for a set the person cannot see,
    ``Forbidden`` for tokens and for people below ``reviewer``."""
    _person(actor)
    set_id = change_set.id if isinstance(change_set, ChangeSet) else change_set
    found = set_for(set_id, actor=actor, action=REVIEW)
    if verdict not in Review.VERDICTS:
        raise InvalidInput(UNKNOWN_VERDICT.format(verdict=str(verdict)[:40]), field="verdict")
    text = clean_body(body, required=False)
    if verdict != Review.APPROVE and not text:
        raise InvalidInput(REVIEW_BODY_NEEDED, field="body")
    with transaction.atomic():
        points = sorted(
            RestorePoint.objects.filter(change_set_id=found.id).values_list("id", flat=True)
        )
        points += sorted(str(e.get("pointId")) for e in found.pruned or [])
        review = Review.objects.create(
            id=_new_id("rv"),
            app=found.app,
            change_set=found,
            author=actor.user,
            author_name=actor.name,
            verdict=verdict,
            body=text,
            created_on=_now(),
            points=points,
        )
        record(
            REVIEW_SUBMITTED,
            actor=actor,
            app=found.app,
            targets=[found.id, review.id],
            details={"verdict": verdict},
        )
        emit(
            found.app_id,
            REVIEW_SUBMITTED_EVENT,
            {
                "review": review.id,
                "changeSet": found.id,
                "author": actor.name,
                "verdict": verdict,
                "body": text,
            },
        )
    return review


def add_comment(
    change_set: ChangeSet | str,
    *,
    collection: str,
    name: str,
    side: str,
    line: int,
    body: str,
    actor: Actor,
    sha256: str | None = None,
) -> Comment:
    """Start a thread on one line of the set's own diff: ``side`` ``before`` or ``after`` of
    artifact ``collection``/``name``, ``line`` from 1. The anchor keeps the side's blob and the
    line as it reads, so the thread is marked outdated once that line changes. ``sha256``: the
    side's blob as the person read it (a diff line clicked); refused when it differs now."""
    _person(actor)
    set_id = change_set.id if isinstance(change_set, ChangeSet) else change_set
    found = set_for(set_id, actor=actor, action=REVIEW)
    if side not in (Comment.BEFORE, Comment.AFTER):
        raise InvalidInput(BAD_SIDE.format(side=str(side)[:20]), field="side")
    text = clean_body(body, required=True)
    entry = next(
        (
            a
            for a in set_states(found.id).artifacts
            if a.artifact.collection == collection and a.artifact.name == name
        ),
        None,
    )
    if entry is None:
        raise NotFound(
            NOT_IN_SET.format(set=found.id, collection=str(collection)[:40], name=str(name)[:200])
        )
    state = entry.before if side == Comment.BEFORE else entry.after
    if state.source is None:
        raise InvalidInput(
            SIDE_NOT_AVAILABLE.format(collection=collection, name=name, reason=state.reason),
            field="side",
        )
    if sha256 is not None and sha256 != (state.sha256 or ""):
        raise InvalidInput(
            LINE_CHANGED_SINCE.format(collection=collection, name=name), field="sha256"
        )
    # Lines as the diff numbers them: split on "\n" only.
    lines = [str(x) for x in diffing.split_lines(state.source)[0]]
    if not isinstance(line, int) or isinstance(line, bool) or not 1 <= line <= len(lines):
        raise InvalidInput(BAD_LINE.format(count=len(lines), line=line), field="line")
    with transaction.atomic():
        comment = Comment.objects.create(
            id=_new_id("cm"),
            app=found.app,
            change_set=found,
            artifact=entry.artifact,
            side=side,
            blob_sha256=state.sha256 or "",
            line=line,
            line_text=lines[line - 1],
            author=actor.user,
            author_name=actor.name,
            body=text,
            created_on=_now(),
        )
        record(
            COMMENT_ADDED,
            actor=actor,
            app=found.app,
            targets=[found.id, comment.id],
            details={"anchor": f"{collection}/{name}:{side}:{line}"},
        )
        emit(
            found.app_id,
            COMMENT_CREATED_EVENT,
            {
                "comment": comment.id,
                "changeSet": found.id,
                "thread": None,
                "author": actor.name,
                "byAgent": False,
                "anchor": {"collection": collection, "name": name, "side": side, "line": line},
                "body": text,
            },
        )
    return comment


def _comment_for(comment_id: object, actor: Actor, action: str) -> Comment:
    """The comment ``comment_id`` as ``actor`` may reach it (``NotFound`` when its app does
    not exist for them)."""
    found = (
        Comment.objects.select_related("app", "change_set", "thread").filter(pk=comment_id).first()
        if isinstance(comment_id, str) and _COMMENT_ID.match(comment_id)
        else None
    )
    missing = NotFound(COMMENT_NOT_FOUND.format(id=str(comment_id)[:60]))
    if found is None:
        raise missing
    actor.check(action, found.app, missing=missing)
    return found


def reply(comment_id: str, *, body: str, actor: Actor, app: App | None = None) -> Comment:
    """Reply in the thread of ``comment_id``: people who may review, and agents (their reply
    is marked as the agent's) on the apps their token reaches. ``app``: the app the caller
    is bound to (an MCP session's): a comment of another app is not found."""
    if actor.token is None:
        _person(actor)
    found = _comment_for(comment_id, actor, VIEW if actor.token is not None else REVIEW)
    if app is not None and found.app_id != app.pk:
        raise NotFound(COMMENT_NOT_FOUND.format(id=comment_id))
    root = found.thread or found
    text = clean_body(body, required=True)
    with transaction.atomic():
        comment = Comment.objects.create(
            id=_new_id("cm"),
            app=found.app,
            change_set=found.change_set,
            thread=root,
            author=actor.user,
            author_name=actor.label if actor.token is not None else actor.name,
            by_agent=actor.token is not None,
            body=text,
            created_on=_now(),
        )
        record(
            COMMENT_REPLIED,
            actor=actor,
            app=found.app,
            targets=[found.change_set_id, root.id, comment.id],
        )
        emit(
            found.app_id,
            COMMENT_CREATED_EVENT,
            {
                "comment": comment.id,
                "changeSet": found.change_set_id,
                "thread": root.id,
                "author": comment.author_name,
                "byAgent": comment.by_agent,
                "anchor": None,
                "body": text,
            },
        )
    return comment


def resolve_thread(
    comment_id: str, *, resolved: bool = True, actor: Actor, app: App | None = None
) -> Comment:
    """``Resolve`` (or, with ``resolved=False``, ``Reopen``) the thread of ``comment_id``:
    people who may review only. ``app``: the app the caller names (another's comment is not
    found)."""
    _person(actor)
    found = _comment_for(comment_id, actor, REVIEW)
    if app is not None and found.app_id != app.pk:
        raise NotFound(COMMENT_NOT_FOUND.format(id=comment_id))
    root = found.thread or found
    with transaction.atomic():
        root.resolved = resolved
        root.resolved_by = actor.name if resolved else ""
        root.resolved_on = _now() if resolved else None
        root.save(update_fields=["resolved", "resolved_by", "resolved_on"])
        record(
            THREAD_RESOLVED if resolved else THREAD_REOPENED,
            actor=actor,
            app=found.app,
            targets=[found.change_set_id, root.id],
        )
    return root


def address_roots(app: App, addresses: object) -> list[str]:
    """The threads a write says it answers (``addresses: ["cm_…"]``), as their first
    comments' ids: refused in words, before anything is written, when it is not a list of
    comment ids of ``app`` (an unknown id and another app's read alike)."""
    if addresses is None:
        return []
    if (
        not isinstance(addresses, list | tuple)
        or len(addresses) > ADDRESSES_MAX
        or not all(isinstance(a, str) for a in addresses)
    ):
        raise InvalidInput(ADDRESSES_NOT_LIST.format(limit=ADDRESSES_MAX), field="addresses")
    wanted = list(dict.fromkeys(addresses))
    if not wanted:
        return []
    for a in wanted:
        if not _COMMENT_ID.match(a):
            raise InvalidInput(ADDRESS_UNKNOWN.format(id=a[:60], slug=app.slug), field="addresses")
    found = dict(
        Comment.objects.filter(app_id=app.pk, pk__in=wanted).values_list("id", "thread_id")
    )
    for a in wanted:
        if a not in found:
            raise InvalidInput(ADDRESS_UNKNOWN.format(id=a, slug=app.slug), field="addresses")
    return list(dict.fromkeys(found[a] or a for a in wanted))


def mark_addressed(app: App, roots: list[str], point_id: str, *, actor: Actor | None) -> None:
    """The threads ``roots`` now read "addressed in ``point_id``" (the write's restore point),
    inside the write's transaction; a person still resolves them."""
    if not roots:
        return
    Comment.objects.filter(app_id=app.pk, pk__in=roots).update(addressed_in=point_id)
    record(
        THREAD_ADDRESSED,
        actor=actor,
        app=app,
        targets=[point_id, *roots],
    )


def set_protection(
    app: App | str,
    *,
    required_approvals: object,
    block_on_changes_requested: bool,
    dismiss_stale: bool,
    actor: Actor,
) -> AppProtection:
    """Set what promoting ``app`` needs (owners only): ``required_approvals`` 0-5 (0: no
    review required), whether a change request blocks, whether stale approvals are dismissed."""
    found = app_for(app, actor=actor, action=MANAGE)
    if actor.token is not None:
        raise Forbidden(TOKEN_CANNOT_REVIEW)
    if (
        not isinstance(required_approvals, int)
        or isinstance(required_approvals, bool)
        or not 0 <= required_approvals <= AppProtection.MAX_APPROVALS
    ):
        raise InvalidInput(PROTECTION_BAD_APPROVALS, field="required_approvals")
    with transaction.atomic():
        protection, _ = AppProtection.objects.select_for_update().get_or_create(app=found)
        before = {
            "required_approvals": protection.required_approvals,
            "block_on_changes_requested": protection.block_on_changes_requested,
            "dismiss_stale": protection.dismiss_stale,
        }
        protection.required_approvals = required_approvals
        protection.block_on_changes_requested = bool(block_on_changes_requested)
        protection.dismiss_stale = bool(dismiss_stale)
        protection.updated_by = actor.name
        protection.save()
        after = {key: getattr(protection, key) for key in before}
        record(
            PROTECTION_CHANGED,
            actor=actor,
            app=found,
            targets=[found.slug],
            details={"before": before, "after": after},
        )
    return protection
