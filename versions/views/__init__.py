"""The Versions panel: server-rendered pages and htmx fragments over the services."""

from versions.views.actions import mark_release, name_change_set, name_point, unmark_release
from versions.views.activity import app_activity, instance_activity
from versions.views.compare import compare, compare_file, compare_pick, compare_viewed
from versions.views.diffs import diff_context, diff_page, diff_section
from versions.views.members import add_member, change_role, members, remove_member
from versions.views.notifications import notifications, webhook_action
from versions.views.pages import change_set, change_sets, home, restore_point, restore_points
from versions.views.production import preview, production, promote, rollback
from versions.views.protection import app_settings
from versions.views.release import restore_to_release, since_release
from versions.views.restoring import receipt, receipt_json, restore_change_set, revert_change_set
from versions.views.restoring import restore_point as restore_point_restore
from versions.views.reviews import add_comment, line_comment, reply, resolve, submit_review

__all__ = [
    "notifications",
    "webhook_action",
    "add_comment",
    "line_comment",
    "reply",
    "resolve",
    "submit_review",
    "app_settings",
    "app_activity",
    "instance_activity",
    "preview",
    "production",
    "promote",
    "rollback",
    "compare",
    "compare_file",
    "compare_pick",
    "compare_viewed",
    "revert_change_set",
    "add_member",
    "change_role",
    "members",
    "remove_member",
    "change_set",
    "change_sets",
    "diff_context",
    "diff_page",
    "diff_section",
    "home",
    "mark_release",
    "name_change_set",
    "name_point",
    "receipt",
    "receipt_json",
    "restore_change_set",
    "restore_point",
    "restore_point_restore",
    "restore_points",
    "restore_to_release",
    "since_release",
    "unmark_release",
]
