"""The Versions services: the one door every write, restore, name and mark goes through.

Views, the agent API, the MCP server, the admin and the management commands build an
:class:`Actor` (who acts, and what it may do) and call these functions, which check access
themselves (``Forbidden`` / ``NotFound`` in words) and translate nothing into HTTP. Nothing
outside this package imports a module inside it: the verbs and types a caller needs are
re-exported here; the words it shows are in :mod:`versions.messages`, the names of actions,
roles, flows and refs in :mod:`versions.terms`.

- ``engine`` — the one executor every plan runs on, and its pre-flight rules
  (docs/architecture.md#one-engine);
- ``receipts`` — the typed receipts and their one serializer;

- ``access`` — the :class:`Actor` and the access checks;
- ``apps`` — adding and renaming an app;
- ``agent_writes`` — a change set's message, and a partial edit of an artifact
  (docs/api.md#turn-messages);
- ``audit`` — the audit trail: :func:`record` appends an action to its hash chain;
- ``capture`` — every write records a restore point first (docs/architecture.md#write-path);
- ``restore`` — Restore all, Restore, and the engine's receipts (docs/architecture.md#restore);
- ``release`` — Restore to release (docs/architecture.md#release-review);
- ``revert`` — Revert this set: a three-way merge that keeps later work
  (docs/architecture.md#revert);
- ``flow`` — the one restore flow every door runs (docs/architecture.md#restore-flow);
- ``members`` — people's roles per app (docs/architecture.md#access);
- ``naming`` — names and the release mark;
- ``portable`` — one app's whole history to an archive and back (docs/operations.md#dump-load);
- ``reading`` — a person's comparison layout and Viewed marks (docs/architecture.md#reviewing);
- ``retention`` — pruning and pins;
- ``promotion`` — safe promotion: checks, rollouts, the watch, schedules, freezes and locks
  (docs/architecture.md#safe-promotion), one namespace (``services.promotion.<verb>``);
- ``reviews`` — reviews, line comments and an app's protection (docs/architecture.md#reviews);
- ``routes`` — the route-save path (docs/architecture.md#live-app);
- ``tokens`` — agent tokens;
- ``validation`` — what a name, collection or source must be;
- ``webhooks`` — an app's webhooks and its members' emails, and the worker's tasks that send
  them (docs/architecture.md#notifications); the doors reach them through ``change_app``.
"""

from versions.services._store import (
    repack as repack_blobs,
)
from versions.services.access import (
    Actor,
    activity_scope,
    actor_for_token,
    actor_for_user,
    app_for,
    authenticate_token,
    point_for,
    require_panel,
    require_workspace_rollback,
    set_for,
    visible_app_ids,
)
from versions.services.agent_writes import (
    describe_change_set,
    edit_artifact,
)
from versions.services.apps import (
    add_app,
    change_app,
)
from versions.services.audit import (
    Someone,
    record,
)
from versions.services.capture import (
    WriteReceipt,
    delete_artifact,
    write_artifact,
)
from versions.services.deployments import (
    PromotionReceipt,
    promote,
    rollback_production,
)
from versions.services.flow import (
    run_restore,
)
from versions.services.members import (
    add_member,
    change_role,
    remove_member,
    revoke_app_token,
)
from versions.services.naming import (
    mark_release,
    name_change_set,
    name_point,
    unmark_release,
)
from versions.services.portable import (
    dump_app,
    load_app,
)
from versions.services.promotion import (
    promotion,
)
from versions.services.reading import (
    mark_viewed,
    set_reading_layout,
)
from versions.services.receipts import (
    read_receipt,
)
from versions.services.refs import (
    check_preview,
    preview_url,
    resolve_state,
    route_sources,
    state_entry,
)
from versions.services.release import (
    restore_to_release,
)
from versions.services.restore import (
    RestoreReceipt,
    restore_change_set,
    restore_point,
)
from versions.services.revert import (
    revert_change_set,
)
from versions.services.reviews import (
    add_comment,
    reply,
    resolve_thread,
    submit_review,
)
from versions.services.routes import (
    RouteSpec,
    parse_route_spec,
)
from versions.services.tokens import (
    create_agent_token,
    list_agent_tokens,
    verify_token,
)
from versions.services.validation import (
    validate_collection,
    validate_name,
)

__all__ = [
    "promotion",
    "dump_app",
    "load_app",
    "add_comment",
    "reply",
    "resolve_thread",
    "submit_review",
    "add_app",
    "change_app",
    "revoke_app_token",
    "activity_scope",
    "Someone",
    "record",
    "mark_viewed",
    "set_reading_layout",
    "PromotionReceipt",
    "check_preview",
    "preview_url",
    "promote",
    "resolve_state",
    "rollback_production",
    "route_sources",
    "state_entry",
    "list_agent_tokens",
    "repack_blobs",
    "describe_change_set",
    "edit_artifact",
    "revert_change_set",
    "add_member",
    "change_role",
    "remove_member",
    "Actor",
    "RestoreReceipt",
    "read_receipt",
    "RouteSpec",
    "WriteReceipt",
    "actor_for_token",
    "actor_for_user",
    "app_for",
    "authenticate_token",
    "point_for",
    "set_for",
    "create_agent_token",
    "delete_artifact",
    "mark_release",
    "name_change_set",
    "name_point",
    "parse_route_spec",
    "require_panel",
    "require_workspace_rollback",
    "restore_change_set",
    "restore_point",
    "restore_to_release",
    "run_restore",
    "unmark_release",
    "validate_collection",
    "validate_name",
    "verify_token",
    "visible_app_ids",
    "write_artifact",
]
