"""Sign-in, sign-out, failed sign-ins and lock-outs in the audit trail: receivers of Django's
auth signals and django-axes' ``user_locked_out``, connected by the app config. They only
adapt: the event is written by ``versions.services.record``."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.signals import user_logged_in, user_logged_out, user_login_failed
from django.dispatch import receiver

from versions import services, terms
from versions.request_meta import request_meta


@receiver(user_logged_in, dispatch_uid="versions_audit_signed_in")
def signed_in(sender: Any, request: Any, user: Any, **kwargs: Any) -> None:
    actor = services.actor_for_user(user)
    services.record(terms.SIGNED_IN, actor=actor, request_meta=request_meta(request))


@receiver(user_logged_out, dispatch_uid="versions_audit_signed_out")
def signed_out(sender: Any, request: Any, user: Any, **kwargs: Any) -> None:
    if user is None or not getattr(user, "pk", None):
        return  # signing out without being signed in does nothing
    actor = services.actor_for_user(user)
    services.record(terms.SIGNED_OUT, actor=actor, request_meta=request_meta(request))


@receiver(user_login_failed, dispatch_uid="versions_audit_signin_failed")
def signin_failed(sender: Any, credentials: dict[str, Any], request: Any = None, **kw: Any) -> None:
    name = str((credentials or {}).get("username") or "")[:150]
    services.record(
        terms.SIGNIN_FAILED, actor=services.Someone(name), request_meta=request_meta(request)
    )


def locked_out(sender: Any, request: Any = None, username: Any = None, **kwargs: Any) -> None:
    meta = request_meta(request)
    if kwargs.get("ip_address"):
        meta["address"] = str(kwargs["ip_address"])[:45]
    actor = services.Someone(str(username or "")[:150])
    services.record(terms.LOCKED_OUT, actor=actor, request_meta=meta)


try:  # sign-in throttling's lock-outs, while django-axes does the throttling
    from axes.signals import user_locked_out
except ImportError:  # pragma: no cover
    pass
else:
    user_locked_out.connect(locked_out, dispatch_uid="versions_audit_locked_out")
