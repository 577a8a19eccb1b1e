"""The audit trail: every action a person, a token or a command takes, appended to one
hash chain in the same transaction as the action (see :mod:`versions.audit_chain` for the
recipe, ``manage.py verify_audit`` to check it, ``manage.py export_audit`` to read it out).

:func:`record` is the one way in. It is called inside the transaction of the action it
records, so the event exists exactly when the action committed (a refusal that rolls the
action back is recorded after the rollback, on purpose). Appending locks one small row (the
chain's head) until that transaction ends: call it last, just before the transaction commits.

Agents' writes are not recorded here (they are restore points): :func:`record` is never
called on the write path.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Protocol

from versions.models import AgentToken, App, AuditEvent


class _Acting(Protocol):
    """What :func:`record` reads of an actor (a :class:`~versions.services.Actor`)."""

    @property
    def name(self) -> str: ...

    @property
    def kind(self) -> str: ...

    @property
    def user(self) -> Any: ...

    @property
    def token(self) -> AgentToken | None: ...


def record(
    action: str,
    *,
    actor: _Acting | None,
    app: App | None = None,
    targets: Iterable[object] = (),
    reason: str = "",
    details: Mapping[str, Any] | None = None,
    request_meta: Mapping[str, str] | None = None,
) -> AuditEvent:
    """Append ``action`` by ``actor`` (None: a trusted command) on ``app`` (None: the
    instance) to the audit trail, in the caller's transaction. ``targets``: the ids acted on;
    ``request_meta``: ``address`` and ``user_agent`` (default: the actor's, set by its door)."""
    meta = request_meta if request_meta is not None else getattr(actor, "meta", None) or {}
    if actor is None:
        kind, name, user_id, token_id = AuditEvent.COMMAND, "command", None, None
    else:
        kind, name = actor.kind, actor.name
        user_id = getattr(actor.user, "pk", None)
        token_id = actor.token.pk if actor.token is not None else None
        if actor.token is not None:
            name = f"{actor.token.prefix}… of {actor.name}"
    return AuditEvent.objects.append(
        action=action,
        actor_kind=kind,
        actor_name=name,
        actor_user_id=user_id,
        actor_token_id=token_id,
        app=app,
        targets=[str(target) for target in targets],
        reason=reason,
        details=details,
        address=str(meta.get("address") or ""),
        user_agent=str(meta.get("user_agent") or ""),
    )


class Someone:
    """A person known only by what they typed or did without an account in hand (a failed
    sign-in, a lock-out): a user's kind and name, no account linked."""

    kind = AuditEvent.USER
    token: AgentToken | None = None
    user: Any = None

    def __init__(self, name: str, meta: Mapping[str, str] | None = None) -> None:
        self.name = name
        self.meta = dict(meta or {})


class Command:
    """A trusted command or script acting by its name (``create_agent_token``, …)."""

    kind = AuditEvent.COMMAND
    token: AgentToken | None = None
    user: Any = None
    meta: dict[str, str] = {}

    def __init__(self, name: str) -> None:
        self.name = name


class ExpiredToken:
    """An agent token used after it expired: it acts as nothing, but is named (with its
    user) in the audit trail."""

    kind = AuditEvent.TOKEN

    def __init__(self, row: AgentToken, meta: Mapping[str, str] | None = None) -> None:
        self.token = row
        self.user = row.user
        self.name = row.user.get_username()
        self.meta = dict(meta or {})
