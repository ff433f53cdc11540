"""The two houses' rooms: ARCHITECTURE.md names every module in its room's section, and no import
(at import time, inside a function, under TYPE_CHECKING, or by a string such as the registry's
"epic_edge.backends.x:Cls") breaks the room rules; no import cycle at run time."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# folder -> the package it installs as (bench/labels/ holds scripts run from their folder)
ROOMS = {"epic_edge": "epic_edge", "backends": "epic_edge.backends",
         "export": "epic_edge.export", "devices": "epic_edge.devices",
         "bench/epic_edge_lab": "epic_edge_lab", "bench/labels": "labels"}
_STRING_REF = re.compile(r"^(epic_edge(?:_lab)?(?:\.[A-Za-z_]\w*)*)(?::[\w.]*)?$")


def _modules() -> dict[str, Path]:
    found = {}
    for folder, package in ROOMS.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            parts = list(path.relative_to(ROOT / folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join([package, *parts])] = path
    return found


MODULES = _modules()


def _room(name: str) -> str:
    """core, cli, backends, export, devices, lab (the lab's package and bench/labels/)."""
    if name.startswith(("epic_edge_lab", "labels")):
        return "lab"
    parts = name.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in (
        "cli", "backends", "export", "devices") else "core"


def _import_nodes(body: list[ast.stmt], runtime_only: bool) -> list[ast.stmt]:
    """Every import statement in `body`, at any depth; `runtime_only` skips the blocks under
    `if TYPE_CHECKING:` (never run, so no cycle at run time)."""
    out: list[ast.stmt] = []
    for node in body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            out.append(node)
            continue
        if (runtime_only and isinstance(node, ast.If)
                and getattr(node.test, "id", "") == "TYPE_CHECKING"):
            out += _import_nodes(node.orelse, runtime_only)
            continue
        for field in ("body", "orelse", "finalbody", "handlers"):
            out += _import_nodes(getattr(node, field, []) or [], runtime_only)
    return out


def _known(dotted: str) -> str | None:
    """The project module `dotted` names, or the longest one it starts with."""
    while dotted:
        if dotted in MODULES:
            return dotted
        dotted = dotted.rpartition(".")[0]
    return None


def _string_refs(tree: ast.Module) -> set[str]:
    """Modules named by string: constants like "epic_edge.x:f", and module-level prefixes
    joined to them (`_B + "onnx_embedder:Cls"`)."""
    names = {t.id: n.value.value for n in tree.body if isinstance(n, ast.Assign)
             for t in n.targets if isinstance(t, ast.Name)
             and isinstance(n.value, ast.Constant) and isinstance(n.value.value, str)}

    def text(node: ast.AST) -> str | None:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return node.value
        if isinstance(node, ast.Name):
            return names.get(node.id)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            left, right = text(node.left), text(node.right)
            return left + right if left is not None and right is not None else None
        return None

    out = set()
    for node in ast.walk(tree):
        value = text(node) if isinstance(node, (ast.Constant, ast.BinOp)) else None
        match = _STRING_REF.match(value or "")
        if match and not value.endswith("."):
            out.add(match.group(1))
    return out


def _imports(name: str, path: Path, runtime_only: bool = False, strings: bool = True
             ) -> set[str]:
    """Project modules `name` imports (or names by string); a parent package is no edge."""
    tree = ast.parse(path.read_text("utf-8"))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out: set[str] = set(_string_refs(tree)) if strings else set()
    for node in _import_nodes(tree.body, runtime_only):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            elif name.startswith("labels.") and f"labels.{base}" in MODULES:
                base = f"labels.{base}"  # a script's sibling, imported from its folder
            subs = {f"{base}.{a.name}" for a in node.names} & set(MODULES)
            out |= subs if subs else {base}
    known = {_known(m) for m in out if m.startswith(("epic_edge", "labels."))}
    return {m for m in known if m and m != name and not name.startswith(m + ".")}


def _registered_backends() -> set[str]:
    from epic_edge.registry import rows

    return {row.factory.partition(":")[0] for row in rows()}


def _breaks(name: str, target: str, registered: set[str]) -> str | None:
    """Why the edge name -> target breaks a room rule (ARCHITECTURE.md's table), or None."""
    source, room = _room(name), _room(target)
    if room == "lab" and source != "lab":
        return "the product never imports the lab"
    if source == "backends" and room in ("cli", "export"):
        return "a backend imports only the core and backend helpers"
    if source == "backends" and target in registered:
        return "backends never import each other (shared code lives in a helper module)"
    if source == "core" and room in ("cli", "export", "backends") and not (
            name == "epic_edge.registry" and room in ("backends", "export")):
        return "the core names backends and export only in registry.py's table"
    if source == "export" and room == "cli":
        return "export never imports the CLI"
    if source == "devices":
        return "devices/ is data"
    return None


def test_every_import_keeps_the_room_rules():
    registered = _registered_backends()
    broken = [f"{name} -> {target}: {why}" for name, path in MODULES.items()
              for target in sorted(_imports(name, path))
              if (why := _breaks(name, target, registered))]
    assert not broken, "\n".join(broken)


def test_the_rules_see_lazy_type_checking_and_string_imports(tmp_path):
    """The checker itself: each kind of import is an edge (a rule no import can break would
    let every break through)."""
    path = tmp_path / "m.py"
    path.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                    "    from epic_edge.cli import common\n"
                    "def f():\n    from epic_edge_lab import quality\n"
                    "_B = 'epic_edge.backends.'\nROW = _B + 'onnx_embedder:OnnxEmbedder'\n"
                    "X = 'epic_edge.export.device_export:export_onnx'\n", "utf-8")
    found = _imports("epic_edge.sample", path)
    assert found == {"epic_edge.cli.common", "epic_edge_lab.quality",
                     "epic_edge.backends.onnx_embedder", "epic_edge.export.device_export"}
    assert _imports("epic_edge.sample", path, runtime_only=True, strings=False) == {
        "epic_edge_lab.quality"}
    registered = _registered_backends()
    assert {_breaks("epic_edge.sample", t, registered) for t in found} == {
        "the product never imports the lab",
        "the core names backends and export only in registry.py's table"}


def _unresolved(name: str, path: Path) -> set[str]:
    """Project modules `name` imports that do not exist (a module moved without its users)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = set()
    for node in _import_nodes(ast.parse(path.read_text("utf-8")).body, runtime_only=False):
        if isinstance(node, ast.Import):
            bases = [a.name for a in node.names]
        else:
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            bases = [base]
        out |= {b for b in bases if b.startswith("epic_edge") and b not in MODULES}
    return out


def test_every_project_import_names_a_module_that_exists():
    broken = {name: sorted(missing) for name, path in MODULES.items()
              if (missing := _unresolved(name, path))}
    assert not broken, broken


def test_no_import_cycle():
    """Not even through imports under TYPE_CHECKING: a type a module needs from one that
    imports it is a narrow Protocol in the module itself (e.g. retrieval.Searched)."""
    graph = {n: {m for m in _imports(n, p, runtime_only=False, strings=False) if m in MODULES}
             for n, p in MODULES.items()}
    cycles: list[list[str]] = []
    state: dict[str, int] = {}

    def visit(node: str, stack: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                cycles.append(stack[stack.index(nxt):] + [nxt])
            elif nxt not in state:
                visit(nxt, [*stack, nxt])
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node, [node])
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join(c) for c in cycles)


# the API layer: what an app or a tool holds a Memory through (the latency bench is such an
# app); every other module of the core receives what it uses (epic_edge.settings, the
# Protocols of ingest, retrieval, ...)
MEMORY_API = ("epic_edge", "epic_edge.memory", "epic_edge.mcp_server",
              "epic_edge.langchain_retriever", "epic_edge.latency")


def test_only_the_api_layer_imports_memory():
    for name, path in MODULES.items():
        if _room(name) == "core" and name not in MEMORY_API:
            assert "epic_edge.memory" not in _imports(name, path, strings=False), (
                f"{name} imports epic_edge.memory: hand it what it uses instead")


def _sections() -> dict[str, str]:
    """ARCHITECTURE.md's text under each heading that names a folder (`backends/`)."""
    out: dict[str, str] = {}
    folder = None
    for line in (ROOT / "ARCHITECTURE.md").read_text("utf-8").splitlines():
        if line.startswith("#"):
            named = re.findall(r"`([\w/]+)/`", line)
            folder = named[0] if named else None
            if folder:
                out.setdefault(folder, "")
        elif folder:
            out[folder] += line + "\n"
    return out


def test_architecture_names_every_module_in_its_rooms_section():
    sections = _sections()
    missing = []
    for path in MODULES.values():
        relative = path.relative_to(ROOT).as_posix()
        folder = max((f for f in sections if relative.startswith(f + "/")), key=len,
                     default=None)
        short = relative[len(folder) + 1:] if folder else relative
        tree = ast.parse(path.read_text("utf-8"))
        if path.name == "__init__.py" and len(tree.body) <= 1:
            continue  # a package marker with only its docstring
        if folder is None or f"`{short}`" not in sections[folder]:
            missing.append(f"{relative} (under {folder or 'no section'}/)")
    assert not missing, "ARCHITECTURE.md does not name:\n" + "\n".join(missing)


def test_every_test_file_the_code_cites_exists():
    cited = set()
    for path in [*ROOT.glob("*.md"), *(p for folder in (*ROOMS, "docs", "scripts")
                                      for p in (ROOT / folder).rglob("*") if p.is_file()
                                      and p.suffix in (".py", ".md", ".toml", ".sh"))]:
        cited |= set(re.findall(r"tests/[\w/]+\.py", path.read_text("utf-8", "replace")))
    assert cited and not {c for c in cited if not (ROOT / c).is_file()}
