"""States of an app (docs/architecture.md#environments): what a ref names, artifact by artifact, and
signed preview links.

A ref is ``draft`` (the artifacts as agents left them), ``production`` (the deployment
production serves), a deployment id (``dp_…``), a set id (``cs_…`` or ``rs_…``: the state right
after the set was complete) or a restore point id (``rp_…``: the state just before that point's
write). Moments in the past are computed by the release review's one rule
(:func:`versions.selectors.states_at`); a source that was not stored or was pruned is
reported missing with the reason in words, never guessed.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.core import signing
from django.db.models import OuterRef, Subquery
from django.urls import reverse
from django.utils.crypto import constant_time_compare

from versions import conf, ids
from versions import selectors as release
from versions.errors import InvalidInput, NotFound
from versions.messages import PREVIEW_LINK_INVALID, PREVIEW_NOT_ALLOWED
from versions.models import (
    API_ROUTE,
    App,
    Artifact,
    Blob,
    ChangeSet,
    Deployment,
    DeploymentEntry,
    RestorePoint,
)
from versions.services.access import (
    Actor,
)
from versions.services.capture import resolve_app
from versions.terms import (
    DRAFT,
    PRODUCTION,
    VIEW,
)

REF_MALFORMED = (
    "“{ref}” does not name a state of an app: use draft, production, a deployment id "
    "(dp_…), a change set id (cs_… or rs_…) or a restore point id (rp_…)."
)
REF_NOT_FOUND = "App “{app}” has no {what} “{ref}”."
NO_PRODUCTION = (
    "App “{app}” has no production deployment yet: /apps/{app}/ serves its draft. "
    "Promote a state to production first."
)
MISSING_NOT_STORED = (
    "Missing: not stored. Its source in this state was {size:,} bytes, over the {cap:,}-byte "
    "limit for stored sources, so it was not kept."
)
MISSING_PRUNED = (
    "Missing: pruned. A restore point of it from after this state was pruned by retention "
    "(only the newest {keep} unpinned points of an app are kept), so its source in this state "
    "is gone."
)
PREVIEW_HOURS_INVALID = "A preview link is valid for 1 to 8,760 hours (got {hours})."

_REF = re.compile(r"^(dp|rp)_[0-9a-z]{1,12}_[0-9a-z]{8}$|^(cs_rp|rs)_[0-9a-z]{1,12}_[0-9a-z]{8}$")
_WHAT = {"dp": "deployment", "cs": "change set", "rs": "change set", "rp": "restore point"}
_PREVIEW_SALT = "versions.preview"


@dataclass(frozen=True)
class StateEntry:
    """One artifact in a state: its blob (``sha256`` "" = absent, None = missing) and, when
    its source is missing, why in words (``reason``)."""

    artifact_id: int
    collection: str
    name: str
    sha256: str | None
    reason: str | None = None

    @property
    def key(self) -> str:
        return f"{self.collection}/{self.name}"

    @property
    def exists(self) -> bool:
        """Whether the artifact exists in the state with a known source."""
        return bool(self.sha256)

    @property
    def missing(self) -> bool:
        """Whether the state's source of this artifact cannot be rebuilt."""
        return self.sha256 is None


@dataclass(frozen=True)
class AppState:
    """The state a ref names: every artifact of the app (absent ones too), by collection and
    name. ``deployment_id`` is set for ``production`` and ``dp_…``; ``source_set`` is the
    change set the state comes from, when there is one."""

    app: App
    ref: str
    entries: tuple[StateEntry, ...]
    deployment_id: str | None = None
    source_set: str = ""

    def get(self, collection: str, name: str) -> StateEntry | None:
        return next(
            (e for e in self.entries if e.collection == collection and e.name == name), None
        )

    @property
    def present(self) -> list[StateEntry]:
        """The artifacts that exist in the state with a known source."""
        return [e for e in self.entries if e.exists]

    @property
    def missing(self) -> list[StateEntry]:
        """The artifacts whose source in the state cannot be rebuilt, with the reason."""
        return [e for e in self.entries if e.missing]


def check_ref(ref: object) -> str:
    """``ref`` if it has the form of a ref, else ``NotFound`` in words."""
    if not isinstance(ref, str) or not (ref in (DRAFT, PRODUCTION) or _REF.match(ref)):
        raise NotFound(REF_MALFORMED.format(ref=str(ref)[:80]))
    return ref


def _not_found(app: App, ref: str) -> NotFound:
    return NotFound(REF_NOT_FOUND.format(app=app.slug, what=_WHAT[ref[:2]], ref=ref))


def production_id(app: App) -> str | None:
    """The deployment production serves now (read from the database), or None."""
    return App.objects.filter(pk=app.pk).values_list("production_id", flat=True).first()


def _draft(app: App) -> tuple[StateEntry, ...]:
    # One statement: a write committing meanwhile is in it whole or not at all.
    rows = Artifact.objects.filter(app=app).order_by("collection", "name", "pk")
    return tuple(
        StateEntry(pk, collection, name, "" if deleted else sha)
        for pk, collection, name, sha, deleted in rows.values_list(
            "pk", "collection", "name", "sha256", "deleted"
        )
    )


def _deployment(app: App, deployment_id: str) -> tuple[StateEntry, ...]:
    held = DeploymentEntry.objects.filter(deployment_id=deployment_id, artifact_id=OuterRef("pk"))
    rows = (
        Artifact.objects.filter(app=app)
        .annotate(held=Subquery(held.values("blob_id")[:1]))
        .order_by("collection", "name", "pk")
        .values_list("pk", "collection", "name", "held")
    )
    return tuple(StateEntry(pk, c, n, held or "") for pk, c, n, held in rows)


def _at(app: App, moment: datetime) -> tuple[StateEntry, ...]:
    entries = []
    for s in release.states_at(app, moment):
        a = s.artifact
        if s.status == release.PRUNED:
            reason: str | None = MISSING_PRUNED.format(keep=conf.points_per_app())
        elif s.status == release.NOT_STORED:
            size = s.point.previous_size if s.point is not None else 0
            reason = MISSING_NOT_STORED.format(size=size, cap=conf.max_stored_bytes())
        else:
            reason = None
        entries.append(
            StateEntry(a.pk, a.collection, a.name, None if reason else (s.sha256 or ""), reason)
        )
    return tuple(entries)


def _set_moment(app: App, set_id: str) -> datetime:
    change_set = ChangeSet.objects.filter(pk=set_id, app=app).first()
    if change_set is None:
        raise _not_found(app, set_id)
    return release.release_moment(app, change_set)


def _point_moment(app: App, point_id: str) -> tuple[datetime, str]:
    found = (
        RestorePoint.objects.filter(pk=point_id, app=app)
        .values_list("created_on", "change_set_id")
        .first()
    )
    if found is None:
        raise _not_found(app, point_id)
    # Just before the point's write: the point itself is the artifact's first one after it.
    return found[0] - timedelta(microseconds=1), found[1]


def resolve_state(app: App | str, ref: str) -> AppState:
    """The state ``ref`` names for ``app``; ``NotFound`` in words for an unknown or malformed
    ref, or a ref of another app."""
    app_obj = resolve_app(app)
    ref = check_ref(ref)
    if ref == DRAFT:
        return AppState(app_obj, ref, _draft(app_obj), source_set=newest_set(app_obj))
    if ref == PRODUCTION:
        current = production_id(app_obj)
        if current is None:
            raise NotFound(NO_PRODUCTION.format(app=app_obj.slug))
        return _deployment_state(app_obj, ref, current)
    if ref.startswith("dp_"):
        if not Deployment.objects.filter(pk=ref, app=app_obj).exists():
            raise _not_found(app_obj, ref)
        return _deployment_state(app_obj, ref, ref)
    if ref.startswith("rp_"):
        moment, set_id = _point_moment(app_obj, ref)
        return AppState(app_obj, ref, _at(app_obj, moment), source_set=set_id)
    return AppState(app_obj, ref, _at(app_obj, _set_moment(app_obj, ref)), source_set=ref)


def _deployment_state(app: App, ref: str, deployment_id: str) -> AppState:
    source_set = (
        Deployment.objects.filter(pk=deployment_id).values_list("source_set", flat=True).first()
    )
    return AppState(
        app, ref, _deployment(app, deployment_id), deployment_id, source_set=source_set or ""
    )


def newest_set(app: App) -> str:
    """The id of the app's newest change set ("" when it has none)."""
    found = (
        ChangeSet.objects.filter(app=app)
        .order_by("-created_on", "-id")
        .values_list("id", flat=True)
        .first()
    )
    return found or ""


def state_entry(app: App, ref: str, collection: str, name: str) -> StateEntry | None:
    """One artifact of the state ``ref`` names (None when the app has no such artifact);
    ``NotFound`` as :func:`resolve_state`. Draft and deployments cost one query."""
    ref = check_ref(ref)
    if ref in (DRAFT, PRODUCTION) or ref.startswith("dp_"):
        deployment_id = None
        if ref == PRODUCTION:
            deployment_id = production_id(app)
            if deployment_id is None:
                raise NotFound(NO_PRODUCTION.format(app=app.slug))
        elif ref != DRAFT:
            if not Deployment.objects.filter(pk=ref, app=app).exists():
                raise _not_found(app, ref)
            deployment_id = ref
        rows = Artifact.objects.filter(app=app, collection=collection, name=name)
        if deployment_id is None:
            found = rows.values_list("pk", "sha256", "deleted").first()
            if found is None:
                return None
            return StateEntry(found[0], collection, name, "" if found[2] else found[1])
        held = DeploymentEntry.objects.filter(
            deployment_id=deployment_id, artifact_id=OuterRef("pk")
        ).values("blob_id")[:1]
        entry = rows.annotate(held=Subquery(held)).values_list("pk", "held").first()
        return None if entry is None else StateEntry(entry[0], collection, name, entry[1] or "")
    state = resolve_state(app, ref)
    return state.get(collection, name)


def route_sources(app: App, ref: str) -> list[tuple[str, str]]:
    """(name, source) of every route that exists in the state ``ref`` names, by name. The
    draft and deployments cost one query (their routes only, with their sources)."""
    ref = check_ref(ref)
    deployment_id: str | None = None
    if ref == PRODUCTION:
        deployment_id = production_id(app)
        if deployment_id is None:
            raise NotFound(NO_PRODUCTION.format(app=app.slug))
    elif ref.startswith("dp_"):
        if not Deployment.objects.filter(pk=ref, app=app).exists():
            raise _not_found(app, ref)
        deployment_id = ref
    elif ref != DRAFT:
        state = resolve_state(app, ref)
        present = [e for e in state.present if e.collection == API_ROUTE]
        texts = blob_texts({e.sha256 for e in present if e.sha256})
        found = [(e.name, texts[e.sha256]) for e in present if e.sha256 in texts]
        return sorted(found)
    if deployment_id is None:
        rows = Artifact.objects.filter(app=app, collection=API_ROUTE, deleted=False)
        pairs = [(a.name, a.blob) for a in rows.select_related("blob").order_by("name")]
    else:
        entries = DeploymentEntry.objects.filter(
            deployment_id=deployment_id, artifact__collection=API_ROUTE
        ).select_related("artifact", "blob")
        pairs = sorted(((e.artifact.name, e.blob) for e in entries), key=lambda p: p[0])
    return [(name, blob.text) for name, blob in pairs if blob is not None]


def blob_texts(shas: set[str]) -> dict[str, str]:
    """Texts of the given blobs, one query."""
    if not shas:
        return {}
    return {b.sha256: b.text for b in Blob.objects.filter(sha256__in=shas)}


# --------------------------------------------------------------------------------------------
# Signed preview links
# --------------------------------------------------------------------------------------------


def _signature(app: App, ref: str, expires: str) -> str:
    return signing.Signer(salt=_PREVIEW_SALT).signature(f"{app.pk}:{app.slug}:{ref}:{expires}")


def preview_token(app: App | str, ref: str, *, hours: float | None = None) -> str:
    """A signed token that opens the preview of ``ref`` for ``hours`` (default
    ``VERSIONS_PREVIEW_LINK_HOURS``) to whoever holds it."""
    app_obj = resolve_app(app)
    ref = check_ref(ref)
    hours = conf.preview_link_hours() if hours is None else hours
    if isinstance(hours, bool) or not isinstance(hours, (int, float)) or not 0 < hours <= 8760:
        raise InvalidInput(PREVIEW_HOURS_INVALID.format(hours=hours), field="hours")
    expires = ids.base36(int(time.time() + hours * 3600))
    return f"{expires}.{_signature(app_obj, ref, expires)}"


def preview_url(app: App | str, ref: str, *, hours: float | None = None) -> str:
    """The path of a signed, expiring preview of the state ``ref`` names: its pages, assets
    and routes are below it, so a sandboxed page's relative links carry the signature too."""
    app_obj = resolve_app(app)
    token = preview_token(app_obj, ref, hours=hours)
    return reverse("live:at_signed_index", kwargs={"slug": app_obj.slug, "ref": ref, "sig": token})


def preview_token_valid(app: App, ref: str, token: str) -> bool:
    """Whether ``token`` is a signed preview link of ``ref`` of ``app`` that has not expired."""
    expires, _, signature = token.partition(".")
    if not expires or not signature or len(expires) > 12:
        return False
    try:
        until = int(expires, 36)
    except ValueError:
        return False
    if until < time.time():
        return False
    return constant_time_compare(signature, _signature(app, ref, expires))


def check_preview(app: App, ref: str, *, actor: Actor | None, signature: str | None) -> None:
    """Whether this caller may open the preview of ``ref`` of ``app``: production to anyone
    (as ``/apps/<slug>/`` is), a signed link the state it was made for, every other state a
    person who may view the app (a global permission or a role on it). ``NotFound`` in words
    otherwise: a refused preview says nothing of the state."""
    if ref == PRODUCTION:
        return
    if signature is not None:
        if preview_token_valid(app, ref, signature):
            return
        raise NotFound(PREVIEW_LINK_INVALID)
    if actor is None or not actor.may(VIEW, app):
        raise NotFound(PREVIEW_NOT_ALLOWED)
