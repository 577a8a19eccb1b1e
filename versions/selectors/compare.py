"""Compare any two states of an app (docs/architecture.md#reviewing): the state each ref names, and
what differs.

A ref is ``draft`` (every artifact's current state), a change set id (the app's state right
after that set was complete) or a restore point id (the state just before that point's write:
its "then"), ``production`` (what production serves) or a deployment id (``dp_…``: what that
deployment holds).

Both states come from :func:`versions.selectors.states.states_at` — the one rule for "the state
at a moment" — so a compare agrees with Since release and with restores.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db.models import OuterRef, Subquery

from versions.errors import NotFound
from versions.models import App, Artifact, ChangeSet, Deployment, DeploymentEntry, RestorePoint
from versions.selectors.states import CURRENT, ArtifactState, states_at

DRAFT = "draft"
SEPARATOR = "..."

REF_NOT_FOUND = (
    "There is no state “{ref}” in app “{slug}”. A ref is draft, a change set id (cs_…) or a "
    "restore point id (rp_…)."
)
NO_ENVIRONMENTS = (
    "“{ref}” names production, and app “{slug}” has no production deployment to compare "
    "with yet. Compare draft, a change set (cs_…) or a restore point (rp_…), or promote first."
)
BAD_RANGE = "A comparison is two refs joined by three dots, e.g. cs_…...draft; got “{refs}”."

# What changed from the left state to the right one.
ADDED = "added"
REMOVED = "removed"
CHANGED = "changed"
UNKNOWN = "unknown"


@dataclass(frozen=True)
class Ref:
    """A resolved ref: what it names, in words, and the moment of its state (None: now)."""

    ref: str
    kind: str  # draft | set | point
    label: str
    moment: datetime | None
    change_set: ChangeSet | None = None
    point: RestorePoint | None = None
    deployment_id: str | None = None


@dataclass(frozen=True)
class FileChange:
    """One artifact whose state differs between the two refs."""

    artifact: Artifact
    left: ArtifactState
    right: ArtifactState

    @property
    def key(self) -> str:
        return f"{self.artifact.collection}/{self.artifact.name}"

    @property
    def change(self) -> str:
        if self.left.sha256 is None or self.right.sha256 is None:
            return UNKNOWN
        if self.left.sha256 == "":
            return ADDED
        if self.right.sha256 == "":
            return REMOVED
        return CHANGED

    @property
    def available(self) -> bool:
        return self.left.available and self.right.available

    @property
    def reason(self) -> str | None:
        return self.left.reason or self.right.reason


@dataclass(frozen=True)
class Comparison:
    app: App
    left: Ref
    right: Ref
    files: list[FileChange]

    @property
    def spec(self) -> str:
        return f"{self.left.ref}{SEPARATOR}{self.right.ref}"


def viewed_key(file: FileChange) -> str:
    """What a "Viewed" mark of ``file`` names: its app, artifact and both states, so a mark
    holds for these two states only (when either changes, the file is unread again)."""
    return f"{file.artifact.app_id}:{file.artifact.pk}:{file.left.sha256}:{file.right.sha256}"


def split_refs(refs: str) -> tuple[str, str]:
    """``a...b`` → (a, b), or ``NotFound`` in words."""
    left, sep, right = refs.partition(SEPARATOR)
    if not sep or not left or not right or SEPARATOR in right:
        raise NotFound(BAD_RANGE.format(refs=refs))
    return left, right


def resolve_ref(app: App, ref: str) -> Ref:
    """What ``ref`` names in ``app``, or ``NotFound`` in words."""
    if ref == DRAFT:
        return Ref(ref, "draft", "the draft (now)", None)
    if ref == "production":
        current = App.objects.filter(pk=app.pk).values_list("production_id", flat=True).first()
        if current is None:
            raise NotFound(NO_ENVIRONMENTS.format(ref=ref, slug=app.slug))
        return Ref(ref, "deployment", f"production ({current})", None, deployment_id=current)
    if ref.startswith("dp_"):
        if Deployment.objects.filter(app=app, id=ref).exists():
            return Ref(ref, "deployment", f"deployment {ref}", None, deployment_id=ref)
        raise NotFound(REF_NOT_FOUND.format(ref=ref, slug=app.slug))
    if ref.startswith(("cs_", "rs_")):
        last_point = RestorePoint.objects.filter(change_set=OuterRef("pk")).order_by("-created_on")
        cs = (
            ChangeSet.objects.filter(app=app, id=ref)
            .annotate(last_point_on=Subquery(last_point.values("created_on")[:1]))
            .first()
        )
        if cs is not None:
            last = cs.last_point_on  # type: ignore[attr-defined]
            moment = max(last, cs.created_on) if last is not None else cs.created_on
            return Ref(ref, "set", f"right after {ref}", moment, change_set=cs)
    if ref.startswith("rp_"):
        point = RestorePoint.objects.select_related("artifact").filter(app=app, id=ref).first()
        if point is not None:
            # Just before its write: every point of that moment (a restore's counter-points
            # share one) counts as after it.
            moment = point.created_on - timedelta(microseconds=1)
            return Ref(ref, "point", f"just before {ref}", moment, point=point)
    raise NotFound(REF_NOT_FOUND.format(ref=ref, slug=app.slug))


def _states(app: App, ref: Ref, artifacts: list[Artifact]) -> dict[int, ArtifactState]:
    if ref.deployment_id is not None:
        # A deployment holds a blob per artifact that exists in it; the others are absent.
        return {
            e.artifact.pk: ArtifactState(e.artifact, CURRENT, e.blob_id, e.blob_id)
            for e in DeploymentEntry.objects.filter(deployment_id=ref.deployment_id)
            .select_related("artifact")
            .order_by("artifact__collection", "artifact__name")
        }
    if ref.moment is None:
        return {
            a.pk: ArtifactState(a, CURRENT, a.sha256, None if a.deleted else a.blob_id)
            for a in artifacts
        }
    return {s.artifact.pk: s for s in states_at(app, ref.moment, artifacts=artifacts)}


def _artifacts(app: App) -> list[Artifact]:
    """The app's artifacts (tombstones too), read once for both sides of a comparison."""
    return list(Artifact.objects.filter(app=app).order_by("collection", "name", "pk"))


def _absent(artifact: Artifact) -> ArtifactState:
    return ArtifactState(artifact, CURRENT, "", None)


def compare(app: App, left_ref: str, right_ref: str) -> Comparison:
    """The artifacts whose state differs between two refs, by collection and name (at most
    four queries whatever the number of artifacts; no source is read)."""
    left, right = resolve_ref(app, left_ref), resolve_ref(app, right_ref)
    artifacts = [] if left.deployment_id and right.deployment_id else _artifacts(app)
    lefts, rights = _states(app, left, artifacts), _states(app, right, artifacts)
    files = []
    for pk in sorted(
        set(lefts) | set(rights),
        key=lambda k: (
            (lefts.get(k) or rights[k]).artifact.collection,
            (lefts.get(k) or rights[k]).artifact.name,
        ),
    ):
        a = lefts.get(pk) or rights[pk]
        ls, rs = lefts.get(pk) or _absent(a.artifact), rights.get(pk) or _absent(a.artifact)
        if ls.sha256 is not None and ls.sha256 == rs.sha256:
            continue
        files.append(FileChange(ls.artifact, ls, rs))
    return Comparison(app, left, right, files)


# How many recent sets and deployments the compare picker offers.
PICK_SETS = 30
PICK_DEPLOYMENTS = 10


@dataclass(frozen=True)
class Choice:
    """One state the compare picker offers: its ref and what a person reads for it."""

    ref: str
    label: str


def compare_choices(app: App, *current: str) -> list[tuple[str, list[Choice]]]:
    """The states to compare, grouped as the picker shows them (no ids to type): the draft,
    production, the release, recent deployments and recent change sets; ``current`` refs
    that are none of those (a restore point, an older set) are offered too. Three queries."""
    states = [Choice(DRAFT, "Draft (now)")]
    if app.production_id:
        states.append(Choice("production", f"Production ({app.production_id})"))
    if app.release_set_id:
        states.append(Choice(app.release_set_id, f"Release ({app.release_set_id})"))
    deployments = [
        Choice(d_id, f"{d_id} · {by or 'someone'} · {on:%Y-%m-%d %H:%M} UTC")
        for d_id, by, on in Deployment.objects.filter(app_id=app.pk)
        .order_by("-created_on", "-id")
        .values_list("id", "created_by", "created_on")[:PICK_DEPLOYMENTS]
    ]
    sets = []
    for set_id, kind, name, message, by, on in (
        ChangeSet.objects.filter(app_id=app.pk)
        .order_by("-created_on", "-id")
        .values_list("id", "kind", "name", "message", "created_by", "created_on")[:PICK_SETS]
    ):
        what = (
            name or (message or "").split("\n")[0][:60] or ("restore" if kind == "restore" else "")
        )
        sets.append(
            Choice(
                set_id, f"{set_id} · {what + ' · ' if what else ''}{by or '—'} · {on:%m-%d %H:%M}"
            )
        )
    offered = {c.ref for c in [*states, *deployments, *sets]}
    others = [Choice(r, r) for r in dict.fromkeys(current) if r and r not in offered]
    groups = [("States", states + others), ("Deployments", deployments), ("Change sets", sets)]
    return [(title, choices) for title, choices in groups if choices]
