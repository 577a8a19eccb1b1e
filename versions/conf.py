"""Versions settings, read at call time so tests can override them."""

from django.conf import settings


def max_stored_bytes() -> int:
    """Largest previous source (UTF-8 bytes) a capture point keeps."""
    return int(getattr(settings, "VERSIONS_MAX_STORED_BYTES", 1_572_864))


def max_write_bytes() -> int:
    """Largest source (UTF-8 bytes) a write accepts."""
    return int(getattr(settings, "VERSIONS_MAX_WRITE_BYTES", 10 * 1024 * 1024))


def points_per_app() -> int:
    """How many unpinned capture points an app keeps (counter-points: restore_sets_per_app)."""
    return int(getattr(settings, "VERSIONS_POINTS_PER_APP", 200))


def sweep_batch() -> int:
    """How many pruned points' leftovers (the blob each held, the set each was in) an app owes
    before a write's pruner settles them together: sweeps the blobs nothing references and
    removes the sets left with no point (PostgreSQL; 1: each pruner settles what the one
    before it left)."""
    return max(1, int(getattr(settings, "VERSIONS_SWEEP_BATCH", 16)))


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
