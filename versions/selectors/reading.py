"""A person's review preferences (docs/architecture.md#reviewing): the layout they read comparisons
in, and which files of a comparison they marked "Viewed" (written by
``versions.services.mark_viewed``)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from versions.models import ReadingPreference, ViewedMark

# Keys asked for in one query (SQLite's bound on a query's parameters is far above it).
_KEYS_PER_QUERY = 500


def reading_layout(user: Any) -> str:
    """``unified`` or ``split``: how ``user`` last chose to read comparisons (unified at first)."""
    if not getattr(user, "is_authenticated", False):
        return ReadingPreference.UNIFIED
    layout = ReadingPreference.objects.filter(user=user).values_list("layout", flat=True).first()
    return layout if layout in ReadingPreference.LAYOUTS else ReadingPreference.UNIFIED


def viewed_keys(user: Any, keys: Iterable[str]) -> set[str]:
    """The ones of ``keys`` that ``user`` marked Viewed."""
    wanted = list(dict.fromkeys(keys))
    if not wanted or not getattr(user, "is_authenticated", False):
        return set()
    found: set[str] = set()
    for start in range(0, len(wanted), _KEYS_PER_QUERY):
        chunk = wanted[start : start + _KEYS_PER_QUERY]
        found.update(
            ViewedMark.objects.filter(user=user, key__in=chunk).values_list("key", flat=True)
        )
    return found


@dataclass(frozen=True)
class ReadingState:
    """What a comparison page needs of the person: their layout and the files marked Viewed."""

    layout: str
    viewed: frozenset[str]


def reading_state(user: Any, keys: Iterable[str]) -> ReadingState:
    """``reading_layout`` and ``viewed_keys`` together, in one query for up to 500 keys."""
    wanted = list(dict.fromkeys(keys))
    if not getattr(user, "is_authenticated", False):
        return ReadingState(ReadingPreference.UNIFIED, frozenset())
    if len(wanted) > _KEYS_PER_QUERY:
        return ReadingState(reading_layout(user), frozenset(viewed_keys(user, wanted)))
    # A layout never contains ":", a mark always does: one UNION ALL tells them apart.
    # The trailing order_by() keeps Meta.ordering off the combined query: Django 6.1 applies a
    # model's default ordering after the UNION, and "user" is not a selected column there.
    layout = ReadingPreference.objects.filter(user=user).order_by().values_list("layout", flat=True)
    marks = (
        ViewedMark.objects.filter(user=user, key__in=wanted)
        .order_by()
        .values_list("key", flat=True)
    )
    rows = set(layout.union(marks, all=True).order_by()) if wanted else set(layout)
    chosen = [row for row in rows if row in ReadingPreference.LAYOUTS]
    return ReadingState(
        chosen[0] if chosen else ReadingPreference.UNIFIED,
        frozenset(row for row in rows if ":" in row),
    )
