"""Keyset pages of a list, newest first (docs/api.md#cursors): a cursor names the last item an
answer gave, and the next page starts after it, so writes between two requests never show an
item twice or skip one (an offset would shift under them).

A cursor is opaque to its reader: the sort key of that last item, base64url. One that was not
given by this API is refused in words (``InvalidInput``, field ``cursor``).
"""

from __future__ import annotations

import base64
import binascii
import json
from datetime import datetime
from typing import Any

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
    rows: QuerySet[Any], *, cursor: str | None, limit: int
) -> tuple[list[Any], str | None]:
    """Up to ``limit`` rows of ``rows`` (ordered by ``-created_on, -id``) after ``cursor``, and
    the cursor after the last one when more follow (else None)."""
    if cursor is not None:
        moment, ident = decode_cursor(cursor, 2)
        try:
            at = datetime.fromisoformat(moment)
        except ValueError:
            raise InvalidInput(BAD_CURSOR.format(cursor=cursor[:100]), field="cursor") from None
        rows = rows.filter(Q(created_on__lt=at) | Q(created_on=at, id__lt=ident))
    items = list(rows.order_by("-created_on", "-id")[: limit + 1])
    more = len(items) > limit
    items = items[:limit]
    if not more or not items:
        return items, None
    return items, after(items[-1])


def after(row: Any) -> str:
    """The cursor after ``row`` in a newest-first list (``created_on``, ``id``)."""
    return encode_cursor(row.created_on.isoformat(), str(row.id))
