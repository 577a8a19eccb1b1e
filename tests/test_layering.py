"""The one-door layout (docs/architecture.md), checked on the source: who may import whom, and
who writes.

- nothing outside ``versions/services/`` imports a module inside it (only the package's door),
  by an absolute import or a relative one (``from ..services.restore import …``);
- the doors (``views/``, ``api/``, ``mcp.py``, ``live.py``, ``admin.py``, the management
  commands) never write through the ORM: every write is a service's (a few allow-listed
  exceptions, each with its reason);
- the lower layers (services, selectors, the diff engine, the models, the workspace engine)
  never import presentation code (template tags, views, templates, the doors);
- selectors never import services (services may call selectors, never the reverse);
- the MCP server imports services and selectors, never the API;
- ``versions/errors.py`` knows nothing of HTTP;
- no import loop among the modules of ``versions`` (imports anywhere in a module, lazy ones in
  functions included: a lazy import is a loop hidden, not removed).

``python tests/test_layering.py`` prints the module graph's loops, if any (docs/architecture.md#layers).
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "versions"


def _module_name(path: Path, root: Path = ROOT) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _sources(folder: Path, root: Path = ROOT) -> dict[str, Path]:
    return {
        _module_name(p, root): p
        for p in sorted(folder.rglob("*.py"))
        if "migrations" not in p.parts and "__pycache__" not in p.parts
    }


def _imports(path: Path, root: Path = ROOT) -> set[str]:
    """Modules ``path`` imports (``from a import b`` counts ``a`` and ``a.b``); a relative
    import counts the absolute module it names (``from ..services import restore`` in
    ``versions/views/x.py`` is ``versions.services`` and ``versions.services.restore``)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = _module_name(path, root).split(".")
    if path.name != "__init__.py":
        package.pop()
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - (node.level - 1)]
                module = ".".join([*base, *([node.module] if node.module else [])])
            elif node.module:
                module = node.module
            else:
                continue
            found.add(module)
            found.update(f"{module}.{alias.name}" for alias in node.names)
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


def reaches_inside_services(sources: dict[str, Path], root: Path = ROOT) -> dict[str, list[str]]:
    """The modules of ``sources`` outside ``versions.services`` that import a module inside
    it (absolutely or relatively), with what they import."""
    offenders = {}
    for name, path in sources.items():
        if name.startswith("versions.services"):
            continue
        inner = {
            m
            for m in _imports(path, root)
            if m.startswith("versions.services.")
            and m.split(".")[2].islower()
            and m.split(".")[2] not in _reexported()
        }
        if inner:
            offenders[name] = sorted(inner)
    return offenders


def test_nothing_outside_the_services_imports_a_module_inside_them():
    # The benchmarks under tests/perf are not tests: bench_capture_floor times the capture's own
    # statements, which only the private statement table holds. tests/fault_points.py reaches
    # the engine's internals through importlib, on purpose and in one place (fault injection).
    tests = {n: p for n, p in _sources(ROOT / "tests").items() if not n.startswith("tests.perf")}
    outside = {**_sources(PACKAGE), **tests, **_sources(ROOT / "versions_site")}
    assert reaches_inside_services(outside) == {}


def test_a_relative_import_inside_the_services_is_caught(tmp_path):
    # The check above reads relative imports too: a door reaching ..services.restore, or a
    # package doing it from its __init__, is an offender; the services' own relative imports
    # and the package's door are not.
    files = {
        "versions/__init__.py": "",
        "versions/services/__init__.py": "from .restore import restore_point\n",
        "versions/services/restore.py": "from . import _sql\n",
        "versions/views/__init__.py": "from ..services import restore\n",
        "versions/views/pages.py": "from ..services.restore import restore_point\n",
        "versions/views/ok.py": "from .. import services\nfrom ..services import Actor\n",
        "versions/workspace/review.py": "from ..services import _store\n",
    }
    for relative, text in files.items():
        (tmp_path / relative).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / relative).write_text(text, encoding="utf-8")
    found = reaches_inside_services(_sources(tmp_path / "versions", tmp_path), tmp_path)
    assert found == {
        "versions.views": ["versions.services.restore"],
        "versions.views.pages": [
            "versions.services.restore",
            "versions.services.restore.restore_point",
        ],
        "versions.workspace.review": ["versions.services._store"],
    }


# --------------------------------------------------------------------------------------------
# The doors never write through the ORM
# --------------------------------------------------------------------------------------------

DOORS = ("versions.views", "versions.api", "versions.mcp", "versions.live", "versions.admin")
COMMANDS = "versions.management.commands"
# Methods that write whatever they are called on (a model, a manager, a queryset, a form).
ALWAYS_WRITES = {
    "save",
    "bulk_create",
    "bulk_update",
    "get_or_create",
    "update_or_create",
    "create_user",
    "create_superuser",
}
# Methods that write when called on the ORM (a manager or a queryset: ``X.objects…``,
# ``….filter(…)``), and mean something else on a dict or a set (``ctx.update``).
ORM_WRITES = {"create", "update", "delete", "add", "remove", "clear", "set"}
QUERYSET_METHODS = {"objects", "filter", "exclude", "all", "select_for_update", "select_related"}
# The few writes a door makes itself, each with its reason: (module, method) → why.
DOOR_WRITES_ALLOWED = {
    ("versions.management.commands.load_demo", "create_superuser"): (
        "Django's user manager makes the demo sign-ins: auth accounts, not Versions data"
    ),
    ("versions.management.commands.load_demo", "create_user"): (
        "Django's user manager makes the demo sign-ins: auth accounts, not Versions data"
    ),
}


def _through_orm(node: ast.expr) -> bool:
    """Whether an expression is an ORM manager or queryset (``App.objects``, ``….filter(…)``)."""
    while True:
        if isinstance(node, ast.Attribute):
            if node.attr in QUERYSET_METHODS:
                return True
            node = node.value
        elif isinstance(node, ast.Call):
            node = node.func
        else:
            return False


def orm_writes(path: Path) -> list[tuple[str, int]]:
    """The ORM writes in ``path``: (method, line) of every call that writes (a decorator such as
    ``@api.delete(…)`` declares a route, it writes nothing)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    decorators = {
        id(d)
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
        for d in node.decorator_list
    }
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or id(node) in decorators:
            continue
        func = node.func
        if not isinstance(func, ast.Attribute):
            continue
        if func.attr in ALWAYS_WRITES or (func.attr in ORM_WRITES and _through_orm(func.value)):
            found.append((func.attr, node.lineno))
    return found


def _doors() -> dict[str, Path]:
    return {
        name: path
        for name, path in _sources(PACKAGE).items()
        if name.startswith(DOORS) or name.startswith(COMMANDS)
    }


def test_the_doors_never_write_through_the_orm():
    offenders = {
        f"{name}:{line}": method
        for name, path in _doors().items()
        for method, line in orm_writes(path)
        if (name, method) not in DOOR_WRITES_ALLOWED
    }
    assert offenders == {}


def test_every_allowed_door_write_still_exists():
    # An exception nobody needs any more goes from the list (it would hide a new write).
    used = {(name, method) for name, path in _doors().items() for method, _ in orm_writes(path)}
    assert set(DOOR_WRITES_ALLOWED) <= used


def test_the_write_finder_sees_the_orm_and_not_dicts(tmp_path):
    source = tmp_path / "door.py"
    source.write_text(
        "@api.delete('/x')\n"
        "def view(request, app, ctx, seen):\n"
        "    ctx.update(a=1)\n"
        "    seen.add(2)\n"
        "    App.objects.create(slug='x')\n"
        "    App.objects.filter(pk=1).update(name='y')\n"
        "    Artifact.objects.filter(app=app).delete()\n"
        "    app.save()\n"
        "    App.objects.get_or_create(slug='z')\n",
        encoding="utf-8",
    )
    assert [method for method, _ in orm_writes(source)] == [
        "create",
        "update",
        "delete",
        "save",
        "get_or_create",
    ]


# The admin writes through Django's ModelAdmin.save_model / delete_model / delete_queryset unless
# a model's admin replaces them: each one that lets a person add, change or delete goes through
# the services instead. (model, what) → why Django's own write is kept.
ADMIN_WRITES_ALLOWED = {
    ("readingpreference", "delete"): (
        "a person's reading preferences belong to no app and hold no history: the admin's own "
        "delete permission decides who clears them"
    ),
    ("viewedmark", "delete"): (
        "a person's Viewed marks belong to no app and hold no history: the admin's own delete "
        "permission decides who clears them"
    ),
}


def admin_orm_writes() -> list[tuple[str, str]]:
    """(model, add/change/delete) for each admin that lets a superuser write and keeps Django's
    own ORM write for it."""
    from django.contrib import admin
    from django.contrib.auth import get_user_model
    from django.test import RequestFactory

    request = RequestFactory().get("/admin/")
    request.user = get_user_model()(username="root", is_superuser=True, is_active=True)
    found = []
    for model, model_admin in admin.site._registry.items():
        if model._meta.app_label != "versions":
            continue
        kind = type(model_admin)
        name = model._meta.model_name
        writes = model_admin.has_add_permission(request) or model_admin.has_change_permission(
            request
        )
        if writes and kind.save_model is admin.ModelAdmin.save_model:
            found.append((name, "change"))
        if model_admin.has_delete_permission(request) and (
            kind.delete_model is admin.ModelAdmin.delete_model
            or kind.delete_queryset is admin.ModelAdmin.delete_queryset
        ):
            found.append((name, "delete"))
    return found


def test_the_admin_writes_through_the_services():
    found = admin_orm_writes()
    assert [w for w in found if w not in ADMIN_WRITES_ALLOWED] == []
    assert set(ADMIN_WRITES_ALLOWED) <= set(found)  # an exception nobody needs goes


# --------------------------------------------------------------------------------------------
# The lower layers never import presentation code
# --------------------------------------------------------------------------------------------

LOWER = (
    "versions.services",
    "versions.selectors",
    "versions.workspace",
    "versions.diffing",
    "versions.models",
    "versions.errors",
    "versions.ids",
    "versions.linecodes",
    "versions.conf",
    "versions.rawsql",
    "versions.formatting",
)
PRESENTATION = (
    "versions.templatetags",
    "versions.views",
    "versions.api",
    "versions.mcp",
    "versions.live",
    "versions.admin",
    "versions.urls",
    "versions.live_urls",
    "versions.nul_guard",
    "django.template",
    "django.shortcuts",
    "django.contrib.admin",
    "django.contrib.messages",
)


def _is_lower(name: str) -> bool:
    return any(name == layer or name.startswith(layer + ".") for layer in LOWER)


def presentation_imports(sources: dict[str, Path]) -> dict[str, list[str]]:
    """The lower-layer modules of ``sources`` that import presentation code, with what."""
    offenders = {}
    for name, path in sources.items():
        if not _is_lower(name):
            continue
        found = {
            m
            for m in _imports(path)
            if any(m == top or m.startswith(top + ".") for top in PRESENTATION)
        }
        if found:
            offenders[name] = sorted(found)
    return offenders


def test_the_lower_layers_never_import_presentation_code():
    # A byte size in words (kb) lives in versions/formatting.py, which the template filter
    # wraps: the workspace log sets and the services call it without the template tags.
    assert presentation_imports(_sources(PACKAGE)) == {}


def _reexported() -> set[str]:
    """Names ``versions.services`` itself exports (``from versions.services import write_artifact``
    is the door, not a reach inside)."""
    import versions.services

    return set(versions.services.__all__)


def test_the_services_facade_exports_few_names_and_each_one_exists():
    # The verbs and types callers need; messages live in versions/messages.py and the names of
    # actions, roles, flows and refs in versions/terms.py (docs/architecture.md#layers).
    import versions.services

    names = _reexported()
    assert len(names) <= 60, sorted(names)
    assert [n for n in names if not hasattr(versions.services, n)] == []


def test_selectors_never_import_services():
    for name, path in _sources(PACKAGE / "selectors").items():
        assert not {m for m in _imports(path) if m.startswith("versions.services")}, name


def test_the_mcp_server_imports_services_and_selectors_not_the_api():
    imported = _imports(PACKAGE / "mcp.py")
    # Only the API's shapes, so each tool's outputSchema is the API's own (docs/api.md#mcp).
    assert {m for m in imported if m.startswith("versions.api")} <= {"versions.api.schemas"}
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
