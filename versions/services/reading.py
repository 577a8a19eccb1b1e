"""A person's review preferences (docs/architecture.md#reviewing): unified or split, and the files
marked "Viewed".

They belong to the signed-in person, not to a session or an app's history: they survive
sign-out, follow the person to another browser and are nobody else's. A mark names a file's
two states (:func:`versions.selectors.compare.viewed_key`), so a file that changes again is
unread again.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction

from versions.errors import InvalidInput
from versions.messages import BAD_VIEWED_KEY, NO_PERSON, UNKNOWN_LAYOUT
from versions.models import App, ReadingPreference, ViewedMark
from versions.services.access import (
    Actor,
)
from versions.terms import (
    VIEW,
)

# The marks each person keeps; beyond it, the oldest are forgotten.
VIEWED_KEPT = ViewedMark.VIEWED_KEPT


def _person(actor: Actor) -> Any:
    user = actor.user
    if user is None or not getattr(user, "is_authenticated", False) or actor.token is not None:
        raise InvalidInput(NO_PERSON)
    return user


def set_reading_layout(*, actor: Actor, layout: str) -> str:
    """Remember how ``actor``'s person reads comparisons (``unified`` or ``split``)."""
    if layout not in ReadingPreference.LAYOUTS:
        raise InvalidInput(UNKNOWN_LAYOUT.format(layout=layout), field="layout")
    user = _person(actor)
    ReadingPreference.objects.update_or_create(user=user, defaults={"layout": layout})
    return layout


@transaction.atomic
def mark_viewed(*, actor: Actor, app: App, key: str, viewed: bool) -> None:
    """Mark a file of a comparison of ``app`` as viewed (or not) for ``actor``'s person; each
    person keeps the newest ``VIEWED_KEPT`` marks."""
    actor.check(VIEW, app)
    user = _person(actor)
    if not key.startswith(f"{app.pk}:") or len(key) > ViewedMark.KEY_MAX:
        raise InvalidInput(BAD_VIEWED_KEY.format(slug=app.slug), field="key")
    mine = ViewedMark.objects.filter(user=user)
    mine.filter(key=key).delete()
    if not viewed:
        return
    # A fresh row: the newest mark is the last forgotten. A concurrent mark of the same file
    # already did the same.
    ViewedMark.objects.bulk_create([ViewedMark(user=user, key=key)], ignore_conflicts=True)
    cutoff = mine.order_by("-id").values_list("id", flat=True)[VIEWED_KEPT : VIEWED_KEPT + 1]
    oldest_kept = list(cutoff)
    if oldest_kept:
        mine.filter(id__lte=oldest_kept[0]).delete()
