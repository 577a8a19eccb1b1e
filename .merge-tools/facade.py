"""Move user-facing message constants out of the versions.services facade into versions/messages.py.

Run from a checkout's root: python facade.py [--dry]
"""
import ast, re, sys, pathlib, subprocess

ROOT = pathlib.Path.cwd()
INIT = ROOT / "versions/services/__init__.py"
MSG = ROOT / "versions/messages.py"
dry = "--dry" in sys.argv

def is_message(node):
    v = node
    def strs(n):
        if isinstance(n, ast.Constant) and isinstance(n.value, str):
            return n.value
        if isinstance(n, ast.BinOp) and isinstance(n.op, ast.Add):
            a, b = strs(n.left), strs(n.right)
            return None if a is None or b is None else a + b
        return None
    s = strs(v)
    return s is not None and " " in s

tree = ast.parse(INIT.read_text())
facade = []
for n in tree.body:
    if isinstance(n, ast.ImportFrom) and n.module and n.module.startswith("versions.services."):
        for a in n.names:
            facade.append((a.asname or a.name, a.name, n.module))

moves = {}  # module -> [(name, src)]
for exported, name, mod in facade:
    if not re.fullmatch(r"[A-Z][A-Z0-9_]*", name) or exported != name:
        continue
    path = ROOT / (mod.replace(".", "/") + ".py")
    src = path.read_text()
    mt = ast.parse(src)
    for node in mt.body:
        targets = []
        if isinstance(node, ast.Assign):
            targets = [t.id for t in node.targets if isinstance(t, ast.Name)]
            value = node.value
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            targets = [node.target.id]; value = node.value
        if name in targets and value is not None and is_message(value):
            moves.setdefault(mod, []).append((name, node.lineno, node.end_lineno))
print({m: [n for n, *_ in v] for m, v in moves.items()})
print(sum(len(v) for v in moves.values()), "messages")
if dry:
    sys.exit()

out = [] if not MSG.exists() else [MSG.read_text().rstrip("\n")]
if not out:
    out.append('"""The words Versions says: every message a person or an agent reads when something is\n'
               'refused or needs saying, in one place so that doors, services and tests share them."""')
moved_names = set()
for mod, items in moves.items():
    path = ROOT / (mod.replace(".", "/") + ".py")
    lines = path.read_text().split("\n")
    block = [f"\n# {mod.rsplit('.', 1)[1]}"]
    drop = set()
    for name, a, b in sorted(items, key=lambda t: t[1]):
        # take comment lines directly above
        start = a - 1
        while start - 1 >= 0 and lines[start - 1].lstrip().startswith("#"):
            start -= 1
        block.append("\n".join(lines[start:b]))
        drop.update(range(start, b))
        moved_names.add(name)
    lines = [l for i, l in enumerate(lines) if i not in drop]
    text = "\n".join(lines)
    names = ", ".join(sorted(n for n, *_ in items))
    imp = f"from versions.messages import {names}\n"
    # insert after the last top-level import of the module's header
    mt = ast.parse(text)
    last = 0
    for node in mt.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            last = node.end_lineno
        elif last:
            break
    tl = text.split("\n")
    tl.insert(last, imp.rstrip("\n"))
    path.write_text("\n".join(tl))
    out.append("\n".join(block))
MSG.write_text("\n".join(out) + "\n")

# drop from the facade
init = INIT.read_text()
for name in moved_names:
    init = re.sub(rf"^\s+{name},\n", "", init, flags=re.M)
    init = re.sub(rf'^\s+"{name}",\n', "", init, flags=re.M)
INIT.write_text(init)

# callers outside services
files = subprocess.run(["git", "ls-files", "versions", "tests"], capture_output=True, text=True).stdout.split()
for f in files:
    if not f.endswith(".py") or f.startswith("versions/services/") or f == "versions/messages.py":
        continue
    p = ROOT / f
    s = p.read_text()
    orig = s
    used_attr = set(re.findall(r"\bservices\.([A-Z][A-Z0-9_]*)\b", s)) & moved_names
    for n in used_attr:
        s = re.sub(rf"\bservices\.{n}\b", f"messages.{n}", s)
    from_imp = set()
    def fix(m):
        body = m.group(2)
        parts = [x.strip() for x in body.replace("(", "").replace(")", "").split(",") if x.strip()]
        keep = [x for x in parts if x.split(" as ")[0] not in moved_names]
        from_imp.update(x for x in parts if x.split(" as ")[0] in moved_names)
        if not keep:
            return ""
        return f"from versions.services import ({', '.join(keep)},)\n"
    s = re.sub(r"^from versions\.services import (\(([^)]*)\)|([^\n]*))\n",
               lambda m: fix(type("M", (), {"group": lambda self, i: (m.group(2) or m.group(3)) if i == 2 else m.group(i)})()),
               s, flags=re.M)
    adds = []
    if used_attr:
        adds.append("from versions import messages")
    if from_imp:
        adds.append(f"from versions.messages import ({', '.join(sorted(from_imp))},)")
    if adds:
        # put after the __future__ import or the module docstring
        mt = ast.parse(s)
        idx = 0
        for node in mt.body:
            if isinstance(node, ast.ImportFrom) and node.module == "__future__":
                idx = node.end_lineno
                continue
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                idx = node.lineno - 1
                break
        sl = s.split("\n")
        for a in reversed(adds):
            sl.insert(idx, a)
        s = "\n".join(sl)
    if s != orig:
        p.write_text(s)
        print("rewrote", f)
