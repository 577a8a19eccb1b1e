"""Line mode's line coding in Apache Arrow's C++ kernels (pyarrow), for big sources.

diff-match-patch's line mode codes every line as one character before it diffs (its
linesToChars). In Python that means a bytes object per line and a dict lookup or two per line:
for a 1.5 MB stylesheet (100,000 lines a side) about 40 ms, most of a first view. Arrow splits
both sources on ``\\n`` and dictionary-encodes their lines in C++ (a hash table with an
equality check, so equal codes are equal bytes), with no Python object per line; the lines
stay in Arrow buffers and are made into ``bytes`` only when a hunk shows them.

:func:`code_lines` gives what :func:`versions.diffing.line_ops` works out before it calls the
engine — the lines both sides share at the start and the end, and the middles' codes, with
lines present on one side only as that side's sentinel — so the engine diffs the same
characters' equality pattern either way, and the diff is the same (the engine compares code
points for equality only). The pure-Python path stays the reference; the tests check that both
agree. Where pyarrow cannot be imported (it is a dependency), or a source is small (the fixed
cost of the kernels is then more than the Python path's), :func:`code_lines` answers ``None``
and the Python path runs.
"""

from __future__ import annotations

import sys
import threading
from array import array
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, overload

# Sources of fewer bytes (both sides together) take the Python path, where the kernels' fixed
# cost is more than they save (tests/perf/bench_diff_engine.py's "crossover": 1.1x at 64 KB,
# 0.9x at 128 KB, 0.7x at 512 KB and 1.5 MB).
MIN_BYTES = 128 * 1024
# The codes are dictionary indices moved past the sentinels and the surrogate block; beyond
# this many distinct lines they would run out of code points (the Python path then wraps).
_FIRST_CODE = 3
_SURROGATES = 0xD800
_SURROGATE_SPAN = 0x800
MAX_DISTINCT = 0x110000 - _SURROGATE_SPAN - _FIRST_CODE - 2
# Arrow's binary arrays address their bytes with 32-bit offsets.
_MAX_SOURCE = 2**31 - 1
_UTF32 = "utf-32-le" if sys.byteorder == "little" else "utf-32-be"

_pa: Any = None
_pc: Any = None
# Arrow scalars made once: a Python value given to a kernel is converted on every call, and
# the conversion tries an import (dateutil's) that, where it fails, searches sys.path again
# each time (0.1 ms a call).
_K: dict[str, Any] = {}
_LOADED = False
_LOAD_LOCK = threading.Lock()


def _load() -> bool:
    """Import pyarrow once (about 0.25 s), on the first big diff; False where it is missing."""
    global _pa, _pc, _LOADED
    if _LOADED:
        return _pa is not None
    with _LOAD_LOCK:
        if not _LOADED:
            try:
                import pyarrow
                import pyarrow.compute
            except ImportError:  # pragma: no cover - depends on the environment
                pass
            else:
                _pa, _pc = pyarrow, pyarrow.compute
                int32 = pyarrow.int32()
                _K.update(
                    first=pyarrow.scalar(_FIRST_CODE, int32),
                    surrogates=pyarrow.scalar(_SURROGATES, int32),
                    span=pyarrow.scalar(_SURROGATE_SPAN, int32),
                    old_only=pyarrow.scalar(1, int32),
                    new_only=pyarrow.scalar(2, int32),
                    true=pyarrow.scalar(True),
                )
            _LOADED = True
    return _pa is not None


def available() -> bool:
    """Whether Arrow's kernels can code lines here (pyarrow importable)."""
    return _load()


class ArrowLines(Sequence[bytes]):
    """A source's lines (without their ``\\n``) held in an Arrow binary array: indexing gives
    ``bytes`` and slicing a list of them, as the Python path's list of lines does."""

    __slots__ = ("_array",)

    def __init__(self, lines: Any) -> None:
        self._array = lines

    def __len__(self) -> int:
        return len(self._array)

    @overload
    def __getitem__(self, index: int) -> bytes: ...

    @overload
    def __getitem__(self, index: slice) -> list[bytes]: ...

    def __getitem__(self, index: int | slice) -> bytes | list[bytes]:
        if isinstance(index, slice):
            start, stop, step = index.indices(len(self._array))
            if step != 1:
                return [self[i] for i in range(start, stop, step)]
            return self._array.slice(start, max(0, stop - start)).to_pylist()  # type: ignore[no-any-return]
        n = len(self._array)
        if index < 0:
            index += n
        if not 0 <= index < n:
            raise IndexError("line index out of range")
        return self._array[index].as_py()  # type: ignore[no-any-return]

    def __iter__(self) -> Iterator[bytes]:
        return iter(self._array.to_pylist())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, ArrowLines):
            return bool(self._array.equals(other._array))
        if isinstance(other, list):
            return len(other) == len(self) and self[:] == other
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"ArrowLines({len(self)} lines)"

    def __reduce__(self) -> tuple[Any, ...]:
        return (ArrowLines, (self._array,))


@dataclass(frozen=True, slots=True)
class CodedLines:
    """Two sources' lines and what line mode needs of them before the engine runs.

    ``prefix``/``suffix``: lines both share at the start / the end (as
    ``diffing._common_ends`` finds them); ``old_codes``/``new_codes``: one character per line
    of the middles, ``None`` when a middle is empty (nothing for the engine to do)."""

    old_lines: ArrowLines
    new_lines: ArrowLines
    old_no_eol: bool
    new_no_eol: bool
    prefix: int
    suffix: int
    old_codes: str | None
    new_codes: str | None


def worth_it(old: bytes, new: bytes) -> bool:
    """Whether these sources are big enough for Arrow (and Arrow is installed)."""
    size = len(old) + len(new)
    return size >= MIN_BYTES and len(old) <= _MAX_SOURCE and len(new) <= _MAX_SOURCE and _load()


def _split(text: bytes) -> tuple[Any, bool]:
    """The lines of ``text`` (split on ``\\n``, as ``diffing.split_lines``) and whether the last
    one lacks a newline."""
    pa, pc = _pa, _pc
    if not text:
        return pa.array([], pa.binary()), False
    offsets = pa.py_buffer(array("i", [0, len(text)]).tobytes())
    whole = pa.Array.from_buffers(pa.binary(), 1, [None, offsets, pa.py_buffer(text)])
    lines = pc.split_pattern(whole, b"\n").flatten()
    if text.endswith(b"\n"):
        return lines.slice(0, len(lines) - 1), False
    return lines, True


def _first_true(mask: Any) -> int:
    """Index of the first true value of a boolean array, or its length when there is none."""
    found = _pc.index(mask, _K["true"]).as_py()
    return len(mask) if found == -1 else int(found)


def _codes(indices: Any, shared: Any, sentinel: Any) -> str:
    """One character per line: its dictionary index moved past the sentinels (and the surrogate
    block) where ``shared``, else ``sentinel`` (an Arrow int32 scalar)."""
    pc = _pc
    code = pc.add(indices, _K["first"])
    code = pc.if_else(pc.less(code, _K["surrogates"]), code, pc.add(code, _K["span"]))
    code = pc.if_else(shared, code, sentinel)
    data = code.buffers()[1]
    start = code.offset * 4
    return bytes(memoryview(data)[start : start + 4 * len(code)]).decode(_UTF32)


def _with_last(indices: Any, value: int) -> Any:
    """``indices`` with its last entry replaced by ``value``."""
    pa = _pa
    head = indices.slice(0, len(indices) - 1)
    return pa.concat_arrays([head, pa.array(array("i", [value]), head.type)])


def code_lines(old: bytes, new: bytes) -> CodedLines | None:
    """Split and code two sources' lines in Arrow (see the module's doc), or ``None`` where the
    Python path must do it: Arrow missing, sources small or too big, too many distinct lines."""
    if not worth_it(old, new):
        return None
    pa, pc = _pa, _pc
    a, a_noeol = _split(old)
    b, b_noeol = _split(new)
    # One dictionary for both sides: equal lines (equal bytes) get equal indices.
    encoded = pc.dictionary_encode(pa.concat_arrays([a, b]))
    distinct = len(encoded.dictionary)
    if distinct > MAX_DISTINCT:
        return None
    indices = encoded.indices
    ia, ib = indices.slice(0, len(a)), indices.slice(len(a))
    # A last line without a newline equals only the other side's last line without one, with
    # the same bytes (``diffing._keys``): fresh indices beyond the dictionary's.
    if a_noeol:
        ia = _with_last(ia, distinct)
    if b_noeol:
        same = a_noeol and len(a) and a[len(a) - 1].as_py() == b[len(b) - 1].as_py()
        ib = _with_last(ib, distinct if same else distinct + 1)
    old_lines, new_lines = ArrowLines(a), ArrowLines(b)
    n = min(len(ia), len(ib))
    if not n:
        return CodedLines(old_lines, new_lines, a_noeol, b_noeol, 0, 0, None, None)
    prefix = _first_true(pc.not_equal(ia.slice(0, n), ib.slice(0, n)))
    suffix = 0
    if prefix < n:
        tail = pc.not_equal(ia.slice(len(ia) - n), ib.slice(len(ib) - n))
        differing = pc.indices_nonzero(tail)
        # The first line from the end that differs (none: all n do not).
        suffix = n - 1 - differing[len(differing) - 1].as_py() if len(differing) else n
        suffix = min(suffix, n - prefix)
    mid_a = ia.slice(prefix, len(ia) - prefix - suffix)
    mid_b = ib.slice(prefix, len(ib) - prefix - suffix)
    if not len(mid_a) or not len(mid_b):
        return CodedLines(old_lines, new_lines, a_noeol, b_noeol, prefix, suffix, None, None)
    # Lines on one side only (of the middles) can never match: that side's sentinel.
    old_codes = _codes(mid_a, pc.is_in(mid_a, value_set=pc.unique(mid_b)), _K["old_only"])
    new_codes = _codes(mid_b, pc.is_in(mid_b, value_set=pc.unique(mid_a)), _K["new_only"])
    return CodedLines(old_lines, new_lines, a_noeol, b_noeol, prefix, suffix, old_codes, new_codes)
