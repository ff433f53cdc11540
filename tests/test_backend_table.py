"""The backend table: profiles are checked against it, and each row's extra provides its imports."""

from __future__ import annotations

import importlib
import re
import sys

import pytest

from epic_edge import registry
from epic_edge.cli import main
from epic_edge.errors import MissingExtraError, ProfileError
from epic_edge.profiles import list_profiles, load_profile

BASE = """name = "t"
[embedder]
backend = "onnx"
model = "m.onnx"
tau = 0.2
[verifier]
backend = "llama-cpp"
{verifier}
[index]
backend = "numpy"
"""


def _profile(tmp_path, verifier: str):
    path = tmp_path / "bad profile.toml"
    path.write_text(BASE.format(verifier=verifier), encoding="utf-8")
    return path


@pytest.mark.parametrize("line, message", [
    ("threhold = 0.4", "[verifier] threhold is not a known key for verifier backend "
                       "'llama-cpp'"),
    ('decision = "maybe"', "[verifier] decision is 'maybe'; one of 'keep-discard'"),
    ('threshold = "high"', "[verifier] threshold must be float, got str"),
    ("threshold = 1.5", "[verifier] threshold is 1.5; at most 1.0"),
    ("n_ctx = true", "[verifier] n_ctx must be int, got bool"),
])
def test_a_bad_key_or_value_is_a_one_line_error_naming_the_file(tmp_path, line, message):
    path = _profile(tmp_path, line)
    with pytest.raises(ProfileError) as caught:
        load_profile(path)
    text = str(caught.value)
    assert str(path) in text and message in text and "\n" not in text


def test_unknown_backend_and_retrieval_key_are_refused(tmp_path):
    path = tmp_path / "p.toml"
    path.write_text(BASE.format(verifier="").replace('"numpy"', '"annoy"'), encoding="utf-8")
    with pytest.raises(ProfileError, match="unknown index backend 'annoy'; known: faiss, numpy"):
        load_profile(path)
    path.write_text(BASE.format(verifier="") + "[retrieval]\nkk = 5\n", encoding="utf-8")
    with pytest.raises(ProfileError, match=r"\[retrieval\] kk is not a known key"):
        load_profile(path)


@pytest.mark.parametrize("key, value, message", [
    ("item_gate_quantile", 0, "0; above 0.0"), ("item_gate_quantile", 1.0, "1.0; below 1.0"),
    ("hedge", 0.0, "0.0; above 0.0"),  # a temperature of 0 would divide by zero
    ("steer_weight", -0.5, "-0.5; at least 0.0"), ("lexical", -0.1, "-0.1; at least 0.0"),
    ("confidence", -0.4, "-0.4; at least 0.0"), ("brevity", -0.3, "-0.3; at least 0.0"),
    ("steer_by", '"sideways"', "'sideways'; one of 'vector', 'text'"),
])
def test_a_setting_at_the_end_of_its_range_is_refused_on_load(tmp_path, key, value, message):
    path = tmp_path / "p.toml"
    path.write_text(BASE.format(verifier="") + f"[retrieval]\n{key} = {value}\n",
                    encoding="utf-8")
    wanted = rf"{re.escape(str(path))}.*{key} is {re.escape(message)}"
    with pytest.raises(ProfileError, match=wanted):
        load_profile(path)


def test_the_cli_reports_a_bad_profile_in_one_line(tmp_path, capsys):
    path = _profile(tmp_path, 'decision = "maybe"')
    code = main(["query", "hello", "--memory", str(tmp_path / "m.epic"), "--profile", str(path)])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err
    assert err.count("\n") == 1 and "decision is 'maybe'" in err


def test_every_shipped_profile_fits_the_table():
    for name in list_profiles():
        profile = load_profile(name)
        for kind in registry.KINDS:
            assert getattr(profile, kind).get("backend") in registry.names(kind)


ROWS = [(row, module) for row in registry.rows() for module in row.imports]


@pytest.mark.parametrize("row, module", ROWS, ids=[f"{r.name}-{m}" for r, m in ROWS])
def test_blanking_a_backends_module_names_its_extra(tmp_path, monkeypatch, row, module):
    for other in row.imports:  # imported for real first: nothing caches the blanked module
        if other != module:
            importlib.import_module(other)
    for name in [n for n in sys.modules if n.startswith(module + ".")]:
        monkeypatch.setitem(sys.modules, name, None)
    monkeypatch.setitem(sys.modules, module, None)
    with pytest.raises(MissingExtraError, match=rf"needs the \[{row.extra}\] extra"):
        registry.create(row.kind, {"backend": row.name, "model": "m", "dim": 4}, tmp_path)
    assert module in row.missing_imports()  # what `devices` reports
