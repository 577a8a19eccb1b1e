"""Where a request comes from, for the audit trail: the client's address and user agent."""

from __future__ import annotations

from typing import Any

try:  # the address sign-in throttling counts by (trusted proxies included)
    from axes.helpers import get_client_ip_address
except ImportError:  # pragma: no cover - without django-axes, the connecting address
    get_client_ip_address = None


def request_meta(request: Any) -> dict[str, str]:
    """``address`` and ``user_agent`` of ``request`` (empty strings when unknown)."""
    if request is None:
        return {}
    meta = getattr(request, "META", None) or {}
    address = getattr(request, "axes_ip_address", None)
    if not address and get_client_ip_address is not None:
        address = get_client_ip_address(request)
    return {
        "address": str(address or meta.get("REMOTE_ADDR") or "")[:45],
        "user_agent": str(meta.get("HTTP_USER_AGENT") or "")[:300],
    }
