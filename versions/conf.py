"""Versions settings, read at call time so tests can override them."""

import os

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured


def max_stored_bytes() -> int:
    """Largest previous source (UTF-8 bytes) a capture point keeps."""
    return int(getattr(settings, "VERSIONS_MAX_STORED_BYTES", 1_572_864))


def max_write_bytes() -> int:
    """Largest source (UTF-8 bytes) a write accepts."""
    return int(getattr(settings, "VERSIONS_MAX_WRITE_BYTES", 10 * 1024 * 1024))


def points_per_app() -> int:
    """How many unpinned capture points an app keeps (counter-points: restore_sets_per_app)."""
    return int(getattr(settings, "VERSIONS_POINTS_PER_APP", 200))


SWEEP_BATCH_REFUSED = (
    "VERSIONS_SWEEP_BATCH must be a positive whole number (how many pruned points an app may "
    "owe before a write settles them; 1 settles what each pruning left at the next one), "
    "not “{value}”."
)


def sweep_batch() -> int:
    """How many pruned points' leftovers (the blob each held, the set each was in) an app owes
    before a pruner (a write's, a restore's) settles them together: sweeps the blobs nothing
    references and removes the sets left with no point (1: each pruner settles what the one
    before it left).

    The setting ``VERSIONS_SWEEP_BATCH``, else the environment variable of that name, else
    16; anything but a positive whole number is refused in words (ImproperlyConfigured)."""
    value = getattr(settings, "VERSIONS_SWEEP_BATCH", None)
    if value is None:
        value = os.environ.get("VERSIONS_SWEEP_BATCH", "").strip() or 16
    return _positive(value, SWEEP_BATCH_REFUSED)


def _positive(value: object, refused: str) -> int:
    """``value`` as a positive int (an int, or its decimal digits), else ImproperlyConfigured."""
    if isinstance(value, bool):
        raise ImproperlyConfigured(refused.format(value=value))
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value.strip())
    if not isinstance(value, int) or value < 1:
        raise ImproperlyConfigured(refused.format(value=value))
    return value


def restore_sets_per_app() -> int:
    """How many of an app's newest unnamed restore sets keep their counter-points."""
    return int(getattr(settings, "VERSIONS_RESTORE_SETS_PER_APP", 50))


def turn_gap_seconds() -> int:
    """Longest pause between captures of one turn (without run_id) that keeps one set."""
    return int(getattr(settings, "VERSIONS_TURN_GAP_SECONDS", 600))


def workspaces() -> dict[str, str]:
    """Registered workspaces for changes-log rollback: name -> folder."""
    return dict(getattr(settings, "VERSIONS_WORKSPACES", {}) or {})


def live_cors() -> bool:
    """Whether the live app's answers may be read from any origin (its own sandboxed pages
    have an opaque origin, so reading their own API routes needs it)."""
    return bool(getattr(settings, "VERSIONS_LIVE_CORS", True))


def preview_link_hours() -> float:
    """How long a signed preview link the panel makes stays valid, in hours."""
    return float(getattr(settings, "VERSIONS_PREVIEW_LINK_HOURS", 24))
