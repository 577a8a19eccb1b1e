"""Errors raised by the Versions services. Every message is meant for a person to read.

No error here knows about HTTP: each door translates them into its own medium (the API's one
error → status table in ``versions.api.errors``, the panel's pages, MCP's ``isError`` results).
"""

from __future__ import annotations

from typing import Any


class VersionsError(Exception):
    """Base class of every error the Versions services raise."""

    code = "error"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class InvalidInput(VersionsError):
    """The request itself is not acceptable (bad name, collection or source)."""

    code = "invalid_input"

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


class InvalidSpec(InvalidInput):
    """A route spec (``pltf_api_route`` source) does not parse or breaks a rule of
    docs/architecture.md#live-app."""

    code = "invalid_input"


class TooLarge(InvalidInput):
    """A source or request is larger than this installation accepts; nothing was written."""

    code = "too_large"


class Conflict(InvalidInput):
    """The request clashes with the app's state (an ambiguous route, no release to restore to)."""

    code = "conflict"


class UnknownField(InvalidInput):
    """A request named a field the operation does not take (a misspelt precondition must
    never be ignored); ``field`` is the unknown name, ``suggestion`` the known one it
    resembles, if any."""

    code = "unknown_field"

    def __init__(self, message: str, *, field: str, suggestion: str | None = None) -> None:
        super().__init__(message, field=field)
        self.suggestion = suggestion


class PreconditionRequired(VersionsError):
    """The app requires every write to say what it expects (a precondition) and this one
    did not; nothing was written."""

    code = "precondition_required"


class NotFound(VersionsError):
    """The app, artifact, restore point or change set does not exist (for this caller)."""

    code = "not_found"


class Forbidden(VersionsError):
    """The caller may not do this (outside its apps, or without the permission or role)."""

    code = "forbidden"


class Unauthenticated(VersionsError):
    """No valid credentials: a missing, unknown, revoked or expired token."""

    code = "unauthorized"


class StaleWrite(VersionsError):
    """The writer's expected sha256 is not the artifact's current sha256; nothing was written."""

    code = "stale_write"

    def __init__(self, message: str, *, current_sha256: str) -> None:
        super().__init__(message)
        self.current_sha256 = current_sha256


class PreconditionFailed(StaleWrite):
    """An HTTP-style precondition (If-Match, If-None-Match) does not hold; nothing was written."""

    code = "precondition_failed"


class PreflightFailed(VersionsError):
    """A restore's pre-flight found problems; nothing was written. The receipt lists them."""

    code = "preflight_failed"

    def __init__(self, message: str, *, receipt: Any) -> None:
        super().__init__(message)
        self.receipt = receipt

    def answer(self) -> dict[str, Any]:
        """What an API or MCP client gets: the refused pre-flight's receipt of docs/api.md#receipts
        (``{"kind": "preflight_failed", "restoredFromSet", "written": 0, "findings", …}``)
        with the error's ``error`` and ``message`` keys."""
        receipt = self.receipt.as_dict() if hasattr(self.receipt, "as_dict") else self.receipt
        return {"error": self.code, **receipt, "message": self.message}


class Locked(VersionsError):
    """An owner locked the artifact: agents may not write it (people's restores still may)."""

    code = "locked"
