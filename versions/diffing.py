"""Then→now text diffs: diff-match-patch line mode, word highlights, collapsed context, paging.

Pure module (no models). The line diff runs in the C++ ``fast_diff_match_patch`` engine when it is
importable, else in the pure-Python ``diff_match_patch``; both give the same results. Every text
fragment is HTML-escaped first, then wrapped in markup, then marked safe.

Line model: text is split on ``\\n`` only (like git). A final line without a newline is a different
line from the same text with one, so ``"a\\nb"`` → ``"a\\nb\\n"`` counts as 1 added and 1 removed
line (as ``git diff --numstat`` does); such a line carries ``no_eol=True``. A ``\\r`` before the
``\\n`` is part of the line (a CRLF↔LF change is a change) but is not rendered; see ``eol``.
"""

from __future__ import annotations

import gc
import hashlib
import re
import threading
from array import array
from bisect import bisect_right
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from html import escape as _html_escape
from itertools import accumulate, chain, compress, count, cycle, islice, repeat
from operator import ne
from typing import Any, Literal

from diff_match_patch import diff_match_patch
from django.utils.safestring import SafeString, mark_safe

from versions import linecodes
from versions.linecodes import ArrowLines

try:  # pragma: no cover - depends on the environment
    import fast_diff_match_patch as _fdmp
except ImportError:  # pragma: no cover
    _fdmp = None

EngineName = Literal["cpp", "python"]
# A source as text, or as its UTF-8 bytes (as stored: big ones are never decoded whole).
Source = str | bytes
# A source's lines: a list, or (big sources, coded in Arrow) an Arrow-backed sequence of bytes.
Lines = list[str] | list[bytes] | ArrowLines
LineKind = Literal["context", "added", "removed"]
Op = tuple[str, int]  # ("=" | "-" | "+", count)

CONTEXT = 3
PER_PAGE = 50
MAX_HUNK_ROWS = 300
WORD_DIFF_MAX_CHARS = 10_000
WORD_DIFF_MIN_SIMILARITY = 0.3
LINE_TIMEOUT = 2.0
WORD_TIMEOUT = 0.2

ENGINES: tuple[EngineName, ...] = ("cpp", "python") if _fdmp is not None else ("python",)
DEFAULT_ENGINE: EngineName = ENGINES[0]

# Code points usable as "characters" for line/token encoding: 1 and 2 are sentinels for lines
# present on one side only; shared lines start at 3; the surrogate block is skipped.
_OLD_ONLY = "\x01"
_NEW_ONLY = "\x02"
_FIRST_CODE = 3
MAX_CODES = (0xD800 - _FIRST_CODE) + (0x110000 - 0xE000)
_MARKS = (
    "\u0300-\u036f\u1ab0-\u1aff\u20d0-\u20ff\ufe00-\ufe0f\U0001f3fb-\U0001f3ff\U000e0020-\U000e007f"
)
# Tokens: words, whitespace runs, single symbols; combining marks, variation selectors, skin tones
# and zero-width-joined sequences stay with their base character so markup never splits them.
_TOKEN_RE = re.compile(rf"(?:\w|[{_MARKS}])+|\s+|[^\w\s](?:[{_MARKS}]|\u200d[^\w\s])*")
_TOKEN_CODE_BASE = 0xF0000  # plane-15 private use: uniform character class for cleanup scoring


class InvalidPage(ValueError):
    """Raised for a page number outside ``1..num_pages``."""


class StaleContext(ValueError):
    """Raised when requested context lines are out of range or differ between the two texts."""


# --------------------------------------------------------------------------------------------
# Engines
# --------------------------------------------------------------------------------------------


def _py_dmp(timeout: float) -> diff_match_patch:
    dmp = diff_match_patch()
    dmp.Diff_Timeout = timeout
    return dmp


def engine_diff(
    a: str, b: str, *, engine: EngineName | None = None, timeout: float = LINE_TIMEOUT
) -> list[Op]:
    """Character diff of ``a``→``b`` as ``[(op, count)]`` with no semantic cleanup."""
    engine = engine or DEFAULT_ENGINE
    if engine == "cpp":
        if _fdmp is None:
            raise RuntimeError("fast_diff_match_patch is not installed")
        return [
            (op, n)
            for op, n in _fdmp.diff(
                a, b, timelimit=timeout, checklines=False, cleanup="No", counts_only=True
            )
            if n
        ]
    ops = {-1: "-", 0: "=", 1: "+"}
    return [(ops[op], len(t)) for op, t in _py_dmp(timeout).diff_main(a, b, False) if t]


# --------------------------------------------------------------------------------------------
# Line splitting and line mode
# --------------------------------------------------------------------------------------------


def split_lines(text: Source) -> tuple[Lines, bool]:
    """Split on ``\\n``; return the lines and whether the last one lacks a newline.

    ``text`` may be UTF-8 bytes: ``\\n`` never occurs inside a multi-byte sequence, so the lines
    are the same, and equal lines are equal bytes.
    """
    if not text:
        return [], False
    newline: Any = "\n" if isinstance(text, str) else b"\n"
    lines = text.split(newline)
    if not lines[-1]:
        lines.pop()
        return lines, False
    return lines, True


def _line_text(line: str | bytes) -> str:
    """A line as text (lines of a source given as UTF-8 bytes are decoded when shown)."""
    return line if isinstance(line, str) else line.decode("utf-8")


def _same_kind(old: Source | None, new: Source | None) -> tuple[str, str] | tuple[bytes, bytes]:
    """Both sources as text, or both as UTF-8 bytes when either is given as bytes."""
    if isinstance(old, bytes) or isinstance(new, bytes):
        return _utf8(old), _utf8(new)
    return old or "", new or ""


def _utf8(source: Source | None) -> bytes:
    if source is None:
        return b""
    return source if isinstance(source, bytes) else source.encode("utf-8", "surrogatepass")


def _keys(lines: Lines, no_eol: bool) -> list[object]:
    """Hash keys per line: a final line without newline never equals a terminated one."""
    if not no_eol:
        return lines  # type: ignore[return-value]
    keys: list[object] = list(lines)
    keys[-1] = (lines[-1],)
    return keys


def _code_points() -> Iterable[int]:
    return chain(range(_FIRST_CODE, 0xD800), range(0xE000, 0x110000))


def _utf32(values: Iterable[int]) -> str:
    """Code points as a string, joined via a UTF-32 buffer (in C: no Python call per value)."""
    return array("I", values).tobytes().decode("utf-32-le")  # type: ignore[arg-type]


def _codes(keys: Sequence[object], code: dict[object, int], missing: str) -> str:
    """One code point per line (``missing``'s for a line ``code`` lacks), looked up in C
    (``map`` over ``dict.get``)."""
    return _utf32(map(code.get, keys, repeat(ord(missing))))


def _lines_to_chars(
    a: Sequence[object], b: Sequence[object], limit: int = MAX_CODES
) -> tuple[str, str, bool]:
    """Encode each line as one character (linesToChars); the flag says codes were reused.

    Only lines present on both sides need their own code: the others can never match, so all
    old-only lines share one sentinel and all new-only lines another (same diff, fewer codes).
    Past ``limit`` distinct shared lines codes wrap around, and equal runs must be verified.
    """
    if len(a) <= limit:
        # Every pass over the lines runs in C, with no Python call per line, and each line is
        # looked up once: an old line takes the code of its first occurrence's turn (codes
        # never run out: there are no more lines than codes), a new line the code of the same
        # old line or the new-only sentinel; then the old codes no new line took become the
        # old-only sentinel (a pass over small ints). Measured on a 1.5 MB stylesheet
        # (102,562 lines, 2% changed), interleaved: 0.8× the time of building the shared
        # lines' set first and looking every line up again (51 ms against 61 ms here).
        table: dict[object, int] = {}
        old = list(map(table.setdefault, a, _code_points()))
        new = list(map(table.get, b, repeat(ord(_NEW_ONLY))))
        old_only = dict.fromkeys(set(table.values()).difference(new), ord(_OLD_ONLY))
        return _utf32(map(old_only.get, old, old)), _utf32(new), False
    shared = set(a).intersection(b)
    overflow = len(shared) > limit
    codes = cycle(islice(_code_points(), limit)) if overflow else _code_points()
    code = dict(zip(shared, codes, strict=False))
    return _codes(a, code, _OLD_ONLY), _codes(b, code, _NEW_ONLY), overflow


def _verify(ops: list[Op], a: Sequence[object], b: Sequence[object]) -> list[Op]:
    """Split equal runs whose lines only shared a wrapped-around code into removed + added."""
    out: list[Op] = []
    i = j = 0
    for op, n in ops:
        if op == "=":
            if a[i : i + n] == b[j : j + n]:
                out.append(("=", n))
            else:
                for k in range(n):
                    out += [("=", 1)] if a[i + k] == b[j + k] else [("-", 1), ("+", 1)]
            i += n
            j += n
        else:
            out.append((op, n))
            i += n if op == "-" else 0
            j += n if op == "+" else 0
    return _normalize(out)


def _common_ends(a: Sequence[object], b: Sequence[object]) -> tuple[int, int]:
    """Lines shared at the start, and then at the end (not overlapping); compared in C."""
    n = min(len(a), len(b))
    pre = next(compress(count(), map(ne, a, b)), n)
    suf = next(compress(count(), map(ne, reversed(a), reversed(b))), n)
    return pre, min(suf, n - pre)


def _normalize(ops: Iterable[Op]) -> list[Op]:
    """Merge adjacent same-op runs and order each change block as deletions then insertions."""
    out: list[Op] = []
    dels = ins = 0
    for op, n in ops:
        if not n:
            continue
        if op == "=":
            if dels:
                out.append(("-", dels))
            if ins:
                out.append(("+", ins))
            dels = ins = 0
            if out and out[-1][0] == "=":
                out[-1] = ("=", out[-1][1] + n)
            else:
                out.append(("=", n))
        elif op == "-":
            dels += n
        else:
            ins += n
    if dels:
        out.append(("-", dels))
    if ins:
        out.append(("+", ins))
    return out


def line_ops(
    a: Sequence[object],
    b: Sequence[object],
    *,
    engine: EngineName | None = None,
    max_codes: int | None = None,
) -> tuple[list[Op], str]:
    """Line-mode diff of two key sequences: ``(ops, method)``; method names the engine used."""
    engine = engine or DEFAULT_ENGINE
    if not a or not b:
        return _normalize([("-", len(a)), ("+", len(b))]), "trivial"
    limit = MAX_CODES if max_codes is None else max_codes
    # The lines both sides share at the start and the end are set aside first, as
    # ``count_line_changes`` does: both then diff the same middle, so the counts a capture
    # stores are the diff's counts, and an edit in a big file codes only its middle.
    pre, suf = _common_ends(a, b)
    if not pre and not suf:
        return _middle_ops(a, b, engine, limit)
    mid_a, mid_b = a[pre : len(a) - suf], b[pre : len(b) - suf]
    return _around_ends(
        pre, suf, len(mid_a), len(mid_b), lambda: _middle_ops(mid_a, mid_b, engine, limit), engine
    )


def coded_line_ops(
    coded: linecodes.CodedLines, *, engine: EngineName | None = None
) -> tuple[list[Op], str]:
    """:func:`line_ops` of two sources whose lines Arrow split and coded
    (:func:`versions.linecodes.code_lines`): the same ops, from the same engine input."""
    engine = engine or DEFAULT_ENGINE
    n_a, n_b = len(coded.old_lines), len(coded.new_lines)
    if not n_a or not n_b:
        return _normalize([("-", n_a), ("+", n_b)]), "trivial"
    pre, suf = coded.prefix, coded.suffix
    old_codes, new_codes = coded.old_codes, coded.new_codes

    def middle() -> tuple[list[Op], str]:
        assert old_codes is not None and new_codes is not None
        return _diff_discarding(old_codes, new_codes, engine), engine

    return _around_ends(pre, suf, n_a - pre - suf, n_b - pre - suf, middle, engine)


def _around_ends(
    pre: int,
    suf: int,
    mid_a: int,
    mid_b: int,
    middle: Callable[[], tuple[list[Op], str]],
    engine: EngineName,
) -> tuple[list[Op], str]:
    """The ops of two line sequences that share ``pre`` lines at the start and ``suf`` at the
    end around middles of ``mid_a`` and ``mid_b`` lines, whose ops ``middle`` diffs (not called
    when a middle is empty)."""
    if not mid_a or not mid_b:
        return _normalize([("=", pre), ("-", mid_a), ("+", mid_b), ("=", suf)]), engine
    # The middle's ops are normalised and start and end with a change (its first and last
    # lines differ): the shared ends go around them as they are.
    mid_ops, method = middle()
    ops = [("=", pre)] if pre else []
    ops += mid_ops
    if suf:
        ops.append(("=", suf))
    return ops, method


def _middle_ops(
    a: Sequence[object], b: Sequence[object], engine: EngineName, limit: int
) -> tuple[list[Op], str]:
    """``line_ops`` of two non-empty key sequences with no common first or last line."""
    ca, cb, overflow = _lines_to_chars(a, b, limit)
    if not overflow:
        return _diff_discarding(ca, cb, engine), engine
    # More distinct shared lines than code points (> 1.1M): diff with wrapped-around codes,
    # and turn false matches back into changes.
    return _verify(_diff_discarding(ca, cb, engine), a, b), f"{engine}-wrapped"


def _set_aside(encoded: str, sentinel: str) -> tuple[str, list[int]]:
    """``encoded`` without its sentinels, and each sentinel's position in that reduced text."""
    pieces = encoded.split(sentinel)
    return "".join(pieces), list(accumulate(map(len, pieces[:-1])))


def _diff_discarding(ca: str, cb: str, engine: EngineName) -> list[Op]:
    """Diff with one-sided lines set aside first (as git's xdiff does), then put back.

    Lines present on one side only can never match, so the engine diffs only the lines that
    can; the longest common subsequence, and so the counts, stay those of the full diff.
    """
    ra, pos_a = _set_aside(ca, _OLD_ONLY)
    rb, pos_b = _set_aside(cb, _NEW_ONLY)

    inf = len(ca) + len(cb) + 1
    pos_a.append(inf)
    pos_b.append(inf)
    # Built normalised as it goes: each equal piece is preceded by the lines skipped since
    # the previous one (deletions, then insertions) or, when none were, merged into it.
    ops: list[Op] = []
    append = ops.append
    prev_a = prev_b = 0  # original positions already emitted
    ia = ib = 0  # reduced positions
    ka = kb = 0  # sentinels at or before the current reduced position (the shift to original)
    for op, n in engine_diff(ra, rb, engine=engine) if ra and rb else ():
        if op == "-":
            ia += n
            continue
        if op == "+":
            ib += n
            continue
        end_a = ia + n
        while ia < end_a:
            ka = bisect_right(pos_a, ia, ka)
            kb = bisect_right(pos_b, ib, kb)
            take = min(end_a - ia, pos_a[ka] - ia, pos_b[kb] - ib)
            oa, ob = ia + ka, ib + kb
            if oa > prev_a or ob > prev_b:
                if oa > prev_a:
                    append(("-", oa - prev_a))
                if ob > prev_b:
                    append(("+", ob - prev_b))
                append(("=", take))
            elif ops:  # right after the previous equal piece
                ops[-1] = ("=", ops[-1][1] + take)
            else:
                append(("=", take))
            prev_a, prev_b = oa + take, ob + take
            ia += take
            ib += take
    if len(ca) > prev_a:
        append(("-", len(ca) - prev_a))
    if len(cb) > prev_b:
        append(("+", len(cb) - prev_b))
    return ops


_STEP = 256


def _common_prefix_len(a: Source, b: Source) -> int:
    """Length of the common prefix: galloping slice comparisons, so the text compared (and
    copied) is about twice the prefix, not the whole text per step."""
    n = min(len(a), len(b))
    good, step = 0, _STEP
    while good < n:
        end = min(n, good + step)
        if a[good:end] == b[good:end]:
            good, step = end, step * 2
            continue
        bad = end  # a[:bad] != b[:bad]
        while bad - good > 1:
            mid = (good + bad) // 2
            if a[good:mid] == b[good:mid]:
                good = mid
            else:
                bad = mid
        return good
    return good


def _common_suffix_len(a: Source, b: Source) -> int:
    """Length of the common suffix (the mirror of :func:`_common_prefix_len`)."""
    la, lb = len(a), len(b)
    n = min(la, lb)
    good, step = 0, _STEP
    while good < n:
        end = min(n, good + step)
        if a[la - end : la - good] == b[lb - end : lb - good]:
            good, step = end, step * 2
            continue
        bad = end
        while bad - good > 1:
            mid = (good + bad) // 2
            if a[la - mid : la - good] == b[lb - mid : lb - good]:
                good = mid
            else:
                bad = mid
        return good
    return good


def _shared_tail_len(old: Source, new: Source, newline: Any) -> int:
    """Length of a run of whole lines that ``old`` and ``new`` (which differ in their first
    line) both end with; not always the longest (any such run gives the same counts).

    The common case, one edited line, is one comparison: does ``new`` end with all of
    ``old`` after its first line, starting at a line boundary of ``new``?
    """
    first_end = old.find(newline)
    if first_end != -1:
        rest = len(old) - (first_end + 1)
        start = len(new) - rest
        at_line_start = start > 0 and new[start - 1 : start] == newline
        if rest and at_line_start and new.endswith(old[first_end + 1 :]):  # type: ignore[arg-type]
            return rest
    tail = _common_suffix_len(old, new)
    cut = old.find(newline, len(old) - tail) if tail else -1
    return len(old) - (cut + 1) if cut != -1 else 0


def _trim_common_lines(old: Source, new: Source) -> tuple[Source, Source]:
    """Drop whole lines ``old`` and ``new`` share at both ends; the counts stay the same."""
    newline: Any = "\n" if isinstance(old, str) else b"\n"
    head = old.rfind(newline, 0, _common_prefix_len(old, new)) + 1
    old, new = old[head:], new[head:]
    keep = _shared_tail_len(old, new, newline)
    if keep:
        old, new = old[: len(old) - keep], new[: len(new) - keep]
    return old, new


def _one_line(text: Source) -> bool:
    newline: Any = "\n" if isinstance(text, str) else b"\n"
    end = text.find(newline)
    return end == -1 or end == len(text) - 1


def count_line_changes(
    old: Source | None, new: Source | None, *, engine: EngineName | None = None
) -> tuple[int, int]:
    """Return ``(added, removed)`` line counts for ``old``→``new`` (``None`` counts as empty).

    Both may be UTF-8 bytes (the same counts as their texts: a newline byte is never part of
    another character). A missing final newline makes the last line differ: ``"a\\nb"`` →
    ``"a\\nb\\n"`` is (1, 1).
    """
    old, new = old or "", new or ""
    if old == new:
        return 0, 0
    # Agents edit a region, not the whole file: set aside the whole lines both sides share at
    # the start and the end (found with C-speed slice comparisons) before splitting into lines.
    old, new = _trim_common_lines(old, new)
    if old and new and _one_line(old) and _one_line(new):
        return 1, 1  # two different lines (the shared ones are set aside)
    coded = _coded(old, new)
    if coded is not None:
        return _counts(coded_line_ops(coded, engine=engine)[0])
    a, a_noeol = split_lines(old)
    b, b_noeol = split_lines(new)
    if not a or not b:
        return len(b), len(a)
    return _counts(line_ops(_keys(a, a_noeol), _keys(b, b_noeol), engine=engine)[0])


def _counts(ops: list[Op]) -> tuple[int, int]:
    """``(added, removed)`` lines of ``ops``."""
    return sum(n for op, n in ops if op == "+"), sum(n for op, n in ops if op == "-")


# --------------------------------------------------------------------------------------------
# Result objects
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class DiffLine:
    """One rendered row: kind, 1-based old/new line numbers (``None`` on the other side), HTML."""

    kind: LineKind
    old_no: int | None
    new_no: int | None
    html: SafeString
    eol: Literal["lf", "crlf", "none"] = "lf"

    @property
    def no_eol(self) -> bool:
        """True for a last line without a trailing newline."""
        return self.eol == "none"

    @property
    def marker(self) -> str:
        """Unified-diff prefix: ``" "``, ``"+"`` or ``"-"``."""
        return {"context": " ", "added": "+", "removed": "-"}[self.kind]


@dataclass(frozen=True, slots=True)
class Gap:
    """A collapsed run of ``count`` unchanged lines from 1-based ``old_start``/``new_start``."""

    old_start: int
    new_start: int
    count: int

    @property
    def label(self) -> str:
        """Human label, e.g. ``"12 unchanged lines"``."""
        return f"{self.count} unchanged line{'' if self.count == 1 else 's'}"

    @property
    def old_end(self) -> int:
        """Last hidden old line number (inclusive)."""
        return self.old_start + self.count - 1

    @property
    def new_end(self) -> int:
        """Last hidden new line number (inclusive)."""
        return self.new_start + self.count - 1


# A hunk segment: ("=", old_index, new_index, count, count) or ("!", old_i, new_i, n_del, n_ins).
Segment = tuple[str, int, int, int, int]
# A gap as a plain tuple: (old_start, new_start, count), as ``Gap``'s fields.
GapRow = tuple[int, int, int]
# A hunk span as a plain tuple, in the order of ``HunkSpan``'s fields: a big diff has thousands
# of hunks and shows one page of them, so only the shown ones become objects.
SpanRow = tuple[int, int, int, int, tuple[Segment, ...], GapRow | None]


@dataclass(frozen=True, slots=True)
class HunkSpan:
    """An unrendered hunk: 0-based starts, counts, segments and the gap collapsed before it."""

    old_start: int
    new_start: int
    old_count: int
    new_count: int
    segments: tuple[Segment, ...]
    gap_before: Gap | None


@dataclass(frozen=True, slots=True)
class Hunk:
    """A rendered hunk: ``header`` (``@@ -a,b +c,d @@``), ``gap_before`` and its ``lines``."""

    index: int
    old_start: int
    old_count: int
    new_start: int
    new_count: int
    gap_before: Gap | None
    lines: list[DiffLine]

    @property
    def header(self) -> str:
        """Unified-diff hunk header with 1-based line numbers."""
        return f"@@ -{self.old_start},{self.old_count} +{self.new_start},{self.new_count} @@"


@dataclass(frozen=True, slots=True)
class DiffPage:
    """One page of hunks; ``trailing_gap`` is set only on the last page."""

    number: int
    num_pages: int
    hunks: list[Hunk]
    trailing_gap: Gap | None

    @property
    def has_next(self) -> bool:
        """Whether a later page exists."""
        return self.number < self.num_pages

    @property
    def has_previous(self) -> bool:
        """Whether an earlier page exists."""
        return self.number > 1

    @property
    def next_page_number(self) -> int | None:
        """The next page number, or ``None`` on the last page."""
        return self.number + 1 if self.has_next else None


@dataclass(slots=True)
class DiffResult:
    """A computed line diff; hunks are rendered lazily, one page at a time (picklable)."""

    old_lines: Lines
    new_lines: Lines
    old_no_eol: bool
    new_no_eol: bool
    span_rows: list[SpanRow]
    trailing_gap: Gap | None
    lines_added: int
    lines_removed: int
    is_added: bool = False
    is_removed: bool = False
    method: str = ""
    _rendered: dict[int, Hunk] = field(default_factory=dict, repr=False)

    @property
    def hunk_count(self) -> int:
        """Number of hunks."""
        return len(self.span_rows)

    @property
    def spans(self) -> list[HunkSpan]:
        """Every hunk's span (unrendered hunks), as objects."""
        return [_span(row) for row in self.span_rows]

    @property
    def identical(self) -> bool:
        """True when both texts are equal (including both empty)."""
        return self.lines_added == 0 and self.lines_removed == 0

    @property
    def both_empty(self) -> bool:
        """True when neither side has any line."""
        return not self.old_lines and not self.new_lines

    @property
    def status(self) -> str:
        """One of ``added``, ``removed``, ``identical``, ``changed``."""
        if self.is_added:
            return "added"
        if self.is_removed:
            return "removed"
        return "identical" if self.identical else "changed"

    @property
    def old_line_count(self) -> int:
        """Lines in the old text."""
        return len(self.old_lines)

    @property
    def new_line_count(self) -> int:
        """Lines in the new text."""
        return len(self.new_lines)

    def num_pages(self, per_page: int = PER_PAGE) -> int:
        """Number of pages of ``per_page`` hunks (at least 1)."""
        return max(1, -(-len(self.span_rows) // per_page))

    def hunk(self, index: int) -> Hunk:
        """Render (once) and return hunk ``index`` (0-based)."""
        h = self._rendered.get(index)
        if h is None:
            h = self._rendered[index] = _render_hunk(self, index)
        return h

    def page(self, number: int = 1, per_page: int = PER_PAGE) -> DiffPage:
        """Hunks of 1-based page ``number``; raise ``InvalidPage`` outside ``1..num_pages``."""
        pages = self.num_pages(per_page)
        if per_page < 1 or not 1 <= number <= pages:
            raise InvalidPage(f"page {number} not in 1..{pages}")
        lo = (number - 1) * per_page
        hunks = [self.hunk(i) for i in range(lo, min(lo + per_page, len(self.span_rows)))]
        return DiffPage(number, pages, hunks, self.trailing_gap if number == pages else None)

    def context_lines(self, old_start: int, new_start: int, count: int) -> list[DiffLine]:
        """Render ``count`` unchanged lines starting at 1-based ``old_start``/``new_start``."""
        return _context_rows(
            self.old_lines,
            self.new_lines,
            self.old_no_eol,
            self.new_no_eol,
            old_start,
            new_start,
            count,
        )


# --------------------------------------------------------------------------------------------
# Computing
# --------------------------------------------------------------------------------------------


def compute_diff(
    old: Source | None,
    new: Source | None,
    *,
    context: int = CONTEXT,
    engine: EngineName | None = None,
    max_hunk_rows: int = MAX_HUNK_ROWS,
) -> DiffResult:
    """Diff ``old``→``new`` (``None``: file did not exist / was removed); render nothing yet.

    Sources may be text or UTF-8 bytes (lines are then decoded only when rendered).
    """
    with _gc_paused():
        return _compute_diff(old, new, context, engine, max_hunk_rows)


@contextmanager
def _gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while diffing, then age what the diff built.

    The line lists of a big text (100k+ items each) are young, so every collection the small
    objects built meanwhile trigger would walk them again (~18 collections per 1.5 MB view).
    Nothing built here is cyclic garbage. On the way out, ``freeze`` + ``unfreeze`` moves the
    tracked objects to the oldest generation in O(1): the result is cached and long-lived, so
    young collections need not walk its lists twice more first (young cyclic garbage of the
    process waits for the next full collection). Skipped when the process uses ``gc.freeze``
    itself. Re-enabled only by whoever paused it (threads may overlap).
    """
    paused = gc.isenabled()
    if paused:
        gc.disable()
    try:
        yield
    finally:
        if paused:
            if not gc.get_freeze_count():
                gc.freeze()
                gc.unfreeze()
            gc.enable()


def _coded(old: Source, new: Source) -> linecodes.CodedLines | None:
    """Big UTF-8 sources' lines split and coded in Arrow, or ``None`` (the Python path)."""
    # The size first: an equality test of two big sources reads them both.
    if isinstance(old, bytes) and isinstance(new, bytes) and linecodes.worth_it(old, new):
        return linecodes.code_lines(old, new) if old != new else None
    return None


def _compute_diff(
    old: Source | None,
    new: Source | None,
    context: int,
    engine: EngineName | None,
    max_hunk_rows: int,
) -> DiffResult:
    old_text, new_text = _same_kind(old, new)
    a: Lines
    b: Lines
    coded = _coded(old_text, new_text)
    if coded is not None:  # big sources: lines split and coded in Arrow, none made in Python
        a, a_noeol = coded.old_lines, coded.old_no_eol
        b, b_noeol = coded.new_lines, coded.new_no_eol
        ops, method = coded_line_ops(coded, engine=engine)
    else:
        a, a_noeol = split_lines(old_text)
        b, b_noeol = split_lines(new_text)
        if old_text == new_text:
            ops = [("=", len(a))] if a else []
            method = "identical"
        else:
            ops, method = line_ops(_keys(a, a_noeol), _keys(b, b_noeol), engine=engine)
    spans, trailing = _build_spans(ops, context, max_hunk_rows)
    added, removed = _counts(ops)
    return DiffResult(
        old_lines=a,
        new_lines=b,
        old_no_eol=a_noeol,
        new_no_eol=b_noeol,
        span_rows=spans,
        trailing_gap=trailing,
        lines_added=added,
        lines_removed=removed,
        is_added=old is None and new is not None,
        is_removed=new is None and old is not None,
        method=method,
    )


_CACHE: OrderedDict[tuple[bytes, bytes, int], DiffResult] = OrderedDict()
_CACHE_LOCK = threading.Lock()
CACHE_SIZE = 16


def cached_diff(old: Source | None, new: Source | None, *, context: int = CONTEXT) -> DiffResult:
    """``compute_diff`` memoised in-process by content hash, for paging and expanders."""

    def digest(t: Source | None) -> bytes:
        return b"\0" if t is None else hashlib.blake2b(_utf8(t), digest_size=16).digest()

    key = (digest(old), digest(new), context)
    with _CACHE_LOCK:
        hit = _CACHE.get(key)
        if hit is not None:
            _CACHE.move_to_end(key)
            return hit
    result = compute_diff(old, new, context=context)
    with _CACHE_LOCK:
        _CACHE[key] = result
        while len(_CACHE) > CACHE_SIZE:
            _CACHE.popitem(last=False)
    return result


def _span(row: SpanRow) -> HunkSpan:
    gap = row[5]
    return HunkSpan(row[0], row[1], row[2], row[3], row[4], Gap(*gap) if gap else None)


def _build_spans(ops: list[Op], context: int, max_rows: int) -> tuple[list[SpanRow], Gap | None]:
    """Group ops into hunks with ``context`` lines; collapse longer unchanged runs into gaps."""
    spans: list[SpanRow] = []
    segs: list[Segment] = []
    gap: GapRow | None = None
    oi = ni = 0
    n_ops = len(ops)
    k = 0
    while k < n_ops:
        op, n = ops[k]
        if op == "=":
            first, last = not segs, k == n_ops - 1
            if first and last:  # identical texts
                return [], Gap(1, 1, n) if n else None
            if first:
                lead = min(n, context)
                if n > lead:
                    gap = (oi + 1, ni + 1, n - lead)
                if lead:
                    segs.append(("=", oi + n - lead, ni + n - lead, lead, lead))
            elif last:
                tail = min(n, context)
                if tail:
                    segs.append(("=", oi, ni, tail, tail))
                _flush(spans, segs, gap, max_rows)
                segs, gap = [], None
                if n > tail:
                    return spans, Gap(oi + tail + 1, ni + tail + 1, n - tail)
            elif n > 2 * context:
                if context:
                    segs.append(("=", oi, ni, context, context))
                _flush(spans, segs, gap, max_rows)
                gap = (oi + context + 1, ni + context + 1, n - 2 * context)
                segs = (
                    [("=", oi + n - context, ni + n - context, context, context)] if context else []
                )
            else:
                segs.append(("=", oi, ni, n, n))
            oi += n
            ni += n
            k += 1
        else:
            dels = n if op == "-" else 0
            ins = n if op == "+" else 0
            if op == "-" and k + 1 < n_ops and ops[k + 1][0] == "+":
                ins = ops[k + 1][1]
                k += 1
            segs.append(("!", oi, ni, dels, ins))
            oi += dels
            ni += ins
            k += 1
    if segs:
        _flush(spans, segs, gap, max_rows)
    return spans, None


def _flush(spans: list[SpanRow], segs: list[Segment], gap: GapRow | None, max_rows: int) -> None:
    """Append the hunk made of ``segs``, split into hunks of at most ``max_rows`` rows."""
    # Segments are contiguous on both sides, so the counts come from the first and last one;
    # rows (context counted once) never exceed old + new lines, so most hunks need no loop.
    first, last = segs[0], segs[-1]
    old_count = last[1] + last[3] - first[1]
    new_count = last[2] + last[4] - first[2]
    if old_count + new_count <= max_rows or max_rows >= sum(
        seg[3] + seg[4] if seg[0] == "!" else seg[3] for seg in segs
    ):
        spans.append((first[1], first[2], old_count, new_count, tuple(segs), gap))
        return
    pieces: list[Segment] = []
    rows = 0
    first_gap = gap
    step = max(1, max_rows // 2)

    def emit() -> None:
        nonlocal pieces, rows, first_gap
        if pieces:
            s0 = pieces[0]
            spans.append(
                (
                    s0[1],
                    s0[2],
                    sum(p[3] for p in pieces),
                    sum(p[4] for p in pieces),
                    tuple(pieces),
                    first_gap,
                )
            )
            first_gap = None
        pieces, rows = [], 0

    for tag, o, nw, dn, an in segs:
        if tag == "=":
            while dn:
                if rows >= max_rows:
                    emit()
                take = min(dn, max_rows - rows)
                pieces.append(("=", o, nw, take, take))
                rows += take
                o, nw, dn = o + take, nw + take, dn - take
            continue
        # Split a long change block at the same offset on both sides so word pairs stay together.
        for s in range(0, max(dn, an), step):
            take_d, take_a = max(0, min(step, dn - s)), max(0, min(step, an - s))
            if pieces and rows + take_d + take_a > max_rows:
                emit()
            pieces.append(("!", o + min(s, dn), nw + min(s, an), take_d, take_a))
            rows += take_d + take_a
    emit()


# --------------------------------------------------------------------------------------------
# Rendering
# --------------------------------------------------------------------------------------------


def _display(line: str) -> tuple[str, Literal["lf", "crlf"]]:
    if line.endswith("\r"):
        return line[:-1], "crlf"
    return line, "lf"


def _eol(
    line: str | bytes, is_last: bool, no_eol: bool
) -> tuple[str, Literal["lf", "crlf", "none"]]:
    text, eol = _display(_line_text(line))
    return (text, "none") if is_last and no_eol else (text, eol)


def _tokens(text: str) -> list[str]:
    return _TOKEN_RE.findall(text)


def word_diff(
    a: str,
    b: str,
    *,
    engine: EngineName | None = None,
) -> tuple[list[tuple[bool, str]], list[tuple[bool, str]]] | None:
    """Token diff of two lines: ``(old_parts, new_parts)`` as ``(changed, text)``; ``None`` if
    too long or too dissimilar to be worth highlighting."""
    if len(a) > WORD_DIFF_MAX_CHARS or len(b) > WORD_DIFF_MAX_CHARS:
        return None
    ta, tb = _tokens(a), _tokens(b)
    codes: dict[str, str] = {}
    for tok in chain(ta, tb):
        if tok not in codes:
            codes[tok] = chr(_TOKEN_CODE_BASE + len(codes))
            if len(codes) > 0xFFFD:
                return None
    ca = "".join(map(codes.__getitem__, ta))
    cb = "".join(map(codes.__getitem__, tb))
    ops = engine_diff(ca, cb, engine=engine, timeout=WORD_TIMEOUT)
    # Semantic cleanup in Python for both engines (same result whichever engine diffed).
    dmp = _py_dmp(WORD_TIMEOUT)
    diffs: list[tuple[int, str]] = []
    i = j = 0
    for op, n in ops:
        if op == "=":
            diffs.append((0, ca[i : i + n]))
            i += n
            j += n
        elif op == "-":
            diffs.append((-1, ca[i : i + n]))
            i += n
        else:
            diffs.append((1, cb[j : j + n]))
            j += n
    dmp.diff_cleanupSemantic(diffs)
    old_parts: list[tuple[bool, str]] = []
    new_parts: list[tuple[bool, str]] = []
    i = j = 0
    same = 0
    for kind, chars in diffs:
        n = len(chars)
        if kind <= 0:
            text = "".join(ta[i : i + n])
            old_parts.append((kind != 0, text))
            i += n
            if kind == 0:
                same += len(text)
        if kind >= 0:
            new_parts.append((kind != 0, "".join(tb[j : j + n])))
            j += n
    longest = max(len(a), len(b))
    if longest and same / longest < WORD_DIFF_MIN_SIMILARITY:
        return None
    return old_parts, new_parts


def render_parts(parts: Iterable[tuple[bool, str]], tag: Literal["del", "ins"]) -> SafeString:
    """Escape each fragment, then wrap changed ones in ``<del class="w-del">``/``<ins ...>``."""
    open_tag = f'<{tag} class="w-{tag}">'
    close_tag = f"</{tag}>"
    out = []
    for changed, text in parts:
        if not text:
            continue
        esc = _html_escape(text)  # what django.utils.html.escape returns, minus its lazy wrapper
        out.append(f"{open_tag}{esc}{close_tag}" if changed else esc)
    return mark_safe("".join(out))


def _plain(text: str) -> SafeString:
    return SafeString(_html_escape(text))


def _render_hunk(result: DiffResult, index: int, engine: EngineName | None = None) -> Hunk:
    span = _span(result.span_rows[index])
    a, b = result.old_lines, result.new_lines
    la, lb = len(a) - 1, len(b) - 1
    rows: list[DiffLine] = []
    for tag, o, nw, dn, an in span.segments:
        if tag == "=":
            for k in range(dn):
                text, eol = _eol(b[nw + k], nw + k == lb, result.new_no_eol)
                rows.append(DiffLine("context", o + k + 1, nw + k + 1, _plain(text), eol))
            continue
        old_side = [_eol(a[o + k], o + k == la, result.old_no_eol) for k in range(dn)]
        new_side = [_eol(b[nw + k], nw + k == lb, result.new_no_eol) for k in range(an)]
        old_html: list[SafeString] = [_plain(t) for t, _ in old_side]
        new_html: list[SafeString] = [_plain(t) for t, _ in new_side]
        for k in range(min(dn, an)):
            wd = word_diff(old_side[k][0], new_side[k][0], engine=engine)
            if wd is not None:
                old_html[k] = render_parts(wd[0], "del")
                new_html[k] = render_parts(wd[1], "ins")
        rows.extend(
            DiffLine("removed", o + k + 1, None, old_html[k], old_side[k][1]) for k in range(dn)
        )
        rows.extend(
            DiffLine("added", None, nw + k + 1, new_html[k], new_side[k][1]) for k in range(an)
        )
    old_start = span.old_start + 1 if span.old_count else span.old_start
    new_start = span.new_start + 1 if span.new_count else span.new_start
    return Hunk(index, old_start, span.old_count, new_start, span.new_count, span.gap_before, rows)


def _context_rows(
    a: Lines,
    b: Lines,
    a_noeol: bool,
    b_noeol: bool,
    old_start: int,
    new_start: int,
    count: int,
) -> list[DiffLine]:
    if count < 0 or old_start < 1 or new_start < 1:
        raise StaleContext("bad range")
    o, n = old_start - 1, new_start - 1
    if o + count > len(a) or n + count > len(b):
        raise StaleContext("range outside the texts")
    # As their keys (``_keys``) compare: the lines, and a last line without a newline equals
    # only the other side's last line without one.
    a_last = a_noeol and o + count == len(a)
    b_last = b_noeol and n + count == len(b)
    if (count and a_last != b_last) or a[o : o + count] != b[n : n + count]:
        raise StaleContext("lines differ between the two texts")
    lb = len(b) - 1
    rows = []
    for k in range(count):
        text, eol = _eol(b[n + k], n + k == lb, b_noeol)
        rows.append(DiffLine("context", o + k + 1, n + k + 1, _plain(text), eol))
    return rows


def context_lines(
    old_text: str | None, new_text: str | None, old_start: int, new_start: int, count: int
) -> list[DiffLine]:
    """Render the ``count`` unchanged lines of a collapsed gap (1-based starts) on demand."""
    a, a_noeol = split_lines(old_text or "")
    b, b_noeol = split_lines(new_text or "")
    return _context_rows(a, b, a_noeol, b_noeol, old_start, new_start, count)


def follow_line(old: Source, new: Source, line: int) -> int | None:
    """Where line ``line`` (from 1) of ``old`` reads unchanged in ``new`` (its number there),
    or ``None`` when the line diff of the two removed or changed it. A line comment follows its
    line into later states this way, and is outdated where it returns ``None``."""
    old_lines, old_no_eol = split_lines(old)
    new_lines, new_no_eol = split_lines(new)
    if not 1 <= line <= len(old_lines):
        return None
    if old == new:
        return line
    ops, _ = line_ops(_keys(old_lines, old_no_eol), _keys(new_lines, new_no_eol))
    at_old, at_new = 0, 0
    for op, n in ops:
        if op == "=":
            if at_old < line <= at_old + n:
                return at_new + (line - at_old)
            at_old += n
            at_new += n
        elif op == "-":
            if at_old < line <= at_old + n:
                return None
            at_old += n
        else:
            at_new += n
    return None
