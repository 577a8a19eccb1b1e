"""Sign-in: Django's own, except where it may lead afterwards."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from django.contrib.auth.views import LoginView
from django.urls import Resolver404, resolve


def leads_into_the_panel(url: str) -> bool:
    """Whether ``url`` (already checked to be on this site) is a page of the panel or the
    admin. Never the live app: its pages and route specs are agent-written, and a sign-in
    that ends on one (a route answering 302 to another site) would make the sign-in page
    an open redirect."""
    try:
        match = resolve(urlsplit(url).path)
    except Resolver404:
        return False
    return not match.func.__module__.startswith("versions.live")


class SignInView(LoginView):
    """``/accounts/login/`` with ``next`` kept to the panel (else the apps page)."""

    def get_redirect_url(self, *args: Any, **kwargs: Any) -> str:
        url = super().get_redirect_url(*args, **kwargs)
        return url if url and leads_into_the_panel(url) else ""
