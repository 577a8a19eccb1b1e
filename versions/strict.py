"""Strict inputs (docs/api.md#strict-inputs): the one check, shared by the API's bodies and the
MCP tools' arguments, that refuses a field the operation does not take, naming the known field
it resembles ("unknown field `expectedSha256`; did you mean `expected_sha256`?").

A misspelt precondition ignored is a write without it, so nothing is ignored.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

from versions.errors import UnknownField
from versions.messages import (
    UNKNOWN_FIELD,
    UNKNOWN_FIELD_DID_YOU_MEAN,
    UNKNOWN_FIELD_KNOWN,
    UNKNOWN_FIELD_NOTHING_KNOWN,
)

# How alike two names must be (difflib's ratio) for one to be offered for the other.
CUTOFF = 0.6


def _folded(name: str) -> str:
    """A name without case, "_" and "-": ``expectedSha256`` and ``expected_sha256`` meet."""
    return name.replace("_", "").replace("-", "").lower()


def suggestion(field: str, known: Iterable[str]) -> str | None:
    """The known name ``field`` most resembles (camelCase for snake_case included), or None."""
    names = list(known)
    by_fold = {_folded(name): name for name in names}
    if _folded(field) in by_fold:
        return by_fold[_folded(field)]
    close = difflib.get_close_matches(field, names, n=1, cutoff=CUTOFF)
    if not close:
        folded = difflib.get_close_matches(_folded(field), list(by_fold), n=1, cutoff=CUTOFF)
        close = [by_fold[folded[0]]] if folded else []
    return close[0] if close else None


def unknown_field_error(field: str, known: Iterable[str]) -> UnknownField:
    """The refusal of ``field``, in words: the known field it resembles, or the known ones."""
    names = sorted(known)
    close = suggestion(field, names)
    message = UNKNOWN_FIELD.format(field=field)
    if close is not None:
        message += UNKNOWN_FIELD_DID_YOU_MEAN.format(known=close)
    elif names:
        message += UNKNOWN_FIELD_KNOWN.format(known=", ".join(f"`{name}`" for name in names))
    else:
        message += UNKNOWN_FIELD_NOTHING_KNOWN
    return UnknownField(message, field=field, suggestion=close)


def first_unknown(given: Iterable[str], known: Iterable[str]) -> UnknownField | None:
    """The refusal of the first name of ``given`` (in its order) not in ``known``, or None."""
    names = set(known)
    for field in given:
        if field not in names:
            return unknown_field_error(str(field), names)
    return None


def refuse_unknown(given: Iterable[str], known: Iterable[str]) -> None:
    """Raise :class:`~versions.errors.UnknownField` for the first name of ``given`` (in its
    order) that is not in ``known``."""
    refusal = first_unknown(given, known)
    if refusal is not None:
        raise refusal
