"""Optional imports: every extra the code names exists and lists the package; a blanked module
yields MissingExtraError naming the extra."""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

import pytest

from epic_edge.errors import MissingExtraError
from epic_edge.optional import DISTRIBUTIONS, optional_import

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
SOURCES = ("epic_edge", "backends", "export", "bench")


def _extras() -> dict[str, set[str]]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["project"]
    return {extra: {re.split(r"[\[<>=;! ]", req, maxsplit=1)[0].lower() for req in reqs}
            for extra, reqs in project["optional-dependencies"].items()}


def _optional_import_calls() -> list[tuple[str, str, str]]:
    """(file:line, module, extra) of every optional_import("module", "extra", ...) call."""
    found = []
    for folder in SOURCES:
        for path in sorted((ROOT / folder).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text("utf-8"))):
                if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "optional_import":
                    module, extra = (a.value for a in node.args[:2])  # literals, by design
                    found.append((f"{path.relative_to(ROOT)}:{node.lineno}", module, extra))
    return found


def test_every_optional_import_names_an_extra_that_lists_its_package():
    extras, calls = _extras(), _optional_import_calls()
    assert len(calls) >= 20
    for where, module, extra in calls:
        assert extra in extras, f"{where}: no extra [{extra}] in pyproject.toml"
        dist = DISTRIBUTIONS[module.split(".")[0]]
        assert dist in extras[extra], f"{where}: [{extra}] does not list {dist} for {module}"


def test_the_message_names_the_extra_and_the_install_command(monkeypatch):
    monkeypatch.setitem(sys.modules, "faiss", None)
    with pytest.raises(MissingExtraError) as caught:
        optional_import("faiss", "cpu", "the FAISS index")
    assert str(caught.value).startswith("the FAISS index needs the [cpu] extra (")
    assert str(caught.value).endswith("install it with: pip install 'epic-edge[cpu]'")
