"""Root URLs: the panel, the live app, the agent API, sign-in and the admin."""

from django.contrib import admin
from django.http import HttpRequest, HttpResponse
from django.urls import include, path, re_path

from versions import mcp
from versions.api import api, api_home, no_such_endpoint
from versions.views.signin import SignInView


def no_icon(request: HttpRequest) -> HttpResponse:
    """Browsers ask for /favicon.ico on pages that name no icon (the admin's): no icon, and no
    404 in their consoles. The panel's pages name an empty one."""
    return HttpResponse(status=204)


urlpatterns = [
    path("favicon.ico", no_icon),
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
