"""The one-door layout (SPEC §12), checked on the source: who may import whom.

- nothing outside ``versions/services/`` imports a module inside it (only the package's door);
- selectors never import services (services may call selectors, never the reverse);
- the MCP server imports services and selectors, never the API;
- ``versions/errors.py`` knows nothing of HTTP;
- no import loop among the modules of ``versions`` (imports anywhere in a module, lazy ones in
  functions included: a lazy import is a loop hidden, not removed).

``python tests/test_layering.py`` prints the module graph's loops, if any (README, "How it works").
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "versions"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _sources(folder: Path) -> dict[str, Path]:
    return {
        _module_name(p): p
        for p in sorted(folder.rglob("*.py"))
        if "migrations" not in p.parts and "__pycache__" not in p.parts
    }


def _imports(path: Path) -> set[str]:
    """Modules ``path`` imports (``from a import b`` counts ``a`` and ``a.b``)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


def _graph() -> dict[str, set[str]]:
    modules = _sources(PACKAGE)
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        graph[name] = {m for m in _imports(path) if m in modules} - {name}
    return graph


def import_loops() -> list[list[str]]:
    """Every loop of imports among versions' modules (a package importing its own submodules in
    its ``__init__`` is not a loop: Python loads it first)."""
    graph = _graph()
    loops: list[list[str]] = []
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt.startswith(node + "."):
                continue  # a package's __init__ re-exporting its own submodules
            if state.get(nxt) == 1:
                loop = stack[stack.index(nxt) :]
                if not all(b.startswith(a + ".") or a == b for a, b in zip(loop, loop[1:])):
                    loops.append([*loop, nxt])
            elif nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node)
    return loops


def test_nothing_outside_the_services_imports_a_module_inside_them():
    # The benchmarks under tests/perf are not tests: bench_capture_floor times the capture's own
    # statements, which only the private statement table holds. tests/fault_points.py reaches
    # the engine's internals through importlib, on purpose and in one place (fault injection).
    tests = {n: p for n, p in _sources(ROOT / "tests").items() if not n.startswith("tests.perf")}
    outside = {**_sources(PACKAGE), **tests, **_sources(ROOT / "versions_site")}
    offenders = {}
    for name, path in outside.items():
        if name.startswith("versions.services"):
            continue
        inner = {
            m
            for m in _imports(path)
            if m.startswith("versions.services.")
            and m.split(".")[2].islower()
            and m.split(".")[2] not in _reexported()
        }
        if inner:
            offenders[name] = sorted(inner)
    assert offenders == {}


def _reexported() -> set[str]:
    """Names ``versions.services`` itself exports (``from versions.services import write_artifact``
    is the door, not a reach inside)."""
    import versions.services

    return set(versions.services.__all__)


def test_selectors_never_import_services():
    for name, path in _sources(PACKAGE / "selectors").items():
        assert not {m for m in _imports(path) if m.startswith("versions.services")}, name


def test_the_mcp_server_imports_services_and_selectors_not_the_api():
    imported = _imports(PACKAGE / "mcp.py")
    assert not {m for m in imported if m.startswith("versions.api")}
    assert {"versions.services", "versions.selectors"} <= {
        f"versions.{m.split('.')[-1]}" for m in imported if m.startswith("versions")
    } | imported


def test_errors_know_nothing_of_http():
    source = (PACKAGE / "errors.py").read_text(encoding="utf-8")
    assert "status=" not in source and "self.status" not in source
    assert not {m for m in _imports(PACKAGE / "errors.py") if m.startswith("django")}


def test_there_is_no_import_loop():
    assert import_loops() == []


if __name__ == "__main__":
    found = import_loops()
    for loop in found:
        print(" → ".join(loop))
    print(f"{len(found)} import loop(s) among versions' modules")
    sys.exit(1 if found else 0)
