"""Plain words for numbers, shared by every layer: no template, view or request here.

The panel's template filters wrap these (``versions.templatetags.versions_panel``); the services,
the workspace log sets and the views call them directly, so no lower layer imports presentation
code.
"""

from __future__ import annotations


def kb(size: int | None) -> str:
    """A byte size in words: ``512 bytes``, ``1.5 KB``, ``2.00 MB``."""
    size = size or 0
    if size < 1024:
        return f"{size} bytes"
    if size < 1024 * 1024:
        return f"{size / 1024:.1f} KB"
    return f"{size / 1024 / 1024:.2f} MB"
