"""The names Versions gives to what people and agents may do, to roles, to the refs of an
app's states and to the actions of the audit trail: shared by the services and the doors
(views, API, MCP, commands), which read them here rather than through the services."""

from versions.models import AppMembership

# access
VIEW = "view"
NAME = "name"
RESTORE = "restore"
PROMOTE = "promote"
MANAGE = "manage"
# Reviewing a change set (approve, request changes, comment): people only, never tokens.
REVIEW = "review"
# Writing artifacts: what agent tokens (and commands) do. A person writes by hand only in the
# admin, and only where they manage the app (an owner could hold a token and write with it).
WRITE = "write"

# flow
SET = "set"
POINT = "point"
RELEASE = "release"
REVERT = "revert"

# refs
DRAFT = "draft"
PRODUCTION = "production"

# tokens
DEFAULT_EXPIRY_DAYS = 90

# The audit trail's actions.
# Sign-in (the panel).
SIGNED_IN = "signed_in"
SIGNED_OUT = "signed_out"
SIGNIN_FAILED = "signin_failed"
LOCKED_OUT = "locked_out"
# Agent tokens.
TOKEN_CREATED = "token_created"
TOKEN_REVOKED = "token_revoked"
TOKEN_EXPIRED_USED = "token_used_after_expiry"
# Members of an app.
MEMBER_ADDED = "member_added"
MEMBER_ROLE_CHANGED = "member_role_changed"
MEMBER_REMOVED = "member_removed"
# Names and the release mark.
SET_NAMED = "set_named"
POINT_NAMED = "point_named"
RELEASE_MARKED = "release_marked"
RELEASE_UNMARKED = "release_unmarked"
# What the engine puts back or ships (recorded by its executor).
RESTORED = "restored"
REVERTED = "reverted"
RESTORED_TO_RELEASE = "restored_to_release"
PROMOTED = "promoted"
ROLLED_BACK = "rolled_back"
PREFLIGHT_FAILED = "preflight_failed"
PROMOTION_REFUSED = "promotion_refused"
# Portable backups of one app (manage.py dump_app / load_app).
APP_DUMPED = "app_dumped"
APP_LOADED = "app_loaded"
# An app's settings.
APP_SETTINGS_CHANGED = "app_settings_changed"
# Reviews, line comments and protection (docs/architecture.md#reviews).
REVIEW_SUBMITTED = "review_submitted"
COMMENT_ADDED = "comment_added"
COMMENT_REPLIED = "comment_replied"
THREAD_RESOLVED = "thread_resolved"
THREAD_REOPENED = "thread_reopened"
THREAD_ADDRESSED = "thread_addressed"
PROTECTION_CHANGED = "protection_changed"
PROTECTION_OVERRIDDEN = "protection_overridden"
# Safe promotion (docs/architecture.md#safe-promotion).
CHECK_ADDED = "check_added"
CHECK_REMOVED = "check_removed"
CHECKS_OVERRIDDEN = "checks_overridden"
WATCH_CHANGED = "watch_changed"
ROLLOUT_STARTED = "rollout_started"
ROLLOUT_ADVANCED = "rollout_advanced"
ROLLOUT_COMPLETED = "rollout_completed"
ROLLOUT_ABORTED = "rollout_aborted"
AUTO_ROLLED_BACK = "auto_rolled_back"
PROMOTION_SCHEDULED = "promotion_scheduled"
SCHEDULE_CANCELLED = "schedule_cancelled"
PRODUCTION_FROZEN = "production_frozen"
PRODUCTION_UNFROZEN = "production_unfrozen"
ARTIFACT_LOCKED = "artifact_locked"
ARTIFACT_UNLOCKED = "artifact_unlocked"

# Each action in words, for the Activity tab (an action not listed shows as its name).
ACTION_LABELS = {
    APP_SETTINGS_CHANGED: "Changed the app's settings",
    SIGNED_IN: "Signed in",
    SIGNED_OUT: "Signed out",
    SIGNIN_FAILED: "Failed sign-in",
    LOCKED_OUT: "Locked out",
    TOKEN_CREATED: "Token made",
    TOKEN_REVOKED: "Token revoked",
    TOKEN_EXPIRED_USED: "Token used after expiry",
    MEMBER_ADDED: "Member added",
    MEMBER_ROLE_CHANGED: "Role changed",
    MEMBER_REMOVED: "Member removed",
    SET_NAMED: "Set named",
    POINT_NAMED: "Point named",
    RELEASE_MARKED: "Marked as release",
    RELEASE_UNMARKED: "Release mark removed",
    RESTORED: "Restored",
    REVERTED: "Reverted",
    RESTORED_TO_RELEASE: "Restored to release",
    PROMOTED: "Promoted",
    ROLLED_BACK: "Rolled back",
    PREFLIGHT_FAILED: "Restore refused",
    PROMOTION_REFUSED: "Promotion refused",
    APP_DUMPED: "App dumped to an archive",
    APP_LOADED: "App loaded from an archive",
    REVIEW_SUBMITTED: "Review submitted",
    COMMENT_ADDED: "Comment added",
    COMMENT_REPLIED: "Reply added",
    THREAD_RESOLVED: "Thread resolved",
    THREAD_REOPENED: "Thread reopened",
    THREAD_ADDRESSED: "Thread answered by a write",
    PROTECTION_CHANGED: "Protection changed",
    PROTECTION_OVERRIDDEN: "Promoted anyway",
    CHECK_ADDED: "Check added",
    CHECK_REMOVED: "Check removed",
    CHECKS_OVERRIDDEN: "Promoted past failing checks",
    WATCH_CHANGED: "Watch changed",
    ROLLOUT_STARTED: "Rollout started",
    ROLLOUT_ADVANCED: "Rollout advanced",
    ROLLOUT_COMPLETED: "Rollout completed",
    ROLLOUT_ABORTED: "Rollout aborted",
    AUTO_ROLLED_BACK: "Rolled back automatically",
    PROMOTION_SCHEDULED: "Promotion scheduled",
    SCHEDULE_CANCELLED: "Scheduled promotion cancelled",
    PRODUCTION_FROZEN: "Production frozen",
    PRODUCTION_UNFROZEN: "Production unfrozen",
    ARTIFACT_LOCKED: "Artifact locked",
    ARTIFACT_UNLOCKED: "Artifact unlocked",
}

# The least role that allows each action, to name it in a refusal.
ROLE_FOR = {
    action: role
    for role, adds in zip(
        AppMembership.ROLES,
        ((VIEW,), (NAME, REVIEW), (RESTORE,), (PROMOTE,), (MANAGE,)),
        strict=True,
    )
    for action in adds
}

# The global Django permissions of docs/architecture.md#access (and
# docs/architecture.md#environments): each means "this action on every app".
PERMISSIONS = {
    VIEW: "versions.view_changeset",
    NAME: "versions.change_changeset",
    RESTORE: "versions.restore_changeset",
    PROMOTE: "versions.promote_deployment",
    # Who may name sets everywhere may review them everywhere.
    REVIEW: "versions.change_changeset",
}

# release
SCOPE = "since_release"

# Webhooks and notifications (docs/architecture.md#notifications): the events an app's webhooks
# and its members' emails may take, and the audit trail's webhook actions.
CHANGE_SET_CREATED = "change_set.created"
REVIEW_SUBMITTED_EVENT = "review.submitted"
COMMENT_CREATED = "comment.created"
PRODUCTION_PROMOTED = "production.promoted"
PRODUCTION_ROLLED_BACK = "production.rolled_back"
RESTORE_COMPLETED = "restore.completed"
REVERT_COMPLETED = "revert.completed"
EVENTS = (
    CHANGE_SET_CREATED,
    REVIEW_SUBMITTED_EVENT,
    COMMENT_CREATED,
    PRODUCTION_PROMOTED,
    PRODUCTION_ROLLED_BACK,
    RESTORE_COMPLETED,
    REVERT_COMPLETED,
)
# Each event in words, for the panel's checkboxes and the emails.
EVENT_LABELS = {
    CHANGE_SET_CREATED: "An agent started a change set",
    REVIEW_SUBMITTED_EVENT: "A review was submitted",
    COMMENT_CREATED: "A line comment or a reply was written",
    PRODUCTION_PROMOTED: "Production was promoted",
    PRODUCTION_ROLLED_BACK: "Production was rolled back",
    RESTORE_COMPLETED: "A restore completed",
    REVERT_COMPLETED: "A revert completed",
}
WEBHOOK_CREATED = "webhook_created"
WEBHOOK_CHANGED = "webhook_changed"
WEBHOOK_DELETED = "webhook_deleted"
WEBHOOK_REDELIVERED = "webhook_redelivered"
WEBHOOK_DISABLED = "webhook_disabled"
NOTIFICATIONS_CHANGED = "notifications_changed"
ACTION_LABELS.update(
    {
        WEBHOOK_CREATED: "Webhook added",
        WEBHOOK_CHANGED: "Webhook changed",
        WEBHOOK_DELETED: "Webhook deleted",
        WEBHOOK_REDELIVERED: "Webhook event redelivered",
        WEBHOOK_DISABLED: "Webhook disabled after failing",
        NOTIFICATIONS_CHANGED: "Email notifications changed",
    }
)
# The signed cookie that pins a visitor to one deployment during a rollout.
ROLLOUT_COOKIE = "versions_dp"
