"""URLs of the live app, mounted at ``apps/<slug:slug>/`` after the panel's URLs."""

from django.urls import path, re_path

from versions import live

app_name = "live"

urlpatterns = [
    path("", live.index, name="index"),
    path("p/<str:page>", live.page, name="page"),
    re_path(r"^assets/(?P<name>[^/]+)\.(?P<ext>css|js)$", live.asset, name="asset"),
    re_path(r"^api/(?P<path>.*)$", live.api, name="api"),
]
