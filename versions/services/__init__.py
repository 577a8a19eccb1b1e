"""The Versions services: the one door every write, restore, name and mark goes through.

Views, the agent API, the MCP server, the admin and the management commands build an
:class:`Actor` (who acts, and what it may do) and call these functions, which check access
themselves (``Forbidden`` / ``NotFound`` in words) and translate nothing into HTTP. Nothing
outside this package imports a module inside it: everything a caller needs is re-exported here.

- ``access`` — the :class:`Actor` and the access checks;
- ``capture`` — every write records a restore point first (SPEC §3);
- ``restore`` — Restore all, Restore, and the engine's receipts (SPEC §4);
- ``release`` — Restore to release (SPEC §6b);
- ``revert`` — Revert this set: a three-way merge that keeps later work (SPEC §14);
- ``flow`` — the one restore flow every door runs (SPEC §12);
- ``members`` — people's roles per app (SPEC §19);
- ``naming`` — names and the release mark;
- ``retention`` — pruning and pins;
- ``routes`` — the route-save path (SPEC §5);
- ``tokens`` — agent tokens;
- ``validation`` — what a name, collection or source must be.
"""

from versions.services._store import sha256_hex
from versions.services.access import (
    MANAGE,
    NAME,
    NEEDS,
    NEEDS_ROLE,
    NO_VIEW,
    NO_WORKSPACE_ROLLBACK,
    OUT_OF_SCOPE,
    PERMISSIONS,
    PROMOTE,
    RESTORE,
    ROLE_FOR,
    TOKEN_REFUSED,
    VIEW,
    WRITE,
    Actor,
    actor_for_token,
    actor_for_user,
    app_for,
    authenticate_token,
    command_actor,
    point_for,
    require_panel,
    require_workspace_rollback,
    restores_everywhere,
    roles_of,
    set_for,
    visible_app_ids,
)
from versions.services.capture import (
    ARTIFACT_NOT_FOUND,
    WriteReceipt,
    delete_artifact,
    write_artifact,
)
from versions.services.flow import KINDS, POINT, RELEASE, REVERT, SET, run_restore
from versions.services.members import (
    ALREADY_MEMBER,
    LAST_OWNER,
    MEMBERSHIP_NOT_FOUND,
    UNKNOWN_GROUP,
    UNKNOWN_ROLE,
    UNKNOWN_USER,
    add_member,
    change_role,
    remove_member,
    whom,
)
from versions.services.naming import (
    NAME_HAS_CONTROL,
    NAME_NOT_TEXT,
    NAME_TOO_LONG,
    mark_release,
    name_change_set,
    name_point,
    unmark_release,
)
from versions.services.release import SCOPE, restore_to_release
from versions.services.restore import (
    NOOP_MESSAGE,
    NOOP_POINT_MESSAGE,
    POINT_NOT_FOUND,
    SET_NOT_FOUND,
    RestoreReceipt,
    normalise_expected,
    restore_change_set,
    restore_point,
)
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
from versions.services.routes import RouteSpec, parse_route_spec
from versions.services.tokens import (
    NOT_OWNER,
    create_agent_token,
    hash_token,
    revoke_token,
    token_app_slugs,
    token_can_restore,
    verify_token,
)
from versions.services.validation import (
    SOURCE_TOO_LARGE,
    encode_source,
    validate_collection,
    validate_name,
    validate_optional_id,
)

__all__ = [
    "PERMISSIONS",
    "REVERT",
    "REVERT_CHANGED_DELETED",
    "REVERT_CONFLICT",
    "REVERT_CREATED_CHANGED",
    "REVERT_DELETED_RECREATED",
    "REVERT_NOOP_MESSAGE",
    "REVERT_NOT_STORED",
    "REVERT_OF_RESTORE_SET",
    "REVERT_PRUNED",
    "REVERT_SET_NOT_FOUND",
    "merge_texts",
    "revert_change_set",
    "ALREADY_MEMBER",
    "LAST_OWNER",
    "MEMBERSHIP_NOT_FOUND",
    "MANAGE",
    "NEEDS_ROLE",
    "NOT_OWNER",
    "ROLE_FOR",
    "UNKNOWN_GROUP",
    "UNKNOWN_ROLE",
    "UNKNOWN_USER",
    "add_member",
    "change_role",
    "remove_member",
    "roles_of",
    "whom",
    "ARTIFACT_NOT_FOUND",
    "KINDS",
    "NAME",
    "NAME_HAS_CONTROL",
    "NAME_NOT_TEXT",
    "NAME_TOO_LONG",
    "NEEDS",
    "NOOP_MESSAGE",
    "NOOP_POINT_MESSAGE",
    "NO_VIEW",
    "NO_WORKSPACE_ROLLBACK",
    "OUT_OF_SCOPE",
    "POINT",
    "POINT_NOT_FOUND",
    "PROMOTE",
    "RELEASE",
    "RESTORE",
    "SCOPE",
    "SET",
    "SET_NOT_FOUND",
    "SOURCE_TOO_LARGE",
    "TOKEN_REFUSED",
    "VIEW",
    "WRITE",
    "Actor",
    "RestoreReceipt",
    "RouteSpec",
    "WriteReceipt",
    "actor_for_token",
    "actor_for_user",
    "app_for",
    "authenticate_token",
    "command_actor",
    "point_for",
    "set_for",
    "create_agent_token",
    "delete_artifact",
    "encode_source",
    "hash_token",
    "mark_release",
    "name_change_set",
    "name_point",
    "normalise_expected",
    "parse_route_spec",
    "require_panel",
    "require_workspace_rollback",
    "restores_everywhere",
    "restore_change_set",
    "restore_point",
    "restore_to_release",
    "revoke_token",
    "run_restore",
    "sha256_hex",
    "token_app_slugs",
    "token_can_restore",
    "unmark_release",
    "validate_collection",
    "validate_name",
    "validate_optional_id",
    "verify_token",
    "visible_app_ids",
    "write_artifact",
]
