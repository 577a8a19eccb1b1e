"""Reviews, line comments and protection as people and agents read them
(docs/architecture.md#reviews): a set's review state (approved, changes requested, review
required), its reviews and threads with their anchors, and what an app's protection asks.

One rule for a set's state, shared by the panel's rows, the set's page, the agent's reads and
the promotion's pre-flight rule: each reviewer's latest verdict counts (a comment is no
verdict); an approval counts when its author is not one of the set's authors (whoever its
points name as ``requested_by`` or ``written_by``) and, with ``dismiss_stale``, when no later
write joined the set since; a change request stays open until its author approves.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.db.models import Q, QuerySet
from django.utils import timezone

from versions import diffing
from versions.models import (
    App,
    AppProtection,
    Artifact,
    Blob,
    ChangeSet,
    Comment,
    Deployment,
    DeploymentEntry,
    RestorePoint,
    Review,
)
from versions.selectors.agent import iso_utc
from versions.selectors.paging import newest_first_pages

# A set's review state, as its row says it.
APPROVED = "Approved"
CHANGES_REQUESTED = "Changes requested"
REVIEW_REQUIRED = "Review required"

# What a set still needs before it may go to production.
NEEDS_APPROVALS = "{id} needs {missing} more approval{s} from someone other than its authors"
HAS_CHANGE_REQUEST = "{id} has changes requested by {who}"

# A keyset page of a set's reviews and threads without ``limit``: this many.
PAGE_MAX = 200


def protection_of(app: App) -> AppProtection:
    """The app's protection (an unsaved row with the defaults when it has none)."""
    found = AppProtection.objects.filter(app_id=app.pk).first()
    return found if found is not None else AppProtection(app=app)


def authors_match(name: str, requested: set[str], written: set[str]) -> bool:
    """Whether the person ``name`` is one of a set's authors: named as ``requested_by``, or
    the principal that wrote (``user:name``, or a token of theirs ``token:… of name``)."""
    if name in requested or f"user:{name}" in written:
        return True
    return any(w.startswith("token:") and w.endswith(f" of {name}") for w in written)


@dataclass
class SetReview:
    """A change set's review state: its valid approvals, its open change requests (by whom),
    its stale approvals, and what protection still needs of it."""

    set_id: str
    approvals: list[str] = field(default_factory=list)
    change_requests: list[str] = field(default_factory=list)
    stale: list[str] = field(default_factory=list)
    own: list[str] = field(default_factory=list)  # approvals by the set's own authors
    required: int = 0
    blocks: bool = True

    @property
    def status(self) -> str:
        """``Changes requested``, ``Approved`` or ``Review required``."""
        if self.change_requests:
            return CHANGES_REQUESTED
        if self.approvals and len(self.approvals) >= self.required:
            return APPROVED
        return REVIEW_REQUIRED

    @property
    def status_key(self) -> str:
        return {APPROVED: "approved", CHANGES_REQUESTED: "changes"}.get(self.status, "required")

    def lacks(self, subject: str = "") -> list[str]:
        """What protection still needs of the set, in words ([]: nothing), each about
        ``subject`` (the set's id unless given: "it" where the id is said already)."""
        out = []
        subject = subject or self.set_id
        if self.blocks and self.change_requests:
            out.append(HAS_CHANGE_REQUEST.format(id=subject, who=", ".join(self.change_requests)))
        missing = self.required - len(self.approvals)
        if missing > 0:
            out.append(
                NEEDS_APPROVALS.format(id=subject, missing=missing, s="" if missing == 1 else "s")
            )
        return out


def review_states(
    set_ids: Iterable[str], protection: AppProtection | None = None
) -> dict[str, SetReview]:
    """The review state of each set: one query, and two more when some set was approved,
    whatever the number of sets."""
    wanted = list(dict.fromkeys(set_ids))
    if not wanted:
        return {}
    required = protection.required_approvals if protection is not None else 0
    dismiss = protection.dismiss_stale if protection is not None else True
    blocks = protection.block_on_changes_requested if protection is not None else True
    latest: dict[tuple[str, str], tuple[str, list[str]]] = {}
    for set_id, author, verdict, reviewed in (
        Review.objects.filter(change_set_id__in=wanted)
        .exclude(verdict=Review.COMMENT)
        .order_by("created_on", "id")
        .values_list("change_set_id", "author_name", "verdict", "points")
    ):
        latest[(set_id, author)] = (verdict, reviewed or [])
    # Points and authors only of the sets someone approved (most rows have no review).
    approved = {key[0] for key, (verdict, _) in latest.items() if verdict == Review.APPROVE}
    points: dict[str, set[str]] = {s: set() for s in approved}
    requested: dict[str, set[str]] = {s: set() for s in approved}
    written: dict[str, set[str]] = {s: set() for s in approved}
    if approved:
        for set_id, point_id, req, wrote in RestorePoint.objects.filter(
            change_set_id__in=approved
        ).values_list("change_set_id", "id", "requested_by", "written_by"):
            points[set_id].add(point_id)
            requested[set_id].add(req)
            written[set_id].add(wrote)
        pruned = ChangeSet.objects.filter(pk__in=approved).values_list("pk", "pruned")
        for set_id, entries in pruned:  # pruned points were part of the set all the same
            points[set_id].update(str(e.get("pointId")) for e in entries or [])
    out = {s: SetReview(s, required=required, blocks=blocks) for s in wanted}
    for (set_id, author), (verdict, reviewed) in latest.items():
        state = out[set_id]
        if verdict == Review.REQUEST_CHANGES:
            state.change_requests.append(author)
        elif authors_match(author, requested[set_id], written[set_id]):
            state.own.append(author)
        elif not points[set_id] <= set(reviewed):
            (state.stale if dismiss else state.approvals).append(author)
        else:
            state.approvals.append(author)
    return out


@dataclass
class Thread:
    """A line comment and its replies, with its anchor and whether its line changed since."""

    comment: Comment
    replies: list[Comment]
    outdated: bool

    def as_dict(self) -> dict[str, Any]:
        root = self.comment
        artifact = root.artifact
        return {
            "id": root.id,
            "anchor": {
                "collection": artifact.collection if artifact else None,
                "name": artifact.name if artifact else None,
                "side": root.side,
                "sha256": root.blob_sha256,
                "line": root.line,
                "text": root.line_text,
            },
            "resolved": root.resolved,
            "outdated": self.outdated,
            "addressedIn": root.addressed_in or None,
            "comments": [comment_dict(c) for c in [root, *self.replies]],
        }


def comment_dict(comment: Comment) -> dict[str, Any]:
    """A comment as the API and MCP answer it."""
    return {
        "id": comment.id,
        "author": comment.author_name,
        "byAgent": comment.by_agent,
        "body": comment.body,
        "created_on": iso_utc(comment.created_on),
    }


def review_dict(review: Review, stale: bool) -> dict[str, Any]:
    """A review as the API and MCP answer it."""
    return {
        "id": review.id,
        "author": review.author_name,
        "verdict": review.verdict,
        "body": review.body,
        "created_on": iso_utc(review.created_on),
        "points": list(review.points),
        "stale": stale,
    }


def blob_sources(shas: Iterable[str]) -> dict[str, bytes]:
    """The sources (UTF-8 bytes) of a few blobs by sha256, from one query: the states line
    comments are anchored to and shown on."""
    wanted = {s for s in shas if s}
    if not wanted:
        return {}
    return {b.sha256: b.raw for b in Blob.objects.filter(pk__in=wanted)}


def _with_replies(roots: list[Comment]) -> dict[str, list[Comment]]:
    """The replies of ``roots`` by thread, oldest first (one query)."""
    replies: dict[str, list[Comment]] = {r.id: [] for r in roots}
    if roots:
        for c in Comment.objects.filter(thread_id__in=list(replies)).order_by("created_on", "id"):
            replies[c.thread_id or ""].append(c)
    return replies


def threads(change_set: ChangeSet) -> list[Thread]:
    """The set's line comment threads, oldest first. A thread anchored on the ``after`` side is
    outdated when its line no longer reads the same in the artifact now (followed through the
    line diff from the anchored state to the current one)."""
    return threads_of(list(_thread_roots(change_set).order_by("created_on", "id")))


def _thread_roots(change_set: ChangeSet) -> QuerySet[Comment]:
    """The first comments of the set's threads."""
    return Comment.objects.filter(change_set=change_set, thread__isnull=True).select_related(
        "artifact"
    )


def threads_of(roots: list[Comment]) -> list[Thread]:
    """The threads that begin with ``roots`` (in their order), with their replies and whether
    each is outdated (see :func:`threads`)."""
    replies = _with_replies(roots)
    moved = [
        r
        for r in roots
        if r.side == Comment.AFTER and r.artifact is not None and r.artifact.sha256 != r.blob_sha256
    ]
    texts = blob_sources(
        {r.blob_sha256 for r in moved if r.blob_sha256}
        | {r.artifact.blob_id for r in moved if r.artifact and r.artifact.blob_id}
    )
    out = []
    for root in roots:
        outdated = False
        artifact = root.artifact
        if root in moved and artifact is not None:
            then = texts.get(root.blob_sha256)
            now = b"" if artifact.deleted else texts.get(artifact.blob_id or "")
            outdated = (
                then is None
                or now is None
                or diffing.follow_line(then, now, root.line or 0) is None
            )
        out.append(Thread(root, replies.get(root.id, []), outdated))
    return out


@dataclass
class LineNotes:
    """What a diff table of one artifact needs to take line comments: where a clicked line
    number opens the comment form, and the threads to show under their lines."""

    form_url: str  # the comment form's address with the artifact and both sides' blobs
    threads: dict[tuple[str, int], list[Thread]] = field(default_factory=dict)
    # The set the diff is of ("" for a compare's): a thread of another set names its set.
    shown_in: str = ""

    def link(self, side: str, line: int) -> str:
        return f"{self.form_url}&side={side}&line={line}"


def line_threads(
    app: App, sides: list[tuple[int, str | None, str | None]]
) -> dict[int, dict[tuple[str, int], list[Thread]]]:
    """The threads to show inline in the diffs of ``sides`` ((artifact pk, left blob sha,
    right blob sha) each), by artifact and then by (side, line). A thread shows where its
    anchored state is shown, and on later states while its line reads unchanged (followed
    through the line diff); where it changed the thread is outdated and shows on its set's
    page only. Three queries at most, whatever the number of artifacts."""
    wanted = {pk for pk, _, _ in sides}
    out: dict[int, dict[tuple[str, int], list[Thread]]] = {pk: {} for pk in wanted}
    if not wanted:
        return out
    roots = list(
        Comment.objects.filter(app_id=app.pk, artifact_id__in=wanted, thread__isnull=True)
        .select_related("artifact", "change_set")
        .order_by("-created_on", "-id")[:200]
    )
    if not roots:
        return out
    roots.reverse()
    replies = _with_replies(roots)
    shown = {pk: (left or "", right or "") for pk, left, right in sides}
    need: set[str] = set()
    for r in roots:
        left, right = shown[r.artifact_id or 0]
        if r.blob_sha256 not in (left, right) and r.blob_sha256:
            need.update({r.blob_sha256, right} - {""})
    texts = blob_sources(need) if need else {}
    for r in roots:
        left, right = shown[r.artifact_id or 0]
        where: tuple[str, int] | None = None
        if r.blob_sha256 == right and right:
            where = (Comment.AFTER, r.line or 0)
        elif r.blob_sha256 == left and left:
            where = (Comment.BEFORE, r.line or 0)
        elif r.blob_sha256 in texts and right in texts:
            moved = diffing.follow_line(texts[r.blob_sha256], texts[right], r.line or 0)
            where = (Comment.AFTER, moved) if moved is not None else None
        if where is not None:
            out[r.artifact_id or 0].setdefault(where, []).append(
                Thread(r, replies.get(r.id, []), False)
            )
    return out


def line_of_state(app: App, collection: str, name: str, sha256: str, line: int) -> str | None:
    """Line ``line`` (from 1) of a state of an artifact of ``app``, as a comment form quotes
    it; ``None`` when ``sha256`` is no state this artifact of this app had (another app's blob
    reads as none) or has no such line."""
    if not sha256 or line < 1:
        return None
    known = (
        Artifact.objects.filter(app_id=app.pk, collection=collection, name=name, sha256=sha256)
        .values("pk")
        .exists()
        or RestorePoint.objects.filter(
            Q(new_sha256=sha256) | Q(previous_sha256=sha256),
            app_id=app.pk,
            artifact__collection=collection,
            artifact__name=name,
        ).exists()
    )
    raw = blob_sources([sha256]).get(sha256) if known else None
    if raw is None:
        return None
    lines = diffing.split_lines(raw)[0]
    if line > len(lines):
        return None
    text = lines[line - 1]
    return text.decode("utf-8", "replace") if isinstance(text, bytes) else str(text)


def comment_target(app: App, collection: str, name: str, sha256: str) -> tuple[str, str] | None:
    """Which change set a line of the state ``sha256`` of an artifact is commented on, and on
    which side: the newest agent's set that wrote that state (its after side: where the agent
    reads its reviews), else the newest restore that put it back, else the oldest set whose
    write started from it (its before side). ``None``: no set of the app did."""
    if not sha256:
        return None
    points = RestorePoint.objects.filter(
        app_id=app.pk, artifact__collection=collection, artifact__name=name
    )
    wrote = points.filter(new_sha256=sha256).order_by("-created_on", "-id")
    by_agent = (
        wrote.filter(change_set__kind=ChangeSet.CHANGE)
        .values_list("change_set_id", flat=True)
        .first()
    )
    put_back = by_agent or wrote.values_list("change_set_id", flat=True).first()
    if put_back:
        return put_back, Comment.AFTER
    started = (
        points.filter(previous_sha256=sha256, previous_existed=True)
        .order_by("created_on", "id")
        .values_list("change_set_id", flat=True)
        .first()
    )
    return (started, Comment.BEFORE) if started else None


def reviews(change_set: ChangeSet) -> list[tuple[Review, bool]]:
    """The set's reviews, oldest first, each with whether later writes joined the set since."""
    return _with_staleness(
        change_set, list(Review.objects.filter(change_set=change_set).order_by("created_on", "id"))
    )


def _with_staleness(change_set: ChangeSet, found: list[Review]) -> list[tuple[Review, bool]]:
    """Each of the set's reviews ``found`` with whether later writes joined the set since."""
    current = set(RestorePoint.objects.filter(change_set=change_set).values_list("id", flat=True))
    current.update(str(e.get("pointId")) for e in change_set.pruned or [])
    return [(r, not current <= set(r.points or [])) for r in found]


def reviews_payload(
    change_set: ChangeSet, *, cursor: str | None = None, limit: int | None = None
) -> dict[str, Any]:
    """What an agent reads of a set's review (``GET /change-sets/{id}/reviews``,
    ``list_reviews``): its state, its reviews and its threads with their anchors — all of them,
    oldest first, or one keyset page of ``limit`` reviews and threads together, newest first,
    after ``cursor`` (docs/api.md#cursors)."""
    state = review_states([change_set.id], protection_of(change_set.app))[change_set.id]
    next_cursor = None
    if cursor is None and limit is None:
        given, roots = reviews(change_set), threads(change_set)
    else:
        (found, started), next_cursor = newest_first_pages(
            [Review.objects.filter(change_set=change_set), _thread_roots(change_set)],
            cursor=cursor,
            limit=limit or PAGE_MAX,
        )
        given, roots = _with_staleness(change_set, found), threads_of(started)
    return {
        "changeSetId": change_set.id,
        "status": state.status,
        "reviews": [review_dict(r, stale) for r, stale in given],
        "threads": [t.as_dict() for t in roots],
        "next_cursor": next_cursor,
    }


# An app that never promoted: the change sets of this many days may await a review.
AWAITING_DAYS = 14
# At most this many sets await a person's review, across their apps (the newest).
AWAITING_MAX = 50


def _pending_since(apps: list[App]) -> dict[int, datetime]:
    """By app, when the sets that production does not serve yet begin: its deployment's
    moment, or (an app that never promoted) ``AWAITING_DAYS`` ago. One query for all."""
    made = dict(
        Deployment.objects.filter(
            pk__in=[a.production_id for a in apps if a.production_id is not None]
        ).values_list("id", "created_on")
    )
    default = timezone.now() - timedelta(days=AWAITING_DAYS)
    return {a.pk: made.get(a.production_id or "", default) for a in apps}


def awaiting_review(name: str, apps: Iterable[App]) -> dict[int, list[ChangeSet]]:
    """The change sets that await the person ``name``'s review, newest first, by app: agents'
    sets that production does not serve yet (written after its deployment; for an app that
    never promoted, of the last ``AWAITING_DAYS`` days), that are not approved yet, that
    ``name`` is not one of the authors of, and that ``name`` has not reviewed since their last
    write. The caller passes only the apps where the person may review. At most the newest
    ``AWAITING_MAX`` candidate sets are weighed, across all the apps: the list is a to-do
    list, and reading the points of every recent set of every app would read a busy app's
    whole history (docs/architecture.md#scale)."""
    apps = list(apps)
    out: dict[int, list[ChangeSet]] = {a.pk: [] for a in apps}
    if not apps or not name:
        return out
    pending = Q()
    for app_id, since in _pending_since(apps).items():
        pending |= Q(app_id=app_id, created_on__gt=since)
    candidates = list(
        ChangeSet.objects.filter(pending, kind=ChangeSet.CHANGE)
        .select_related("app")
        .order_by("-created_on", "-id")[:AWAITING_MAX]
    )
    if not candidates:
        return out
    ids = [c.id for c in candidates]
    points: dict[str, set[str]] = {i: set() for i in ids}
    requested: dict[str, set[str]] = {i: set() for i in ids}
    written: dict[str, set[str]] = {i: set() for i in ids}
    for set_id, point_id, req, wrote in RestorePoint.objects.filter(
        change_set_id__in=ids
    ).values_list("change_set_id", "id", "requested_by", "written_by"):
        points[set_id].add(point_id)
        requested[set_id].add(req)
        written[set_id].add(wrote)
    seen: dict[str, set[str]] = {}
    for set_id, reviewed in Review.objects.filter(
        change_set_id__in=ids, author_name=name
    ).values_list("change_set_id", "points"):
        seen.setdefault(set_id, set()).update(reviewed or [])
    by_app = {a.pk: a for a in apps}
    fresh = [
        c
        for c in candidates
        if points[c.id]
        and not authors_match(name, requested[c.id], written[c.id])
        and not (c.id in seen and points[c.id] <= seen[c.id])
    ]
    for app_id in by_app:
        mine = [c for c in fresh if c.app_id == app_id]
        if not mine:
            continue
        states = review_states([c.id for c in mine], protection_of(by_app[app_id]))
        for c in mine:
            state = states[c.id]
            if state.status == APPROVED and len(state.approvals) >= max(state.required, 1):
                continue
            c.review = state  # type: ignore[attr-defined]
            if len(out[app_id]) < AWAITING_MAX:
                out[app_id].append(c)
    return out


def draft_changes(
    app: App, production: str, planned: Mapping[tuple[str, str], str | None] | None = None
) -> list[int]:
    """The artifacts (primary keys) whose draft state deployment ``production`` does not hold:
    the draft as it is, or with ``planned`` written over it ((collection, name) → its sha256
    afterwards; "" or None: absent). Two queries."""
    held = dict(
        DeploymentEntry.objects.filter(deployment_id=production).values_list(
            "artifact_id", "blob_id"
        )
    )
    draft: dict[int, str | None] = {}
    rows = Artifact.objects.filter(app_id=app.pk).values_list(
        "pk", "collection", "name", "blob_id", "deleted"
    )
    for pk, collection, name, blob, deleted in rows:
        draft[pk] = None if deleted else blob
        if planned is not None and (collection, name) in planned:
            draft[pk] = planned[(collection, name)] or None
    return [pk for pk in set(held) | set(draft) if held.get(pk) != draft.get(pk)]


def sets_between(
    app_id: int, artifacts: list[int], *, since: str | None, until: datetime | None = None
) -> list[str]:
    """The change sets between production and a state (docs/architecture.md#protection): the
    agents' sets with a write to one of ``artifacts`` (those the state changes) after
    deployment ``since`` was made (None: ever), up to ``until``; oldest first. What the
    Production tab lists and what protection asks approvals of."""
    if not artifacts:
        return []
    points = RestorePoint.objects.filter(
        app_id=app_id, artifact_id__in=artifacts, change_set__kind=ChangeSet.CHANGE
    )
    if since is not None:
        made = Deployment.objects.filter(pk=since).values_list("created_on", flat=True).first()
        if made is not None:
            points = points.filter(created_on__gt=made)
    if until is not None:
        points = points.filter(created_on__lte=until)
    rows = points.order_by("created_on", "id").values_list("change_set_id", flat=True)
    return list(dict.fromkeys(rows))


def draft_ahead(app: App) -> list[ChangeSet] | None:
    """The agents' change sets the draft is ahead of production by, newest first, each with
    its review state (``review``): sets with a write after production's deployment was made
    to an artifact whose draft state production does not serve. ``None``: the app has no
    production (the draft is what it serves)."""
    # Read afresh: the caller's row may predate a promotion made in the same request.
    production = App.objects.filter(pk=app.pk).values_list("production_id", flat=True).first()
    if production is None:
        return None
    changed = draft_changes(app, production)
    if not changed:
        return []
    ids = sets_between(app.pk, changed, since=production)
    rows = list(ChangeSet.objects.filter(pk__in=ids).order_by("-created_on", "-id"))
    states = review_states([r.id for r in rows], protection_of(app))
    for r in rows:
        r.review = states[r.id]  # type: ignore[attr-defined]
    return rows
