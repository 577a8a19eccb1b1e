"""URLs of the live app, mounted at ``apps/<slug:slug>/`` after the panel's URLs.

Previews of any state sit below ``at/<ref>/`` with the same paths; a signed preview link puts
its signature in the path (``at/<ref>/s/<sig>/``), so the page's relative links keep it.
"""

from django.urls import path, re_path

from versions import live

app_name = "live"

_AT = r"^at/(?P<ref>[^/]{1,100})/"
_SIGNED = _AT + r"s/(?P<sig>[0-9A-Za-z._:-]{1,200})/"

urlpatterns = [
    path("", live.index, name="index"),
    path("p/<str:page>", live.page, name="page"),
    re_path(r"^assets/(?P<name>[^/]+)\.(?P<ext>css|js)$", live.asset, name="asset"),
    re_path(r"^api/(?P<path>.*)$", live.api, name="api"),
    # Previews: the state a ref names (draft, production, dp_…, cs_…, rs_…, rp_…).
    re_path(_AT + r"$", live.at_index, name="at_index"),
    re_path(_AT + r"p/(?P<page>[^/]+)$", live.at_page, name="at_page"),
    re_path(_AT + r"assets/(?P<name>[^/]+)\.(?P<ext>css|js)$", live.at_asset, name="at_asset"),
    re_path(_AT + r"api/(?P<path>.*)$", live.at_api, name="at_api"),
    # The same, opened with a signed preview link.
    re_path(_SIGNED + r"$", live.at_index, name="at_signed_index"),
    re_path(_SIGNED + r"p/(?P<page>[^/]+)$", live.at_page, name="at_signed_page"),
    re_path(
        _SIGNED + r"assets/(?P<name>[^/]+)\.(?P<ext>css|js)$",
        live.at_asset,
        name="at_signed_asset",
    ),
    re_path(_SIGNED + r"api/(?P<path>.*)$", live.at_api, name="at_signed_api"),
]
