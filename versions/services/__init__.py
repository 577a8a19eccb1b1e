"""The Versions services: the one path every write, restore, name and mark goes through.

Views, the agent API, the MCP server, the admin and the management commands are thin adapters
over these functions.
"""

from versions.services.capture import WriteReceipt, delete_artifact, write_artifact
from versions.services.release import restore_to_release, since_release, state_at, states_at
from versions.services.restore import RestoreReceipt, restore_change_set, restore_point
from versions.services.retention import mark_release, name_change_set, name_point, unmark_release
from versions.services.tokens import (
    DEFAULT_EXPIRY_DAYS,
    create_agent_token,
    list_agent_tokens,
    revoke_agent_token,
    revoke_token,
    verify_token,
)

__all__ = [
    "DEFAULT_EXPIRY_DAYS",
    "RestoreReceipt",
    "WriteReceipt",
    "create_agent_token",
    "delete_artifact",
    "list_agent_tokens",
    "mark_release",
    "name_change_set",
    "name_point",
    "restore_change_set",
    "restore_point",
    "restore_to_release",
    "revoke_agent_token",
    "revoke_token",
    "since_release",
    "state_at",
    "states_at",
    "unmark_release",
    "verify_token",
    "write_artifact",
]
