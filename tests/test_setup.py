"""`epic-edge setup` installs what the chosen profile needs, from its backend rows (one path):
the learned decision unpacked from its committed artifact, never trained here."""

from __future__ import annotations

import io
import json
import tarfile
from dataclasses import replace
from pathlib import Path

import pytest

from epic_edge.errors import ModelNotFoundError
from epic_edge.export import artifacts, setup_steps
from epic_edge.profiles import load_profile


def _artifact(path: Path, files: dict[str, bytes]) -> Path:
    with tarfile.open(path, "w:xz") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def _stub_installs(monkeypatch, artifact: Path) -> list[Path]:
    unpacked: list[Path] = []
    real = setup_steps.unpack_artifact

    def unpack(source: Path, folder: Path) -> None:
        unpacked.append(folder)
        real(source, folder)

    monkeypatch.setattr(setup_steps, "minilm_onnx", lambda config, models, force=False: {})
    monkeypatch.setattr(setup_steps, "learned_artifact", lambda: artifact)
    monkeypatch.setattr(setup_steps, "unpack_artifact", unpack)
    return unpacked


def test_setup_unpacks_the_default_profiles_learned_decision_once(tmp_path, monkeypatch):
    artifact = _artifact(tmp_path / "a.tar.xz", {"model.onnx": b"trained", "model.json": b"{}"})
    unpacked = _stub_installs(monkeypatch, artifact)
    models = tmp_path / "models"
    profile = load_profile("linux-cpu")
    installed = setup_steps.install_profile(profile, models)
    model = models / profile.verifier["model"]
    assert installed == {"learned verifier": model} and model.read_bytes() == b"trained"
    assert (model.parent / "model.json").read_bytes() == b"{}"
    setup_steps.install_profile(profile, models)
    assert unpacked == [model.parent]  # present: not unpacked again
    assert not list(model.parent.glob("*.part"))


def test_setup_runs_each_backends_step_from_the_table(tmp_path, monkeypatch):
    artifact = _artifact(tmp_path / "a.tar.xz", {"model.onnx": b"trained"})
    _stub_installs(monkeypatch, artifact)
    monkeypatch.setattr(setup_steps, "gguf", lambda config, models, force=False: {"llm": models})
    monkeypatch.setattr(setup_steps, "minilm_onnx",
                        lambda config, models, force=False: {"emb": models})
    jetson = load_profile("jetson-orin-nano")  # onnx embedder + learned decision rows' steps
    installed = setup_steps.install_profile(jetson, tmp_path)
    assert installed == {"emb": tmp_path, "learned verifier": tmp_path / jetson.verifier["model"]}
    llm = replace(jetson, verifier={"backend": "llama-cpp"})  # the llama-cpp row's step
    assert setup_steps.install_profile(llm, tmp_path) == {"emb": tmp_path, "llm": tmp_path}
    # the default profile's template instructions need no GGUF; "llm" instructions do
    writer = replace(jetson, verifier={**jetson.verifier, "instructions": "llm"})
    assert setup_steps.install_profile(writer, tmp_path)["llm"] == tmp_path


def test_an_artifact_with_a_path_inside_is_refused(tmp_path):
    artifact = _artifact(tmp_path / "a.tar.xz", {"../model.onnx": b"x"})
    with pytest.raises(ModelNotFoundError, match="unexpected entry"):
        setup_steps.unpack_artifact(artifact, tmp_path / "out")
    assert not (tmp_path / "model.onnx").exists()


def test_without_the_artifact_setup_says_where_it_comes_from(tmp_path, monkeypatch):
    monkeypatch.setattr(artifacts, "LEARNED_ARTIFACT", tmp_path / "absent.tar.xz")
    with pytest.raises(ModelNotFoundError, match="train-verifier"):
        artifacts.learned_artifact()
    monkeypatch.setattr(artifacts, "EMBEDDER_ARTIFACT", tmp_path / "absent.tar.xz")
    with pytest.raises(ModelNotFoundError, match="train-embedder"):
        artifacts.embedder_artifact()


def test_the_shipped_recipe_refuses_other_settings(tmp_path, monkeypatch, capsys):
    train = pytest.importorskip("epic_edge_lab.verifier.train")
    monkeypatch.setattr("epic_edge_lab.verifier.default.train_default",
                        lambda *a, **k: pytest.fail("trained"))
    with pytest.raises(SystemExit) as caught:
        train.main(["--kind", "shipped", "--epochs", "3", "--out", str(tmp_path)])
    assert caught.value.code == 2 and "fixed recipe" in capsys.readouterr().err


def test_a_new_export_is_quantised_again(tmp_path, monkeypatch):
    """An int8 copy made from an older fp32 export (model.json rewritten without its int8
    note, as a new export writes it) or stored the older way is made again; a current one is
    left alone."""
    from epic_edge.export import minilm_onnx, onnx_int8

    folder = tmp_path / minilm_onnx.FOLDER
    folder.mkdir()
    (folder / onnx_int8.INT8_NAME).write_bytes(b"old int8")
    made: list[Path] = []

    def export(out_dir, force=False, weights=None):  # writes once, then finds it current
        if not (out_dir / "model.onnx").exists():
            (out_dir / "model.onnx").write_bytes(b"fp32")
            (out_dir / "model.json").write_text('{"name": "fresh"}')
        return out_dir / "model.onnx"

    def quantize(fp32, out):
        made.append(out)
        note = {"name": "fresh", "int8": {"stored": onnx_int8.WEIGHT_STORAGE}}
        fp32.with_name("model.json").write_text(json.dumps(note))

    monkeypatch.setattr(minilm_onnx, "embedder_weights", lambda models=None: tmp_path)
    monkeypatch.setattr(minilm_onnx, "export_minilm_onnx", export)
    monkeypatch.setattr(onnx_int8, "quantize_int8", quantize)
    setup_steps.minilm_onnx({}, tmp_path)
    assert made == [folder / onnx_int8.INT8_NAME]
    setup_steps.minilm_onnx({}, tmp_path)
    assert len(made) == 1  # the same export: its int8 copy stands
    # a copy stored as signed int8 (before WEIGHT_STORAGE) is made again
    (folder / "model.json").write_text('{"name": "fresh", "int8": {"weight_type": "QInt8"}}')
    setup_steps.minilm_onnx({}, tmp_path)
    assert len(made) == 2
