"""Sign-in: Django's own, except where it may lead afterwards."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.contrib.auth.forms import AuthenticationForm
from django.contrib.auth.views import LoginView
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import Resolver404, resolve

# Sign-in is throttled by django-axes (versions/signin_throttle.py), its attempts kept in the
# database so that the count holds across every server process: failures pause one account
# from one address, and many failures from one address pause that address, each for a fixed
# time from the last failed try. Every failure is logged (Axes' "Access failures" in the
# admin, and the server log).
SIGNIN_LOCKED = (
    "Too many failed sign-ins for this account from this address. Signing in to it from here "
    "is paused for {minutes} minutes after the last failed try; tries during the pause do not "
    "make it longer, and signing in from elsewhere is not affected. An administrator can lift "
    "the pause in the admin (Access attempts)."
)
SIGNIN_ADDRESS_LOCKED = (
    "Too many failed sign-ins from this address, for one account or several. Signing in from "
    "here is paused for {minutes} minutes after the last failed try; tries during the pause do "
    "not make it longer. An administrator can lift the pause in the admin (Access attempts)."
)
LOCKED_STATUS = 429


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


def _lock_minutes() -> int:
    return int(settings.AXES_COOLOFF_TIME.total_seconds() // 60)


def signin_locked(
    request: HttpRequest, response: HttpResponse | None = None, credentials: Any = None
) -> HttpResponse:
    """Axes' lock-out answer: the sign-in page again, with the pause said in words (429)."""
    form = AuthenticationForm(request)
    by_address = getattr(request, "versions_address_locked", False)  # signin_throttle sets it
    message = SIGNIN_ADDRESS_LOCKED if by_address else SIGNIN_LOCKED
    username = (credentials or {}).get("username") or request.POST.get("username", "")
    form.fields["username"].initial = username
    context = {
        "form": form,
        "locked_message": message.format(minutes=_lock_minutes()),
        "next": request.POST.get("next", request.GET.get("next", "")),
    }
    return render(request, "registration/login.html", context, status=LOCKED_STATUS)


def client_address(request: HttpRequest) -> str | None:
    """The address sign-in failures are counted by: the connecting address, or behind
    VERSIONS_PROXY_COUNT trusted proxies the one the outermost proxy saw (X-Forwarded-For)."""
    proxies = int(getattr(settings, "VERSIONS_PROXY_COUNT", 0))
    remote = request.META.get("REMOTE_ADDR")
    if proxies <= 0:
        return remote
    forwarded = [a.strip() for a in request.META.get("HTTP_X_FORWARDED_FOR", "").split(",")]
    forwarded = [a for a in forwarded if a]
    # Each proxy appends the address it saw: the last `proxies` entries are our own proxies'
    # doing; anything before them the client may have written itself.
    if len(forwarded) >= proxies:
        return forwarded[-proxies]
    return remote
