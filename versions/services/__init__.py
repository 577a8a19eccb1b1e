"""The Versions services: the one path every write, restore, name and mark goes through.

Views, the agent API, the MCP server, the admin and the management commands are thin adapters
over these functions.
"""

from versions.services.capture import WriteReceipt, delete_artifact, write_artifact
from versions.services.deployments import (
    PromotionReceipt,
    deployment_history,
    deployments,
    event_receipt,
    production_notice,
    promote,
    rollback_production,
)
from versions.services.release import restore_to_release, since_release, state_at, states_at
from versions.services.restore import RestoreReceipt, restore_change_set, restore_point
from versions.services.retention import mark_release, name_change_set, name_point, unmark_release
from versions.services.states import (
    DRAFT,
    PRODUCTION,
    AppState,
    StateEntry,
    preview_token_valid,
    preview_url,
    resolve_state,
    route_sources,
    state_entry,
)

__all__ = [
    "DRAFT",
    "PRODUCTION",
    "AppState",
    "PromotionReceipt",
    "RestoreReceipt",
    "StateEntry",
    "WriteReceipt",
    "delete_artifact",
    "deployment_history",
    "deployments",
    "event_receipt",
    "mark_release",
    "name_change_set",
    "name_point",
    "preview_token_valid",
    "preview_url",
    "production_notice",
    "promote",
    "resolve_state",
    "restore_change_set",
    "restore_point",
    "restore_to_release",
    "rollback_production",
    "route_sources",
    "since_release",
    "state_entry",
    "state_at",
    "states_at",
    "unmark_release",
    "write_artifact",
]
