"""What an agent says and edits (docs/api.md#turn-messages): a change set's message, and a partial
edit of one artifact (replace one exact, unique piece of text), captured like any write."""

from __future__ import annotations

from dataclasses import dataclass

from versions.errors import InvalidInput, NotFound
from versions.messages import (
    ARTIFACT_NOT_FOUND,
    EDIT_OLD_TEXT_EMPTY,
    EDIT_OLD_TEXT_MISSING,
    EDIT_OLD_TEXT_NOT_UNIQUE,
)
from versions.models import Artifact, ChangeSet
from versions.services.access import (
    Actor,
    app_for,
    set_for,
)
from versions.services.capture import (
    WriteReceipt,
    check_expected,
    write_artifact,
)
from versions.services.validation import validate_collection, validate_message, validate_name
from versions.terms import (
    WRITE,
)

EDIT_NOT_TEXT = "{field} must be text. Nothing was written."


@dataclass(frozen=True)
class DescribedSet:
    """A change set after its message was set."""

    id: str
    app: str
    message: str

    def as_dict(self) -> dict[str, str]:
        return {"id": self.id, "app": self.app, "message": self.message}


def describe_change_set(
    set_id: str, message: str, *, actor: Actor | None = None, app: object = None
) -> DescribedSet:
    """Set change set ``set_id``'s message (what the agent was asked or did; at most 2,000
    characters, "" clears it). ``actor`` must may write to the set's app; ``app``, when given,
    is the app the caller addressed (a set of another app is not found)."""
    text = validate_message(message)
    change_set = set_for(set_id, actor=actor, action=WRITE)
    if app is not None and getattr(app, "pk", None) != change_set.app_id:
        raise NotFound(f"There is no change set “{set_id}”.")
    ChangeSet.objects.filter(pk=change_set.pk).update(message=text)
    return DescribedSet(change_set.id, change_set.app.slug, text)


def _replace_once(source: str, old_text: str, new_text: str, collection: str, name: str) -> str:
    """``source`` with its one occurrence of ``old_text`` replaced, or InvalidInput in words."""
    count = source.count(old_text)
    if count == 0:
        raise InvalidInput(
            EDIT_OLD_TEXT_MISSING.format(collection=collection, name=name), field="old_text"
        )
    if count > 1:
        raise InvalidInput(
            EDIT_OLD_TEXT_NOT_UNIQUE.format(count=count, collection=collection, name=name),
            field="old_text",
        )
    return source.replace(old_text, new_text, 1)


def edit_artifact(
    app: object,
    collection: str,
    name: str,
    old_text: str,
    new_text: str,
    *,
    tool: str,
    requested_by: str | None = None,
    run_id: str | None = None,
    turn_id: str | None = None,
    expected_sha256: str | None = None,
    message: str | None = None,
    actor: Actor | None = None,
    addresses: list[str] | None = None,
) -> WriteReceipt:
    """Replace the one exact occurrence of ``old_text`` in an artifact with ``new_text``.

    Captured like any write (a restore point first), with the hash of the source the edit was
    made on as its expected sha256: if the artifact changed in between, the write is refused
    as stale. ``expected_sha256``, when given, must be that hash too. Refused in words when
    ``old_text`` is empty, missing or not unique; nothing is written then.
    """
    validate_collection(collection)
    name = validate_name(name)
    for field, value in (("old_text", old_text), ("new_text", new_text)):
        if not isinstance(value, str):
            raise InvalidInput(EDIT_NOT_TEXT.format(field=field), field=field)
    if old_text == "":
        raise InvalidInput(EDIT_OLD_TEXT_EMPTY, field="old_text")
    validate_message(message)
    app_obj = app_for(app, actor=actor, action=WRITE)
    artifact = (
        Artifact.objects.select_related("blob")
        .filter(app=app_obj, collection=collection, name=name, deleted=False)
        .first()
    )
    if artifact is None:
        raise NotFound(
            ARTIFACT_NOT_FOUND.format(collection=collection, name=name, app=app_obj.slug)
        )
    # The caller's hash must be the one the edit is made on; the capture then refuses the
    # write if the artifact changed since this read, so no other write is lost.
    check_expected(artifact, name, expected_sha256)
    new_source = _replace_once(artifact.source, old_text, new_text, collection, name)
    return write_artifact(
        app_obj,
        collection,
        name,
        new_source,
        requested_by=requested_by,
        tool=tool,
        run_id=run_id,
        turn_id=turn_id,
        expected_sha256=artifact.sha256,
        message=message,
        actor=actor,
        addresses=addresses,
    )
