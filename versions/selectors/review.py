"""A person's review preferences (SPEC §16): the layout they read comparisons in, and which
files of a comparison they marked "Viewed" (written by ``versions.services.mark_viewed``)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from versions.models import ReviewPreference, ViewedMark

# Keys asked for in one query (SQLite's bound on a query's parameters is far above it).
_KEYS_PER_QUERY = 500


def review_layout(user: Any) -> str:
    """``unified`` or ``split``: how ``user`` last chose to read comparisons (unified at first)."""
    if not getattr(user, "is_authenticated", False):
        return ReviewPreference.UNIFIED
    layout = ReviewPreference.objects.filter(user=user).values_list("layout", flat=True).first()
    return layout if layout in ReviewPreference.LAYOUTS else ReviewPreference.UNIFIED


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
