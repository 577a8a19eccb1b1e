"""Template helpers of the Versions panel: times, labels, diff rows."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from django import template
from django.template.loader import render_to_string
from django.utils import timezone
from django.utils.dateparse import parse_datetime
from django.utils.html import escape, format_html, format_html_join
from django.utils.safestring import SafeString, mark_safe

from versions import conf
from versions.diffing import DiffLine, Gap, Hunk
from versions.formatting import kb
from versions.markdown import render_markdown
from versions.models import COLLECTION_CHOICES

register = template.Library()

_LABELS = dict(COLLECTION_CHOICES)


def relative(moment: datetime, now: datetime | None = None) -> str:
    """'just now', '5 minutes ago', '3 hours ago', '2 days ago', or a date when older; a
    moment ahead (a freeze's end, a scheduled promotion) 'in 5 minutes' … 'in 2 days'."""
    now = now or timezone.now()
    seconds = int((now - moment).total_seconds())
    ahead = seconds < 0
    seconds = abs(seconds)
    if seconds < 45:
        return "just now"
    for unit, size in (("minute", 60), ("hour", 3600), ("day", 86400)):
        limit = {"minute": 3600, "hour": 86400, "day": 86400 * 30}[unit]
        if seconds < limit:
            n = max(1, round(seconds / size))
            amount = f"{n} {unit}{'' if n == 1 else 's'}"
            return f"in {amount}" if ahead else f"{amount} ago"
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


# A list in an audit event's details shows this many entries; the rest are counted.
DETAIL_ITEMS = 20


@register.filter
def detail(value: Any) -> SafeString:
    """An audit event's detail value in words: a list as a list (its first
    :data:`DETAIL_ITEMS` entries), a mapping as ``key: value`` pairs, a yes/no, a dash for
    none; every text escaped."""
    if isinstance(value, list):
        if not value:
            return mark_safe("none")  # noqa: S308 - a constant
        shown = format_html_join("", "<li>{}</li>", ((detail(v),) for v in value[:DETAIL_ITEMS]))
        more = len(value) - DETAIL_ITEMS
        if more > 0:
            shown = format_html("{}<li>… and {} more</li>", shown, more)
        return format_html('<ul class="detail-items">{}</ul>', shown)
    if isinstance(value, dict):
        return format_html_join(", ", "{}: {}", ((k, detail(v)) for k, v in value.items()))
    if value is None:
        return mark_safe("—")  # noqa: S308 - a constant
    if isinstance(value, bool):
        return mark_safe("yes" if value else "no")  # noqa: S308 - a constant
    return escape(value)


@register.filter
def collection_label(collection: str) -> str:
    """Human label of a collection, e.g. 'Stylesheet'."""
    return _LABELS.get(collection, collection)


@register.filter
def restore_words(change_set: Any) -> str:
    """What a restore set restored, in words ("Restore all of cs_… by ada")."""
    from versions.selectors import restore_words as words

    return words(change_set)


@register.filter
def trimmed(text: str | None) -> str:
    """A source line without its indentation and line end (a comment's anchor, as quoted)."""
    return (text or "").strip()


@register.filter
def short_sha(sha: str | None) -> str:
    return (sha or "")[:12] or "—"


@register.filter
def signed(n: int | None, sign: str) -> str:
    return f"{sign}{n or 0}"


register.filter("kb", kb)


class Notes:
    """Line comments in one diff table: line numbers that open the comment form (``link``,
    when the person may review) and the threads under their lines (``threads``, rendered
    by ``render``)."""

    def __init__(self, notes: Any, render: Callable[[list[Any], int], str], cols: int) -> None:
        self.link = notes.link if notes is not None and notes.form_url else None
        self.threads = notes.threads if notes is not None else {}
        self.render = render
        self.cols = cols

    def number(self, number: int | None, side: str) -> str:
        """A line number cell's content: the number, or a link that opens the form."""
        if number is None:
            return ""
        if self.link is None:
            return str(number)
        url = escape(self.link(side, number))
        return (
            f'<a class="ln-link" href="{url}" hx-get="{url}" hx-target="closest tr" '
            f'hx-swap="afterend" aria-label="Comment on line {number} '
            f'({"before" if side == "before" else "after"})">{number}</a>'
        )

    def after(self, line: DiffLine | None, other: DiffLine | None = None) -> str:
        """The thread row under a line, when threads are anchored to it."""
        if not self.threads:
            return ""
        found: list[Any] = []
        for ln in (line, other):
            if ln is None:
                continue
            if ln.old_no is not None and ln.kind != "added":
                found += self.threads.get(("before", ln.old_no), [])
            if ln.new_no is not None and ln.kind != "removed":
                found += self.threads.get(("after", ln.new_no), [])
        unique = list({id(t): t for t in found}.values())
        return self.render(unique, self.cols) if unique else ""


def rows_html(lines: list[DiffLine], notes: Notes | None = None) -> str:
    """Table rows of diff lines. Line HTML is already escaped by the diff engine."""
    out = []
    for line in lines:
        if notes is None:
            old_no = "" if line.old_no is None else str(line.old_no)
            new_no = "" if line.new_no is None else str(line.new_no)
        else:
            old_no = notes.number(line.old_no, "before")
            new_no = notes.number(line.new_no, "after")
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
        if notes is not None:
            out.append(notes.after(line))
    return "".join(out)


def _notes(context: template.Context, notes: Any, cols: int) -> Notes:
    request = context.get("request")
    base = {
        "app": context.get("app"),
        "can_review": context.get("can_review"),
        "cs": context.get("cs"),
        "shown_in": getattr(notes, "shown_in", ""),
    }

    def render(threads: list[Any], span: int) -> str:
        ctx = {**base, "threads": threads, "colspan": span}
        return str(render_to_string("versions/partials/_line_threads.html", ctx, request=request))

    return Notes(notes, render, cols)


@register.simple_tag(takes_context=True)
def note_rows(
    context: template.Context, lines: list[DiffLine], notes: Any, layout: str = "unified"
) -> SafeString:
    """Diff rows whose line numbers take line comments and with their threads under their
    lines (``notes``: a ``selectors.LineNotes``; None renders plain rows)."""
    if notes is None:
        html = split_rows_html(lines) if layout == "split" else rows_html(lines)
    else:
        cols = 4 if layout == "split" else 3
        ready = _notes(context, notes, cols)
        html = split_rows_html(lines, ready) if layout == "split" else rows_html(lines, ready)
    return mark_safe(html)  # noqa: S308 - fragments escaped in versions.diffing, threads by templates


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


def _side(line: DiffLine | None, old: bool, notes: Notes | None = None) -> str:
    if line is None:
        return '<td class="ln"></td><td class="code empty"></td>'
    number = line.old_no if old else line.new_no
    shown = (
        notes.number(number, "before" if old else "after")
        if notes is not None
        else ("" if number is None else number)
    )
    kind = "context" if line.kind == "context" else line.kind
    eol = (
        '<span class="eol" title="No newline at end of file">⏎̸</span>' if line.eol == "none" else ""
    )
    return (
        f'<td class="ln s-{kind}">{shown}</td>'
        f'<td class="code s-{kind}"><span class="mk" aria-hidden="true">{line.marker}</span>'
        f"{line.html}{eol}</td>"
    )


def split_rows_html(lines: list[DiffLine], notes: Notes | None = None) -> str:
    """Side-by-side table rows for ``lines`` (old | new); line HTML is escaped by the engine."""
    out = []
    for left, right in split_pairs(lines):
        changed = left is None or right is None or left.kind != "context"
        cls = "l-change" if changed else "l-context"
        out.append(f'<tr class="{cls}">{_side(left, True, notes)}{_side(right, False, notes)}</tr>')
        if notes is not None:
            out.append(notes.after(left, right if right is not left else None))
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


@register.simple_tag(takes_context=True)
def compare_hunks(
    context: template.Context, url: str, hunks: list[Hunk], layout: str, notes: Any = None
) -> SafeString:
    """A page of a compare file's hunks, each after its gap's expander: one call for the
    page instead of a template pass per hunk (a big diff's first view renders 20 of them).
    ``notes``: the file's line comments (a ``selectors.LineNotes``)."""
    split = layout == "split"
    ready = _notes(context, notes, 4 if split else 3) if notes is not None else None
    head = _HUNK_HEAD["split" if split else "unified"]
    out: list[str] = []
    for hunk in hunks:
        if hunk.gap_before:
            out.append(compare_gap(url, hunk.gap_before, layout))
        out.append(format_html(head, hunk.header))
        out.append(split_rows_html(hunk.lines, ready) if split else rows_html(hunk.lines, ready))
        out.append("</tbody>")
    return mark_safe("".join(out))  # noqa: S308 - headers escaped above, lines by the engine


@register.filter
def markdown(text: str) -> SafeString:
    """A review's or comment's body as sanitised HTML (versions/markdown.py: rendered with
    raw HTML off, then cleaned to a list of tags and link schemes)."""
    return mark_safe(render_markdown(text or ""))  # noqa: S308 - sanitised by nh3
