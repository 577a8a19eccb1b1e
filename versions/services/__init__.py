"""The Versions services: the one path every write, restore, name and mark goes through.

Views, the agent API, the MCP server, the admin and the management commands are thin adapters
over these functions.
"""

from versions.services.capture import WriteReceipt, delete_artifact, write_artifact
from versions.services.release import restore_to_release, since_release, state_at, states_at
from versions.services.restore import RestoreReceipt, restore_change_set, restore_point
from versions.services.retention import (
    mark_release,
    name_change_set,
    name_point,
    over_limit,
    unmark_release,
)

__all__ = [
    "RestoreReceipt",
    "WriteReceipt",
    "delete_artifact",
    "mark_release",
    "name_change_set",
    "name_point",
    "over_limit",
    "restore_change_set",
    "restore_point",
    "restore_to_release",
    "since_release",
    "state_at",
    "states_at",
    "unmark_release",
    "write_artifact",
]
