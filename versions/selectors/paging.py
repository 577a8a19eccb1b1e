"""Keyset pages of a list, newest first (docs/api.md#cursors): a cursor names the last item an
answer gave, and the next page starts after it, so writes between two requests never show an
item twice or skip one (an offset would shift under them).

A cursor is opaque to its reader: the sort key of that last item, base64url. One that was not
given by this API is refused in words (``InvalidInput``, field ``cursor``).
"""

from __future__ import annotations

import base64
import binascii
import heapq
import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from django.core.exceptions import ValidationError
from django.db.models import Q, QuerySet

from versions.errors import InvalidInput

BAD_CURSOR = (
    "cursor “{cursor}” is not one this API gave: pass the next_cursor of the answer before, "
    "unchanged (or leave cursor out to start from the newest)."
)
CURSOR_MAX = 500


def encode_cursor(*key: str) -> str:
    """The cursor after an item whose sort key is ``key``."""
    raw = json.dumps(list(key), separators=(",", ":"), ensure_ascii=False).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str, parts: int) -> list[str]:
    """The sort key a cursor names (``parts`` strings), or ``InvalidInput`` in words."""
    bad = InvalidInput(BAD_CURSOR.format(cursor=cursor[:100]), field="cursor")
    if len(cursor) > CURSOR_MAX:
        raise bad
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        key = json.loads(raw.decode())
    except (ValueError, binascii.Error, UnicodeDecodeError):
        raise bad from None
    if not isinstance(key, list) or len(key) != parts or not all(isinstance(k, str) for k in key):
        raise bad
    return key


def newest_first_page(
    rows: QuerySet[Any], *, cursor: str | None, limit: int, moment: str = "created_on"
) -> tuple[list[Any], str | None]:
    """Up to ``limit`` rows of ``rows`` (ordered by ``-<moment>, -id``; ``moment`` is the
    field that says when a row was made) after ``cursor``, and the cursor after the last one
    when more follow (else None)."""
    if cursor is not None:
        at, ident = _key(rows, cursor)
        rows = rows.filter(Q(**{f"{moment}__lt": at}) | Q(**{moment: at, "id__lt": ident}))
    items = list(rows.order_by(f"-{moment}", "-id")[: limit + 1])
    more = len(items) > limit
    items = items[:limit]
    if not more or not items:
        return items, None
    return items, after(items[-1], moment)


def _key(rows: QuerySet[Any], cursor: str) -> tuple[datetime, Any]:
    """The moment and id a newest-first cursor names, as ``rows``' fields read them."""
    moment, ident = decode_cursor(cursor, 2)
    try:
        return datetime.fromisoformat(moment), rows.model._meta.pk.to_python(ident)
    except (ValueError, ValidationError):
        raise InvalidInput(BAD_CURSOR.format(cursor=cursor[:100]), field="cursor") from None


def after(row: Any, moment: str = "created_on") -> str:
    """The cursor after ``row`` in a newest-first list (its ``moment`` field, then ``id``)."""
    return encode_cursor(getattr(row, moment).isoformat(), str(row.id))


def newest_first_pages(
    lists: Sequence[QuerySet[Any]], *, cursor: str | None, limit: int
) -> tuple[list[list[Any]], str | None]:
    """One keyset page over several newest-first lists at once, with one cursor: up to
    ``limit`` rows in all (by ``created_on``, then ``id``) after ``cursor``, split back by
    list, and the cursor after the last one when more follow (else None)."""
    pages = [newest_first_page(rows, cursor=cursor, limit=limit) for rows in lists]
    # Each page keeps the database's order; merging only interleaves them.
    merged = list(
        heapq.merge(
            *([(i, row) for row in found] for i, (found, _more) in enumerate(pages)),
            key=lambda pair: (pair[1].created_on, pair[1].id),
            reverse=True,
        )
    )
    taken = merged[:limit]
    more = len(merged) > limit or any(following for _found, following in pages)
    split = [[row for i, row in taken if i == which] for which in range(len(lists))]
    return split, after(taken[-1][1]) if more and taken else None
