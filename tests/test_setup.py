"""`epic-edge setup` installs and trains everything the chosen profile needs (one setup path)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from epic_edge.cli import setup
from epic_edge.profiles import load_profile


def _stub_installs(monkeypatch, models: Path, recipe: list | None = None) -> list[Path]:
    trained: list[Path] = []

    def reference(folder: Path, force: bool = False) -> dict[str, Path]:
        return {}

    def train(out_dir: Path, **settings: object) -> dict[str, str]:
        if recipe is not None:
            recipe.append(settings)
        out_dir.mkdir(parents=True, exist_ok=True)
        (out_dir / "model.onnx").write_bytes(b"trained")
        trained.append(out_dir)
        return {}

    monkeypatch.setattr(setup, "install_reference_models", reference)
    monkeypatch.setattr(setup, "minilm_onnx", lambda config, models, force=False: {})
    monkeypatch.setattr("epic_edge.export.verifier.default.train_default", train)
    return trained


def test_setup_trains_the_default_profiles_learned_verifier_once(tmp_path, monkeypatch):
    trained = _stub_installs(monkeypatch, tmp_path)
    profile = load_profile("linux-cpu")
    installed = setup.install_profile(profile, tmp_path)
    model = tmp_path / profile.verifier["model"]
    assert installed["learned verifier"] == model and model.read_bytes() == b"trained"
    setup.install_profile(profile, tmp_path)
    assert trained == [model.parent]  # present: not trained again


def test_setup_runs_each_backends_step_from_the_table(tmp_path, monkeypatch):
    _stub_installs(monkeypatch, tmp_path)
    monkeypatch.setattr(setup, "gguf", lambda config, models, force=False: {"llm": models})
    monkeypatch.setattr(setup, "minilm_onnx", lambda config, models, force=False: {"emb": models})
    jetson = load_profile("jetson-orin-nano")  # onnx embedder + learned decision rows' steps
    installed = setup.install_profile(jetson, tmp_path)
    assert installed == {"emb": tmp_path, "learned verifier": tmp_path / jetson.verifier["model"]}
    llm = replace(jetson, verifier={"backend": "llama-cpp"})  # the llama-cpp row's step
    assert setup.install_profile(llm, tmp_path) == {"emb": tmp_path, "llm": tmp_path}


def test_setup_trains_the_shipped_recipe_in_fp32_with_a_progress_bar(tmp_path, monkeypatch):
    recipe: list = []
    _stub_installs(monkeypatch, tmp_path, recipe)
    setup.install_profile(load_profile("linux-cpu"), tmp_path)
    assert recipe == [{"quantize": False, "threads": 0, "progress": True}]


def test_the_shipped_recipe_refuses_other_settings(tmp_path, monkeypatch, capsys):
    from epic_edge.export.verifier import train

    monkeypatch.setattr("epic_edge.export.verifier.default.train_default",
                        lambda *a, **k: pytest.fail("trained"))
    with pytest.raises(SystemExit) as caught:
        train.main(["--kind", "shipped", "--epochs", "3", "--out", str(tmp_path)])
    assert caught.value.code == 2 and "fixed recipe" in capsys.readouterr().err
