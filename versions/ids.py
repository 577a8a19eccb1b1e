"""Identifiers of restore points and sets: ``rp_<ms base36>_<8 random [0-9a-z]>``."""

from __future__ import annotations

import secrets
import time
from datetime import UTC, datetime, timedelta

_ALPHABET = "0123456789abcdefghijklmnopqrstuvwxyz"


def base36(number: int) -> str:
    """``number`` (≥ 0) in base 36, lowercase."""
    if number == 0:
        return "0"
    digits = []
    while number:
        number, rest = divmod(number, 36)
        digits.append(_ALPHABET[rest])
    return "".join(reversed(digits))


def random_suffix(length: int = 8) -> str:
    """``length`` uniformly random characters of [0-9a-z], from one draw of the system RNG."""
    digits = base36(secrets.randbelow(36**length))
    return "0" * (length - len(digits)) + digits


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def ms_to_datetime(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, tz=UTC)


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MS = timedelta(milliseconds=1)


def datetime_to_ms(moment: datetime) -> int:
    """Whole milliseconds since the epoch (exact integer arithmetic, floored; naive = UTC)."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return (moment - _EPOCH) // _MS


def point_id(ms: int) -> str:
    """A restore point id for capture time ``ms`` (milliseconds since the epoch)."""
    return f"rp_{base36(ms)}_{random_suffix()}"


def restore_set_id(ms: int) -> str:
    """A restore set id for time ``ms``."""
    return f"rs_{base36(ms)}_{random_suffix()}"


def change_set_id(first_point_id: str) -> str:
    """The id of a writer's change set: ``cs_`` + the id of its first restore point."""
    return f"cs_{first_point_id}"
