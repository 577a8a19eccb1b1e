"""Errors raised by the Versions services. Every message is meant for a person to read."""

from __future__ import annotations

from typing import Any


class VersionsError(Exception):
    """Base class of every error the Versions services raise."""

    code = "error"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class InvalidInput(VersionsError):
    """The request itself is not acceptable (bad name, collection, source or spec)."""

    code = "invalid_input"

    def __init__(self, message: str, *, field: str | None = None, status: int = 400) -> None:
        super().__init__(message)
        self.field = field
        self.status = status


class NotFound(VersionsError):
    """The app, artifact, restore point or change set does not exist."""

    code = "not_found"


class StaleWrite(VersionsError):
    """The writer's expected sha256 is not the artifact's current sha256; nothing was written."""

    code = "stale_write"

    def __init__(self, message: str, *, current_sha256: str) -> None:
        super().__init__(message)
        self.current_sha256 = current_sha256


class PreflightFailed(VersionsError):
    """A restore's pre-flight found problems; nothing was written. The receipt lists them."""

    code = "preflight_failed"

    def __init__(self, message: str, *, receipt: Any) -> None:
        super().__init__(message)
        self.receipt = receipt

    def answer(self) -> dict[str, Any]:
        """What an API or MCP client gets: the refused pre-flight's receipt of SPEC §4
        (``{"kind": "preflight_failed", "restoredFromSet", "written": 0, "findings", …}``)
        with the error's ``error`` and ``message`` keys."""
        receipt = self.receipt.as_dict() if hasattr(self.receipt, "as_dict") else self.receipt
        return {"error": self.code, **receipt, "message": self.message}
