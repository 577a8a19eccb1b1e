"""Names and the release mark (docs/architecture.md#domain, docs/architecture.md#panel): naming sets
and points, marking the release.

A named point, the points of a named set and those of the release set are pinned
(:func:`versions.services.retention.refresh_pins`), so retention never prunes them.
"""

from __future__ import annotations

import unicodedata

from django.db import transaction

from versions import selectors
from versions.errors import Conflict, InvalidInput, NotFound
from versions.messages import NAME_HAS_CONTROL, NAME_NOT_TEXT, NAME_TOO_LONG
from versions.models import App, ChangeSet, ReleaseMark, RestorePoint
from versions.services.access import (
    Actor,
)
from versions.services.audit import (
    Command,
    record,
)
from versions.services.retention import refresh_pins
from versions.terms import (
    NAME,
    POINT_NAMED,
    RELEASE_MARKED,
    RELEASE_UNMARKED,
    SET_NAMED,
)

POINT_NOT_FOUND = "There is no restore point “{id}”."
SET_NOT_FOUND = "There is no change set “{id}”."
SET_ALL_PRUNED = (
    "Retention pruned every restore point of the change set “{id}”, so its states are gone: "
    "it is listed as pruned until it is removed, and it can no longer be {doing}."
)


def _keeps_points(cs: ChangeSet, doing: str) -> None:
    """A set whose every point retention pruned (it lingers, listed as pruned, until the
    app's debt is settled: docs/architecture.md#retention) is not named or marked: nothing of it can
    be restored."""
    if not RestorePoint.objects.filter(change_set_id=cs.id).exists():
        raise Conflict(SET_ALL_PRUNED.format(id=cs.id, doing=doing))


def _check(actor: Actor | None, app: App | None, owner_id: int, ident: str, missing: str) -> None:
    """The caller may name on the app that owns the set or point (``app``: the app the caller
    addressed; another app's id is NotFound)."""
    if app is not None and app.pk != owner_id:
        raise NotFound(missing.format(id=ident))
    if actor is not None:
        owner = app if app is not None else App.objects.get(pk=owner_id)
        actor.check(NAME, owner, missing=NotFound(missing.format(id=ident)))


def _who(actor: Actor | None, by: str) -> Actor | Command:
    """Who the audit trail names: the actor, else the trusted command ``by``."""
    return actor if actor is not None else Command(by or "command")


def _by(by: str | None, actor: Actor | None) -> str:
    """Who is recorded: ``by`` when given, else the actor's name."""
    return by if by else (actor.name if actor is not None else "")


def _clean_name(name: object) -> str:
    if not isinstance(name, str):
        raise InvalidInput(NAME_NOT_TEXT, field="name")
    name = " ".join(name.split())
    if any(unicodedata.category(char) in ("Cc", "Cs") for char in name):
        raise InvalidInput(NAME_HAS_CONTROL, field="name")
    if len(name) > 200:
        raise InvalidInput(NAME_TOO_LONG, field="name")
    return name


def name_point(
    point_id: str,
    name: str,
    *,
    by: str | None = None,
    actor: Actor | None = None,
    app: App | None = None,
) -> RestorePoint:
    """Give a restore point a name ("" removes it); a named point is pinned."""
    clean = _clean_name(name)
    by = _by(by, actor)
    with transaction.atomic():
        point = RestorePoint.objects.select_for_update().filter(id=point_id).first()
        if point is None:
            raise NotFound(POINT_NOT_FOUND.format(id=point_id))
        _check(actor, app, point.app_id, point_id, POINT_NOT_FOUND)
        point.name = clean
        point.save(update_fields=["name"])
        refresh_pins(point_ids=[point.id])
        record(
            POINT_NAMED,
            actor=_who(actor, by),
            app=app if app is not None else App.objects.get(pk=point.app_id),
            targets=[point.id, point.change_set_id],
            details={"name": clean},
        )
        point.refresh_from_db()
    return point


def name_change_set(
    set_id: str,
    name: str,
    *,
    by: str | None = None,
    actor: Actor | None = None,
    app: App | None = None,
) -> ChangeSet:
    """Give a change set a name ("" removes it); the points of a named set are pinned."""
    clean = _clean_name(name)
    by = _by(by, actor)
    with transaction.atomic():
        cs = ChangeSet.objects.select_for_update().filter(id=set_id).first()
        if cs is None:
            raise NotFound(SET_NOT_FOUND.format(id=set_id))
        _check(actor, app, cs.app_id, set_id, SET_NOT_FOUND)
        if clean:
            _keeps_points(cs, "named")
        cs.name = clean
        cs.save(update_fields=["name"])
        refresh_pins(set_ids=[cs.id])
        record(
            SET_NAMED,
            actor=_who(actor, by),
            app=app if app is not None else App.objects.get(pk=cs.app_id),
            targets=[cs.id],
            details={"name": clean},
        )
    return cs


def mark_release(
    set_id: str, *, by: str | None = None, actor: Actor | None = None, app: App | None = None
) -> ChangeSet:
    """Mark a change set as its app's release; the mark moves from any other set."""
    by = _by(by, actor)
    with transaction.atomic():
        cs = ChangeSet.objects.filter(id=set_id).first()
        if cs is None:
            raise NotFound(SET_NOT_FOUND.format(id=set_id))
        _check(actor, app, cs.app_id, set_id, SET_NOT_FOUND)
        _keeps_points(cs, "marked as the release")
        locked = App.objects.select_for_update().get(pk=cs.app_id)
        previous = locked.release_set_id
        locked.release_set = cs
        locked.save(update_fields=["release_set"])
        ReleaseMark.objects.create(
            app=locked, change_set=cs, change_set_ref=cs.id, action=ReleaseMark.MARK, by=by
        )
        refresh_pins(set_ids=[s for s in (previous, cs.id) if s])
        record(
            RELEASE_MARKED,
            actor=_who(actor, by),
            app=locked,
            targets=[cs.id],
            details={"previous": previous} if previous else {},
        )
    return cs


def unmark_release(app: App | str, *, by: str | None = None, actor: Actor | None = None) -> None:
    """Remove the release mark of an app (history keeps who did it)."""
    by = _by(by, actor)
    target = selectors.app_of(app)
    if actor is not None:
        actor.check(NAME, target)
    with transaction.atomic():
        app_obj = App.objects.select_for_update().get(pk=target.pk)
        previous = app_obj.release_set_id
        if previous is None:
            return
        app_obj.release_set = None
        app_obj.save(update_fields=["release_set"])
        ReleaseMark.objects.create(
            app=app_obj,
            change_set_id=previous,
            change_set_ref=previous,
            action=ReleaseMark.UNMARK,
            by=by,
        )
        refresh_pins(set_ids=[previous])
        record(RELEASE_UNMARKED, actor=_who(actor, by), app=app_obj, targets=[previous])
