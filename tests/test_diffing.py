"""Tests for ``versions.diffing``: line mode, hunks, gaps, paging, word highlights, escaping."""

from __future__ import annotations

import html
import pickle
import random
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from versions import diffing
from versions.diffing import (
    DiffLine,
    DiffResult,
    Gap,
    InvalidPage,
    StaleContext,
    compute_diff,
    context_lines,
    count_line_changes,
    line_ops,
    split_lines,
    word_diff,
)

HAS_CPP = "cpp" in diffing.ENGINES
needs_cpp = pytest.mark.skipif(not HAS_CPP, reason="fast_diff_match_patch not installed")
XSS = "</textarea><script>alert(1)</script><img src=x onerror=alert(2)>"
TAG_RE = re.compile(r"<(/?)([a-zA-Z]+)([^>]*)>")


def text_of(fragment: str) -> str:
    """The source text shown by a rendered fragment (markup removed, entities decoded)."""
    return html.unescape(TAG_RE.sub("", fragment))


def assert_safe_markup(fragment: str) -> None:
    """Only our own highlight tags may appear; everything else must be escaped."""
    for _slash, tag, attrs in TAG_RE.findall(fragment):
        assert tag in {"del", "ins"}, fragment
        assert attrs in {"", ' class="w-del"', ' class="w-ins"'}, fragment
    assert "<script" not in fragment and "<img" not in fragment and "</textarea" not in fragment


def all_rows(result: DiffResult) -> list[DiffLine]:
    """Every row of the diff, with each collapsed gap expanded through ``context_lines``."""
    rows: list[DiffLine] = []
    for number in range(1, result.num_pages() + 1):
        page = result.page(number)
        for hunk in page.hunks:
            if hunk.gap_before:
                g = hunk.gap_before
                rows += result.context_lines(g.old_start, g.new_start, g.count)
            rows += hunk.lines
        if page.trailing_gap:
            g = page.trailing_gap
            rows += result.context_lines(g.old_start, g.new_start, g.count)
    return rows


def rebuild(result: DiffResult) -> tuple[list[str], list[str]]:
    """Old and new display lines from the rows, checking line numbers run 1..N without holes."""
    old: list[str] = []
    new: list[str] = []
    for row in all_rows(result):
        assert_safe_markup(row.html)
        if row.kind in ("context", "removed"):
            assert row.old_no == len(old) + 1
            old.append(text_of(row.html))
        else:
            assert row.old_no is None
        if row.kind in ("context", "added"):
            assert row.new_no == len(new) + 1
            new.append(text_of(row.html))
        else:
            assert row.new_no is None
    return old, new


def display(text: str) -> list[str]:
    lines, _ = split_lines(text)
    return [line[:-1] if line.endswith("\r") else line for line in lines]


def check_roundtrip(old: str | None, new: str | None, **kw: object) -> DiffResult:
    result = compute_diff(old, new, **kw)  # type: ignore[arg-type]
    got_old, got_new = rebuild(result)
    assert got_old == display(old or "")
    assert got_new == display(new or "")
    added, removed = count_line_changes(old, new, engine=kw.get("engine"))  # type: ignore[arg-type]
    assert (result.lines_added, result.lines_removed) == (added, removed)
    assert added - removed == len(display(new or "")) - len(display(old or ""))
    return result


def numbered(n: int, prefix: str = "line") -> list[str]:
    return [f"{prefix} {i}" for i in range(1, n + 1)]


def join(lines: list[str]) -> str:
    return "".join(f"{line}\n" for line in lines)


# --------------------------------------------------------------------------------------------
# Basics: line numbers, kinds, headers
# --------------------------------------------------------------------------------------------


def test_single_change_line_numbers_and_header() -> None:
    old = join(numbered(5))
    new = join(["line 1", "line 2", "LINE 3", "line 4", "line 5", "line 6"])
    result = check_roundtrip(old, new)
    assert (result.lines_added, result.lines_removed, result.hunk_count) == (2, 1, 1)
    assert result.status == "changed" and not result.identical
    hunk = result.page(1).hunks[0]
    assert hunk.header == "@@ -1,5 +1,6 @@"
    assert hunk.gap_before is None
    kinds = [(r.kind, r.old_no, r.new_no) for r in hunk.lines]
    assert kinds == [
        ("context", 1, 1),
        ("context", 2, 2),
        ("removed", 3, None),
        ("added", None, 3),
        ("context", 4, 4),
        ("context", 5, 5),
        ("added", None, 6),
    ]
    assert [r.marker for r in hunk.lines] == [" ", " ", "-", "+", " ", " ", "+"]


def test_pure_insertion_header_uses_line_before() -> None:
    result = compute_diff("", "a\nb\n")
    assert result.page(1).hunks[0].header == "@@ -0,0 +1,2 @@"
    result = compute_diff("a\nb\n", "")
    assert result.page(1).hunks[0].header == "@@ -1,2 +0,0 @@"


def test_matches_git_style_hunks_for_two_distant_changes() -> None:
    lines = numbered(40)
    new = list(lines)
    new[4] = "five"
    new[30] = "thirty-one"
    result = check_roundtrip(join(lines), join(new))
    headers = [h.header for h in result.page(1).hunks]
    assert headers == ["@@ -2,7 +2,7 @@", "@@ -28,7 +28,7 @@"]


# --------------------------------------------------------------------------------------------
# Collapsing unchanged runs
# --------------------------------------------------------------------------------------------


def test_collapses_leading_middle_and_trailing_runs() -> None:
    lines = numbered(40)
    new = list(lines)
    new[9] = "ten"  # line 10
    new[29] = "thirty"  # line 30
    result = check_roundtrip(join(lines), join(new))
    first, second = result.page(1).hunks
    assert first.gap_before == Gap(1, 1, 6)
    assert first.gap_before.label == "6 unchanged lines"
    assert [r.old_no for r in first.lines if r.kind == "context"] == [7, 8, 9, 11, 12, 13]
    # Lines 14..26 are hidden between the hunks (13 lines), 27..29 lead into the second.
    assert second.gap_before == Gap(14, 14, 13)
    assert (second.gap_before.old_end, second.gap_before.new_end) == (26, 26)
    assert result.trailing_gap == Gap(34, 34, 7)
    assert result.page(1).trailing_gap == Gap(34, 34, 7)


def test_run_of_exactly_two_contexts_stays_in_one_hunk() -> None:
    lines = numbered(20)
    for gap_len, hunks in [(6, 1), (7, 2)]:
        new = list(lines)
        new[5] = "x"
        new[5 + gap_len + 1] = "y"
        result = check_roundtrip(join(lines), join(new))
        assert result.hunk_count == hunks
    gap = result.page(1).hunks[1].gap_before
    assert gap == Gap(10, 10, 1) and gap.label == "1 unchanged line"


def test_gap_shifted_by_insertions_has_both_starts() -> None:
    old = numbered(30)
    new = ["new a", "new b", *old[:15], *old[16:]]
    result = check_roundtrip(join(old), join(new))
    second = result.page(1).hunks[1]
    gap = second.gap_before
    assert gap is not None and gap.new_start == gap.old_start + 2
    rows = context_lines(join(old), join(new), gap.old_start, gap.new_start, gap.count)
    assert [(r.old_no, r.new_no) for r in rows] == [
        (gap.old_start + k, gap.new_start + k) for k in range(gap.count)
    ]
    assert all(r.kind == "context" for r in rows)


def test_context_lines_refuses_stale_or_bad_ranges() -> None:
    old, new = "a\nb\nc\n", "a\nB\nc\n"
    assert [text_of(r.html) for r in context_lines(old, new, 1, 1, 1)] == ["a"]
    with pytest.raises(StaleContext):
        context_lines(old, new, 2, 2, 1)
    with pytest.raises(StaleContext):
        context_lines(old, new, 3, 3, 5)
    with pytest.raises(StaleContext):
        context_lines(old, new, 0, 1, 1)


def test_custom_context_zero() -> None:
    lines = numbered(10)
    new = list(lines)
    new[4] = "five"
    result = compute_diff(join(lines), join(new), context=0)
    (hunk,) = result.page(1).hunks
    assert [r.kind for r in hunk.lines] == ["removed", "added"]
    assert hunk.gap_before == Gap(1, 1, 4)
    assert result.trailing_gap == Gap(6, 6, 5)
    assert rebuild(result) == (lines, new)


# --------------------------------------------------------------------------------------------
# Paging and lazy rendering
# --------------------------------------------------------------------------------------------


def test_paging_of_many_hunks() -> None:
    lines = numbered(2000)
    new = list(lines)
    for i in range(5, 2000, 10):  # 200 isolated changes, 9 unchanged lines between
        new[i] = f"changed {i}"
    result = check_roundtrip(join(lines), join(new))
    assert result.hunk_count == 200
    assert result.num_pages() == 4 and result.num_pages(per_page=30) == 7
    first = result.page(1)
    assert len(first.hunks) == 50 and first.has_next and not first.has_previous
    assert first.next_page_number == 2 and first.trailing_gap is None
    last = result.page(4)
    assert not last.has_next and last.has_previous and last.next_page_number is None
    assert last.trailing_gap == result.trailing_gap == Gap(2000, 2000, 1)
    assert [h.index for h in result.page(2).hunks] == list(range(50, 100))
    assert len(result.page(7, per_page=30).hunks) == 20
    for bad in (0, 5, -1):
        with pytest.raises(InvalidPage):
            result.page(bad)


def test_rendering_is_lazy_and_memoised() -> None:
    lines = numbered(1000)
    new = [f"{line}!" if i % 10 == 0 else line for i, line in enumerate(lines)]
    result = compute_diff(join(lines), join(new))
    assert result.hunk_count == 100
    assert result._rendered == {}
    page = result.page(2)
    assert sorted(result._rendered) == list(range(50, 100))
    assert result.page(2).hunks[0] is page.hunks[0]


def test_identical_and_empty_pages() -> None:
    text = join(numbered(12))
    result = compute_diff(text, text)
    assert result.identical and result.status == "identical" and result.hunk_count == 0
    page = result.page(1)
    assert page.hunks == [] and page.num_pages == 1 and not page.has_next
    assert page.trailing_gap == Gap(1, 1, 12)
    assert rebuild(result) == (numbered(12), numbered(12))


def test_long_hunks_are_split_into_bounded_pages() -> None:
    new = join(numbered(1000))
    result = check_roundtrip(None, new, max_hunk_rows=300)
    assert result.is_added and result.status == "added"
    assert [len(h.lines) for h in result.page(1).hunks] == [300, 300, 300, 100]
    assert [h.header for h in result.page(1).hunks][:2] == [
        "@@ -0,0 +1,300 @@",
        "@@ -0,0 +301,300 @@",
    ]
    assert all(h.gap_before is None for h in result.page(1).hunks)
    # A long replace block keeps word pairs together across the split.
    old_lines = numbered(400)
    new_lines = [f"{line} changed" for line in old_lines]
    result = check_roundtrip(join(old_lines), join(new_lines), max_hunk_rows=100)
    assert all(len(h.lines) <= 100 for h in result.page(1).hunks)
    for hunk in result.page(1).hunks:
        removed = [r for r in hunk.lines if r.kind == "removed"]
        added = [r for r in hunk.lines if r.kind == "added"]
        assert [r.old_no for r in removed] == [r.new_no for r in added]
        assert all('<ins class="w-ins"> changed</ins>' in r.html for r in added)


def test_result_pickles_for_caching() -> None:
    result = compute_diff("a\nb\nc\n", "a\nB\nc\n")
    result.page(1)
    clone = pickle.loads(pickle.dumps(result))
    assert clone.page(1).hunks[0].lines == result.page(1).hunks[0].lines
    assert diffing.cached_diff("x\n", "y\n") is diffing.cached_diff("x\n", "y\n")
    assert diffing.cached_diff(None, "y\n").is_added


# --------------------------------------------------------------------------------------------
# Word-level highlights
# --------------------------------------------------------------------------------------------


def test_word_highlights_inside_changed_lines() -> None:
    result = compute_diff(".btn {\n  color: red;\n}\n", ".btn {\n  color: blue;\n}\n")
    rows = result.page(1).hunks[0].lines
    removed = next(r for r in rows if r.kind == "removed")
    added = next(r for r in rows if r.kind == "added")
    assert removed.html == '  color: <del class="w-del">red</del>;'
    assert added.html == '  color: <ins class="w-ins">blue</ins>;'


def test_pairs_within_a_change_block_in_order() -> None:
    old = "a = 1\nb = 2\nkeep\n"
    new = "a = 10\nb = 20\nc = 30\nkeep\n"
    rows = compute_diff(old, new).page(1).hunks[0].lines
    assert [r.kind for r in rows] == ["removed", "removed", "added", "added", "added", "context"]
    assert rows[0].html == 'a = <del class="w-del">1</del>'
    assert rows[2].html == 'a = <ins class="w-ins">10</ins>'
    assert rows[3].html == 'b = <ins class="w-ins">20</ins>'
    assert rows[4].html == "c = 30"  # unpaired: no highlight


def test_no_highlights_for_dissimilar_or_huge_lines() -> None:
    assert word_diff("completely different words", "nothing alike at all here") is None
    rows = compute_diff("alpha beta gamma\n", "one two three\n").page(1).hunks[0].lines
    assert [r.html for r in rows] == ["alpha beta gamma", "one two three"]
    long_old = "x " * 6000
    long_new = "x " * 5999 + "y "
    assert word_diff(long_old, long_new) is None
    rows = compute_diff(long_old + "\n", long_new + "\n").page(1).hunks[0].lines
    assert "<del" not in rows[0].html and "<ins" not in rows[1].html


def test_word_diff_parts_rebuild_both_lines() -> None:
    a, b = "margin: 0 auto; padding: 4px;", "margin: 0 8px; padding: 4px 2px;"
    parts = word_diff(a, b)
    assert parts is not None
    assert "".join(t for _, t in parts[0]) == a
    assert "".join(t for _, t in parts[1]) == b
    assert any(changed for changed, _ in parts[0]) and any(changed for changed, _ in parts[1])


# --------------------------------------------------------------------------------------------
# Escaping: every rendered fragment
# --------------------------------------------------------------------------------------------


def test_hostile_source_is_escaped_in_every_fragment() -> None:
    escaped = html.escape(XSS, quote=True)
    cases = [
        (None, XSS),  # added file
        (XSS, None),  # removed file
        (XSS, XSS + "\n"),  # trailing newline only
        (XSS + "\nkeep\n", XSS + "\nkeep\nmore\n"),  # as context
        (XSS + "\n" + XSS + "\n", XSS + "\n" + XSS.replace("(1)", "(3)") + "\n"),  # word pair
        ("x\n" + XSS + "\n", "y\n" + XSS + " '\"&\n"),  # context next to a change, quotes
        (join([XSS] * 20), join([XSS] * 9 + ["changed"] + [XSS] * 10)),  # gaps of it
    ]
    for old, new in cases:
        result = compute_diff(old, new)
        rows = all_rows(result)
        assert rows
        for row in rows:
            assert_safe_markup(row.html)
            assert "&lt;script&gt;" in row.html or XSS not in text_of(row.html)
        for row in rows:
            if "<" not in row.html:  # no highlight markup: the whole line escaped as is
                assert row.html == html.escape(text_of(row.html))
        assert any(escaped in row.html for row in rows)
        assert rebuild(result) == (display(old or ""), display(new or ""))
    rows = context_lines(join([XSS] * 3), join([XSS] * 3), 1, 1, 3)
    assert all(r.html == escaped for r in rows)
    pair = compute_diff(XSS + "\n", XSS.replace("alert(1)", "alert(3)") + "\n")
    removed = pair.page(1).hunks[0].lines[0].html
    assert '<del class="w-del">1</del>' in removed and "&lt;script&gt;alert(" in removed


@given(
    st.text(alphabet="<>&\"'ab/ \n=", max_size=60), st.text(alphabet="<>&\"'ab/ \n=", max_size=60)
)
@settings(max_examples=150, deadline=None)
def test_escaping_property(old: str, new: str) -> None:
    result = compute_diff(old, new)
    for row in all_rows(result):
        assert_safe_markup(row.html)
        assert not re.search(r"[<>\"']", TAG_RE.sub("", row.html))


# --------------------------------------------------------------------------------------------
# Unicode, CRLF, empty files, trailing newlines
# --------------------------------------------------------------------------------------------


def test_unicode_emoji_and_astral_characters() -> None:
    old = "héllo wörld 👋\n𝔘𝔫𝔦𝔠𝔬𝔡𝔢 𐍈 text\n日本語の行\n"
    new = "héllo wörld 👋🏽\n𝔘𝔫𝔦𝔠𝔬𝔡𝔢 𐍈 text\n日本語の新しい行\n"
    result = check_roundtrip(old, new)
    rows = result.page(1).hunks[0].lines
    assert rows[0].html == 'héllo wörld <del class="w-del">👋</del>'
    assert rows[1].html == 'héllo wörld <ins class="w-ins">👋🏽</ins>'
    assert word_diff("a 👨‍👩‍👧 b", "a 👨‍👩‍👦 b") == (
        [(False, "a "), (True, "👨‍👩‍👧"), (False, " b")],
        [(False, "a "), (True, "👨‍👩‍👦"), (False, " b")],
    )
    assert diffing._tokens("cafe\u0301 ok") == ["cafe\u0301", " ", "ok"]
    assert (result.lines_added, result.lines_removed) == (2, 2)


def test_crlf_lines() -> None:
    old = "a\r\nb\r\nc\r\n"
    new = "a\r\nB\r\nc\r\n"
    result = check_roundtrip(old, new)
    rows = result.page(1).hunks[0].lines
    assert all("\r" not in r.html for r in rows)
    assert {r.eol for r in rows} == {"crlf"}
    # Switching line endings is a change of every line, like git shows it.
    result = check_roundtrip(old, "a\nb\nc\n")
    assert (result.lines_added, result.lines_removed) == (3, 3)
    assert [r.eol for r in result.page(1).hunks[0].lines] == ["crlf"] * 3 + ["lf"] * 3
    assert count_line_changes(old, "a\nb\nc\n") == (3, 3)
    # A lone \r inside a line is not a line break.
    assert split_lines("a\rb\n") == (["a\rb"], False)


def test_empty_and_missing_files() -> None:
    for old, new in [("", ""), (None, None), (None, ""), ("", None)]:
        result = compute_diff(old, new)
        assert result.both_empty and result.identical and result.hunk_count == 0
        assert result.page(1).hunks == [] and result.trailing_gap is None
    assert compute_diff(None, "").is_added and compute_diff(None, "").status == "added"
    assert compute_diff("", None).is_removed
    result = check_roundtrip(None, "a\nb\n")
    assert (result.is_added, result.is_removed, result.lines_added, result.lines_removed) == (
        True,
        False,
        2,
        0,
    )
    assert [r.kind for r in result.page(1).hunks[0].lines] == ["added", "added"]
    result = check_roundtrip("a\nb\n", None)
    assert result.is_removed and result.status == "removed" and result.lines_removed == 2
    result = check_roundtrip("", "x")
    assert result.status == "changed" and not result.is_added
    assert count_line_changes("", "") == (0, 0)
    assert count_line_changes(None, "a\nb") == (2, 0)
    assert count_line_changes("a\nb\n", "") == (0, 2)
    assert count_line_changes("\n", "") == (0, 1)


def test_trailing_newline_difference_counts_last_line() -> None:
    assert count_line_changes("a\nb", "a\nb\n") == (1, 1)
    assert count_line_changes("a\nb\n", "a\nb") == (1, 1)
    assert count_line_changes("a\nb", "a\nb") == (0, 0)
    assert count_line_changes("a\nb", "a\nb\nc") == (2, 1)
    result = check_roundtrip("a\nb", "a\nb\n")
    rows = result.page(1).hunks[0].lines
    assert [(r.kind, r.eol, r.no_eol) for r in rows] == [
        ("context", "lf", False),
        ("removed", "none", True),
        ("added", "lf", False),
    ]
    result = check_roundtrip("a\n", "a\n\n")
    assert (result.lines_added, result.lines_removed) == (1, 0)


# --------------------------------------------------------------------------------------------
# Engines: C++ and Python agree; many unique lines; fallback
# --------------------------------------------------------------------------------------------

LINE_POOL = ["", "a", "b", "c", "{", "}", "  x: 1;", "  x: 2;", "a\r", "é👋", "\t"]
lines_st = st.lists(st.sampled_from(LINE_POOL), max_size=40)


def as_text(lines: list[str], eol: bool) -> str:
    return "\n".join(lines) + ("\n" if eol and lines else "")


@needs_cpp
@given(lines_st, lines_st, st.booleans(), st.booleans())
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_engines_agree_on_line_mode(a: list[str], b: list[str], ea: bool, eb: bool) -> None:
    old, new = as_text(a, ea), as_text(b, eb)
    ka, kb = diffing._keys(*split_lines(old)), diffing._keys(*split_lines(new))
    assert line_ops(ka, kb, engine="cpp")[0] == line_ops(ka, kb, engine="python")[0]
    cpp = compute_diff(old, new, engine="cpp")
    py = compute_diff(old, new, engine="python")
    assert cpp.spans == py.spans and cpp.trailing_gap == py.trailing_gap
    assert count_line_changes(old, new, engine="cpp") == count_line_changes(
        old, new, engine="python"
    )
    check_roundtrip(old, new, engine="python")


@needs_cpp
@given(st.text(max_size=80), st.text(max_size=80))
@settings(max_examples=300, deadline=None)
def test_engines_agree_on_free_text(old: str, new: str) -> None:
    cpp = compute_diff(old, new, engine="cpp")
    py = compute_diff(old, new, engine="python")
    assert cpp.spans == py.spans
    assert rebuild(cpp) == rebuild(py) == (display(old), display(new))


@needs_cpp
@given(
    st.text(alphabet="ab c;:{}-_1é👋", max_size=50), st.text(alphabet="ab c;:{}-_1é👋", max_size=50)
)
@settings(max_examples=300, deadline=None)
def test_engines_agree_on_word_diff(a: str, b: str) -> None:
    assert word_diff(a, b, engine="cpp") == word_diff(a, b, engine="python")


@needs_cpp
def test_engines_agree_on_random_edits() -> None:
    rnd = random.Random(7)
    pool = [f"  prop-{i}: {i % 7};" for i in range(60)] + ["}", "", ".x {"]
    for _ in range(60):
        old = [rnd.choice(pool) for _ in range(rnd.randint(0, 300))]
        new = list(old)
        for _ in range(rnd.randint(0, 30)):
            op = rnd.random()
            pos = rnd.randint(0, len(new))
            if op < 0.4:
                new.insert(pos, rnd.choice(pool + [f"new {rnd.random()}"]))
            elif op < 0.7 and new:
                del new[min(pos, len(new) - 1)]
            elif new:
                new[min(pos, len(new) - 1)] = f"edited {rnd.random()}"
        a, b = join(old), join(new)
        assert compute_diff(a, b, engine="cpp").spans == compute_diff(a, b, engine="python").spans
        for engine in diffing.ENGINES:
            check_roundtrip(a, b, engine=engine)


def test_discarding_keeps_counts_minimal() -> None:
    """Setting one-sided lines aside must not change the counts of a minimal line diff."""
    import difflib

    rnd = random.Random(3)
    for _ in range(100):
        old = [rnd.choice("abcdefgh") for _ in range(rnd.randint(0, 25))]
        new = [rnd.choice("abcdefghxyz") for _ in range(rnd.randint(0, 25))]
        ops, _ = line_ops(old, new)
        common = sum(n for op, n in ops if op == "=")
        sm = difflib.SequenceMatcher(None, old, new, autojunk=False)
        lcs = _lcs_len(old, new)
        assert common <= lcs and common >= sum(b.size for b in sm.get_matching_blocks())
        assert sum(n for op, n in ops if op != "+") == len(old)
        assert sum(n for op, n in ops if op != "-") == len(new)


def _lcs_len(a: list[str], b: list[str]) -> int:
    prev = [0] * (len(b) + 1)
    for x in a:
        cur = [0]
        for j, y in enumerate(b):
            cur.append(prev[j] + 1 if x == y else max(prev[j + 1], cur[j]))
        prev = cur
    return prev[-1]


def test_many_unique_lines_beyond_bmp_and_surrogates() -> None:
    n = 70_000  # more shared unique lines than the BMP outside the surrogates can code
    old = [f"unique line {i}" for i in range(n)]
    new = list(old)
    new[0] = "first changed"
    new[n // 2 : n // 2 + 10] = []  # delete a block
    new[-1] = "last changed"
    moved = old[1000:1010]
    new[2000:2000] = moved  # copy a block elsewhere: shared lines the engine must align
    a, b = join(old), join(new)
    results = [compute_diff(a, b, engine=e) for e in diffing.ENGINES]
    for result in results:
        assert (result.lines_added, result.lines_removed) == (12, 12)
        assert result.method in diffing.ENGINES
    assert len({tuple(r.spans) for r in results}) == 1
    assert rebuild(results[0]) == (old, new)
    ca, cb, overflow = diffing._lines_to_chars(old, new)
    assert not overflow
    assert max(map(ord, ca)) > 0xFFFF
    assert not any(0xD800 <= ord(c) <= 0xDFFF for c in ca + cb)


def test_fallback_when_too_many_distinct_lines() -> None:
    rnd = random.Random(5)
    for _ in range(200):
        old = [f"l{rnd.randint(0, 30)}" for _ in range(rnd.randint(1, 40))]
        new = [f"l{rnd.randint(0, 30)}" for _ in range(rnd.randint(1, 40))]
        new[0], new[-1] = "first", "last"  # no common ends to trim
        for engine in diffing.ENGINES:
            ops, method = line_ops(old, new, engine=engine, max_codes=3)
            assert method in (engine, f"{engine}-wrapped")
            _assert_valid_ops(ops, old, new)
    # Common ends trimmed first: the middle fits and the engine is used unwrapped.
    old = [f"l{i}" for i in range(50)]
    new2 = old[:20] + ["x", "y"] + old[22:]
    ops2, method2 = line_ops(old, new2, max_codes=5)
    assert method2 in diffing.ENGINES and ops2 == [("=", 20), ("-", 2), ("+", 2), ("=", 28)]


def _assert_valid_ops(ops: list[tuple[str, int]], old: list[str], new: list[str]) -> None:
    """Ops are normalised and really turn ``old`` into ``new``."""
    i = j = 0
    got: list[str] = []
    for op, n in ops:
        assert n > 0
        if op == "=":
            assert old[i : i + n] == new[j : j + n]
            got += old[i : i + n]
            i, j = i + n, j + n
        elif op == "-":
            i += n
        else:
            got += new[j : j + n]
            j += n
    assert (i, j) == (len(old), len(new)) and got == new
    assert all(x[0] != y[0] for x, y in zip(ops, ops[1:], strict=False))


@pytest.mark.slow
def test_more_than_a_million_unique_lines_falls_back_gracefully() -> None:
    n = diffing.MAX_CODES + 10
    old = [f"{i}" for i in range(n)]
    new = ["changed first", *old[1 : n // 2], "middle", *old[n // 2 + 1 : -1], "changed last"]
    added, removed = count_line_changes(join(old), join(new))
    assert (added, removed) == (3, 3)
    result = compute_diff(join(old), join(new))
    assert result.method.endswith("-wrapped") and result.hunk_count == 3
    assert result.page(1).hunks[0].header == "@@ -1,4 +1,4 @@"


def test_engine_selection() -> None:
    assert diffing.ENGINES[0] == diffing.DEFAULT_ENGINE
    assert diffing.engine_diff("abc", "abd", engine="python") == [("=", 2), ("-", 1), ("+", 1)]
    if HAS_CPP:
        assert diffing.engine_diff("abc", "abd", engine="cpp") == [("=", 2), ("-", 1), ("+", 1)]


def test_count_line_changes_matches_compute_diff_on_realistic_css() -> None:
    rnd = random.Random(11)
    old = [f".c{i} {{ color: #{i:03x}; }}" for i in range(3000)]
    new = list(old)
    for i in rnd.sample(range(3000), 60):
        new[i] = new[i].replace("color", "background")
    a, b = join(old), join(new)
    result = compute_diff(a, b)
    assert (result.lines_added, result.lines_removed) == (60, 60)
    assert count_line_changes(a, b) == (60, 60)
    assert result.hunk_count <= 60 and result.num_pages() >= 1


_line_soup = st.lists(st.sampled_from(["a", "b", "c", "\n", "\n", "x\n", "foo\n", "é\r\n"]))


@settings(max_examples=400, deadline=None)
@given(old=_line_soup, new=_line_soup)
def test_counting_trims_shared_ends_without_changing_the_counts(old, new):
    old_text, new_text = "".join(old), "".join(new)
    a, a_noeol = diffing.split_lines(old_text)
    b, b_noeol = diffing.split_lines(new_text)
    if old_text == new_text:
        expected = (0, 0)
    elif not a or not b:
        expected = (len(b), len(a))
    else:
        ops, _ = diffing.line_ops(diffing._keys(a, a_noeol), diffing._keys(b, b_noeol))
        expected = (sum(n for op, n in ops if op == "+"), sum(n for op, n in ops if op == "-"))
    assert count_line_changes(old_text, new_text) == expected
