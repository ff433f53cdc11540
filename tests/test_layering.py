"""The house's rooms: what each may import (ARCHITECTURE.md), and no import cycle."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ROOMS = {"epic_edge": "epic_edge", "backends": "epic_edge.backends",
         "export": "epic_edge.export", "bench": "epic_edge_lab", "devices": "epic_edge.devices"}


def _modules() -> dict[str, Path]:
    found = {}
    for folder, package in ROOMS.items():
        for path in (ROOT / folder).rglob("*.py"):
            parts = list(path.relative_to(ROOT / folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            name = ".".join([package, *parts])
            if folder == "epic_edge" and parts and parts[0] in ("backends", "export", "bench"):
                continue
            found[name] = path
    return found


def _import_nodes(body: list[ast.stmt], top_level_only: bool) -> list[ast.stmt]:
    """Import statements in `body`, skipping `if TYPE_CHECKING:` blocks (never run)."""
    out: list[ast.stmt] = []
    for node in body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            out.append(node)
        elif isinstance(node, ast.If) and getattr(node.test, "id", "") == "TYPE_CHECKING":
            out += _import_nodes(node.orelse, top_level_only)
        elif not top_level_only or isinstance(node, (ast.If, ast.Try)):
            for field in ("body", "orelse", "finalbody", "handlers"):
                out += _import_nodes(getattr(node, field, []) or [], top_level_only)
    return out


def _imports(name: str, path: Path, top_level_only: bool) -> set[str]:
    """Project modules `name` imports (at import time only, when top_level_only); a parent
    package is no edge (Python imports it before any of its modules anyway)."""
    tree = ast.parse(path.read_text("utf-8"))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out: set[str] = set()
    for node in _import_nodes(tree.body, top_level_only):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            subs = {f"{base}.{a.name}" for a in node.names} & set(MODULES)
            out |= subs if subs else {base}
    return {m for m in out if m.startswith("epic_edge") and not name.startswith(m + ".")}


MODULES = _modules()


def test_backends_never_import_export_or_the_cli():
    for name, path in MODULES.items():
        if name.startswith("epic_edge.backends."):
            bad = {m for m in _imports(name, path, False)
                   if m.startswith(("epic_edge.export", "epic_edge.cli", "epic_edge_lab"))}
            assert not bad, f"{name} imports {sorted(bad)}"


def test_the_core_imports_no_export_or_bench_at_import_time():
    for name, path in MODULES.items():
        if name.startswith("epic_edge.") and name.split(".")[1] not in (
                "backends", "export", "bench", "cli"):
            bad = {m for m in _imports(name, path, True)
                   if m.startswith(("epic_edge.export", "epic_edge_lab", "epic_edge.cli"))}
            assert not bad, f"{name} imports {sorted(bad)}"


def test_no_import_cycle():
    graph = {n: {m for m in _imports(n, p, False) if m in MODULES and m != n}
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


def test_every_test_file_the_code_cites_exists():
    cited = set()
    for path in [*ROOT.glob("*.md"), *(p for folder in (*ROOMS, "docs", "scripts")
                                      for p in (ROOT / folder).rglob("*") if p.is_file()
                                      and p.suffix in (".py", ".md", ".toml", ".sh"))]:
        cited |= set(re.findall(r"tests/[\w/]+\.py", path.read_text("utf-8", "replace")))
    assert cited and not {c for c in cited if not (ROOT / c).is_file()}
