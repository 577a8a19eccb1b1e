"""The audit trail's hash chain: how one event is written down and hashed (pure functions).

Every :class:`~versions.models.AuditEvent` carries ``hash = sha256(prev_hash + canonical JSON
of the event)``, ``prev_hash`` being the hash of the event before it (the first event's is
:data:`GENESIS`). The recipe, exactly (``manage.py verify_audit`` recomputes it):

1. the event is the JSON object with these keys and nothing else::

       {"action": str, "actor": {"kind": str, "name": str}, "address": str,
        "app": app slug or null, "created_on": "YYYY-MM-DDTHH:MM:SS.ffffffZ" (UTC),
        "details": object, "id": "ae_…", "reason": str, "seq": int, "targets": [str, …],
        "user_agent": str}

2. canonical JSON: keys sorted at every level, separators ``,`` and ``:`` (no spaces),
   non-ASCII characters written as themselves (not ``\\u`` escapes), encoded as UTF-8;
3. ``hash`` is the lowercase hex sha256 of the ASCII bytes of ``prev_hash`` followed by
   those UTF-8 bytes.

Events loaded with their app from another Versions (``manage.py load_app``) keep the hash of
the chain they were appended to there: their ``origin_seq`` is the number that chain gave them,
and the ``app_loaded`` event of this chain carries :func:`loaded_digest` of them, so removing,
adding or altering one is found (docs/operations.md#dump-load).

Not covered: the links to the user and the token (``actor_user``, ``actor_token``: they empty
themselves when those are deleted; the actor's kind and name are covered) and the app's link
as such (its slug is covered).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from versions.ids import base36, random_suffix

# The prev_hash of the first event.
GENESIS = "0" * 64


def event_id(ms: int) -> str:
    """An audit event id for time ``ms``: ``ae_<ms base36>_<8 random [0-9a-z]>``."""
    return f"ae_{base36(ms)}_{random_suffix()}"


def stamp(moment: datetime) -> str:
    """``created_on`` as the chain writes it: UTC, microseconds, ``Z``."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def event_document(
    *,
    id: str,
    seq: int,
    app: str | None,
    actor_kind: str,
    actor_name: str,
    action: str,
    targets: Sequence[str],
    reason: str,
    details: Mapping[str, Any],
    address: str,
    user_agent: str,
    created_on: datetime,
) -> dict[str, Any]:
    """The event as the chain hashes it (and as ``export_audit`` writes it, with its hashes)."""
    return {
        "id": id,
        "seq": seq,
        "app": app,
        "actor": {"kind": actor_kind, "name": actor_name},
        "action": action,
        "targets": list(targets),
        "reason": reason,
        "details": dict(details),
        "address": address,
        "user_agent": user_agent,
        "created_on": stamp(created_on),
    }


def canonical_json(document: Mapping[str, Any]) -> bytes:
    """Sorted keys, no spaces, UTF-8."""
    return json.dumps(
        document, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    ).encode("utf-8")


def event_hash(prev_hash: str, document: Mapping[str, Any]) -> str:
    """``sha256(prev_hash + canonical JSON of the event)``, lowercase hex."""
    return hashlib.sha256(prev_hash.encode("ascii") + canonical_json(document)).hexdigest()


def loaded_digest(events: Sequence[tuple[str, str, int, str]]) -> str:
    """What an ``app_loaded`` event holds of the events it loaded: the sha256 of one line
    ``<id> <chain> <seq in that chain> <hash>`` per event, in the order they were loaded."""
    digest = hashlib.sha256()
    for ident, chain, seq, hashed in events:
        digest.update(f"{ident} {chain} {seq} {hashed}\n".encode())
    return digest.hexdigest()
