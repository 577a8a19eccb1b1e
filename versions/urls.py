"""URLs of the Versions panel (and, added by its owner, the live app)."""

from django.urls import path

from versions import views

app_name = "versions"

_APP = "apps/<slug:slug>/versions/"

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
    # Live app routes (versions/live.py) go below this line.
]
