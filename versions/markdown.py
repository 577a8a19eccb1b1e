"""Review and comment bodies: Markdown rendered by markdown-it-py (CommonMark, raw HTML off)
and cleaned by nh3 (docs/architecture.md#reviews). Pure: no request, no template.

Two lines of defence: the renderer escapes any HTML a body contains and refuses links whose
scheme is not http, https or mailto; the sanitizer then keeps only the tags and attributes
listed here, so no script, iframe, event handler or ``javascript:`` link survives either way.
"""

from __future__ import annotations

import nh3
from markdown_it import MarkdownIt

_RENDERER = MarkdownIt("commonmark", {"html": False}).enable(["table", "strikethrough"])

_TAGS = {
    "p", "br", "hr", "em", "strong", "del", "code", "pre", "blockquote", "ul", "ol", "li",
    "h1", "h2", "h3", "h4", "h5", "h6", "a", "table", "thead", "tbody", "tr", "th", "td",
}  # fmt: skip
_ATTRIBUTES = {"a": {"href", "title"}, "ol": {"start"}}


def render_markdown(text: str) -> str:
    """``text`` as safe HTML: Markdown rendered, then sanitised (links open nothing but
    http, https and mailto, and carry ``rel="nofollow noopener noreferrer"``)."""
    html = _RENDERER.render(text or "")
    return nh3.clean(
        html,
        tags=_TAGS,
        attributes=_ATTRIBUTES,
        url_schemes={"http", "https", "mailto"},
        link_rel="nofollow noopener noreferrer",
    )
