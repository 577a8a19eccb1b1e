"""Apps themselves: adding one and renaming it, for the admin and the demo loader.

Who may: adding an app needs the ``manage`` action on every app (a superuser; an app nobody is
a member of yet belongs to no owner), renaming one needs ``manage`` on it (its owners). A call
without an actor acts as a trusted command, as scripts and ``load_demo`` do.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from django.db import IntegrityError, transaction

from versions.errors import Conflict, Forbidden, InvalidInput
from versions.messages import EMAIL_NEEDS_A_PERSON, NO_NEW_APPS, WEBHOOK_ACTION_UNKNOWN
from versions.models import App
from versions.services.access import (
    Actor,
    app_for,
    command_actor,
)
from versions.services.audit import record
from versions.services.reviews import set_protection
from versions.services.validation import check_new_app_slug
from versions.services.webhooks import (
    change_webhook,
    create_webhook,
    delete_webhook,
    redeliver,
    set_email_events,
)
from versions.terms import (
    APP_SETTINGS_CHANGED,
    MANAGE,
    ROLE_FOR,
    VIEW,
)

SLUG_INVALID = "An app's slug is 1 to 50 lowercase letters, digits and hyphens (got “{slug}”)."
APP_NAME_INVALID = "An app's name is 1 to 200 characters."
APP_EXISTS = "There is already an app “{slug}”; nothing was created."
_SLUG = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")


def _checked_name(name: object) -> str:
    if not isinstance(name, str) or not name.strip() or len(name) > 200:
        raise InvalidInput(APP_NAME_INVALID, field="name")
    return name


def add_app(
    slug: object, name: object, *, actor: Actor | None = None, exist_ok: bool = False
) -> tuple[App, bool]:
    """Add the app ``slug`` named ``name``; returns (the app, whether it was made). With
    ``exist_ok`` an app of that slug is returned as it is, else it is a ``Conflict``."""
    if actor is not None and MANAGE not in actor.everywhere:
        raise Forbidden(NO_NEW_APPS.format(who=actor.who, role=ROLE_FOR[MANAGE]))
    if not isinstance(slug, str) or len(slug) > 50 or not _SLUG.match(slug):
        raise InvalidInput(SLUG_INVALID.format(slug=slug), field="slug")
    name = _checked_name(name)
    existing = App.objects.filter(slug=slug).first()
    if existing is not None:
        if exist_ok:
            return existing, False
        raise Conflict(APP_EXISTS.format(slug=slug))
    check_new_app_slug(slug)  # not one that looks like another app's
    try:
        with transaction.atomic():
            return App.objects.create(slug=slug, name=name), True
    except IntegrityError:  # added by another request meanwhile
        if exist_ok:
            return App.objects.get(slug=slug), False
        raise Conflict(APP_EXISTS.format(slug=slug)) from None


def rename_app(app: App | str, name: object, *, actor: Actor | None = None) -> App:
    """Give ``app`` a new display name (its slug, in every address, never changes)."""
    found = app_for(app, actor=actor, action=MANAGE)
    found.name = _checked_name(name)
    App.objects.filter(pk=found.pk).update(name=found.name)
    return found


@transaction.atomic
def set_require_preconditions(app: App | str, required: bool, *, actor: Actor | None = None) -> App:
    """Whether every artifact write through the agent API of ``app`` must carry a precondition
    (docs/api.md#require-preconditions); needs ``manage`` on it, recorded when it changes."""
    found = app_for(app, actor=actor, action=MANAGE)
    required = bool(required)
    # The row's value, not the instance's: a form may have set the instance already.
    stored = App.objects.filter(pk=found.pk).values_list("require_preconditions", flat=True)
    if stored.first() != required:
        found.require_preconditions = required
        App.objects.filter(pk=found.pk).update(require_preconditions=required)
        record(
            APP_SETTINGS_CHANGED,
            actor=actor,
            app=found,
            details={"require_preconditions": required},
        )
    return found


def change_app(
    app: App | str,
    *,
    name: object = None,
    require_preconditions: bool | None = None,
    protection: Mapping[str, Any] | None = None,
    webhook: Mapping[str, Any] | None = None,
    email_events: object = None,
    actor: Actor | None = None,
) -> App:
    """Change what an owner may change of ``app`` (its slug, in every address, never changes):
    its display name, whether agent writes must carry a precondition, and what promoting needs
    (``protection``: ``required_approvals``, ``block_on_changes_requested``, ``dismiss_stale``;
    a person's change only). ``None`` keeps a setting as it is.

    ``webhook`` adds, changes, deletes or re-delivers one of its webhooks
    (docs/architecture.md#notifications): ``{"add": {"url", "secret", "events"}}``,
    ``{"change": id, "url"?, "secret"?, "events"?, "active"?}``, ``{"delete": id}`` or
    ``{"redeliver": delivery id}``. ``email_events``: the events of the app the acting person
    hears of by email (a member's own choice: it needs only ``view``)."""
    owner_only = (name, require_preconditions, protection, webhook) != (None,) * 4
    with transaction.atomic():
        found = app_for(app, actor=actor, action=MANAGE if owner_only else VIEW)
        if name is not None:
            found = rename_app(found, name, actor=actor)
        if require_preconditions is not None:
            found = set_require_preconditions(found, require_preconditions, actor=actor)
        if protection is not None:
            if actor is None:
                actor = command_actor("change_app")
            set_protection(found, actor=actor, **protection)
        if webhook is not None:
            _change_webhooks(found, webhook, actor)
        if email_events is not None:
            if actor is None or actor.user is None:
                raise InvalidInput(EMAIL_NEEDS_A_PERSON, field="email_events")
            set_email_events(found, email_events, actor=actor)
        return found


def _change_webhooks(app: App, webhook: Mapping[str, Any], actor: Actor | None) -> None:
    """One webhook action of :func:`change_app` on ``app``; a webhook or delivery of another
    app is not found."""
    if "add" in webhook:
        fields = webhook["add"]
        create_webhook(
            app,
            url=fields.get("url"),
            secret=fields.get("secret"),
            events=fields.get("events"),
            actor=actor,
        )
    elif "change" in webhook:
        change_webhook(
            webhook["change"],
            app=app,
            url=webhook.get("url"),
            secret=webhook.get("secret"),
            events=webhook.get("events"),
            active=webhook.get("active"),
            actor=actor,
        )
    elif "delete" in webhook:
        delete_webhook(webhook["delete"], app=app, actor=actor)
    elif "redeliver" in webhook:
        redeliver(webhook["redeliver"], app=app, actor=actor)
    else:
        raise InvalidInput(WEBHOOK_ACTION_UNKNOWN, field="webhook")
