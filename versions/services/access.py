"""Who is acting, and what they may do: the one place every door's access check lives
(docs/architecture.md#layers).

Each door builds an :class:`Actor` once per request — the panel from the signed-in user, the API
and the MCP server from an agent token, commands as a trusted command — and passes it to the
services, which check it and raise :class:`~versions.errors.Forbidden` or
:class:`~versions.errors.NotFound` in words. No door repeats a check or its message.

Actions: ``view`` (read the panel, diffs, previews), ``name`` (name sets and points, mark the
release), ``restore`` (Restore, Restore all, Revert, Restore to release), ``promote`` (promote,
roll back production), ``manage`` (an app's members and agent tokens), and ``write`` (write
artifacts: what agent tokens and commands do).

Who may do what (docs/architecture.md#access): a global Django permission allows its action on every
app; a role on one app (``AppMembership``, for the user or one of their groups; the highest wins)
allows its actions there. An app a person may not view does not exist for them (``NotFound``).
A token acts only on its apps, and never beyond its user's role there.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from django.db.models import Exists, OuterRef, Q, QuerySet

from versions.errors import Forbidden, NotFound, Unauthenticated, VersionsError
from versions.messages import (
    APP_NOT_FOUND,
    NEEDS,
    NEEDS_ROLE,
    NO_VIEW,
    NO_WORKSPACE_ROLLBACK,
    TOKEN_CANNOT_PROMOTE,
    TOKEN_REFUSED,
)
from versions.models import AgentToken, App, AppMembership, ChangeSet, RestorePoint
from versions.services.tokens import verify_token
from versions.terms import (
    MANAGE,
    NAME,
    PERMISSIONS,
    PROMOTE,
    RESTORE,
    REVIEW,
    ROLE_FOR,
    VIEW,
    WRITE,
)

ACTIONS = (VIEW, NAME, REVIEW, RESTORE, PROMOTE, MANAGE, WRITE)


# The actions of each role on its app (docs/architecture.md#access); each includes the ones before
# it.
_ROLE_ADDS = ((VIEW,), (NAME, REVIEW), (RESTORE,), (PROMOTE,), (MANAGE,))
ROLE_ACTIONS: dict[str, frozenset[str]] = {}
_granted: set[str] = set()
for _role, _adds in zip(AppMembership.ROLES, _ROLE_ADDS, strict=True):
    _granted.update(_adds)
    ROLE_ACTIONS[_role] = frozenset(_granted)

COMMAND = "command"
USER = "user"
TOKEN = "token"

SET_NOT_FOUND = "There is no change set “{id}”."
POINT_NOT_FOUND = "There is no restore point “{id}”."
_SET_ID = re.compile(r"^(cs_rp|rs)_[0-9a-z]{1,14}_[0-9a-z]{1,16}$")
_POINT_ID = re.compile(r"^rp_[0-9a-z]{1,14}_[0-9a-z]{1,16}$")


class Actor:
    """Who is acting (a panel user, an agent token, a command) and what it may do.

    ``everywhere``: the actions allowed on every app (global permissions; read from the user's
    permissions when first needed); ``per_app``: more actions on single apps (by app id); a
    token may touch only the apps it is scoped to (looked up once per app, or together with
    the app by :func:`app_for`).
    """

    @classmethod
    def command(cls, name: str = "command") -> Actor:
        """A trusted command or script: every action on every app (``name`` is recorded)."""
        return command_actor(name)

    def __init__(
        self,
        name: str,
        kind: str,
        *,
        everywhere: frozenset[str] | None = None,
        per_app: Mapping[int, frozenset[str]] | None = None,
        user: Any = None,
        token: AgentToken | None = None,
        extra: frozenset[str] = frozenset(),
    ) -> None:
        self.name = name
        self.kind = kind
        self.user = user
        self.token = token
        self._per_app = dict(per_app) if per_app is not None else None
        self._everywhere = everywhere
        self._extra = extra
        self._scope: dict[int, bool] = {}
        # Where it acts from (``address``, ``user_agent``), set by its door for the audit trail.
        self.meta: dict[str, str] = {}

    def __repr__(self) -> str:
        return f"<Actor {self.label}>"

    @property
    def everywhere(self) -> frozenset[str]:
        """The actions the actor may do on every app it may touch."""
        return self.user_everywhere | self._extra

    @property
    def user_everywhere(self) -> frozenset[str]:
        """The actions the global permissions allow (a token's user's, for a token)."""
        if self._everywhere is None:
            self._everywhere = _user_actions(self.user)
        return self._everywhere

    @property
    def per_app(self) -> dict[int, frozenset[str]]:
        """The actions the actor's roles allow, by app id (one query, when first needed)."""
        if self._per_app is None:
            self._per_app = roles_of(self.user)
        return self._per_app

    @property
    def label(self) -> str:
        """Who this is, for the record: ``user:alice``, ``token:vt_abc… of alice``."""
        if self.kind == TOKEN and self.token is not None:
            return f"token:{self.token.prefix}… of {self.name}"
        return f"{self.kind}:{self.name}"

    @property
    def who(self) -> str:
        return f"User “{self.name}”"

    def in_scope(self, app: App) -> bool:
        """Whether the actor may touch ``app`` at all (a token: one of its apps)."""
        if self.token is None:
            return True
        if app.pk not in self._scope:
            through = AgentToken.apps.through.objects
            self._scope[app.pk] = through.filter(
                agenttoken_id=self.token.pk, app_id=app.pk
            ).exists()
        return self._scope[app.pk]

    def may(self, action: str, app: App | None = None) -> bool:
        """Whether the actor may do ``action`` on ``app`` (on some app when ``app`` is None)."""
        if action == WRITE and self.kind == USER:
            action = MANAGE  # a person writes by hand where they manage the app
        if app is not None and not self.in_scope(app):
            return False
        if self.token is not None and app is not None:
            return self._token_may(action, app)
        if action in self.everywhere:
            return True
        if app is None:
            return any(action in actions for actions in self.per_app.values())
        return action in self.per_app.get(app.pk, frozenset())

    def _token_may(self, action: str, app: App) -> bool:
        """A token may read and write its apps (what it is for) and do more as far as its user
        may. On an app with members, its user must be one of them (or hold a global
        permission): a token never acts beyond its owner's role there. Only a token made
        ``--can-promote`` may promote."""
        if action == PROMOTE and self.token is not None and not self.token.can_promote:
            return False
        if action in self._extra and not _has_members(app):
            return True  # an app nobody was made a member of keeps round 1's rule
        held = self.user_everywhere
        user_may = action in held or action in self.per_app.get(app.pk, frozenset())
        if action not in self._extra:
            return user_may
        # Reading and writing: its user holds a global permission or any role on the app.
        return user_may or bool(held) or app.pk in self.per_app

    def sees(self, app: App) -> bool:
        """Whether ``app`` exists for this actor: it may view it."""
        return self.may(VIEW, app)

    def check(self, action: str, app: App, *, missing: VersionsError | None = None) -> None:
        """The whole access check of one action on one app: ``missing`` (default: the app's
        ``NotFound``) when the app does not exist for the actor — outside a token's apps too,
        so that an id never tells another app's from none (docs/api.md#existence) —,
        ``Forbidden`` naming what it lacks otherwise."""
        if not self.in_scope(app) or not self.sees(app):
            raise missing or NotFound(APP_NOT_FOUND.format(slug=app.slug))
        self.require(action, app)

    def require(self, action: str, app: App) -> None:
        """Raise ``Forbidden`` in words unless the actor may do ``action`` on ``app``."""
        if not self.in_scope(app):
            raise NotFound(APP_NOT_FOUND.format(slug=app.slug))
        if action == PROMOTE and self.token is not None and not self.token.can_promote:
            raise Forbidden(TOKEN_CANNOT_PROMOTE)
        if not self.may(action, app):
            message = NEEDS[action].format(who=self.who, slug=app.slug)
            role = ROLE_FOR.get(MANAGE if action == WRITE and self.kind == USER else action)
            if role is not None and self.kind != COMMAND:
                message += NEEDS_ROLE.format(role=role)
            raise Forbidden(message)

    def abilities(self, app: App | None = None) -> dict[str, bool]:
        """What the actor may do on ``app`` (without one: on every app, as workspaces need,
        which belong to no app), for a door to offer only that; the services refuse the rest
        anyway."""
        if app is None:
            return {
                "can_change": NAME in self.everywhere,
                "can_restore": restores_everywhere(self),
                "can_manage": False,
                "can_promote": False,
                "can_review": False,
            }
        return {
            "can_change": self.may(NAME, app),
            "can_restore": self.may(RESTORE, app),
            "can_manage": self.may(MANAGE, app),
            "can_promote": self.may(PROMOTE, app),
            # Reviews are people's: a token never reviews.
            "can_review": self.token is None and self.may(REVIEW, app),
        }


def roles_of(user: Any) -> dict[int, frozenset[str]]:
    """The actions ``user``'s roles allow, by app id: its own memberships and its groups'
    (the highest role wins). One query, whatever the number of memberships."""
    if user is None or not getattr(user, "is_active", False) or not user.pk:
        return {}
    rows = AppMembership.objects.filter(
        Q(user_id=user.pk) | Q(group__in=user.groups.all())
    ).values_list("app_id", "role")
    out: dict[int, frozenset[str]] = {}
    for app_id, role in rows:
        out[app_id] = out.get(app_id, frozenset()) | ROLE_ACTIONS.get(role, frozenset())
    return out


def _has_members(app: App) -> bool:
    cached = getattr(app, "_has_members", None)
    if cached is None:
        cached = AppMembership.objects.filter(app_id=app.pk).exists()
        app._has_members = cached  # type: ignore[attr-defined]
    return bool(cached)


def principal(actor: Actor | None, by: str | None) -> str:
    """Who really acts, for the record (``written_by``, docs/api.md#turn-messages): the actor's
    label, or for a trusted caller without one the command it acts as, ``command:<by>``."""
    return trusted(actor, by).label


def command_actor(name: str = "command") -> Actor:
    """A trusted command or script: every action on every app (``by`` names it)."""
    return Actor(name=name, kind=COMMAND, everywhere=frozenset(ACTIONS))


def _user_actions(user: Any) -> frozenset[str]:
    if not getattr(user, "is_active", False):
        return frozenset()
    held = {action for action, perm in PERMISSIONS.items() if user.has_perm(perm)}
    if getattr(user, "is_superuser", False):
        held.add(MANAGE)  # a superuser manages every app's members and tokens
    return frozenset(held)


def actor_for_user(user: Any) -> Actor:
    """The actor of a signed-in panel user: its global permissions."""
    return Actor(name=user.get_username(), kind=USER, user=user)


def actor_for_token(row: AgentToken) -> Actor:
    """The actor of an agent token: on the token's apps only, it may read and write (what a
    token is for), and restore or promote as far as its user's permissions allow."""
    return Actor(
        name=row.user.get_username(),
        kind=TOKEN,
        user=row.user,
        token=row,
        extra=frozenset({VIEW, WRITE}),
    )


def authenticate_token(token: str | None) -> Actor:
    """The actor of a bearer token, or ``Unauthenticated`` in words."""
    row = verify_token(token)
    if row is None:
        raise Unauthenticated(TOKEN_REFUSED)
    return actor_for_token(row)


def trusted(actor: Actor | None, by: str | None) -> Actor:
    """The actor a service acts for: the one given, else a trusted command named ``by``."""
    return actor if actor is not None else command_actor(by or "command")


def require_workspace_rollback(actor: Actor) -> None:
    """Rolling back a workspace (docs/architecture.md#workspace-rollback) needs the restore
    permission on every app: a workspace belongs to no app (``Forbidden`` in words)."""
    if restores_everywhere(actor):
        return
    raise Forbidden(NO_WORKSPACE_ROLLBACK.format(who=actor.who))


def restores_everywhere(actor: Actor) -> bool:
    """Whether the actor may restore on every app (a global permission, not a role)."""
    return actor.token is None and RESTORE in actor.everywhere


def require_panel(actor: Actor) -> None:
    """A person must be able to view some app to use the panel at all (403 in words)."""
    if not actor.may(VIEW):
        raise Forbidden(NO_VIEW)


def app_for(slug: object, *, actor: Actor | None = None, action: str = VIEW) -> App:
    """The app ``slug`` as ``actor`` may reach it: ``NotFound`` when it does not exist (for this
    actor), ``Forbidden`` when the actor may not do ``action`` on it. One query for a slug,
    the token's scope included."""
    if isinstance(slug, App):
        app: App | None = slug
    elif isinstance(slug, str) and len(slug) <= 50:
        members = AppMembership.objects.filter(app_id=OuterRef("pk"))
        rows = (
            App.objects.select_related("release_set")
            .filter(slug=slug)
            .annotate(_has_members=Exists(members))
        )
        if actor is not None and actor.token is not None:
            scope = AgentToken.apps.through.objects.filter(
                agenttoken_id=actor.token.pk, app_id=OuterRef("pk")
            )
            rows = rows.annotate(in_scope=Exists(scope))
        app = rows.first()
        if app is not None and actor is not None and actor.token is not None:
            actor._scope[app.pk] = bool(app.in_scope)  # type: ignore[attr-defined]
    else:
        app = None
    if app is None:
        raise NotFound(APP_NOT_FOUND.format(slug=slug))
    if actor is not None:
        actor.check(action, app)
    return app


def set_for(set_id: object, *, actor: Actor | None = None, action: str = VIEW) -> ChangeSet:
    """The change set ``set_id`` (with its app) as ``actor`` may reach it, or ``NotFound`` /
    ``Forbidden`` in words."""
    found = (
        ChangeSet.objects.select_related("app").filter(id=set_id).first()
        if isinstance(set_id, str) and _SET_ID.match(set_id)
        else None
    )
    missing = NotFound(SET_NOT_FOUND.format(id=set_id))
    if found is None:
        raise missing
    if actor is not None:
        actor.check(action, found.app, missing=missing)
    return found


def point_for(point_id: object, *, actor: Actor | None = None, action: str = VIEW) -> RestorePoint:
    """The restore point ``point_id`` (with its app) as ``actor`` may reach it, or ``NotFound``
    / ``Forbidden`` in words."""
    found = (
        RestorePoint.objects.select_related("app", "artifact").filter(id=point_id).first()
        if isinstance(point_id, str) and _POINT_ID.match(point_id)
        else None
    )
    missing = NotFound(POINT_NOT_FOUND.format(id=point_id))
    if found is None:
        raise missing
    if actor is not None:
        actor.check(action, found.app, missing=missing)
    return found


ACTIVITY_NOT_FOUND = "There is no Activity page of app “{slug}” for you: only its owners read it."
INSTANCE_ACTIVITY_NOT_FOUND = "There is no page here."


def activity_scope(actor: Actor, slug: object = None) -> App | None:
    """Whose Activity ``actor`` may read: an app's (``slug``) for its owners and superusers,
    the whole instance's (no ``slug``: returns None) for superusers. Anyone else finds no such
    page (``NotFound``), as for an app they may not see."""
    if slug is None:
        if actor.token is not None or not getattr(actor.user, "is_superuser", False):
            raise NotFound(INSTANCE_ACTIVITY_NOT_FOUND)
        return None
    app = app_for(slug, actor=actor)
    if actor.token is not None or not actor.may(MANAGE, app):
        raise NotFound(ACTIVITY_NOT_FOUND.format(slug=app.slug))
    return app


def visible_app_ids(actor: Actor) -> QuerySet[App, int] | None:
    """The ids of the apps ``actor`` sees beyond its global permissions (a query of ids, which
    the apps list keeps as a subquery), or None: every app."""
    if actor.token is not None:
        return App.objects.filter(agent_tokens=actor.token).values_list("pk", flat=True)
    if VIEW in actor.everywhere:
        return None
    user = actor.user
    if user is None or not getattr(user, "is_active", False) or not user.pk:
        return App.objects.none().values_list("pk", flat=True)
    viewing = [role for role, actions in ROLE_ACTIONS.items() if VIEW in actions]
    members = AppMembership.objects.filter(
        Q(user_id=user.pk) | Q(group__in=user.groups.all()), role__in=viewing
    )
    return App.objects.filter(pk__in=members.values("app_id")).values_list("pk", flat=True)
