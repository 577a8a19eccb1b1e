"""The agent API's request and response shapes (django-ninja schemas, in its OpenAPI document)."""

from __future__ import annotations

from typing import Any

from ninja import Field, Schema
from pydantic import field_validator

PER_PAGE_DEFAULT = 50
PER_PAGE_MAX = 200
BAD_TEXT = "{field} must not contain NUL characters or unpaired surrogates."


def _clean_text(value: str | None, field: str) -> str | None:
    """Refuse NUL and lone surrogates in ids and names: no database stores them as text."""
    if value is None:
        return None
    if "\x00" in value or any("\ud800" <= ch <= "\udfff" for ch in value):
        raise ValueError(BAD_TEXT.format(field=field))
    return value


class ErrorOut(Schema):
    error: str = Field(description="A short machine-readable code, e.g. stale_write.")
    message: str = Field(description="What went wrong, in words.")
    current_sha256: str | None = Field(None, description="On stale_write: the current hash.")
    field: str | None = None
    receipt: dict[str, Any] | None = Field(None, description="On preflight_failed.")
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

    source: str
    expected_sha256: str | None = None
    requested_by: str | None = None
    tool: str | None = None
    run_id: str | None = None
    turn_id: str | None = None

    @field_validator("expected_sha256", "requested_by", "tool", "run_id", "turn_id")
    @classmethod
    def _no_nul(cls, value: str | None, info: Any) -> str | None:
        return _clean_text(value, info.field_name)


class DeleteQuery(Schema):
    expected_sha256: str | None = None
    requested_by: str | None = None
    tool: str | None = None
    run_id: str | None = None
    turn_id: str | None = None

    @field_validator("expected_sha256", "requested_by", "tool", "run_id", "turn_id")
    @classmethod
    def _no_nul(cls, value: str | None, info: Any) -> str | None:
        return _clean_text(value, info.field_name)


class ChangeSetSummary(Schema):
    id: str
    kind: str
    name: str
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
    tool: str
    created_on: str
    lines_added: int
    lines_removed: int
    run_id: str
    turn_id: str
    name: str


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
        None, description='"collection/name" → the sha256 you reviewed as "now".'
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


ERRORS: dict[int, type[Schema]] = dict.fromkeys((400, 401, 403, 404, 409, 412, 413, 422), ErrorOut)
