"""Template helpers of the Versions panel: times, labels, diff rows."""

from __future__ import annotations

from datetime import UTC, datetime

from django import template
from django.utils import timezone
from django.utils.dateparse import parse_datetime
from django.utils.html import escape, format_html
from django.utils.safestring import SafeString, mark_safe

from versions import conf
from versions.diffing import DiffLine, Gap, Hunk
from versions.formatting import kb
from versions.markdown import render_markdown
from versions.models import COLLECTION_CHOICES

register = template.Library()

_LABELS = dict(COLLECTION_CHOICES)


def relative(moment: datetime, now: datetime | None = None) -> str:
    """'just now', '5 minutes ago', '3 hours ago', '2 days ago', or a date when older."""
    now = now or timezone.now()
    seconds = int((now - moment).total_seconds())
    if seconds < 0:
        return "just now"
    if seconds < 45:
        return "just now"
    for unit, size in (("minute", 60), ("hour", 3600), ("day", 86400)):
        limit = {"minute": 3600, "hour": 86400, "day": 86400 * 30}[unit]
        if seconds < limit:
            n = max(1, round(seconds / size))
            return f"{n} {unit}{'' if n == 1 else 's'} ago"
    return moment.strftime("%-d %b %Y")


@register.simple_tag
def when(moment: datetime | str | None) -> SafeString:
    """A <time> with the relative time, and the absolute time beside it: UTC as sent, shown in
    the viewer's time zone by panel.js (with the UTC time on hover).

    Accepts the ISO strings of stored receipts too.
    """
    if isinstance(moment, str):
        moment = parse_datetime(moment)
    if moment is None:
        return mark_safe("")  # noqa: S308 - a constant
    absolute = moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    return format_html(
        '<time datetime="{}" data-utc="{}" title="{}">{}</time> '
        '<span class="abs" data-local title="{}">{}</span>',
        moment.isoformat(),
        absolute,
        absolute,
        relative(moment),
        absolute,
        absolute,
    )


@register.filter
def collection_label(collection: str) -> str:
    """Human label of a collection, e.g. 'Stylesheet'."""
    return _LABELS.get(collection, collection)


@register.filter
def short_sha(sha: str | None) -> str:
    return (sha or "")[:12] or "—"


@register.filter
def signed(n: int | None, sign: str) -> str:
    return f"{sign}{n or 0}"


register.filter("kb", kb)


def rows_html(lines: list[DiffLine]) -> str:
    """Table rows of diff lines. Line HTML is already escaped by the diff engine."""
    out = []
    for line in lines:
        old_no = "" if line.old_no is None else str(line.old_no)
        new_no = "" if line.new_no is None else str(line.new_no)
        eol = (
            '<span class="eol" title="No newline at end of file">⏎̸</span>'
            if line.eol == "none"
            else ""
        )
        out.append(
            f'<tr class="l-{line.kind}"><td class="ln">{old_no}</td><td class="ln">{new_no}</td>'
            f'<td class="code"><span class="mk" aria-hidden="true">{line.marker}</span>'
            f"{line.html}{eol}</td></tr>"
        )
    return "".join(out)


@register.simple_tag
def diff_rows(lines: list[DiffLine]) -> SafeString:
    """Rows for ``lines`` (escaped by the engine first, then marked up here)."""
    return mark_safe(rows_html(lines))  # noqa: S308 - fragments escaped in versions.diffing


@register.simple_tag
def hunk_header(hunk: Hunk) -> str:
    return escape(hunk.header)


@register.simple_tag
def stored_source_cap() -> str:
    """The largest previous source a capture point keeps (``VERSIONS_MAX_STORED_BYTES``)."""
    return kb(conf.max_stored_bytes())


def split_pairs(lines: list[DiffLine]) -> list[tuple[DiffLine | None, DiffLine | None]]:
    """Side-by-side rows of a hunk: unchanged lines on both sides; a run of removed lines
    beside the run of added lines that follows it."""
    rows: list[tuple[DiffLine | None, DiffLine | None]] = []
    removed: list[DiffLine] = []
    added: list[DiffLine] = []

    def flush() -> None:
        for i in range(max(len(removed), len(added))):
            rows.append(
                (removed[i] if i < len(removed) else None, added[i] if i < len(added) else None)
            )
        removed.clear()
        added.clear()

    for line in lines:
        if line.kind == "removed":
            if added:
                flush()
            removed.append(line)
        elif line.kind == "added":
            added.append(line)
        else:
            flush()
            rows.append((line, line))
    flush()
    return rows


def _side(line: DiffLine | None, old: bool) -> str:
    if line is None:
        return '<td class="ln"></td><td class="code empty"></td>'
    number = line.old_no if old else line.new_no
    kind = "context" if line.kind == "context" else line.kind
    eol = (
        '<span class="eol" title="No newline at end of file">⏎̸</span>' if line.eol == "none" else ""
    )
    return (
        f'<td class="ln s-{kind}">{"" if number is None else number}</td>'
        f'<td class="code s-{kind}"><span class="mk" aria-hidden="true">{line.marker}</span>'
        f"{line.html}{eol}</td>"
    )


def split_rows_html(lines: list[DiffLine]) -> str:
    """Side-by-side table rows for ``lines`` (old | new); line HTML is escaped by the engine."""
    out = []
    for left, right in split_pairs(lines):
        changed = left is None or right is None or left.kind != "context"
        cls = "l-change" if changed else "l-context"
        out.append(f'<tr class="{cls}">{_side(left, True)}{_side(right, False)}</tr>')
    return "".join(out)


@register.simple_tag
def split_rows(lines: list[DiffLine]) -> SafeString:
    """Side-by-side table rows for ``lines`` (old | new); line HTML is escaped by the engine."""
    return mark_safe(split_rows_html(lines))  # noqa: S308 - fragments escaped in versions.diffing


_GAP = (
    '<tbody class="gap"><tr><td colspan="{}"><button type="button" class="gap-btn" '
    'hx-get="{}?old={}&amp;new={}&amp;count={}" hx-target="closest tbody" hx-swap="outerHTML">'
    '<span aria-hidden="true">↕</span> {}</button></td></tr></tbody>'
)
_HUNK_HEAD = {
    "split": '<tbody class="hunk"><tr class="hh"><td class="ln"></td><td class="code" colspan="3">'
    "{}</td></tr>",
    "unified": '<tbody class="hunk"><tr class="hh"><td class="ln"></td><td class="ln"></td>'
    '<td class="code">{}</td></tr>',
}


@register.simple_tag
def compare_gap(url: str, gap: Gap, layout: str) -> SafeString:
    """A compare file's "N unchanged lines" expander row (its lines load from ``url``)."""
    cols = 4 if layout == "split" else 3
    return format_html(_GAP, cols, url, gap.old_start, gap.new_start, gap.count, gap.label)


@register.simple_tag
def compare_hunks(url: str, hunks: list[Hunk], layout: str) -> SafeString:
    """A page of a compare file's hunks, each after its gap's expander: one call for the
    page instead of a template pass per hunk (a big diff's first view renders 20 of them)."""
    split = layout == "split"
    head = _HUNK_HEAD["split" if split else "unified"]
    out: list[str] = []
    for hunk in hunks:
        if hunk.gap_before:
            out.append(compare_gap(url, hunk.gap_before, layout))
        out.append(format_html(head, hunk.header))
        out.append(split_rows_html(hunk.lines) if split else rows_html(hunk.lines))
        out.append("</tbody>")
    return mark_safe("".join(out))  # noqa: S308 - headers escaped above, lines by the engine


@register.filter
def markdown(text: str) -> SafeString:
    """A review's or comment's body as sanitised HTML (versions/markdown.py: rendered with
    raw HTML off, then cleaned to a list of tags and link schemes)."""
    return mark_safe(render_markdown(text or ""))  # noqa: S308 - sanitised by nh3
