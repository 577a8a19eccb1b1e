"""Checks of a write's input, with their messages as constants (docs/architecture.md#write-path,
step 1)."""

from __future__ import annotations

import json
import threading
import unicodedata

import icu

from versions import conf
from versions.errors import InvalidInput, TooLarge
from versions.messages import (
    MESSAGE_HAS_CONTROL,
    MESSAGE_TOO_LONG,
    NAME_EDGE_SPACES,
    SLUG_LOOKS_LIKE,
    SOURCE_TOO_LARGE,
)
from versions.models import COLLECTIONS, App

UNKNOWN_COLLECTION = "Unknown collection “{collection}”. Use one of: {choices}."
NAME_EMPTY = "The artifact name is empty. Give it a name such as “index”."
NAME_BLANK = (
    "The artifact name is only spaces (got {name}): give it a name people can see, such as “index”."
)
NAME_HAS_SLASH = "Artifact names cannot contain “/” (got “{name}”)."
NAME_HAS_CONTROL = "Artifact names cannot contain control characters (found {char} at {pos})."
NAME_TOO_LONG = "Artifact names are at most 200 characters; this one has {length}."
SOURCE_NOT_TEXT = "The source must be text, not {kind}. Nothing was written."
SOURCE_NOT_UTF8 = "The source is not valid UTF-8 text ({detail}). Nothing was written."
SOURCE_HAS_NUL = (
    "The source contains a NUL character at position {pos}; sources are text, "
    "so nothing was written."
)
MESSAGE_MAX_CHARS = 2000
MESSAGE_NOT_TEXT = "The message must be text. Nothing was written."
ID_TOO_LONG = "{field} is at most 200 characters."
ID_HAS_CONTROL = "{field} cannot contain control characters or broken text (found {char})."


def validate_collection(collection: object) -> str:
    if not isinstance(collection, str) or collection not in COLLECTIONS:
        raise InvalidInput(
            UNKNOWN_COLLECTION.format(collection=collection, choices=", ".join(COLLECTIONS)),
            field="collection",
        )
    return collection


def validate_name(name: object) -> str:
    """The artifact name as stored: in Unicode's composed form (NFC), so that one name typed
    two ways is one artifact; or an InvalidInput saying what is wrong with it. A new name is
    held to more (:func:`check_new_name`)."""
    if not isinstance(name, str) or name == "":
        raise InvalidInput(NAME_EMPTY, field="name")
    if not name.strip():
        raise InvalidInput(NAME_BLANK.format(name=json.dumps(name)), field="name")
    if not name.isascii():
        name = unicodedata.normalize("NFC", name)
    if len(name) > 200:
        raise InvalidInput(NAME_TOO_LONG.format(length=len(name)), field="name")
    if "/" in name:
        raise InvalidInput(NAME_HAS_SLASH.format(name=name), field="name")
    if name.isprintable():  # no Cc, Cf, Cs, Zl, Zp: nothing to look for character by character
        return name
    for pos, char in enumerate(name):
        if unicodedata.category(char) in ("Cc", "Cf", "Cs", "Zl", "Zp"):
            raise InvalidInput(
                NAME_HAS_CONTROL.format(char=f"U+{ord(char):04X}", pos=pos + 1), field="name"
            )
    return name


_spoof = threading.local()


def name_skeleton(name: str) -> str:
    """What ``name`` looks like: the confusable skeleton of Unicode TS #39 (ICU's, so its data
    follows ICU's Unicode version) of the name's compatibility form, NFKC, which makes
    full-width letters plain ones. Two names with one skeleton look alike to people."""
    checker = getattr(_spoof, "checker", None)
    if checker is None:  # one per thread: cheap to make, and nothing shared between threads
        checker = _spoof.checker = icu.SpoofChecker()
    return str(checker.getSkeleton(0, unicodedata.normalize("NFKC", name)))


def check_new_name(name: str) -> str:
    """A new artifact's name, already through :func:`validate_name`: refused (InvalidInput)
    with spaces around it; else its skeleton. Older artifacts named so keep their names."""
    if name != name.strip():
        raise InvalidInput(NAME_EDGE_SPACES.format(name=name, stripped=name.strip()), field="name")
    return name_skeleton(name)


def check_new_app_slug(slug: str) -> None:
    """Refuse (InvalidInput) a new app's slug that looks like an existing app's."""
    skeleton = name_skeleton(slug)
    # Apps are made by hand and seldom: their slugs are read, not indexed by look.
    for existing in App.objects.exclude(slug=slug).values_list("slug", flat=True).iterator():
        if name_skeleton(existing) == skeleton:
            raise InvalidInput(SLUG_LOOKS_LIKE.format(slug=slug, existing=existing), field="slug")


def encode_source(source: object) -> bytes:
    """The UTF-8 bytes of a valid source, or an InvalidInput saying what is wrong."""
    if not isinstance(source, str):
        raise InvalidInput(SOURCE_NOT_TEXT.format(kind=type(source).__name__), field="source")
    limit = conf.max_write_bytes()
    # Four bytes per character at most: a cheap refusal before encoding a huge string.
    if len(source) > limit:
        raise TooLarge(
            SOURCE_TOO_LARGE.format(size=len(source.encode("utf-8", "replace")), limit=limit),
            field="source",
        )
    nul = source.find("\x00")
    if nul != -1:
        raise InvalidInput(SOURCE_HAS_NUL.format(pos=nul), field="source")
    try:
        raw = source.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidInput(SOURCE_NOT_UTF8.format(detail=exc.reason), field="source")
    if len(raw) > limit:
        raise TooLarge(SOURCE_TOO_LARGE.format(size=len(raw), limit=limit), field="source")
    return raw


def validate_optional_id(value: object, field: str) -> str:
    """run_id / turn_id / requested_by / tool: optional short text."""
    if value is None:
        return ""
    if not isinstance(value, str):
        raise InvalidInput(f"{field} must be text.", field=field)
    if len(value) > 200:
        raise InvalidInput(ID_TOO_LONG.format(field=field), field=field)
    if value.isprintable():  # no Cc, Cs: nothing to look for character by character
        return value
    for char in value:
        if unicodedata.category(char) in ("Cc", "Cs"):
            raise InvalidInput(
                ID_HAS_CONTROL.format(field=field, char=f"U+{ord(char):04X}"), field=field
            )
    return value


def validate_message(value: object) -> str:
    """A turn's message (docs/api.md#turn-messages): text of at most 2,000 characters, with no
    control characters but newline and tab; "" when none is given."""
    if value is None:
        return ""
    if not isinstance(value, str):
        raise InvalidInput(MESSAGE_NOT_TEXT, field="message")
    if len(value) > MESSAGE_MAX_CHARS:
        raise InvalidInput(
            MESSAGE_TOO_LONG.format(length=len(value), limit=MESSAGE_MAX_CHARS), field="message"
        )
    for pos, char in enumerate(value):
        if char not in "\n\t" and unicodedata.category(char) in ("Cc", "Cs"):
            raise InvalidInput(
                MESSAGE_HAS_CONTROL.format(char=f"U+{ord(char):04X}", pos=pos + 1),
                field="message",
            )
    return value


NOTE_NOT_TEXT = "A note must be text."
NOTE_TOO_LONG = "A note is at most 500 characters."
NOTE_HAS_CONTROL = "A note cannot contain control characters."


def clean_note(note: object) -> str:
    """A note or reason (at most 500 characters, spaces folded, no control characters), or
    ``InvalidInput`` in words."""
    if note is None:
        return ""
    if not isinstance(note, str):
        raise InvalidInput(NOTE_NOT_TEXT, field="note")
    note = " ".join(note.split())
    if any(unicodedata.category(char) in ("Cc", "Cs") for char in note):
        raise InvalidInput(NOTE_HAS_CONTROL, field="note")
    if len(note) > 500:
        raise InvalidInput(NOTE_TOO_LONG, field="note")
    return note
