"""Root URLs: the panel, the live app, the agent API, sign-in and the admin."""

from django.contrib import admin
from django.urls import include, path

from versions.api import api

urlpatterns = [
    path("admin/", admin.site.urls),
    path("accounts/", include("django.contrib.auth.urls")),
    path("api/v1/", api.urls),
    path("", include("versions.urls")),
    # The live app, after the panel (which owns /apps/<slug>/versions/…).
    path("apps/<slug:slug>/", include("versions.live_urls")),
]
