"""Changes-log rollback for agent workspaces: the engine, its worker-side tracker, no Django.

Callers use only what is re-exported here.
"""

from .changes_log import ChangesLog, ChangesLogError, ModifiedFile, load_changes_log
from .paths import UnsafePathError, resolve_in_workspace, workspace_root
from .rollback import (
    EXIT_BAD_INPUT,
    EXIT_DECLINED,
    EXIT_FAILED,
    EXIT_OK,
    RollbackInputError,
    RollbackPlan,
    RollbackResult,
    confirmation_prompt,
    is_commit_id,
    plan_rollback,
    rollback,
    run_rollback,
    summary,
)
from .safeio import NotRegularFileError, OutsideWorkspaceError, open_for_reading
from .tracker import ChangesTracker

__all__ = [
    "EXIT_BAD_INPUT",
    "EXIT_DECLINED",
    "EXIT_FAILED",
    "EXIT_OK",
    "ChangesLog",
    "ChangesLogError",
    "ChangesTracker",
    "ModifiedFile",
    "NotRegularFileError",
    "OutsideWorkspaceError",
    "RollbackInputError",
    "RollbackPlan",
    "RollbackResult",
    "UnsafePathError",
    "confirmation_prompt",
    "is_commit_id",
    "load_changes_log",
    "open_for_reading",
    "plan_rollback",
    "resolve_in_workspace",
    "rollback",
    "run_rollback",
    "summary",
    "workspace_root",
]
