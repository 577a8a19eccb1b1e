"""Identifiers of restore points and sets: ``rp_<ms base36>_<8 random [0-9a-z]>``."""

from __future__ import annotations

import secrets
import threading
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


_sequence_lock = threading.Lock()
_sequence_at = [0, 0]  # [ms, number of ids handed out in that ms]


def ordered_suffix(ms: int, length: int = 8) -> str:
    """``length`` characters of [0-9a-z] that sort in the order this process asked for them
    within millisecond ``ms`` (three characters of sequence, the rest random), so that ids made
    in one millisecond by one process keep the order they were made in."""
    with _sequence_lock:
        if _sequence_at[0] == ms:
            _sequence_at[1] += 1
        else:
            _sequence_at[0], _sequence_at[1] = ms, 0
        number = _sequence_at[1]
    sequence = base36(min(number, 36**3 - 1))
    return "0" * (3 - len(sequence)) + sequence + random_suffix(length - 3)


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
