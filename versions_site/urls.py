"""Root URLs: the panel, the live app, the agent API, sign-in and the admin."""

from django.contrib import admin
from django.urls import include, path, re_path

from versions import mcp
from versions.api import api, api_home, no_such_endpoint
from versions.views.signin import SignInView

urlpatterns = [
    path("admin/", admin.site.urls),
    # Django's sign-in, with ``next`` kept to the panel (never the agent-written live app).
    path("accounts/login/", SignInView.as_view(), name="login"),
    path("accounts/", include("django.contrib.auth.urls")),
    path("api/v1/", api_home),  # before the API's own root, which is an HTML 404 off DEBUG
    path("api/v1/", api.urls),
    # Anything else under the API answers in the API's JSON error format, not an HTML page.
    re_path(r"^api/v1/(?P<rest>[\s\S]*)\Z", no_such_endpoint),
    # Remote MCP over Streamable HTTP, with the API's bearer token (docs/operations.md#remote-mcp).
    re_path(r"^mcp/?\Z", mcp.http_endpoint, name="mcp"),
    path("", include("versions.urls")),
    # The live app, after the panel (which owns /apps/<slug>/versions/…).
    path("apps/<slug:slug>/", include("versions.live_urls")),
]
