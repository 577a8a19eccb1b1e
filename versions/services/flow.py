"""The restore flow (docs/architecture.md#restore-flow): one entry for every kind of restore a
person or agent confirms.

Each door runs the same steps — a dry run for the dialog, then the confirmed restore with the
hashes the person reviewed as "now", then the receipt — through :func:`run_restore`, whatever
is restored: a change set (Restore all, and Undo this restore), one point (Restore), the
release (Restore to release), or what one set did (Revert this set).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from versions.errors import InvalidInput
from versions.models import App
from versions.services.access import Actor
from versions.services.release import restore_to_release
from versions.services.restore import RestoreReceipt, restore_change_set, restore_point
from versions.services.revert import revert_change_set
from versions.terms import (
    POINT,
    RELEASE,
    REVERT,
    SET,
)

KINDS = (SET, POINT, RELEASE, REVERT)

UNKNOWN_KIND = "There is no kind of restore “{kind}”."


def run_restore(
    kind: str,
    ident: str | None = None,
    *,
    actor: Actor | None = None,
    app: App | None = None,
    by: str | None = None,
    dry_run: bool = False,
    expected: Mapping[Any, str] | None = None,
) -> RestoreReceipt:
    """Restore (or dry-run) a set, a point or the release of ``app`` for ``actor``.

    ``ident`` is the set or point id (unused for the release); ``expected`` maps
    ``"collection/name"`` to the sha256 the person reviewed as "now". Raises what the engine
    raises: ``PreflightFailed`` (nothing written), ``NotFound``, ``Forbidden``.
    """
    if kind == SET:
        return restore_change_set(
            str(ident), by=by, dry_run=dry_run, expected=expected, actor=actor, app=app
        )
    if kind == POINT:
        return restore_point(
            str(ident), by=by, dry_run=dry_run, expected=expected, actor=actor, app=app
        )
    if kind == REVERT:
        return revert_change_set(
            str(ident), by=by, dry_run=dry_run, expected=expected, actor=actor, app=app
        )
    if kind == RELEASE and app is not None:
        return restore_to_release(app, by=by, dry_run=dry_run, expected=expected, actor=actor)
    raise InvalidInput(UNKNOWN_KIND.format(kind=kind))
