"""The agent API's request and response shapes (django-ninja schemas, in its OpenAPI document)."""

from __future__ import annotations

import functools
import re
import unicodedata
from datetime import UTC, datetime
from typing import Any, Literal

from ninja import Field, Schema
from ninja.schema import DjangoGetter
from pydantic import ConfigDict, field_validator, model_validator

from versions.models import COLLECTIONS
from versions.strict import refuse_unknown

PER_PAGE_DEFAULT = 50
PER_PAGE_MAX = 200
ID_MAX = 200
MESSAGE_MAX = 2000
NAME_MAX = 200
NOTE_MAX = 500
NEXT_CURSOR_DESCRIPTION = (
    "Pass it as cursor for the next page (also in the Link header, rel=next); null on the last."
)

# What the OpenAPI document states of each value: the same rules the services check and answer
# in words (400 with the field; 404 for an id or slug of the wrong form, which names nothing).
# A value the document allows is never refused for its form.
SHA256_PATTERN = r"^([0-9a-fA-F]{64})?$"
SHA256_DESCRIPTION = (
    'The sha256 you last read (hex, any case); "" means the artifact must not exist yet. '
    "Refused as a stale write (409, with current_sha256) when it is not the current one."
)
SLUG_PATTERN = r"^[a-z0-9-]{1,50}$"
SET_ID_PATTERN = r"^(cs_rp|rs)_[0-9a-z]{1,14}_[0-9a-z]{1,16}$"
# Revert this set takes back what a writer did: a restore set (rs_…) is undone by restoring it.
WRITER_SET_ID_PATTERN = r"^cs_rp_[0-9a-z]{1,14}_[0-9a-z]{1,16}$"
POINT_ID_PATTERN = r"^rp_[0-9a-z]{1,14}_[0-9a-z]{1,16}$"
COMMENT_ID_PATTERN = r"^cm_[0-9a-z]{1,14}_[0-9a-z]{8}$"
SCHEDULE_ID_PATTERN = r"^sp_[0-9a-z]{1,14}_[0-9a-z]{1,16}$"
DEPLOYMENT_ID_PATTERN = r"^dp_[0-9a-z]{1,14}_[0-9a-z]{1,16}$"
REF_BODY = r"(draft|production|release|(cs_rp|rs|rp|dp)_[0-9a-z]{1,14}_[0-9a-z]{1,16})"
REF_PATTERN = f"^{REF_BODY}$"
# What a promotion ships: a ref of a state, not the release mark.
PROMOTE_REF_PATTERN = r"^(draft|production|(cs_rp|rs|rp|dp)_[0-9a-z]{1,14}_[0-9a-z]{1,16})$"
COMPARE_PATTERN = f"^{REF_BODY}\\.\\.\\.{REF_BODY}$"
REF_MAX = 64
# An expected hash of a restore or promotion: hex, compared with the current sha256 (any case);
# "" for "absent", anything else simply is not the current hash (a finding: 409).
EXPECTED_SHA_PATTERN = r"^[0-9a-fA-F]{0,64}$"


def _escape(code: int) -> str:
    # BMP characters as \\uXXXX (ECMA-262 and Python read it alike); others as themselves.
    return f"\\u{code:04x}" if code <= 0xFFFF else chr(code)


@functools.cache
def _char_class(categories: tuple[str, ...], keep: str = "") -> str:
    """A regex character-class body matching every character of ``categories`` but ``keep``
    (computed once, from the same Unicode tables the services check with).

    Lone surrogates are left out: validators built on Rust's regex cannot compile them, and
    they are not UTF-8 text, so they only arrive escaped in JSON ("\\ud800"); the API refuses
    them in words (422 in ids, hashes and keys; 400 in source, message and names)."""
    parts = []
    start = None
    for code in range(0x110001):
        inside = (
            code <= 0x10FFFF
            and not 0xD800 <= code <= 0xDFFF
            and unicodedata.category(chr(code)) in categories
            and chr(code) not in keep
        )
        if inside and start is None:
            start = code
        elif not inside and start is not None:
            last = code - 1
            parts.append(_escape(start) if start == last else f"{_escape(start)}-{_escape(last)}")
            start = None
    return "".join(parts)


def text_pattern() -> str:
    """ids, tool names, requested_by: no control character and no lone surrogate."""
    return f"^[^{_char_class(('Cc', 'Cs'))}]*$"


def message_pattern() -> str:
    """A turn's message: newline and tab, no other control character, no lone surrogate."""
    return f"^[^{_char_class(('Cc', 'Cs'), keep=chr(10) + chr(9))}]*$"


def note_pattern() -> str:
    """A deployment note: white space of any kind (it is folded to single spaces), no other
    control character, no lone surrogate."""
    spaces = "".join(chr(c) for c in range(0xA0) if chr(c).isspace())
    return f"^[^{_char_class(('Cc', 'Cs'), keep=spaces)}]*$"


def source_pattern() -> str:
    """A source: any text but NUL and lone surrogates (no database stores them as text)."""
    return "^[^\\u0000]*$"


def _name_body() -> str:
    bad = "/" + _char_class(("Cc", "Cf", "Cs", "Zl", "Zp"))
    return f"[^{bad}]*[^{bad}\\s][^{bad}]*"


def name_pattern() -> str:
    """An artifact name (docs/architecture.md#write-path): not only spaces, no "/", no control or
    format character."""
    return f"^{_name_body()}$"


def expected_key_pattern() -> str:
    """A key of ``expected``: "collection/name", a known collection and a name (1-200)."""
    return f"^({'|'.join(COLLECTIONS)})/(?=[^/]{{1,{NAME_MAX}}}$){_name_body()}$"


def _rules(**rules: Any) -> Any:
    """``json_schema_extra`` stating ``rules`` (a callable value is computed when the document
    is generated, so the Unicode tables are read only by whoever asks for the document)."""

    def extra(schema: dict[str, Any]) -> None:
        target = schema
        for option in schema.get("anyOf", ()):  # an optional field: state it on the string
            if option.get("type") == "string":
                target = option
        target.update({k: v() if callable(v) else v for k, v in rules.items()})

    return extra


ID_RULES = _rules(maxLength=ID_MAX, pattern=text_pattern)
MESSAGE_RULES = _rules(maxLength=MESSAGE_MAX, pattern=message_pattern)
SHA256_RULES = _rules(pattern=SHA256_PATTERN)


def _expected_rules(schema: dict[str, Any]) -> None:
    """What ``expected`` maps: "collection/name" → the sha256 reviewed ("" for absent)."""
    rules = {
        "propertyNames": {"pattern": expected_key_pattern()},
        "additionalProperties": {"type": "string", "pattern": EXPECTED_SHA_PATTERN},
    }
    for option in schema.get("anyOf", ()):
        if option.get("type") == "object":
            option.update(rules)


# The path's parameters, stated in the document (see _VersionsApi); the services check them.
def path_parameter_rules() -> dict[str, dict[str, Any]]:
    """The schema of each path parameter by name."""
    return {
        "slug": {"type": "string", "pattern": SLUG_PATTERN, "maxLength": 50},
        "collection": {"type": "string", "enum": list(COLLECTIONS)},
        "name": {
            "type": "string",
            "minLength": 1,
            "maxLength": NAME_MAX,
            "pattern": name_pattern(),
        },
        "set_id": {"type": "string", "pattern": SET_ID_PATTERN},
        "point_id": {"type": "string", "pattern": POINT_ID_PATTERN},
        "comment_id": {"type": "string", "pattern": COMMENT_ID_PATTERN},
        "refs": {"type": "string", "pattern": COMPARE_PATTERN, "maxLength": 2 * REF_MAX + 3},
        "schedule_id": {"type": "string", "pattern": SCHEDULE_ID_PATTERN},
    }


MESSAGE_DESCRIPTION = (
    "What you were asked or did, like a commit message: at most 2,000 characters, no control "
    "characters but newline and tab. The change set keeps the first message its writes give."
)
SOURCE_DESCRIPTION = (
    "The whole new source text: no NUL and no unpaired surrogate (400, naming the position), "
    "at most VERSIONS_MAX_WRITE_BYTES bytes as UTF-8 (10 MiB unless the server sets it; 413 "
    "over it)."
)
EXPECTED_DESCRIPTION = (
    '"collection/name" → the sha256 you reviewed as "now" ("" for absent). A key that names '
    "no artifact of the restore is ignored; an artifact whose hash differs is a finding (409)."
)
NOTE_DESCRIPTION = "At most 500 characters; white space is folded to single spaces."
NOTE_RULES = _rules(pattern=note_pattern)
DRY_RUN_DESCRIPTION = "true: change nothing, answer what it would do (a JSON boolean)."
NOT_A_SHA256 = (
    'expected_sha256 must be a sha256 (64 hex digits, any case) or "" for "it must not exist yet".'
)
NOT_AN_OBJECT = "The body must be a JSON object ({...}); send {} for the defaults."
BAD_TEXT = "{field} must not contain NUL characters or unpaired surrogates."
BAD_FILTER = "{field} must not contain control characters: no id or principal has one."
NOT_A_DATE_TIME = "since is a date and time in ISO 8601, e.g. 2026-12-03T09:00:00Z."
LONG_FILTER = "{field} is at most {max} characters: no id or principal is longer."


def _sha256_form(value: str | None) -> str | None:
    """A write's expected_sha256 has the form the document states (a NUL, a lone surrogate or
    any other text is not a hash: 422, before any precondition is looked at)."""
    if value is not None and not re.fullmatch(SHA256_PATTERN[1:-1], value):
        raise ValueError(NOT_A_SHA256)
    return value


def _clean_text(value: str | None, field: str) -> str | None:
    """Refuse NUL and lone surrogates in ids and names: no database stores them as text."""
    if value is None:
        return None
    if "\x00" in value or any("\ud800" <= ch <= "\udfff" for ch in value):
        raise ValueError(BAD_TEXT.format(field=field))
    return value


class _JsonObject(Schema):
    """A request body: a JSON object. (django-ninja would read any other JSON value, such as
    ``[null]`` or ``5``, as an object of defaults.) Its document says it takes no other field
    (``additionalProperties: false``), as it refuses them (docs/api.md#strict-inputs)."""

    model_config = ConfigDict(extra="forbid")

    @model_validator(mode="before")
    @classmethod
    def _an_object(cls, data: Any) -> Any:
        # ninja hands the value over wrapped in its attribute getter.
        given = data._obj if isinstance(data, DjangoGetter) else data
        if not isinstance(given, dict):
            raise ValueError(NOT_AN_OBJECT)
        # Strict (docs/api.md#strict-inputs): UnknownField is no ValueError, so pydantic lets it
        # through to the error table (422 in words), before any field is looked at.
        refuse_unknown(given, known_fields(cls))
        return data


def known_fields(schema: type[Schema]) -> list[str]:
    """The names a request may give for ``schema``'s fields (their aliases where they have one)."""
    return [field.alias or name for name, field in schema.model_fields.items()]


class ErrorOut(Schema):
    """An RFC 9457 problem (``application/problem+json``) with the API's keys as extension
    members. A refused pre-flight (409 preflight_failed) also carries the receipt's keys at
    the top level: kind, restoredFromSet, written, findings, skipped."""

    type: str = Field("about:blank", description="The problem type (about:blank: see error).")
    title: str = Field(description="The status's phrase.")
    status: int = Field(description="The HTTP status.")
    detail: str = Field(description="What went wrong, in words (the same as message).")
    error: str = Field(description="A short machine-readable code, e.g. stale_write.")
    message: str = Field(description="What went wrong, in words.")
    current_sha256: str | None = Field(
        None, description="On stale_write and precondition_failed: the current hash."
    )
    field: str | None = Field(None, description="The field at fault, when one is.")
    suggestion: str | None = Field(
        None, description="On unknown_field: the known field it resembles, or null."
    )
    kind: str | None = Field(None, description="On preflight_failed: the receipt's kind.")
    restoredFromSet: str | None = Field(None, description="On preflight_failed.")
    written: int | None = Field(None, description="On preflight_failed: 0.")
    findings: list[dict[str, Any]] | None = Field(None, description="On preflight_failed.")
    skipped: list[dict[str, Any]] | None = Field(None, description="On preflight_failed.")
    details: list[dict[str, Any]] | None = None


class ArtifactRef(Schema):
    app: str
    collection: str
    name: str


class WriteReceiptOut(Schema):
    """The receipt of a write (docs/api.md#receipts)."""

    artifact: ArtifactRef
    previousSha256: str
    sha256: str
    restorePointId: str | None
    changeSetId: str | None
    linesAdded: int
    linesRemoved: int
    unchanged: bool


class ArtifactSummary(Schema):
    collection: str
    name: str
    sha256: str
    size: int
    deleted: bool
    updated_on: str
    updated_by: str


class ArtifactList(Schema):
    app: str
    artifacts: list[ArtifactSummary]
    next_cursor: str | None = Field(
        None,
        description=NEXT_CURSOR_DESCRIPTION + " (Without limit, every artifact: null.)",
    )


class ArtifactOut(ArtifactSummary):
    app: str
    source: str


ADDRESSES_DESCRIPTION = (
    "The comment threads (cm_…) of this app that the write answers, at most 20: they then read "
    "“addressed in rp_…” (a person resolves them). An id that is not a comment of this app is "
    "refused in words (422) and nothing is written."
)


def _addresses_rules(schema: dict[str, Any]) -> None:
    """Each id a comment's; at most 20 of them."""
    for option in schema.get("anyOf", ()):
        if option.get("type") == "array":
            option.update(
                {"maxItems": 20, "items": {"type": "string", "pattern": COMMENT_ID_PATTERN}}
            )


class _WhoFields(Schema):
    """What a write and a delete carry besides the source: the reviewed hash, who asked, with
    which tool, in which run and turn, and the turn's message."""

    expected_sha256: str | None = Field(
        None, description=SHA256_DESCRIPTION, json_schema_extra=SHA256_RULES
    )
    requested_by: str | None = Field(None, description="Who asked.", json_schema_extra=ID_RULES)
    tool: str | None = Field(None, description="Which tool writes.", json_schema_extra=ID_RULES)
    run_id: str | None = Field(None, json_schema_extra=ID_RULES)
    turn_id: str | None = Field(None, json_schema_extra=ID_RULES)
    message: str | None = Field(
        None, description=MESSAGE_DESCRIPTION, json_schema_extra=MESSAGE_RULES
    )
    addresses: list[str] | None = Field(
        None,
        description=ADDRESSES_DESCRIPTION,
        json_schema_extra=_addresses_rules,
    )

    @field_validator("expected_sha256", "requested_by", "tool", "run_id", "turn_id")
    @classmethod
    def _no_nul(cls, value: str | None, info: Any) -> str | None:
        return _clean_text(value, info.field_name)

    @field_validator("expected_sha256")
    @classmethod
    def _a_sha256(cls, value: str | None) -> str | None:
        return _sha256_form(value)


class WriteIn(_JsonObject, _WhoFields):
    """The body of a write. ``expected_sha256`` "" means "it must not exist yet"."""

    source: str = Field(
        description=SOURCE_DESCRIPTION, json_schema_extra=_rules(pattern=source_pattern)
    )


class DescribeIn(_JsonObject):
    """The body of PATCH /change-sets/{id}: the set's message."""

    message: str = Field(description=MESSAGE_DESCRIPTION, json_schema_extra=MESSAGE_RULES)


class ReplyIn(_JsonObject):
    """The body of POST /comments/{id}/replies: the agent's answer, in Markdown."""

    body: str = Field(
        description="Markdown, at most 10,000 characters; shown as the agent's.",
        min_length=1,
        json_schema_extra=_rules(maxLength=10_000, pattern=message_pattern),
    )


class DescribedOut(Schema):
    id: str
    app: str
    message: str


class DeleteQuery(_WhoFields):
    """The query of a delete."""


class ChangeSetSummary(Schema):
    id: str
    kind: str
    name: str
    message: str = Field(description="The turn's message (docs/api.md#turn-messages), or empty.")
    created_on: str
    created_by: str
    requested_by: list[str]
    tools: list[str]
    artifacts: int
    points: int
    lines_added: int
    lines_removed: int
    is_release: bool
    restored_from: str | None
    run_id: str
    turn_id: str
    pruned: list[dict[str, Any]] = Field(
        description=(
            "The set's points retention pruned ({artifactId, pointId}); with no point left "
            "(points 0) nothing of the set can be restored."
        )
    )


class ChangeSetPage(Schema):
    app: str
    page: int | None = Field(description="The page number; null for a keyset page.")
    per_page: int
    total: int
    next_page: int | None
    next_cursor: str | None = Field(description=NEXT_CURSOR_DESCRIPTION)
    items: list[ChangeSetSummary]


class PointOut(Schema):
    id: str
    kind: str
    artifact: ArtifactRef
    previous_sha256: str
    previous_existed: bool
    previous_size: int
    source_stored: bool
    new_sha256: str
    requested_by: str
    written_by: str = Field(
        description="Who really wrote it: user:<name>, token:<prefix>… of <user>, command:<name>."
    )
    tool: str
    created_on: str
    lines_added: int
    lines_removed: int
    run_id: str
    turn_id: str
    name: str


class HistoryPointOut(PointOut):
    change_set: str
    message: str = Field(description="The message of the point's change set.")


class ArtifactHistory(Schema):
    app: str
    collection: str
    name: str
    page: int | None = Field(description="The page number; null for a keyset page.")
    per_page: int
    total: int
    next_page: int | None
    next_cursor: str | None = Field(description=NEXT_CURSOR_DESCRIPTION)
    items: list[HistoryPointOut]


class PointDetail(PointOut):
    change_set: str
    previous_source: str | None = Field(
        description='The source before the write ("" when it did not exist; null when not kept).'
    )
    previous_source_reason: str | None = Field(description="Why previous_source is null, in words.")


class ArtifactAtOut(Schema):
    app: str
    at: str
    collection: str
    name: str
    sha256: str
    size: int
    source: str
    deleted: bool | None = None
    updated_on: str | None = None
    updated_by: str | None = None


class ChangeSetDetail(ChangeSetSummary):
    app: str
    restore_points: list[PointOut]
    receipt: dict[str, Any] | None
    restoredBy: str | None = Field(
        description="The newest restore set that restored this set (Restore all, Restore of "
        "one of its points, Restore to release), or null. Later writes of its run or turn "
        "start a new set."
    )
    revertedBy: str | None = Field(
        description="The newest restore set that reverted this set (Revert this set), or null. "
        "Later writes of its run or turn start a new set."
    )
    diff: dict[str, Any] | None = Field(
        None,
        description=(
            "With ?view=set (what the set did: before it → right after it) or ?view=now "
            "(before it → now): the view's line totals and, per artifact, its change and counts."
        ),
    )


class RestoreSetIn(_JsonObject):
    dry_run: bool = Field(False, strict=True, description=DRY_RUN_DESCRIPTION)
    expected: dict[str, str] | None = Field(
        None,
        description=EXPECTED_DESCRIPTION,
        json_schema_extra=_expected_rules,
    )

    @field_validator("expected")
    @classmethod
    def _no_nul(cls, value: dict[str, str] | None) -> dict[str, str] | None:
        for key, sha in (value or {}).items():
            _clean_text(key, "expected")
            _clean_text(sha, "expected")
        return value


class RestorePointIn(_JsonObject):
    dry_run: bool = Field(False, strict=True, description=DRY_RUN_DESCRIPTION)
    expected_sha256: str | None = Field(
        None,
        description='The artifact\'s sha256 you reviewed as "now" ("" for absent).',
        json_schema_extra=_rules(pattern=EXPECTED_SHA_PATTERN),
    )

    @field_validator("expected_sha256")
    @classmethod
    def _no_nul(cls, value: str | None) -> str | None:
        return _clean_text(value, "expected_sha256")


class RestoreReceiptOut(Schema):
    """A restore receipt (docs/api.md#receipts, docs/architecture.md#revert): kind restore, revert,
    noop or dry_run."""

    kind: str
    restoredFromSet: str
    setId: str | None = None
    items: list[dict[str, Any]] | None = None
    skipped: list[dict[str, Any]] | None = None
    findings: list[dict[str, Any]] | None = None
    written: int | None = None
    message: str | None = None
    created_by: str | None = None
    created_on: str | None = None
    scope: str | None = None
    revertedSet: str | None = Field(None, description="On a revert: the set taken back.")
    restoredPoint: str | None = Field(
        None, description="On a Restore of one point: the point restored to its state before."
    )
    laterChanges: list[dict[str, Any]] | None = Field(
        None,
        description="On a dry run: per artifact, the later change sets this would also undo.",
    )
    laterSets: list[dict[str, Any]] | None = Field(
        None, description="Those later sets once each: setId, kind, name, created_by, created_on."
    )


CURSOR_PATTERN = r"^[A-Za-z0-9_-]{1,500}$"
CURSOR_DESCRIPTION = (
    "The next_cursor of the answer before, unchanged: the page after it, in the list's keyset "
    "order (docs/api.md#cursors). Given, page (where a list takes it) is ignored."
)
LIMIT_DESCRIPTION = "How many items (a keyset page: the answer carries next_cursor)."


NOT_A_CURSOR = "cursor must be a next_cursor this API gave (letters, digits, - and _)."


class KeysetQuery(Schema):
    """A keyset page (docs/api.md#cursors): ``limit`` items after ``cursor``. Every list's
    query is this one, or extends it."""

    limit: int | None = Field(None, ge=1, le=PER_PAGE_MAX, description=LIMIT_DESCRIPTION)
    cursor: str | None = Field(
        None, description=CURSOR_DESCRIPTION, json_schema_extra=_rules(pattern=CURSOR_PATTERN)
    )

    @field_validator("cursor")
    @classmethod
    def _a_cursor(cls, value: str | None) -> str | None:
        if value is not None and not re.fullmatch(CURSOR_PATTERN[1:-1], value):
            raise ValueError(NOT_A_CURSOR)
        return value


class _CursorQuery(KeysetQuery):
    """Keyset cursors, or page numbers (docs/api.md#cursors)."""

    page: int = Field(1, ge=1, le=1_000_000)
    per_page: int = Field(PER_PAGE_DEFAULT, ge=1, le=PER_PAGE_MAX)


class PageQuery(_CursorQuery):
    """A page of change sets, filtered by run, turn, writer and time."""

    run_id: str | None = Field(
        None, description="Only this run's sets.", json_schema_extra=ID_RULES
    )
    turn_id: str | None = Field(
        None, description="Only this turn's sets.", json_schema_extra=ID_RULES
    )
    written_by: str | None = Field(
        None,
        description="Only sets with a point this principal wrote (as written_by says it).",
        json_schema_extra=ID_RULES,
    )
    since: datetime | None = Field(None, description="Only sets created at or after (ISO 8601).")

    @field_validator("run_id", "turn_id", "written_by")
    @classmethod
    def _no_nul(cls, value: str | None, info: Any) -> str | None:
        # As the document states (text_pattern): no control character either, so a filter
        # that could name nothing is refused rather than answered with an empty page.
        if value is not None and any(unicodedata.category(ch) == "Cc" for ch in value):
            raise ValueError(BAD_FILTER.format(field=info.field_name))
        if value is not None and len(value) > ID_MAX:
            raise ValueError(LONG_FILTER.format(field=info.field_name, max=ID_MAX))
        return _clean_text(value, info.field_name)

    @field_validator("since", mode="before")
    @classmethod
    def _a_date_time(cls, value: Any) -> Any:
        # ISO 8601 date and time, as the document's format says (pydantic alone would also
        # read a number of seconds, or a date without its time).
        if isinstance(value, str) and not re.match(r"\d{4}-\d\d-\d\d[Tt ]\d\d:\d\d", value):
            raise ValueError(NOT_A_DATE_TIME)
        return value

    @field_validator("since")
    @classmethod
    def _utc_unless_said(cls, value: datetime | None) -> datetime | None:
        # A time without an offset is UTC, as every time the API answers is; one with an offset
        # is read in UTC (a database may refuse offsets ISO 8601 allows, such as -19:36).
        if value is None:
            return None
        if value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        try:
            return value.astimezone(UTC)
        except OverflowError:
            raise ValueError("since is out of range: give a time from year 1 to 9999") from None


HISTORY_PER_PAGE_MAX = 200


class HistoryQuery(_CursorQuery):
    """A page of an artifact's history."""


class AtQuery(Schema):
    at: str | None = Field(
        None,
        json_schema_extra=_rules(pattern=REF_PATTERN, maxLength=REF_MAX),
        description=(
            "Read the source at a ref: draft (now), production (what production serves), release "
            "(right after the release set), dp_… (a deployment), cs_…/rs_… (right after that "
            "set), rp_… (just before that point)."
        ),
    )


ERRORS: dict[int, type[Schema]] = dict.fromkeys(
    (400, 401, 403, 404, 409, 412, 413, 422, 428), ErrorOut
)


class PromoteIn(_JsonObject):
    """Promote a state to production (docs/architecture.md#environments). ``ref``: draft (default),
    a set, a point or a deployment; ``expected``: "collection/name" → the sha256 you reviewed in the
    state ``ref`` names (a dry run's ``changed[].to``; for the draft, its current hashes)."""

    ref: str = Field(
        "draft", max_length=REF_MAX, json_schema_extra={"pattern": PROMOTE_REF_PATTERN}
    )
    note: str = Field(
        "", max_length=NOTE_MAX, description=NOTE_DESCRIPTION, json_schema_extra=NOTE_RULES
    )
    expected: dict[str, str] | None = Field(
        None, description=EXPECTED_DESCRIPTION, json_schema_extra=_expected_rules
    )
    dry_run: bool = Field(False, strict=True, description=DRY_RUN_DESCRIPTION)

    @field_validator("ref", "note")
    @classmethod
    def _no_nul(cls, value: str, info: Any) -> str:
        return _clean_text(value, info.field_name) or ""


class RollbackIn(_JsonObject):
    """Roll production back to an earlier deployment (``to``; default the one before)."""

    to: str | None = Field(
        None, max_length=REF_MAX, json_schema_extra=_rules(pattern=DEPLOYMENT_ID_PATTERN)
    )
    note: str = Field(
        "", max_length=NOTE_MAX, description=NOTE_DESCRIPTION, json_schema_extra=NOTE_RULES
    )

    @field_validator("to", "note")
    @classmethod
    def _no_nul(cls, value: str | None, info: Any) -> str | None:
        return _clean_text(value, info.field_name)


# Output shapes keep keys a newer server adds (a client reads what it knows).
_OPEN = ConfigDict(extra="allow")


class ArtifactsQuery(KeysetQuery):
    """The app's artifacts: all (no limit), or a keyset page by collection and name."""

    include_deleted: bool = Field(False, description="Tombstones too.")


class ReviewsQuery(KeysetQuery):
    """A page of an app's reviews, newest first."""

    verdict: Literal["approve", "request_changes", "comment"] | None = Field(
        None, description="Only reviews with this verdict."
    )


class DeploymentOut(Schema):
    model_config = _OPEN
    id: str
    ref: str = Field(description="The ref it was promoted from (draft, cs_…, rp_…, dp_…).")
    source_set: str | None
    artifacts: int
    created_by: str
    created_on: str
    note: str
    is_production: bool


class EventOut(Schema):
    """One promotion or rollback: who, when, note, from → to."""

    model_config = _OPEN

    kind: str
    from_: str | None = Field(alias="from")
    to: str | None
    by: str
    on: str
    note: str


class FreezeOut(Schema):
    """Whether production is frozen, and by whom, why and until when
    (docs/api.md#safe-promotion)."""

    model_config = _OPEN

    frozen: bool
    since: str | None = None
    until: str | None = None
    by: str | None = None
    reason: str | None = None
    message: str | None = None


class RolloutOut(Schema):
    """A running gradual rollout: its candidate, its share of visitors, and what the watch
    counted of the candidate's answers."""

    model_config = _OPEN

    candidate: str
    share: int
    requests: int
    errors: int


class DeploymentPage(Schema):
    """The app's production, its deployments newest first, and the history of production."""

    model_config = _OPEN

    app: str
    production: str | None = Field(description="The deployment production serves, or null.")
    deployments: list[DeploymentOut]
    history: list[EventOut] = Field(
        description="The newest promotions, rollbacks and rollout steps (50); the rest: "
        "history_next_cursor."
    )
    history_next_cursor: str | None = Field(
        None,
        description="Pass it as cursor to the history of production (GET "
        "/apps/{slug}/production/history, MCP production_history) for the events after "
        "these; null when there are no more.",
    )
    rollback_targets: list[str] = Field(
        default_factory=list,
        description="The deployments a rollback may go to: those production served, other "
        "than the one it serves (a rollout's candidate is not one).",
    )
    rollout: RolloutOut | None = Field(None, description="The running rollout, or null.")
    freeze: FreezeOut | None = None
    schedules: list[dict[str, Any]] = Field(
        default_factory=list, description="Scheduled promotions that have not run."
    )
    next_cursor: str | None = Field(None, description=NEXT_CURSOR_DESCRIPTION)


class ProductionHistoryPage(Schema):
    """A keyset page of the history of production, newest first."""

    model_config = _OPEN

    app: str
    next_cursor: str | None = Field(description=NEXT_CURSOR_DESCRIPTION)
    items: list[EventOut]


class ChangeOut(Schema):
    model_config = _OPEN
    name: str
    collection: str
    from_: str | None = Field(alias="from")
    to: str | None


class FindingOut(Schema):
    model_config = _OPEN
    name: str
    collection: str
    reason: str
    pointId: str | None = None


class PromotionReceiptOut(Schema):
    """A promotion's or rollback's receipt (docs/api.md#receipts): kind promotion, rollback,
    noop, dry_run or preflight_failed."""

    model_config = _OPEN

    kind: str
    message: str | None = None
    deploymentId: str | None = None
    ref: str | None = None
    previousDeployment: str | None = None
    changed: list[ChangeOut] | None = None
    unchanged: int | None = None
    findings: list[FindingOut] | None = None
    created_by: str | None = None
    created_on: str | None = None
    note: str | None = None


class CommentOut(Schema):
    model_config = _OPEN
    id: str
    author: str
    byAgent: bool
    body: str
    created_on: str


class ReplyOut(CommentOut):
    thread: str | None = Field(description="The thread's first comment.")


class AnchorOut(Schema):
    model_config = _OPEN
    collection: str | None
    name: str | None
    side: str
    sha256: str | None
    line: int | None
    text: str | None


class ThreadOut(Schema):
    model_config = _OPEN
    id: str
    anchor: AnchorOut
    resolved: bool
    outdated: bool
    addressedIn: str | None = Field(
        None, description="The restore point of the write that said it answers this thread."
    )
    comments: list[CommentOut]


class ReviewOut(Schema):
    model_config = _OPEN
    id: str
    author: str
    verdict: str
    body: str
    created_on: str
    points: list[str]
    stale: bool = Field(description="Later writes joined the set since this review.")


class SetReviewsOut(Schema):
    """A change set's review state, its reviews and its line comment threads."""

    model_config = _OPEN

    changeSetId: str
    status: str = Field(description="Of all the set's reviews, whatever the page.")
    reviews: list[ReviewOut]
    threads: list[ThreadOut]
    next_cursor: str | None = Field(
        None,
        description=NEXT_CURSOR_DESCRIPTION
        + " (A keyset page holds limit reviews and threads together, newest first; without "
        "limit or cursor, all of them oldest first and null.)",
    )


class AppReviewOut(ReviewOut):
    changeSetId: str


class ReviewPage(Schema):
    model_config = _OPEN
    app: str
    next_cursor: str | None = Field(description=NEXT_CURSOR_DESCRIPTION)
    items: list[AppReviewOut]


class DiffOut(Schema):
    model_config = _OPEN
    set_id: str
    view: str
    diff: str = Field(description="Unified diff text (diff -u).")


class CompareFileOut(Schema):
    model_config = _OPEN
    collection: str
    name: str
    change: str = Field(description="added, removed, changed or unknown (a side not known).")
    from_: str | None = Field(
        alias="from", description='The base sha256 ("" absent; null unknown).'
    )
    to: str | None = Field(description='The head sha256 ("" absent; null unknown).')
    lines_added: int | None
    lines_removed: int | None
    available: bool
    reason: str | None = Field(description="Why a side is not known, in words.")


class CompareOut(Schema):
    """What differs from one ref to another (docs/api.md#compare)."""

    model_config = _OPEN

    app: str
    base: str
    head: str
    base_label: str
    head_label: str
    files: list[CompareFileOut]
    total_files: int
    lines_added: int
    lines_removed: int


class CompareDiffOut(CompareOut):
    """A comparison over MCP: with ``diff`` = true, its unified diff text too."""

    diff: str | None = Field(None, description="Unified diff text, when asked for.")


class MeTokenOut(Schema):
    model_config = _OPEN
    prefix: str
    label: str
    created_on: str
    expires_on: str | None
    last_used_on: str | None
    can_promote: bool


class MeAppOut(Schema):
    model_config = _OPEN
    slug: str
    name: str
    may: list[str] = Field(
        description="What the token may do there: view, write, restore, promote."
    )


class MeOut(Schema):
    """Who the token is (docs/api.md#me)."""

    model_config = _OPEN

    user: str
    token: MeTokenOut
    apps: list[MeAppOut]
    app: str | None = Field(None, description="Over MCP: the app this session serves.")


REVIEW_VERDICTS = ("approve", "request_changes", "comment")
# --- safe promotion (docs/api.md#safe-promotion) ---------------------------------------------


class RolloutIn(_JsonObject):
    """A gradual rollout: ``{to}`` starts one (of ``ref``, default the draft) when none runs,
    else advances it; ``{action: complete|abort}`` ends it."""

    to: int | None = Field(None, strict=True, ge=1, le=99, description="Percent of visitors.")
    action: Literal["complete", "abort"] | None = None
    ref: str = Field("draft", max_length=REF_MAX, json_schema_extra={"pattern": REF_PATTERN})
    note: str = Field(
        "", max_length=NOTE_MAX, description=NOTE_DESCRIPTION, json_schema_extra=NOTE_RULES
    )

    @field_validator("ref", "note")
    @classmethod
    def _no_nul(cls, value: str, info: Any) -> str:
        return _clean_text(value, info.field_name) or ""


class FreezeIn(_JsonObject):
    """Freeze production: why (required), and when it ends by itself (optional)."""

    reason: str = Field(..., max_length=NOTE_MAX, json_schema_extra=NOTE_RULES)
    until: datetime | None = Field(None, description="ISO 8601 with its offset.")

    @field_validator("reason")
    @classmethod
    def _no_nul(cls, value: str, info: Any) -> str:
        return _clean_text(value, info.field_name) or ""


class ScheduleIn(_JsonObject):
    """Promote the state ``ref`` names, as it is now, at ``at`` (in the future)."""

    at: str = Field(..., max_length=64, description="ISO 8601 with its offset.")
    ref: str = Field("draft", max_length=REF_MAX, json_schema_extra={"pattern": REF_PATTERN})
    note: str = Field(
        "", max_length=NOTE_MAX, description=NOTE_DESCRIPTION, json_schema_extra=NOTE_RULES
    )

    @field_validator("at", "ref", "note")
    @classmethod
    def _no_nul(cls, value: str, info: Any) -> str:
        return _clean_text(value, info.field_name) or ""
