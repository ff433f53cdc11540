"""Optional imports: every extra the code names exists and lists the package; a blanked module
yields MissingExtraError naming the extra."""

from __future__ import annotations

import ast
import importlib
import re
import sys
from pathlib import Path

import pytest

from epic_edge.errors import MissingExtraError
from epic_edge.optional import DISTRIBUTIONS, optional_import
from epic_edge.registry import rows

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
SOURCES = ("epic_edge", "backends", "export", "bench")


def _extras() -> dict[str, set[str]]:
    """The product's extras and the lab's (its own dependencies as "lab", bench/pyproject.toml)."""
    product = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["project"]
    lab = tomllib.loads((ROOT / "bench" / "pyproject.toml").read_text("utf-8"))["project"]
    extras = {**product["optional-dependencies"], **lab["optional-dependencies"],
              "lab": lab["dependencies"]}
    return {extra: {re.split(r"[\[<>=;! ]", req, maxsplit=1)[0].lower() for req in reqs}
            for extra, reqs in extras.items()}


def _optional_import_calls() -> list[tuple[str, str, str]]:
    """(file:line, module, extra) of every optional_import("module", "extra", ...) call."""
    found = []
    for folder in SOURCES:
        for path in sorted((ROOT / folder).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text("utf-8"))):
                call = isinstance(node, ast.Call) and getattr(node.func, "id", "") or ""
                named = call == "optional_import"
                if named and all(isinstance(a, ast.Constant) for a in node.args[:2]):
                    module, extra = (a.value for a in node.args[:2])  # type: ignore[attr-defined]
                    found.append((f"{path.relative_to(ROOT)}:{node.lineno}", module, extra))
    return found


def test_every_optional_import_names_an_extra_that_lists_its_package():
    extras, calls = _extras(), _optional_import_calls()
    assert len(calls) >= 20
    calls += [(f"registry row {r.kind} {r.name}", m, r.extra) for r in rows() for m in r.imports]
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


def _sealer():  # type: ignore[no-untyped-def]
    from epic_edge.crypto import Sealer

    return Sealer(bytes(32))


def _mcp_server():  # type: ignore[no-untyped-def]
    from epic_edge.mcp_server import build_server

    return build_server(None)  # type: ignore[arg-type]


def _langchain():  # type: ignore[no-untyped-def]
    sys.modules.pop("epic_edge.langchain_retriever", None)
    import epic_edge.langchain_retriever  # noqa: F401


def _stream_plot():  # type: ignore[no-untyped-def]
    from epic_edge_lab.stream import write_plot

    return write_plot({"steps": []}, Path("unused.png"))


def _embedder_export():  # type: ignore[no-untyped-def]
    from epic_edge.export.minilm_onnx import _import_export_deps

    return _import_export_deps()


def _int8():  # type: ignore[no-untyped-def]
    from epic_edge.export.onnx_int8 import quantize_int8

    return quantize_int8(Path("absent.onnx"))


def _training():  # type: ignore[no-untyped-def]
    from epic_edge_lab.verifier.nets import _torch

    return _torch()


def _mlx_export():  # type: ignore[no-untyped-def]
    from epic_edge.export.mlx_llm import _import_mlx_convert

    return _import_mlx_convert()


def _ray_engine():  # type: ignore[no-untyped-def]
    from epic_edge_lab.ray_engine import start

    return start()


# entry points outside the backend table (tests/test_backend_table.py blanks those)
ENTRY_POINTS = [
    ("cryptography", "crypto", _sealer),
    ("mcp", "mcp", _mcp_server),
    ("langchain_core", "langchain", _langchain),
    ("matplotlib", "lab", _stream_plot),
    ("transformers", "export", _embedder_export),
    ("onnxruntime", "export", _int8),
    ("torch", "export", _training),
    ("mlx_lm", "export", _mlx_export),
    ("ray", "ray", _ray_engine),
]


# the entry points' own modules, imported while nothing is blanked (they import no extra at
# import time; a library imported while another is blanked could cache its absence)
for _module in ("epic_edge.crypto", "epic_edge.mcp_server", "epic_edge_lab.stream",
                "epic_edge.export.minilm_onnx", "epic_edge.export.onnx_int8",
                "epic_edge_lab.verifier.nets", "epic_edge.export.mlx_llm",
                "epic_edge_lab.ray_engine"):
    importlib.import_module(_module)


@pytest.mark.parametrize("module, extra, entry", ENTRY_POINTS, ids=[e[0] for e in ENTRY_POINTS])
def test_blanking_an_optional_module_names_its_extra(monkeypatch, module, extra, entry):
    for name in [n for n in sys.modules if n.startswith(module + ".")]:
        monkeypatch.setitem(sys.modules, name, None)
    monkeypatch.setitem(sys.modules, module, None)
    with pytest.raises(MissingExtraError, match=rf"needs the \[{extra}\] extra"):
        entry()
