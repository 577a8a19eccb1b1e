"""URLs of the Versions panel (and, added by its owner, the live app)."""

from django.urls import path

from versions import views
from versions.views import safe_promotion as safe_views
from versions.views import workspace as workspace_views

app_name = "versions"

_APP = "apps/<slug:slug>/versions/"
# A changes log: "logs/<file name>" at the workspace root, or "undo/<stamp>" for a counter log.
_LOG = "workspaces/<str:name>/<str:kind>/<str:log>/"

urlpatterns = [
    path("", views.home, name="home"),
    path(_APP, views.change_sets, name="change_sets"),
    path(f"{_APP}change-sets/<str:set_id>/", views.change_set, name="change_set"),
    path(f"{_APP}change-sets/<str:set_id>/name/", views.name_change_set, name="name_change_set"),
    path(f"{_APP}change-sets/<str:set_id>/release/", views.mark_release, name="mark_release"),
    path(
        f"{_APP}change-sets/<str:set_id>/unmark-release/",
        views.unmark_release,
        name="unmark_release",
    ),
    path(
        f"{_APP}change-sets/<str:set_id>/restore/",
        views.restore_change_set,
        name="restore_change_set",
    ),
    path(
        f"{_APP}change-sets/<str:set_id>/revert/",
        views.revert_change_set,
        name="revert_change_set",
    ),
    path(f"{_APP}change-sets/<str:set_id>/reviews/", views.submit_review, name="submit_review"),
    path(f"{_APP}change-sets/<str:set_id>/comments/", views.add_comment, name="add_comment"),
    path(f"{_APP}line-comment/", views.line_comment, name="line_comment"),
    path(
        f"{_APP}change-sets/<str:set_id>/comments/<str:comment_id>/reply/",
        views.reply,
        name="reply",
    ),
    path(
        f"{_APP}change-sets/<str:set_id>/comments/<str:comment_id>/resolve/",
        views.resolve,
        name="resolve",
    ),
    path(f"{_APP}points/", views.restore_points, name="restore_points"),
    path(f"{_APP}points/<str:point_id>/", views.restore_point, name="restore_point"),
    path(f"{_APP}points/<str:point_id>/name/", views.name_point, name="name_point"),
    path(
        f"{_APP}points/<str:point_id>/restore/",
        views.restore_point_restore,
        name="restore_point_restore",
    ),
    path(f"{_APP}points/<str:point_id>/diff/", views.diff_section, name="diff_section"),
    path(f"{_APP}points/<str:point_id>/diff/page/", views.diff_page, name="diff_page"),
    path(f"{_APP}points/<str:point_id>/diff/context/", views.diff_context, name="diff_context"),
    path(f"{_APP}restore-sets/<str:set_id>/", views.receipt, name="receipt"),
    path(f"{_APP}restore-sets/<str:set_id>/receipt.json", views.receipt_json, name="receipt_json"),
    # Workspaces (docs/architecture.md#workspace-rollback): changes logs as change sets, rolled back
    # with Restore all.
    path("workspaces/", workspace_views.workspaces, name="workspaces"),
    path("workspaces/<str:name>/", workspace_views.workspace, name="workspace"),
    path(f"{_LOG}", workspace_views.workspace_log, name="workspace_log"),
    path(f"{_LOG}restore/", workspace_views.workspace_restore, name="workspace_restore"),
    path(f"{_LOG}files/", workspace_views.workspace_files, name="workspace_files"),
    path(
        f"{_LOG}files/<str:file_id>/diff/page/",
        workspace_views.workspace_diff_page,
        name="workspace_diff_page",
    ),
    path(
        f"{_LOG}files/<str:file_id>/diff/context/",
        workspace_views.workspace_diff_context,
        name="workspace_diff_context",
    ),
    path(f"{_APP}since-release/", views.since_release, name="since_release"),
    path(
        f"{_APP}since-release/restore/",
        views.restore_to_release,
        name="restore_to_release",
    ),
    path(f"{_APP}members/", views.members, name="members"),
    path(f"{_APP}members/add/", views.add_member, name="add_member"),
    path(f"{_APP}members/<int:membership_id>/role/", views.change_role, name="change_role"),
    path(f"{_APP}members/<int:membership_id>/remove/", views.remove_member, name="remove_member"),
    path(f"{_APP}activity/", views.app_activity, name="app_activity"),
    path(f"{_APP}settings/", views.app_settings, name="app_settings"),
    path(f"{_APP}settings/webhooks/", views.webhook_action, name="webhook_action"),
    path(f"{_APP}notifications/", views.notifications, name="notifications"),
    path("versions/activity/", views.instance_activity, name="instance_activity"),
    path(f"{_APP}production/", views.production, name="production"),
    path(f"{_APP}production/promote/", views.promote, name="promote"),
    path(f"{_APP}production/rollback/<str:deployment_id>/", views.rollback, name="rollback"),
    # Safe promotion (docs/architecture.md#safe-promotion).
    path(f"{_APP}production/rollout/", safe_views.rollout, name="production_rollout"),
    path(f"{_APP}production/freeze/", safe_views.freeze, name="production_freeze"),
    path(
        f"{_APP}production/schedules/<str:schedule_id>/cancel/",
        safe_views.cancel_schedule,
        name="production_schedule_cancel",
    ),
    path(
        f"{_APP}settings/safe-promotion/",
        safe_views.settings_action,
        name="safe_promotion_settings",
    ),
    path(f"{_APP}preview/<str:ref>/", views.preview, name="preview"),
    # Compare any two states (docs/architecture.md#reviewing).
    path(f"{_APP}compare/", views.compare_pick, name="compare_pick"),
    path(f"{_APP}compare/<str:refs>/", views.compare, name="compare"),
    path(f"{_APP}compare/<str:refs>/viewed/", views.compare_viewed, name="compare_viewed"),
    path(
        f"{_APP}compare/<str:refs>/files/<int:artifact_id>/",
        views.compare_file,
        name="compare_file",
    ),
    # Live app routes (versions/live.py) go below this line.
]
