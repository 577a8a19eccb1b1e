"""Artifact locks (docs/architecture.md#safe-promotion): an owner locks an artifact, and
agents' writes to it are refused with ``Locked`` (423 in the API, an error in MCP), in words;
people's restores still put it back."""

from __future__ import annotations

from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils import timezone

from versions import messages as words
from versions import selectors, terms
from versions.errors import Conflict, Locked, NotFound
from versions.models import App, Artifact, ArtifactLock
from versions.services.access import Actor, app_for
from versions.services.audit import record
from versions.services.validation import clean_note, validate_collection, validate_name
from versions.terms import MANAGE


def _binds(app: App, actor: Actor | None) -> bool:
    """Whether the app's locks bind ``actor``: an agent (a token), on an app with a lock."""
    return actor is not None and actor.token is not None and bool(app.artifact_locks)


def check_unlocked(app: App, collection: str, name: str, actor: Actor | None) -> None:
    """An agent (a token) may not write a locked artifact: ``Locked`` in words."""
    if not _binds(app, actor):
        return
    found = (
        ArtifactLock.objects.filter(app=app, collection=collection, name=name)
        .values_list("locked_by", "reason")
        .first()
    )
    if found is not None:
        raise Locked(
            words.LOCKED_BY_OWNER.format(
                collection=collection, name=name, slug=app.slug, **selectors.lock_who(*found)
            )
        )


def locked_findings(app: App, actor: Actor | None) -> dict[tuple[str, str], str]:
    """For a restore's pre-flight: ``(collection, name)`` → why ``actor`` may not write it, for
    each locked artifact of the app when the locks bind the actor (an agent); else {}. One
    query for an agent (a restore's app row may be read without its lock count), none for a
    person."""
    if actor is None or actor.token is None:
        return {}
    return {
        (collection, name): selectors.lock_words(by, reason)
        for collection, name, by, reason in ArtifactLock.objects.filter(app=app).values_list(
            "collection", "name", "locked_by", "reason"
        )
    }


def lock_artifact(
    app: App | str, *, collection: str, name: str, actor: Actor, reason: str = ""
) -> ArtifactLock:
    """Lock an artifact of the app against agents' writes (owners)."""
    app_obj = app_for(app, actor=actor, action=MANAGE)
    collection, name = validate_collection(collection), validate_name(name)
    reason = clean_note(reason)
    if not Artifact.objects.filter(app=app_obj, collection=collection, name=name).exists():
        raise NotFound(
            words.LOCK_ARTIFACT_MISSING.format(slug=app_obj.slug, collection=collection, name=name)
        )
    try:
        with transaction.atomic():
            lock = ArtifactLock.objects.create(
                app=app_obj,
                collection=collection,
                name=name,
                reason=reason,
                locked_by=actor.name,
                locked_on=timezone.now(),
            )
            App.objects.filter(pk=app_obj.pk).update(artifact_locks=F("artifact_locks") + 1)
            record(
                terms.ARTIFACT_LOCKED,
                actor=actor,
                app=app_obj,
                targets=[f"{collection}/{name}"],
                reason=reason,
            )
    except IntegrityError:  # locked already: the lock stands as it is
        raise Conflict(
            words.LOCK_EXISTS.format(collection=collection, name=name, slug=app_obj.slug)
        ) from None
    return lock


def unlock_artifact(app: App | str, *, collection: str, name: str, actor: Actor) -> None:
    """Lift an artifact's lock (owners)."""
    app_obj = app_for(app, actor=actor, action=MANAGE)
    with transaction.atomic():
        deleted, _ = ArtifactLock.objects.filter(
            app=app_obj, collection=collection, name=name
        ).delete()
        if deleted:
            App.objects.filter(pk=app_obj.pk).update(artifact_locks=F("artifact_locks") - 1)
        else:
            raise NotFound(
                words.LOCK_NOT_FOUND.format(slug=app_obj.slug, collection=collection, name=name)
            )
        record(terms.ARTIFACT_UNLOCKED, actor=actor, app=app_obj, targets=[f"{collection}/{name}"])
