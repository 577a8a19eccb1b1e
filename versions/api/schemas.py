"""The agent API's request and response shapes (django-ninja schemas, in its OpenAPI document)."""

from __future__ import annotations

from typing import Any, Literal

from ninja import Field, Schema
from pydantic import field_validator

from versions.models import COLLECTIONS

PER_PAGE_DEFAULT = 50
PER_PAGE_MAX = 200
# What the OpenAPI document states of each value (the services check the same in words).
SHA256_PATTERN = r"^([0-9a-fA-F]{64})?$"
SHA256_DESCRIPTION = (
    'The sha256 you last read (hex, any case); "" means the artifact must not exist yet. '
    "Refused as a stale write (409, with current_sha256) when it is not the current one."
)
ID_MAX = 200
# Text no database stores (NUL, lone surrogates) or that is a control character: refused.
TEXT_PATTERN = "^[^\\u0000-\\u001f\\u007f-\\u009f]*$"
# A message may hold newlines and tabs, no other control character.
MESSAGE_PATTERN = "^[^\\u0000-\\u0008\\u000b-\\u001f\\u007f-\\u009f]*$"
MESSAGE_RULES: dict[str, Any] = {"maxLength": 2000, "pattern": MESSAGE_PATTERN}
# What a restore's ``expected`` maps: "collection/name" → a sha256 ("" for absent).
EXPECTED_RULES: dict[str, Any] = {
    "propertyNames": {"pattern": "^pltf_[a-z_]+/[^/]+$"},
    "additionalProperties": {"type": "string", "pattern": "^([0-9a-fA-F]{64})?$"},
}
ID_RULES: dict[str, Any] = {"maxLength": ID_MAX, "pattern": TEXT_PATTERN}
MESSAGE_MAX = 2000

# Rules given as json_schema_extra are stated in the OpenAPI document while the services check
# them and answer in words (400, with the field), as for every other write input.


MESSAGE_DESCRIPTION = (
    "What you were asked or did, like a commit message: at most 2,000 characters, no control "
    "characters but newline and tab. The change set keeps the first message its writes give."
)
Collection = Literal[COLLECTIONS]  # type: ignore[valid-type]
NAME_PATTERN = r"^[^/]{1,200}$"
REF_PATTERN = r"^(draft|production|(cs_rp|rs|rp|dp)_[0-9a-z]{1,14}_[0-9a-z]{1,16})$"
SET_ID_PATTERN = r"^(cs_rp|rs)_[0-9a-z]{1,14}_[0-9a-z]{1,16}$"
POINT_ID_PATTERN = r"^rp_[0-9a-z]{1,14}_[0-9a-z]{1,16}$"
SLUG_PATTERN = r"^[a-z0-9-]{1,50}$"
BAD_TEXT = "{field} must not contain NUL characters or unpaired surrogates."


def _clean_text(value: str | None, field: str) -> str | None:
    """Refuse NUL and lone surrogates in ids and names: no database stores them as text."""
    if value is None:
        return None
    if "\x00" in value or any("\ud800" <= ch <= "\udfff" for ch in value):
        raise ValueError(BAD_TEXT.format(field=field))
    return value


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
    field: str | None = None
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
    """The receipt of a write (SPEC §3)."""

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


class ArtifactOut(ArtifactSummary):
    app: str
    source: str


class WriteIn(Schema):
    """The body of a write. ``expected_sha256`` "" means "it must not exist yet"."""

    source: str = Field(description="The whole new source text (UTF-8, no NUL).")
    expected_sha256: str | None = Field(
        None, description=SHA256_DESCRIPTION, json_schema_extra={"pattern": SHA256_PATTERN}
    )
    requested_by: str | None = Field(None, description="Who asked.", json_schema_extra=ID_RULES)
    tool: str | None = Field(None, description="Which tool writes.", json_schema_extra=ID_RULES)
    run_id: str | None = Field(None, json_schema_extra=ID_RULES)
    turn_id: str | None = Field(None, json_schema_extra=ID_RULES)
    message: str | None = Field(
        None, description=MESSAGE_DESCRIPTION, json_schema_extra=MESSAGE_RULES
    )

    @field_validator("expected_sha256", "requested_by", "tool", "run_id", "turn_id")
    @classmethod
    def _no_nul(cls, value: str | None, info: Any) -> str | None:
        return _clean_text(value, info.field_name)


class DescribeIn(Schema):
    """The body of PATCH /change-sets/{id}: the set's message."""

    message: str = Field(description=MESSAGE_DESCRIPTION, json_schema_extra=MESSAGE_RULES)


class DescribedOut(Schema):
    id: str
    app: str
    message: str


class DeleteQuery(Schema):
    expected_sha256: str | None = Field(
        None, description=SHA256_DESCRIPTION, json_schema_extra={"pattern": SHA256_PATTERN}
    )
    requested_by: str | None = Field(None, json_schema_extra=ID_RULES)
    tool: str | None = Field(None, json_schema_extra=ID_RULES)
    run_id: str | None = Field(None, json_schema_extra=ID_RULES)
    turn_id: str | None = Field(None, json_schema_extra=ID_RULES)
    message: str | None = Field(
        None, description=MESSAGE_DESCRIPTION, json_schema_extra=MESSAGE_RULES
    )

    @field_validator("expected_sha256", "requested_by", "tool", "run_id", "turn_id")
    @classmethod
    def _no_nul(cls, value: str | None, info: Any) -> str | None:
        return _clean_text(value, info.field_name)


class ChangeSetSummary(Schema):
    id: str
    kind: str
    name: str
    message: str = Field(description="The turn's message (SPEC §15), or empty.")
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


class ChangeSetPage(Schema):
    app: str
    page: int
    per_page: int
    total: int
    next_page: int | None
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
    page: int
    per_page: int
    total: int
    next_page: int | None
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
    pruned: list[dict[str, Any]]
    receipt: dict[str, Any] | None
    diff: dict[str, Any] | None = Field(
        None,
        description=(
            "With ?view=set (what the set did: before it → right after it) or ?view=now "
            "(before it → now): the view's line totals and, per artifact, its change and counts."
        ),
    )


class RestoreSetIn(Schema):
    dry_run: bool = False
    expected: dict[str, str] | None = Field(
        None,
        description='"collection/name" → the sha256 you reviewed as "now".',
        json_schema_extra=EXPECTED_RULES,
    )

    @field_validator("expected")
    @classmethod
    def _no_nul(cls, value: dict[str, str] | None) -> dict[str, str] | None:
        for key, sha in (value or {}).items():
            _clean_text(key, "expected")
            _clean_text(sha, "expected")
        return value


class RestorePointIn(Schema):
    dry_run: bool = False
    expected_sha256: str | None = Field(
        None, description='The artifact\'s sha256 you reviewed as "now".'
    )

    @field_validator("expected_sha256")
    @classmethod
    def _no_nul(cls, value: str | None) -> str | None:
        return _clean_text(value, "expected_sha256")


class RestoreReceiptOut(Schema):
    """A restore receipt (SPEC §4, §14): kind restore, revert, noop or dry_run."""

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
    laterChanges: list[dict[str, Any]] | None = Field(
        None,
        description="On a dry run: per artifact, the later change sets this would also undo.",
    )
    laterSets: list[dict[str, Any]] | None = Field(
        None, description="Those later sets once each: setId, kind, name, created_by, created_on."
    )


class PageQuery(Schema):
    page: int = Field(1, ge=1, le=1_000_000)
    per_page: int = Field(PER_PAGE_DEFAULT, ge=1, le=PER_PAGE_MAX)


HISTORY_PER_PAGE_MAX = 200


class HistoryQuery(Schema):
    page: int = Field(1, ge=1, le=1_000_000)
    per_page: int = Field(PER_PAGE_DEFAULT, ge=1, le=HISTORY_PER_PAGE_MAX)


class AtQuery(Schema):
    at: str | None = Field(
        None,
        json_schema_extra={"pattern": REF_PATTERN},
        description=(
            "Read the source at a ref: draft (now), cs_…/rs_… (right after that set), rp_… "
            "(just before that point). production and dp_… need environments (404 for now)."
        ),
    )


ERRORS: dict[int, type[Schema]] = dict.fromkeys((400, 401, 403, 404, 409, 412, 413, 422), ErrorOut)


class PromoteIn(Schema):
    """Promote a state to production (SPEC §13). ``ref``: draft (default), a set, a point or a
    deployment; ``expected``: "collection/name" → the sha256 you reviewed in the draft."""

    ref: str = Field("draft", max_length=64)
    note: str = Field("", max_length=500)
    expected: dict[str, str] | None = Field(None, json_schema_extra=EXPECTED_RULES)
    dry_run: bool = False

    @field_validator("ref", "note")
    @classmethod
    def _no_nul(cls, value: str, info: Any) -> str:
        return _clean_text(value, info.field_name) or ""


class RollbackIn(Schema):
    """Roll production back to an earlier deployment (``to``; default the one before)."""

    to: str | None = Field(
        None, max_length=64, json_schema_extra={"pattern": "^dp_[0-9a-z]{1,14}_[0-9a-z]{1,16}$"}
    )
    note: str = Field("", max_length=500)

    @field_validator("to", "note")
    @classmethod
    def _no_nul(cls, value: str | None, info: Any) -> str | None:
        return _clean_text(value, info.field_name)
