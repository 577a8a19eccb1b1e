"""Sign-in throttling that nobody can turn against someone else (docs/operations.md).

django-axes counts the failures; ``AXES_LOCKOUT_PARAMETERS`` asks it for two counts, the
account from this address and this address whatever the account. One account's failures from
many addresses never add up, so a right password from another address is never refused because
of someone else's failures; the address count, with its own higher limit, still stops one
address guessing across many accounts. Axes compares one number with one limit, so this handler
reports the pair's count, raised to that limit when the address is over its own.
"""

from __future__ import annotations

from typing import Any

from axes.handlers.database import AxesDatabaseHandler
from axes.helpers import get_failure_limit
from django.conf import settings
from django.db.models import Sum
from django.http import HttpRequest


class PairAndAddressHandler(AxesDatabaseHandler):
    """Axes' database handler with a limit per (account, address) and one per address."""

    def get_failures(self, request: HttpRequest, credentials: dict[str, Any] | None = None) -> int:
        # settings.AXES_LOCKOUT_PARAMETERS lists the pair first, then the address.
        pair, address = (
            attempts.aggregate(n=Sum("failures_since_start"))["n"] or 0
            for attempts in self.get_user_attempts(request, credentials)
        )
        address_locked = address >= settings.VERSIONS_SIGNIN_ADDRESS_FAILURE_LIMIT
        # Read by the lock-out page, to say which pause applies.
        request.versions_address_locked = address_locked  # type: ignore[attr-defined]
        if address_locked:
            return max(pair, get_failure_limit(request, credentials))
        return int(pair)
