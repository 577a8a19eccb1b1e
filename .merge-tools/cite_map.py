#!/usr/bin/env python3
"""Rewrite every "SPEC §N" citation of a Versions tree into a citation of its own docs.

    python cite_map.py [ROOT] [--dry-run] [--no-format]

ROOT defaults to the current folder. Every text file under it (but .git, virtualenvs,
node_modules, staticfiles and caches) is read; each "SPEC §N" (and the "§M" that follow it in
one citation: "SPEC §4, §13", "SPEC §6 (and §13)") becomes the doc section that now says what
§N said, chosen from the words around it: "(SPEC §13)" → "(docs/architecture.md#environments)".
The identifiers that spell SPEC (routes.py's SPEC_* messages, a test's ROUTE_SPEC, .ci/compat's
DJANGO_SPEC) are renamed too, so that `grep -rn SPEC` finds nothing afterwards.

In Python files, a line the rewrite makes longer than 100 characters is re-wrapped: a comment
or docstring line pours its last words into the next line of the same paragraph (or a new
one); a string literal inside brackets is split in two literals. Then `ruff format` runs on the
Python files it changed (unless --no-format or ruff is missing), as the project is formatted.

Idempotent: a second run finds no "SPEC" and changes nothing. It prints what it changed and
anything it could not map or wrap (exit 1 then). Check afterwards, from ROOT:

    git grep -n SPEC                         # nothing
    .venv/bin/ruff check . && .venv/bin/ruff format --check . && .venv/bin/mypy versions
    .venv/bin/python manage.py makemigrations --check --dry-run   # help_text kept equal

Every target is an anchor (<a id="…">) of docs/architecture.md, api.md, operations.md or
performance.md; citations are mapped by the words before them (the line before too when the
citation opens its line), then by the section's default (RULES); PHRASES says some better.
"""

from __future__ import annotations

import argparse
import io
import os
import re
import shutil
import subprocess
import sys
import tokenize
from pathlib import Path

LINE_LENGTH = 100
SKIP_DIRS = {
    ".git",
    ".venv",
    ".venv-compat",
    "node_modules",
    "staticfiles",
    "__pycache__",
    ".mypy_cache",
    ".ruff_cache",
    ".pytest_cache",
}

A = "docs/architecture.md"
API = "docs/api.md"
OPS = "docs/operations.md"
PERF = "docs/performance.md"

# Per section: (words in the citation's context → where that is documented now), first match
# wins; the last entry (None) is the section's default.
RULES: dict[str, list[tuple[str | None, str]]] = {
    "2": [
        (r"retention|prune|pins\b|pinned", f"{A}#retention"),
        (r"change set|grouping|turn", f"{A}#change-sets"),
        (r"limits|settings", f"{OPS}#settings"),
        (None, f"{A}#domain"),
    ],
    "3": [
        (r"turn rule|grouped", f"{A}#change-sets"),
        (r"limits|settings", f"{OPS}#settings"),
        (r"receipt", f"{API}#receipts"),
        (None, f"{A}#write-path"),
    ],
    "4": [
        (r"receipt|keys|json|answer", f"{API}#receipts"),
        (r"step 2|pre-flight of restore all", f"{A}#restore-all"),
        (None, f"{A}#restore"),
    ],
    "5": [(None, f"{A}#live-app")],
    "6": [
        (r"permission|who may", f"{A}#access"),
        (None, f"{A}#panel"),
    ],
    "6b": [(None, f"{A}#release-review")],
    "7": [
        (r"database|error|status|json even|mid-request", f"{API}#errors"),
        (r"point with who|history", f"{API}#history"),
        (r"optional|bodies", f"{API}#restore"),
        (None, f"{API}#routes"),
    ],
    "8": [(None, f"{API}#mcp")],
    "9": [(None, f"{A}#workspace-rollback")],
    "11": [(None, f"{A}#storage")],
    "12": [
        (r"status table|→ status", f"{API}#errors"),
        (r"restore flow|one flow|one path for", f"{A}#restore-flow"),
        (None, f"{A}#layers"),
    ],
    "13": [
        (r"receipt|json of|as_dict", f"{API}#receipts"),
        (r"can-promote|--can", f"{API}#mcp-tools"),
        (None, f"{A}#environments"),
    ],
    "14": [(None, f"{A}#revert")],
    "15": [
        (r"hints|mcp", f"{API}#mcp"),
        (r"problem|html error|gunicorn|rfc 9457", f"{API}#errors"),
        (r"openapi|headers the|rule a request|case-insensitive", f"{API}#conventions"),
        (r"message|who really|written_by|principal", f"{API}#turn-messages"),
        (None, f"{API}#history"),
    ],
    "16": [
        (r"heading|axe", f"{A}#reviewing"),
        (None, f"{A}#reviewing"),
    ],
    "17": [
        (r"throttl|sign-in|axes", f"{OPS}#sign-in-throttling"),
        (r"token", f"{OPS}#agent-tokens"),
        (
            r"refuse[sd]? to start|unsafe|production settings|development key",
            f"{OPS}#production-settings",
        ),
        (r"database|json even|mid-request", f"{API}#errors"),
        (r"sandbox|route spec|proxy|middleware|django's 404", f"{A}#live-app-safety"),
        (r"gitignor|workspace|rollback|timestamp|plan file|seed", f"{A}#workspace-rollback"),
        (r"only (by )?spaces|artifact named", f"{A}#write-path"),
        (r"retention|prune|pruned|counter-point|restor|debt|settled", f"{A}#retention"),
        (None, f"{OPS}#production"),
    ],
    "18": [
        (r"prune_vs_write|bench", f"{PERF}#bench-scale"),
        (r"delta|re-pack|repack|full cop", f"{A}#storage"),
        (r"kept whole|larger than the limit|retention", f"{A}#retention"),
        (None, f"{A}#scale"),
    ],
    "19": [(None, f"{A}#access")],
    # Not cited in the tree today; mapped in case a branch merged late cites them.
    "1": [(None, f"{A}#layers")],
    "10": [
        (r"bench|perf|ratio", f"{PERF}#running-benchmarks"),
        (r"demo|fixture", f"{OPS}#running"),
        (None, f"{OPS}#settings"),
    ],
    "20": [
        (r"receipt|serializ", f"{API}#receipts"),
        (r"retention|prune|sweep", f"{A}#retention"),
        (r"access|actor|preview", f"{A}#access"),
        (None, f"{A}#one-engine"),
    ],
    "21": [
        (r"webhook|notif|worker|task", f"{OPS}#workers"),
        (None, f"{A}#reviewing"),
    ],
    "22": [(None, f"{A}#environments")],
    "23": [
        (r"mcp", f"{API}#mcp"),
        (r"pagina|cursor", f"{API}#conventions"),
        (None, f"{API}#conventions"),
    ],
    "24": [
        (r"replica", f"{OPS}#several-servers"),
        (r"bench", f"{PERF}#bench-scale"),
        (None, f"{A}#scale"),
    ],
    "25": [
        (r"csp|sandbox", f"{A}#live-app-safety"),
        (r"backup|dump_app|load_app", f"{OPS}#backups"),
        (r"lock-out|sign-in|throttl", f"{OPS}#sign-in-throttling"),
        (r"name|confusable|nfc", f"{A}#write-path"),
        (None, f"{OPS}#production"),
    ],
}

# Sections whose default is only a last resort: when the words before a citation of one say
# nothing, the rest of its line is read too.
READ_ON = {"17"}

# Phrases that read better said another way (applied first, everywhere; each must keep the
# same words in models and migrations, whose help_text must stay equal).
PHRASES: list[tuple[str, str]] = [
    (
        "SPEC §4's refused pre-flight, at the top level, with the error's keys of §7.",
        f"The refused pre-flight of {API}#receipts, at the top level, with the error's keys "
        + f"({API}#errors).",
    ),
    (
        "SPEC §7's point with who really wrote it",
        f"the point of {API}#history with who really wrote it",
    ),
    ("the default view since SPEC §14", f"the default view ({A}#revert)"),
    ('"""SPEC §15 through the API:', f'"""History reads ({API}#history) through the API:'),
    ("(SPEC §4 keys,", f"(the keys of {API}#receipts,"),
    (
        "the keys of SPEC §4 and §7 as extension members (SPEC §15)",
        f"the keys of {API}#receipts and {API}#errors as extension members ({API}#errors)",
    ),
    ("and the engine's receipts (SPEC §4)", f"and the engine's receipts ({A}#restore)"),
    (
        "What an agent says and edits (SPEC §15)",
        f"What an agent says and edits ({API}#turn-messages)",
    ),
    ("(SPEC §6b, §13)", f"({A}#release-review, {A}#environments)"),
    (
        "What the agent was asked or did (SPEC §15)",
        f"What the agent was asked or did ({API}#turn-messages)",
    ),
    ("Who really wrote it (SPEC §15)", f"Who really wrote it ({API}#turn-messages)"),
    ("The receipt of SPEC §13.", f"The receipt of {API}#receipts."),
    ("(production and deployments, SPEC §13)", f"(production and deployments, {A}#environments)"),
    (
        "/* Production (SPEC §13): its deployments. */",
        f"/* Production ({A}#environments): its deployments. */",
    ),
    ('(SPEC §17: "listed as pruned', f'({A}#retention: "listed as pruned'),
]

# Identifiers that spell SPEC, renamed (word-bounded).
IDENTIFIERS: list[tuple[str, str]] = [
    (r"\bSPEC_([A-Z0-9_]+)\b", r"ROUTE_\1"),  # versions/services/routes.py's messages
    (r"\bROUTE_SPEC\b", "ROUTE_SOURCE"),  # tests/test_capture.py
    (r"\bDJANGO_SPEC\b", "DJANGO_REQUIREMENT"),  # .ci/compat
]

SECTION = r"§(\d+[a-z]?)"
# "SPEC §4", "SPEC §2, §17, §18", "SPEC §4 and §7", "SPEC §3 step 1"
CITATION = re.compile(
    r"SPEC " + SECTION + r"((?:(?:,\s+and\s+|,\s+|\s+and\s+|/)§\d+[a-z]?)*)(\s+step\s+\d+)?"
)
# A "§M" left on a line after a citation ("SPEC §6 (and §13)"), never an RFC's.
LONE = re.compile(r"(?<![\w§])(?<!RFC \d{4} )(?<!RFC \d{3} )§(\d+[a-z]?)(?![.\d])")


# A line that carries on the citation the line before ended with: "and §7 …", ", §13)".
CONTINUED = re.compile(r"^[\s#*/\"']*(?:and\s+|,\s*|\(and\s+)?§\d")


def cite(section: str, context: str, unmapped: list[str]) -> str:
    """The doc section that now says what ``section`` said, chosen by the words around it."""
    rules = RULES.get(section)
    if rules is None:
        unmapped.append(section)
        return f"{A}#layers"
    words = context.lower()
    for pattern, target in rules:
        if pattern is None or re.search(pattern, words):
            return target
    return rules[-1][1]


def rewrite_line(line: str, previous: str, unmapped: list[str]) -> str:
    """``line`` with its citations rewritten. Each is mapped by the words before it: the line
    before and this line up to the citation (the subject a citation backs comes first)."""
    for old, new in PHRASES:
        line = line.replace(old, new)
    if "SPEC §" not in line:
        return line
    source = line

    def group(match: re.Match[str]) -> str:
        before = source[: match.start()]
        opens_line = len(re.findall(r"\w+", before)) < 3
        context = (previous + " " if opens_line else "") + source[: match.end()]
        sections = [match.group(1), *re.findall(r"§(\d+[a-z]?)", match.group(2) or "")]
        targets: list[str] = []
        for section in sections:
            target = cite(section, context, unmapped)
            if section in READ_ON and target == RULES[section][-1][1]:
                target = cite(section, context + " " + source[match.end() :], unmapped)
            if target not in targets:
                targets.append(target)
        text = " and ".join(targets) if " and " in (match.group(2) or "") else ", ".join(targets)
        if match.group(3):
            text += "," + match.group(3).replace("  ", " ")
        return text

    line = CITATION.sub(group, line)
    return LONE.sub(lambda m: cite(m.group(1), previous + " " + source, unmapped), line)


def rewrite_text(text: str, unmapped: list[str]) -> tuple[str, set[int]]:
    """The text with every citation and identifier rewritten, and the changed line numbers."""
    lines = text.split("\n")
    changed: set[int] = set()
    for i, line in enumerate(lines):
        if "SPEC" not in line:
            continue
        new = rewrite_line(line, lines[i - 1] if i else "", unmapped)
        if "SPEC §" in line and i + 1 < len(lines) and CONTINUED.match(lines[i + 1]):
            # "... the keys of SPEC §4" / "and §7 that go with it": the citation goes on.
            following = LONE.sub(
                lambda m, line=line: cite(m.group(1), line, unmapped), lines[i + 1]
            )
            if following != lines[i + 1]:
                lines[i + 1] = following
                changed.add(i + 1)
        for pattern, repl in IDENTIFIERS:
            new = re.sub(pattern, repl, new)
        if new != line:
            lines[i] = new
            changed.add(i)
    return "\n".join(lines), changed


# --- re-wrapping Python lines the rewrite made too long -------------------------------------


def _string_spans(source: str) -> tuple[dict[int, tuple[int, int, int]], set[int], list]:
    """Line → (first line, last line, start column) of the triple-quoted string it is in;
    the comment lines; the single-line string tokens with their bracket depth."""
    spans: dict[int, tuple[int, int, int]] = {}
    comments: set[int] = set()
    singles = []
    depth = 0
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    except (tokenize.TokenError, SyntaxError):
        return spans, comments, singles
    for tok in tokens:
        if tok.type == tokenize.OP and tok.string in "([{":
            depth += 1
        elif tok.type == tokenize.OP and tok.string in ")]}":
            depth -= 1
        elif tok.type == tokenize.COMMENT:
            comments.add(tok.start[0] - 1)
        elif tok.type == tokenize.STRING:
            first, last = tok.start[0] - 1, tok.end[0] - 1
            if first != last:
                for n in range(first, last + 1):
                    spans[n] = (first, last, tok.start[1])
            else:
                singles.append((first, tok.start[1], tok.end[1], tok.string, depth))
    return spans, comments, singles


def _cut(text: str, limit: int, start: int) -> int | None:
    """Where to break ``text`` (at a space after column ``start``) to keep it within ``limit``."""
    cut = text.rfind(" ", start, limit + 1)
    return cut if cut > start else None


def _glue(tail: str) -> str:
    """What joins ``tail`` to the words that follow: nothing after a hyphenated word's hyphen."""
    return "" if re.search(r"\w-$", tail) else " "


def _wrap_comment(lines: list[str], i: int, reserved: set[int]) -> bool:
    line = lines[i]
    indent = line[: len(line) - len(line.lstrip())]
    prefix = indent + "# "
    rule = re.match(r"^(\s*#.*?\S) (-{3,}|={3,})$", line)
    if rule and len(rule.group(1)) + 5 <= LINE_LENGTH:
        # "# --- production (…) -----": the rule of dashes is cut to fit.
        lines[i] = rule.group(1) + " " + rule.group(2)[0] * (LINE_LENGTH - len(rule.group(1)) - 1)
        return True
    cut = _cut(line, LINE_LENGTH, len(prefix))
    if cut is None:
        return False
    head, tail = line[:cut].rstrip(), line[cut + 1 :].strip()
    lines[i] = head
    nxt = lines[i + 1] if i + 1 < len(lines) else None
    joins = (
        nxt is not None
        and i + 1 in reserved
        and nxt.startswith(prefix)
        and not nxt[len(prefix) :].startswith((" ", "-", "*", "•"))
        and nxt.strip() != "#"
    )
    if joins:
        lines[i + 1] = prefix + tail + _glue(tail) + nxt[len(prefix) :]
    else:
        lines.insert(i + 1, prefix + tail)
    return True


def _wrap_docstring(lines: list[str], i: int, span: tuple[int, int, int]) -> bool:
    first, last, column = span
    line = lines[i]
    indent = " " * column if i == first else line[: len(line) - len(line.lstrip())]
    start = column + 3 if i == first else len(indent)
    if line.lstrip().startswith(("- ", "* ")):
        indent += "  "  # a list item's continuation
    cut = _cut(line, LINE_LENGTH, start)
    if cut is None:
        return False
    head, tail = line[:cut].rstrip(), line[cut + 1 :].strip()
    lines[i] = head
    nxt = lines[i + 1] if i + 1 <= last and i + 1 < len(lines) else None
    joins = (
        nxt is not None
        and nxt.strip()
        and not nxt.strip().startswith(('"""', "'''", "- ", "* ", "::"))
        and nxt[: len(nxt) - len(nxt.lstrip())] == indent
        and not head.rstrip().endswith(('"""', "'''", "::"))
        and not tail.endswith(('"""', "'''"))
    )
    if joins:
        lines[i + 1] = indent + tail + _glue(tail) + nxt.lstrip()
    else:
        lines.insert(i + 1, indent + tail)
    return True


def _trailing_comment(line: str) -> int | None:
    """The column of a comment that follows code on ``line``, if any."""
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(line.lstrip() + "\n").readline))
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return None
    offset = len(line) - len(line.lstrip())
    for tok in tokens:
        if tok.type == tokenize.COMMENT and tok.start[1] > 0:
            return tok.start[1] + offset
    return None


def _wrap_one_line_docstring(lines: list[str], i: int, single: tuple) -> bool:
    """A one-line docstring that grew too long becomes two lines."""
    _line, start, _end, _token, _depth = single
    line = lines[i]
    cut = _cut(line, LINE_LENGTH, start + 3)
    if cut is None:
        return False
    lines[i : i + 1] = [line[:cut].rstrip(), " " * start + line[cut + 1 :].strip()]
    return True


def _split_literal(lines: list[str], i: int, single: tuple) -> bool:
    _line, start, end, token, depth = single
    if depth <= 0 or token[:1] not in "\"'" or token[:3] in ('"""', "'''"):
        return False
    quote = token[0]
    line = lines[i]
    # The first piece keeps the space it ends with, then its closing quote: within the limit.
    cut = _cut(line, LINE_LENGTH - 2, start + 1)
    if cut is None or cut >= end - 2:
        return False
    indent = line[: len(line) - len(line.lstrip())]
    rest = line[cut + 1 :]
    lines[i] = line[: cut + 1] + quote
    nxt = lines[i + 1] if i + 1 < len(lines) else ""
    if rest.endswith(quote) and nxt.lstrip().startswith(quote) and rest.count(quote) == 1:
        # The literal goes on in the next line's: its first words join it there.
        nxt_indent = nxt[: len(nxt) - len(nxt.lstrip())]
        lines[i + 1] = nxt_indent + quote + rest[:-1] + nxt.lstrip()[1:]
    else:
        lines.insert(i + 1, indent + quote + rest)
    return True


def rewrap_python(text: str, changed: set[int]) -> tuple[str, list[str]]:
    """Re-wrap the changed lines longer than the limit; what could not be wrapped, in words."""
    lines = text.split("\n")
    todo = sorted(changed)
    problems: list[str] = []
    guard = 0
    while guard < 500:
        guard += 1
        long = [n for n in todo if n < len(lines) and len(lines[n]) > LINE_LENGTH]
        if not long:
            break
        i = long[0]
        spans, comments, singles = _string_spans("\n".join(lines))
        single = next((s for s in singles if s[0] == i and s[1] < LINE_LENGTH < s[2]), None)
        before = len(lines)
        stripped = lines[i].lstrip()
        trailing = _trailing_comment(lines[i]) if i in comments else None
        if i in comments and stripped.startswith("#"):
            done = _wrap_comment(lines, i, comments)
        elif trailing is not None:
            # A comment after code goes on its own line above it, to be wrapped there.
            indent = lines[i][: len(lines[i]) - len(stripped)]
            lines[i : i + 1] = [indent + lines[i][trailing:], lines[i][:trailing].rstrip()]
            done = True
        elif (
            single is not None
            and single[3][:3] in ('"""', "'''")
            and stripped.startswith(single[3][:3])
        ):
            done = _wrap_one_line_docstring(lines, i, single)
        elif i in spans:
            done = _wrap_docstring(lines, i, spans[i])
        elif single is not None:
            done = _split_literal(lines, i, single)
        else:
            done = False
        if not done:
            problems.append(f"line {i + 1} is {len(lines[i])} characters: {lines[i].strip()[:60]}")
            todo.remove(i)
            continue
        shift = len(lines) - before
        # Lines after i moved down if one was inserted; keep i and i + 1 under watch.
        todo = sorted({n + (shift if n > i else 0) for n in todo} | {i, i + 1})
    return "\n".join(lines), problems


def rewrap_comments(text: str, changed: set[int]) -> str:
    """Re-wrap changed "#" comment lines longer than the limit (TOML, Makefile, shell)."""
    lines = text.split("\n")
    todo = sorted(changed)
    while todo:
        i = todo.pop(0)
        if i < len(lines) and len(lines[i]) > LINE_LENGTH and lines[i].lstrip().startswith("#"):
            comments = {n for n, line in enumerate(lines) if line.lstrip().startswith("#")}
            before = len(lines)
            if _wrap_comment(lines, i, comments):
                shift = len(lines) - before
                todo = sorted({n + (shift if n > i else 0) for n in todo} | {i + 1})
    return "\n".join(lines)


def files(root: Path):
    for folder, dirs, names in os.walk(root):
        dirs[:] = [d for d in dirs if d not in SKIP_DIRS and not d.startswith(".venv")]
        for name in names:
            path = Path(folder) / name
            if path.suffix in {".png", ".jpg", ".gif", ".ico", ".sqlite3", ".pyc", ".dump"}:
                continue
            yield path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("root", nargs="?", default=".")
    parser.add_argument("--dry-run", action="store_true", help="say what would change only")
    parser.add_argument("--no-format", action="store_true", help="do not run ruff format")
    args = parser.parse_args()
    root = Path(args.root).resolve()
    unmapped: list[str] = []
    problems: list[str] = []
    changed_py: list[Path] = []
    count = files_changed = 0
    for path in sorted(files(root)):
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        if "SPEC" not in text:
            continue
        new, changed = rewrite_text(text, unmapped)
        if path.suffix in {".toml", ".sh", ".cfg"} or path.name in {"Makefile", "compat", "run"}:
            new = rewrap_comments(new, changed)
        if path.suffix == ".py" and changed:
            new, wrap_problems = rewrap_python(new, changed)
            problems += [f"{path.relative_to(root)}: {p}" for p in wrap_problems]
        if new == text:
            continue
        count += len(changed)
        files_changed += 1
        print(f"{path.relative_to(root)}: {len(changed)} line(s)")
        if not args.dry_run:
            path.write_text(new, encoding="utf-8")
            if path.suffix == ".py":
                changed_py.append(path)
    ruff = root / ".venv" / "bin" / "ruff"
    ruff_cmd = str(ruff) if ruff.exists() else shutil.which("ruff")
    if changed_py and not args.dry_run and not args.no_format and ruff_cmd:
        subprocess.run([ruff_cmd, "format", "-q", *map(str, changed_py)], cwd=root, check=False)
    left = subprocess.run(
        [
            "grep",
            "-rIn",
            "--exclude-dir=.git",
            "--exclude-dir=.venv",
            "--exclude-dir=.venv-compat",
            "--exclude-dir=node_modules",
            "SPEC",
            ".",
        ],
        cwd=root,
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()
    print(f"{count} line(s) rewritten in {files_changed} file(s).")
    for section in sorted(set(unmapped)):
        print(f"unmapped: §{section} (cited as {A}#layers; map it in RULES)")
    for problem in problems:
        print(f"too long: {problem}")
    if left and not args.dry_run:
        print("still mentions SPEC:\n" + left)
    return 1 if unmapped or problems or (left and not args.dry_run) else 0


if __name__ == "__main__":
    sys.exit(main())
