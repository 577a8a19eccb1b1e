"""The Versions services: the one path every write, restore, name and mark goes through.

Views, the agent API, the MCP server, the admin and the management commands are thin adapters
over these functions.
"""

from versions.services.capture import WriteReceipt, delete_artifact, write_artifact
from versions.services.release import restore_to_release, since_release, state_at, states_at
from versions.services.restore import RestoreReceipt, restore_change_set, restore_point
from versions.services.retention import mark_release, name_change_set, name_point, unmark_release
from versions.services.revert import (
    REVERT_CHANGED_DELETED,
    REVERT_CONFLICT,
    REVERT_CREATED_CHANGED,
    REVERT_DELETED_RECREATED,
    REVERT_NOOP_MESSAGE,
    REVERT_NOT_STORED,
    REVERT_OF_RESTORE_SET,
    REVERT_PRUNED,
    REVERT_SET_NOT_FOUND,
    merge_texts,
    revert_change_set,
)
from versions.services.states import SetArtifactStates, SetStates, set_states

__all__ = [
    "REVERT_CHANGED_DELETED",
    "REVERT_CONFLICT",
    "REVERT_CREATED_CHANGED",
    "REVERT_DELETED_RECREATED",
    "REVERT_NOOP_MESSAGE",
    "REVERT_NOT_STORED",
    "REVERT_OF_RESTORE_SET",
    "REVERT_PRUNED",
    "REVERT_SET_NOT_FOUND",
    "RestoreReceipt",
    "SetArtifactStates",
    "SetStates",
    "WriteReceipt",
    "delete_artifact",
    "mark_release",
    "merge_texts",
    "name_change_set",
    "name_point",
    "restore_change_set",
    "restore_point",
    "restore_to_release",
    "set_states",
    "revert_change_set",
    "since_release",
    "state_at",
    "states_at",
    "unmark_release",
    "write_artifact",
]
