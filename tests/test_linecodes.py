"""Big sources' lines split and coded in Arrow (``versions.linecodes``) give the same diff as the
pure-Python path: the same hunks, counts, rendered rows and context, and the same capture counts.

The Arrow path runs for sources of ``linecodes.MIN_BYTES`` and more; these tests lower the
threshold to 0 to run it on small, hostile inputs and compare it with the Python path.
"""

from __future__ import annotations

import pickle
import random
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from test_diffing import all_rows, check_roundtrip

from versions import diffing, linecodes
from versions.diffing import DiffResult, StaleContext, compute_diff, count_line_changes
from versions.linecodes import ArrowLines


@pytest.fixture(autouse=True)
def _arrow_installed() -> None:
    # pyarrow is a dependency (pyproject.toml): its absence is a broken install, not a skip.
    assert linecodes.available(), "pyarrow is not importable"


@pytest.fixture
def arrow_always(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(linecodes, "MIN_BYTES", 0)
    yield


@contextmanager
def threshold(size: int) -> Iterator[None]:
    """Arrow codes the lines of sources of ``size`` bytes and more (0: always, huge: never)."""
    saved = linecodes.MIN_BYTES
    linecodes.MIN_BYTES = size
    try:
        yield
    finally:
        linecodes.MIN_BYTES = saved


ARROW, PYTHON = 0, 2**62


def both_paths(old: bytes, new: bytes) -> tuple[DiffResult, DiffResult]:
    """The diff through Arrow and through the Python path."""
    with threshold(ARROW):
        arrow = compute_diff(old, new)
    with threshold(PYTHON):
        return arrow, compute_diff(old, new)


def counts_both(old: bytes, new: bytes) -> tuple[tuple[int, int], tuple[int, int]]:
    with threshold(ARROW):
        arrow = count_line_changes(old, new)
    with threshold(PYTHON):
        return arrow, count_line_changes(old, new)


def assert_same(arrow: DiffResult, python: DiffResult, old: bytes, new: bytes) -> None:
    if old != new and (old or new):
        assert isinstance(arrow.old_lines, ArrowLines), "the Arrow path did not run"
    assert arrow.span_rows == python.span_rows
    assert arrow.trailing_gap == python.trailing_gap
    assert (arrow.lines_added, arrow.lines_removed) == (python.lines_added, python.lines_removed)
    assert arrow.method == python.method
    assert (arrow.old_no_eol, arrow.new_no_eol) == (python.old_no_eol, python.new_no_eol)
    assert arrow.old_line_count == python.old_line_count
    assert arrow.new_line_count == python.new_line_count
    assert arrow.both_empty == python.both_empty
    assert list(arrow.old_lines) == list(python.old_lines)
    assert list(arrow.new_lines) == list(python.new_lines)
    # Every rendered row, with every collapsed gap expanded, is the same.
    assert all_rows(arrow) == all_rows(python)


POOL = [b"", b"a", b"b", b"{", b"}", b"  x: 1;", b"  x: 2;", b"a\r", "é👋".encode(), b"\t", b"\x00"]
lines_st = st.lists(st.sampled_from(POOL), max_size=40)


def joined(lines: list[bytes], eol: bool) -> bytes:
    return b"\n".join(lines) + (b"\n" if eol and lines else b"")


@given(lines_st, lines_st, st.booleans(), st.booleans())
@example([b"a", b"b"], [b"a", b"b"], False, True)  # only the final newline differs
@example([b"x", b"a"], [b"y", b"x", b"a"], True, True)  # a suffix longer than the prefix
@example([b"a"], [b"a", b"a"], False, False)  # the same last line, one side terminated
@example([b"a", b"b"], [b"c", b"b"], False, False)  # both unterminated, same last line
@example([], [b""], False, True)  # an empty text against one empty line
@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_arrow_and_python_paths_agree(a: list[bytes], b: list[bytes], ea: bool, eb: bool) -> None:
    old, new = joined(a, ea), joined(b, eb)
    arrow, python = both_paths(old, new)
    assert_same(arrow, python, old, new)
    arrow_counts, python_counts = counts_both(old, new)
    assert arrow_counts == python_counts == (python.lines_added, python.lines_removed)


@given(st.binary(max_size=120), st.binary(max_size=120))
@settings(max_examples=300, deadline=None)
def test_arrow_and_python_paths_agree_on_any_bytes(old: bytes, new: bytes) -> None:
    # Any bytes: lines the Python path never decodes unless shown; only valid UTF-8 is shown.
    arrow, python = both_paths(old, new)
    assert arrow.span_rows == python.span_rows
    assert (arrow.lines_added, arrow.lines_removed) == (python.lines_added, python.lines_removed)
    assert list(arrow.old_lines) == list(python.old_lines)
    assert list(arrow.new_lines) == list(python.new_lines)
    assert counts_both(old, new)[0] == counts_both(old, new)[1]


def stylesheet(rules: int, seed: int) -> list[bytes]:
    rnd = random.Random(seed)
    values = [b"0", b"1px", b"auto", b"#333", b"red", b"inherit"]
    out: list[bytes] = []
    for i in range(rules):
        out.append(b".c%d > a {" % i)
        out += [b"  p%d: %s;" % (k, rnd.choice(values)) for k in range(rnd.randint(1, 5))]
        out.append(b"}")
    return out


def test_a_big_stylesheet_takes_the_arrow_path_with_the_same_diff() -> None:
    """At the default threshold: a source of a few hundred KB is coded in Arrow, and every
    hunk, count and expander is the Python path's; a moved block and repeated lines (most
    lines of a stylesheet occur many times) included."""
    lines = stylesheet(6000, seed=1)
    new = list(lines)
    rnd = random.Random(2)
    for i in rnd.sample(range(len(new)), 400):
        new[i] = new[i].replace(b":", b": /* v2 */", 1)
    new[5000:5000] = lines[100:160]  # a block copied elsewhere
    del new[200:230]
    old_text, new_text = joined(lines, True), joined(new, False)
    assert len(old_text) + len(new_text) >= linecodes.MIN_BYTES
    arrow = compute_diff(old_text, new_text)
    assert isinstance(arrow.old_lines, ArrowLines)
    with threshold(PYTHON):
        python = compute_diff(old_text, new_text)
        python_counts = count_line_changes(old_text, new_text)
    assert_same(arrow, python, old_text, new_text)
    assert count_line_changes(old_text, new_text) == python_counts
    # A capture's counts (the trimmed middle is still big enough for Arrow) are the diff's.
    assert python_counts == (arrow.lines_added, arrow.lines_removed)


def test_text_sources_and_small_ones_keep_the_python_path() -> None:
    big = "\n".join(f"line {i}" for i in range(20_000))
    assert isinstance(compute_diff(big, big + "x").old_lines, list)  # text: the Python path
    assert isinstance(compute_diff(b"a\nb\n", b"a\nc\n").old_lines, list)  # small bytes
    same = big.encode()
    assert isinstance(compute_diff(same, same).old_lines, list)  # identical: nothing to code


def test_roundtrip_through_the_arrow_path(arrow_always: None) -> None:
    """Rows rebuild both texts with line numbers 1..N, and counts match the capture's."""
    rnd = random.Random(5)
    pool = [f"  prop-{i}: {i % 7};" for i in range(40)] + ["}", "", ".x {", "é👋\r"]
    for _ in range(40):
        old = [rnd.choice(pool) for _ in range(rnd.randint(0, 200))]
        new = list(old)
        for _ in range(rnd.randint(0, 20)):
            pos = rnd.randint(0, len(new))
            if rnd.random() < 0.5:
                new.insert(pos, rnd.choice(pool + [f"new {rnd.random()}"]))
            elif new:
                del new[min(pos, len(new) - 1)]
        a = ("\n".join(old) + "\n").encode()
        b = "\n".join(new).encode()
        result = check_roundtrip(a.decode(), b.decode())  # text: Python path, the reference
        arrow = compute_diff(a, b)
        assert arrow.span_rows == result.span_rows


def test_context_of_an_arrow_result_refuses_what_the_python_one_refuses(
    arrow_always: None,
) -> None:
    old = b"a\nb\nc\nd\ne\nf\ng\nh\ni\nj\nk"
    new = b"a\nb\nc\nd\nX\nf\ng\nh\ni\nj\nk\n"  # one line changed; the last one now ends
    arrow = compute_diff(old, new)
    assert isinstance(arrow.old_lines, ArrowLines)
    assert [r.new_no for r in arrow.context_lines(1, 1, 2)] == [1, 2]
    with pytest.raises(StaleContext):
        arrow.context_lines(4, 4, 2)  # "d", "e" against "d", "X"
    with pytest.raises(StaleContext):
        arrow.context_lines(11, 11, 1)  # "k" without a newline against "k" with one
    with pytest.raises(StaleContext):
        arrow.context_lines(11, 11, 2)  # past the end


def test_an_arrow_result_pickles_and_renders_the_same() -> None:
    old = b"".join(b"line %d\n" % i for i in range(10_000))
    new = old.replace(b"line 500\n", b"line 500 changed\n")
    result = compute_diff(old, new)
    assert isinstance(result.old_lines, ArrowLines)
    again = pickle.loads(pickle.dumps(result))
    assert again.span_rows == result.span_rows
    assert again.old_lines == result.old_lines
    assert all_rows(again) == all_rows(result)


def test_arrow_lines_behave_like_a_list_of_lines(arrow_always: None) -> None:
    coded = linecodes.code_lines(b"a\nbb\n\nccc\n", b"a\nx\n")
    assert coded is not None
    lines = coded.old_lines
    assert len(lines) == 4 and lines[0] == b"a" and lines[-1] == b"ccc" and lines[2] == b""
    assert lines[1:3] == [b"bb", b""] and lines[::2] == [b"a", b""] and lines[3:99] == [b"ccc"]
    assert lines == [b"a", b"bb", b"", b"ccc"] and lines != [b"a"]
    with pytest.raises(IndexError):
        lines[4]
    assert (coded.prefix, coded.suffix) == (1, 0)


def test_too_many_distinct_lines_fall_back_to_the_python_path(
    monkeypatch: pytest.MonkeyPatch, arrow_always: None
) -> None:
    """Past the code points Arrow's codes can use, the Python path (which wraps codes around
    and verifies equal runs) takes over."""
    monkeypatch.setattr(linecodes, "MAX_DISTINCT", 3)
    old = b"".join(b"%d\n" % i for i in range(10))
    new = old.replace(b"5\n", b"five\n")
    assert linecodes.code_lines(old, new) is None
    result = compute_diff(old, new)
    assert isinstance(result.old_lines, list)
    assert (result.lines_added, result.lines_removed) == (1, 1)


def test_the_engine_sees_the_same_equality_pattern_as_the_python_path(arrow_always: None) -> None:
    """The codes differ (dictionary indices against first occurrences) but the characters the
    engine compares are equal exactly where the Python path's are."""
    rnd = random.Random(11)
    pool = [b"x%d" % i for i in range(30)]
    old_lines = [rnd.choice(pool) for _ in range(300)]
    new_lines = [rnd.choice(pool + [b"only-new"]) for _ in range(280)]
    old, new = joined(old_lines, True), joined(new_lines, True)
    coded = linecodes.code_lines(old, new)
    assert coded is not None and coded.old_codes is not None and coded.new_codes is not None
    a = diffing._keys(*diffing.split_lines(old))
    b = diffing._keys(*diffing.split_lines(new))
    pre, suf = diffing._common_ends(a, b)
    assert (pre, suf) == (coded.prefix, coded.suffix)
    ca, cb, _ = diffing._lines_to_chars(a[pre : len(a) - suf], b[pre : len(b) - suf])
    arrow = coded.old_codes + coded.new_codes
    python = ca + cb
    assert len(arrow) == len(python)
    pairs = {(x, y) for x, y in zip(arrow, python, strict=True)}
    assert len({x for x, _ in pairs}) == len(pairs) == len({y for _, y in pairs})
