"""Read, validate and write changes logs: the JSON a worker keeps while it changes a workspace.

The format is the rollback seed's: required `phase`, `timestamp`, `files_modified` ({path,
backup} objects), `files_created`, `commands_executed`, `git_commits`; optional `artifacts`,
`plan_files`, `metadata`. Validation is strict about types so the engine never guesses.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import lru_cache
from pathlib import Path
from typing import Any

# A worker's log lists files, not file contents; anything this big is a mistake or an attack,
# and reading it whole into memory should not be the way we find out.
MAX_LOG_BYTES = 5 * 1024 * 1024
MAX_ENTRIES = 10_000

REQUIRED_FIELDS = (
    "phase",
    "timestamp",
    "files_modified",
    "files_created",
    "commands_executed",
    "git_commits",
)
OPTIONAL_FIELDS = ("artifacts", "plan_files", "metadata")

# The seed's messages, verbatim.
LOG_NOT_FOUND = "Changes log not found at {path}"
INVALID_JSON = "Invalid JSON in changes log: {details}"
MISSING_FIELD = "Changes log missing required field: {field}"
# Ours, in the same voice.
WRONG_TYPE = "Changes log field {field} must be {expected}"
LOG_TOO_LARGE = "Changes log too large: {size} bytes (limit {limit} bytes)"
TOO_MANY_ENTRIES = "Changes log field {field} has too many entries: {count} (limit {limit})"
LOG_UNREADABLE = "Cannot read changes log at {path}: {details}"
# A warning, not a refusal: a rollback does not need the log's timestamp
# (docs/architecture.md#workspace-rollback).
TIMESTAMP_NOT_ISO = "Changes log timestamp is not ISO-8601: {value} (ignored)"


class ChangesLogError(ValueError):
    """The changes log cannot be used: missing, unreadable, not JSON or not the seed's shape."""


@dataclass(frozen=True)
class ModifiedFile:
    """One `files_modified` entry: a workspace file and the backup holding its old content."""

    path: str
    backup: str


@dataclass
class ChangesLog:
    """A validated changes log; `to_dict()` gives back the seed's JSON shape."""

    phase: str
    timestamp: str
    files_modified: list[ModifiedFile] = field(default_factory=list)
    files_created: list[str] = field(default_factory=list)
    commands_executed: list[str] = field(default_factory=list)
    git_commits: list[str] = field(default_factory=list)
    artifacts: list[str] = field(default_factory=list)
    plan_files: list[str] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)
    # What was odd but harmless when the log was read (never written back to the log).
    warnings: list[str] = field(default_factory=list)

    @classmethod
    def new(cls, phase: str) -> ChangesLog:
        """An empty log for `phase`, stamped now."""
        return cls(phase=phase, timestamp=utc_timestamp())

    def to_dict(self) -> dict[str, Any]:
        """The log as JSON-ready data, optional fields included only when they say something."""
        data: dict[str, Any] = {
            "phase": self.phase,
            "timestamp": self.timestamp,
            "files_modified": [{"path": m.path, "backup": m.backup} for m in self.files_modified],
            "files_created": list(self.files_created),
            "commands_executed": list(self.commands_executed),
            "git_commits": list(self.git_commits),
        }
        if self.artifacts:
            data["artifacts"] = list(self.artifacts)
        if self.plan_files:
            data["plan_files"] = list(self.plan_files)
        if self.metadata:
            data["metadata"] = dict(self.metadata)
        return data


def utc_timestamp(moment: datetime | None = None) -> str:
    """ISO-8601 UTC with a `Z`, to the second, as in the seed's examples."""
    moment = moment or datetime.now(UTC)
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def load_changes_log(path: str | os.PathLike[str]) -> ChangesLog:
    """Read and validate the log at `path`; raise ChangesLogError with the seed's message."""
    shown = os.fspath(path)
    try:
        size = os.stat(path).st_size
    except FileNotFoundError:
        raise ChangesLogError(LOG_NOT_FOUND.format(path=shown))
    except OSError as exc:
        raise ChangesLogError(LOG_UNREADABLE.format(path=shown, details=exc.strerror or exc))
    if not Path(path).is_file():
        raise ChangesLogError(LOG_NOT_FOUND.format(path=shown))
    if size > MAX_LOG_BYTES:
        raise ChangesLogError(LOG_TOO_LARGE.format(size=size, limit=MAX_LOG_BYTES))
    try:
        with open(path, "rb") as handle:
            # Read one byte past the limit: the file may have grown since stat().
            raw = handle.read(MAX_LOG_BYTES + 1)
    except OSError as exc:
        raise ChangesLogError(LOG_UNREADABLE.format(path=shown, details=exc.strerror or exc))
    if len(raw) > MAX_LOG_BYTES:
        raise ChangesLogError(LOG_TOO_LARGE.format(size=len(raw), limit=MAX_LOG_BYTES))
    return parse_changes_log(raw)


def parse_changes_log(raw: bytes | str) -> ChangesLog:
    """Parse JSON text into a validated ChangesLog."""
    try:
        text = raw.decode("utf-8") if isinstance(raw, bytes) else raw
    except UnicodeDecodeError as exc:
        raise ChangesLogError(INVALID_JSON.format(details=f"not UTF-8 ({exc.reason})"))
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ChangesLogError(INVALID_JSON.format(details=str(exc)))
    except RecursionError:
        raise ChangesLogError(INVALID_JSON.format(details="nested too deeply"))
    if not isinstance(data, dict):
        raise ChangesLogError(INVALID_JSON.format(details="top level must be an object"))
    return validate_changes_log(data)


def validate_changes_log(data: dict[str, Any]) -> ChangesLog:
    """Check the seed's required and optional fields and their types."""
    for name in REQUIRED_FIELDS:
        if name not in data:
            raise ChangesLogError(MISSING_FIELD.format(field=name))
    phase = _string(data, "phase")
    warnings = []
    raw_timestamp = data["timestamp"]
    timestamp = raw_timestamp if isinstance(raw_timestamp, str) else json.dumps(raw_timestamp)
    if not isinstance(raw_timestamp, str) or not _is_iso8601(raw_timestamp):
        shown = json.dumps(raw_timestamp, ensure_ascii=False)
        warnings.append(TIMESTAMP_NOT_ISO.format(value=shown[:100]))
    files_modified = []
    for index, entry in enumerate(_array(data, "files_modified")):
        where = f"files_modified[{index}]"
        if not isinstance(entry, dict):
            raise ChangesLogError(
                WRONG_TYPE.format(field=where, expected="an object with path and backup")
            )
        for key in ("path", "backup"):
            if not isinstance(entry.get(key), str) or not entry[key]:
                raise ChangesLogError(
                    WRONG_TYPE.format(field=f"{where}.{key}", expected="a non-empty string")
                )
        files_modified.append(ModifiedFile(path=entry["path"], backup=entry["backup"]))
    metadata = data.get("metadata", {})
    if not isinstance(metadata, dict):
        raise ChangesLogError(WRONG_TYPE.format(field="metadata", expected="an object"))
    return ChangesLog(
        phase=phase,
        timestamp=timestamp,
        files_modified=files_modified,
        files_created=_strings(data, "files_created"),
        commands_executed=_strings(data, "commands_executed"),
        git_commits=_strings(data, "git_commits"),
        artifacts=_strings(data, "artifacts", required=False),
        plan_files=_strings(data, "plan_files", required=False),
        metadata=metadata,
        warnings=warnings,
    )


def render_changes_log(log: ChangesLog) -> str:
    """`log` as the text `write_changes_log` writes."""
    return _readable_json(log.to_dict())


def write_changes_log(log: ChangesLog, path: str | os.PathLike[str]) -> None:
    """Write `log` to `path` atomically: a crash leaves the old log or the new, never half."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    payload = render_changes_log(log)
    fd, temp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(payload)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp_name, target)
    except BaseException:
        Path(temp_name).unlink(missing_ok=True)
        raise


def _readable_json(data: dict[str, Any]) -> str:
    """`data` as JSON a person can read, one list entry per line.

    The same text as ``json.dumps(data, indent=2)`` up to the entries, which are each on one
    line; built from the C encoder's output for each entry, because the indenting encoder is
    pure Python, and a worker rewrites its log after every entry it records.
    """

    def dumps(value: Any) -> str:
        return json.dumps(value, ensure_ascii=False)

    fields = []
    for key, value in data.items():
        if isinstance(value, list) and value:
            entries = ",\n".join(f"    {_entry_json(_hashable(entry))}" for entry in value)
            fields.append(f"  {dumps(key)}: [\n{entries}\n  ]")
        elif isinstance(value, dict) and value:
            nested = json.dumps(value, ensure_ascii=False, indent=2).replace("\n", "\n  ")
            fields.append(f"  {dumps(key)}: {nested}")
        else:
            fields.append(f"  {dumps(key)}: {dumps(value)}")
    return "{\n" + ",\n".join(fields) + "\n}\n"


def _hashable(entry: Any) -> Any:
    return tuple(entry.items()) if isinstance(entry, dict) else entry


@lru_cache(maxsize=1 << 16)
def _entry_json(entry: Any) -> str:
    """One list entry as JSON, remembered: a log rewritten after each new entry encodes each
    old one once, not once per rewrite."""
    value = dict(entry) if isinstance(entry, tuple) else entry
    return json.dumps(value, ensure_ascii=False)


def _string(data: dict[str, Any], name: str) -> str:
    value = data[name]
    if not isinstance(value, str) or not value.strip():
        raise ChangesLogError(WRONG_TYPE.format(field=name, expected="a non-empty string"))
    return value


def _array(data: dict[str, Any], name: str, *, required: bool = True) -> list[Any]:
    if not required and name not in data:
        return []
    value = data[name]
    if not isinstance(value, list):
        raise ChangesLogError(WRONG_TYPE.format(field=name, expected="an array"))
    if len(value) > MAX_ENTRIES:
        raise ChangesLogError(
            TOO_MANY_ENTRIES.format(field=name, count=len(value), limit=MAX_ENTRIES)
        )
    return value


def _strings(data: dict[str, Any], name: str, *, required: bool = True) -> list[str]:
    values = _array(data, name, required=required)
    for index, value in enumerate(values):
        if not isinstance(value, str) or not value:
            raise ChangesLogError(
                WRONG_TYPE.format(field=f"{name}[{index}]", expected="a non-empty string")
            )
    return list(values)


def _is_iso8601(value: str) -> bool:
    try:
        datetime.fromisoformat(value)
    except ValueError:
        return False
    return True
