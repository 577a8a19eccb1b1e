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

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from versions.models import App, AppProtection, ChangeSet, Comment, RestorePoint, Review
from versions.selectors.agent import iso_utc

# A set's review state, as its row says it.
APPROVED = "Approved"
CHANGES_REQUESTED = "Changes requested"
REVIEW_REQUIRED = "Review required"

# What a set still needs before it may go to production.
NEEDS_APPROVALS = "{id} needs {missing} more approval{s} from someone other than its authors"
HAS_CHANGE_REQUEST = "{id} has changes requested by {who}"


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

    def lacks(self) -> list[str]:
        """What protection still needs of the set, in words ([]: nothing)."""
        out = []
        if self.blocks and self.change_requests:
            out.append(
                HAS_CHANGE_REQUEST.format(id=self.set_id, who=", ".join(self.change_requests))
            )
        missing = self.required - len(self.approvals)
        if missing > 0:
            out.append(
                NEEDS_APPROVALS.format(
                    id=self.set_id, missing=missing, s="" if missing == 1 else "s"
                )
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


def _line(text: str | None, number: int | None) -> str | None:
    if text is None or not number:
        return None
    lines = text.splitlines()
    return lines[number - 1] if number <= len(lines) else None


def threads(change_set: ChangeSet) -> list[Thread]:
    """The set's line comment threads, oldest first. A thread anchored on the ``after`` side is
    outdated when its line reads differently in the artifact now."""
    rows = list(
        Comment.objects.filter(change_set=change_set)
        .select_related("artifact")
        .order_by("created_on", "id")
    )
    roots = [c for c in rows if c.thread_id is None]
    replies: dict[str, list[Comment]] = {}
    for c in rows:
        if c.thread_id is not None:
            replies.setdefault(c.thread_id, []).append(c)
    out = []
    for root in roots:
        outdated = False
        artifact = root.artifact
        if (
            root.side == Comment.AFTER
            and artifact is not None
            and artifact.sha256 != root.blob_sha256
        ):
            now = "" if artifact.deleted else artifact.source
            outdated = _line(now, root.line) != root.line_text
        out.append(Thread(root, replies.get(root.id, []), outdated))
    return out


def reviews(change_set: ChangeSet) -> list[tuple[Review, bool]]:
    """The set's reviews, oldest first, each with whether later writes joined the set since."""
    current = set(RestorePoint.objects.filter(change_set=change_set).values_list("id", flat=True))
    current.update(str(e.get("pointId")) for e in change_set.pruned or [])
    return [
        (r, not current <= set(r.points or []))
        for r in Review.objects.filter(change_set=change_set).order_by("created_on", "id")
    ]


def reviews_payload(change_set: ChangeSet) -> dict[str, Any]:
    """What an agent reads of a set's review (``GET /change-sets/{id}/reviews``,
    ``list_reviews``): its state, its reviews and its threads with their anchors."""
    state = review_states([change_set.id], protection_of(change_set.app))[change_set.id]
    return {
        "changeSetId": change_set.id,
        "status": state.status,
        "reviews": [review_dict(r, stale) for r, stale in reviews(change_set)],
        "threads": [t.as_dict() for t in threads(change_set)],
    }
