"""The three-way merge of texts that Revert this set uses (``git merge-file``'s, through
libgit2 and pygit2; see docs/architecture.md#revert for why this one): pure text in, text or a
conflict out, nothing on disk."""

from __future__ import annotations

from typing import Any

import pygit2

# The name the merge gives the file; it appears nowhere (conflicts are refused, not written).
_MERGE_PATH = "artifact"


class _MemoryObjects(pygit2.OdbBackend):
    """A git object database held in memory: the three texts of one merge, nothing on disk."""

    def __init__(self) -> None:
        super().__init__()
        self._objects: dict[str, tuple[int, bytes]] = {}

    def read_cb(self, oid: Any) -> tuple[int, bytes]:
        return self._objects[str(oid)]

    def read_header_cb(self, oid: Any) -> tuple[int, int]:
        kind, data = self._objects[str(oid)]
        return kind, len(data)

    def exists_cb(self, oid: Any) -> bool:
        return str(oid) in self._objects

    def write_cb(self, oid: Any, data: bytes, kind: int) -> None:
        self._objects[str(oid)] = (kind, bytes(data))

    def read_prefix_cb(self, oid: Any) -> Any:
        raise KeyError(oid)

    def exists_prefix_cb(self, oid: Any) -> Any:
        raise KeyError(oid)

    def refresh_cb(self) -> None:
        return None

    def __iter__(self) -> Any:
        return iter(pygit2.Oid(hex=key) for key in self._objects)


def merge_texts(base: str, ours: str, theirs: str) -> str | None:
    """The three-way merge of ``ours`` and ``theirs`` from ``base`` (``git merge-file``'s), or
    None when they change the same lines (a conflict)."""
    objects = pygit2.Odb()
    objects.add_backend(_MemoryObjects(), 1)
    repo = pygit2.Repository()
    repo.set_odb(objects)
    base_entry, ours_entry, theirs_entry = (
        pygit2.IndexEntry(
            _MERGE_PATH,
            objects.write(pygit2.enums.ObjectType.BLOB, text.encode()),
            pygit2.enums.FileMode.BLOB,
        )
        for text in (base, ours, theirs)
    )
    result = repo.merge_file_from_index(base_entry, ours_entry, theirs_entry)
    return result.contents if result.automergeable else None
