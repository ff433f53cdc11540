"""Device bundles (linux-cpu and galaxy-z-flip6 exported once per session: conftest.py):
manifest and loader."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest

from epic_edge.errors import EpicEdgeError

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
pytest.importorskip("torch")
pytest.importorskip("transformers")

SENTENCES = [
    "I'm vegan, so please never suggest dishes with meat, fish, eggs or dairy.",
    "The steakhouse on Fifth Street serves dry-aged ribeye and bone marrow butter.",
    "How do I get from Kyoto Station to Fushimi Inari by train?",
    "My daughter is allergic to peanuts.",
    "¿Dónde está la biblioteca más cercana?",
    "ok",
]


@pytest.fixture(scope="session")
def reference(shipped: Path) -> np.ndarray:
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(shipped), device="cpu")
    return model.encode(SENTENCES, normalize_embeddings=True, convert_to_numpy=True)


def test_manifest_describes_the_linux_cpu_bundle(cpu_bundle: Path) -> None:
    from epic_edge.export.bundle import sha256_file

    manifest = json.loads((cpu_bundle / "manifest.json").read_text())
    assert manifest["profile"] == "linux-cpu" and manifest["format"] == "epic-edge-bundle"
    files = manifest["files"]
    # linux-cpu: the learned decision model; instructions from the template, so no GGUF
    for rel in ("epic-minilm/model.onnx", "epic-minilm/model.int8.onnx",
                "epic-minilm/tokenizer.json", "epic-verifier-minilm/model.onnx",
                "profile.toml"):
        assert rel in files, rel
        assert files[rel]["bytes"] == (cpu_bundle / rel).stat().st_size
        assert files[rel]["sha256"] == sha256_file(cpu_bundle / rel)
    emb, llm = manifest["embedder"], manifest["llm"]
    assert (emb["dim"], emb["pooling"], emb["max_length"], emb["tau"]) == (384, "mean", 256, 0.24)
    assert emb["tokenizer"] == "epic-minilm/tokenizer.json"
    assert llm["backend"] == "learned" and llm["decision_file"] == "epic-verifier-minilm/model.onnx"
    assert llm["format"] == "none" and not any(rel.endswith(".gguf") for rel in files)
    assert {"torch", "onnx", "onnxruntime", "transformers"} <= set(manifest["versions"])


def test_bundle_carries_a_wheel_and_exact_requirements(cpu_bundle: Path, tmp_path: Path) -> None:
    """A person can install the bundle's own epic-edge: no package index holds it."""
    import importlib.metadata
    import zipfile

    python = json.loads((cpu_bundle / "manifest.json").read_text())["python"]
    assert python["extra"] == "cpu"
    wheel = cpu_bundle / python["wheel"]
    names = zipfile.ZipFile(wheel).namelist()
    assert {"epic_edge/memory.py", "epic_edge/backends/onnx_embedder.py",
            "epic_edge/devices/linux-cpu.toml", "epic_edge/data/sample_persona.json"} <= set(names)
    lines = [line for line in (cpu_bundle / python["requirements"]).read_text().splitlines()
             if line and not line.startswith("#")]
    assert f"numpy=={importlib.metadata.version('numpy')}" in lines
    assert f"onnxruntime=={importlib.metadata.version('onnxruntime')}" in lines
    # linux-cpu decides with the learned model: its [cpu] extra compiles no llama.cpp
    assert not any(line.startswith("llama-cpp-python") for line in lines)
    assert not any("torch" in line or "extra" in line for line in lines)


def test_int8_embedder_agrees(cpu_bundle: Path) -> None:
    int8 = json.loads((cpu_bundle / "manifest.json").read_text())["embedder"]["int8"]
    assert int8["per_channel"] and int8["min_cosine"] >= 0.98, int8


def test_per_tensor_int8_agrees_less(cpu_bundle: Path, tmp_path: Path) -> None:
    """The naive (per-tensor) int8 loses more than per-channel: why per-channel is the export."""
    from epic_edge.export.onnx_int8 import agreement, quantize_int8

    folder = cpu_bundle / "epic-minilm"
    naive = quantize_int8(folder / "model.onnx", tmp_path / "naive.onnx", per_channel=False)
    good = agreement(folder / "model.onnx", folder / "model.int8.onnx", folder / "tokenizer.json")
    bad = agreement(folder / "model.onnx", naive, folder / "tokenizer.json")
    print(f"int8 min cosine: per-channel {good['min_cosine']:.4f}, "
          f"per-tensor {bad['min_cosine']:.4f}")
    assert good["min_cosine"] >= 0.98
    assert bad["mean_cosine"] < good["mean_cosine"]


def test_bundle_loads_and_embeds(cpu_bundle: Path, reference: np.ndarray) -> None:
    from epic_edge import registry
    from epic_edge.export.bundle import load_bundle

    bundle = load_bundle(cpu_bundle)
    assert bundle.profile.name == "linux-cpu" and bundle.model_dir == cpu_bundle
    emb = registry.create("embedder", bundle.profile.embedder, bundle.model_dir)
    assert emb.fingerprint == "epic-minilm-l6:mean:384:int8"  # the profile embeds with int8
    cos = (emb.embed(SENTENCES) * reference).sum(axis=1)  # against sentence-transformers fp32
    # int8 loses most on a one-word "ok"; the fine-tuned model's int8 copy gives 0.988 at worst
    # on the rest (all-MiniLM-L6-v2's: 0.99)
    assert cos[:-1].min() >= 0.985 and cos[-1] >= 0.95
    fp32 = {**bundle.profile.embedder, "model": "epic-minilm/model.onnx"}
    exact = registry.create("embedder", fp32, bundle.model_dir).embed(SENTENCES)
    assert (exact * reference).sum(axis=1).min() >= 0.999


@pytest.mark.parametrize("damage", ["missing", "altered", "truncated"])
def test_damaged_bundle_names_the_file(cpu_bundle: Path, tmp_path: Path, damage: str) -> None:
    from epic_edge.export.bundle import BundleError, load_bundle

    copy = tmp_path / "copy"
    shutil.copytree(cpu_bundle, copy)
    victim = copy / "epic-minilm" / "tokenizer.json"
    if damage == "missing":
        victim.unlink()
    elif damage == "altered":
        data = bytearray(victim.read_bytes())
        data[100] ^= 0x01
        victim.write_bytes(bytes(data))
    else:
        victim.write_bytes(victim.read_bytes()[:-10])
    with pytest.raises(BundleError, match=r"epic-minilm/tokenizer\.json"):
        load_bundle(copy)


def test_not_a_bundle(tmp_path: Path) -> None:
    from epic_edge.export.bundle import BundleError, load_bundle

    with pytest.raises(BundleError, match="manifest.json is missing"):
        load_bundle(tmp_path)
    (tmp_path / "manifest.json").write_text("{nope")
    with pytest.raises(BundleError, match="not readable JSON"):
        load_bundle(tmp_path)


def test_export_refuses_foreign_folders(cpu_bundle: Path, tmp_path: Path) -> None:
    from epic_edge.export.device_export import export_bundle

    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(EpicEdgeError, match="not empty"):
        export_bundle("linux-cpu", tmp_path)
    with pytest.raises(EpicEdgeError, match="holds a bundle for 'linux-cpu'"):
        export_bundle("jetson-orin-nano", cpu_bundle)


def test_phone_bundle_xnnpack_embedder_agrees(phone_bundle: Path, reference: np.ndarray) -> None:
    from epic_edge import registry
    from epic_edge.export.bundle import load_bundle

    bundle = load_bundle(phone_bundle)
    manifest = bundle.manifest
    assert "epic-minilm/model.int8.xnnpack.pte" in manifest["files"]
    assert manifest["embedder"]["delegate"] == "xnnpack"
    llm = manifest["llm"]
    assert (llm["decision_file"], llm["decision_format"]) == (
        "epic-verifier-minilm/model.int8.xnnpack.pte", "executorch")
    assert llm["decision_sha256"] == manifest["files"][llm["decision_file"]]["sha256"]
    assert llm["file"] is None and not any(f.endswith(".gguf") for f in manifest["files"])
    for name in ("embedder executorch qnn", "learned decision executorch qnn"):
        qnn = [s for s in manifest["steps"] if s["step"] == name]
        if not os.environ.get("QNN_SDK_ROOT"):
            assert qnn[0]["status"] == "skipped" and "QNN_SDK_ROOT" in qnn[0]["reason"]
    emb = registry.create("embedder", bundle.profile.embedder, bundle.model_dir)
    assert emb.dim == 384 and emb.fingerprint == "epic-minilm-l6:mean:384:int8"
    got = emb.embed(SENTENCES)
    assert got.shape == (len(SENTENCES), 384) and got.dtype == np.float32
    assert (got * reference).sum(axis=1).min() >= 0.99  # int8 ("ok": 0.993): docs/bundles.md
    assert emb.embed([]).shape == (0, 384)


def test_phone_bundle_decides_as_linux_cpu_and_keeps_a_small_memory(phone_bundle: Path,
                                                                     tmp_path: Path) -> None:
    """The galaxy-z-flip6 bundle as shipped (int8 ExecuTorch embedder and decision) on x86
    Linux."""
    pytest.importorskip("faiss")
    from epic_edge import registry
    from epic_edge.backends.learned_verifier import LearnedVerifier
    from epic_edge.baseline import StoreEverything
    from epic_edge.datasets import load_sample_corpus, load_sample_persona
    from epic_edge.export.bundle import load_bundle
    from epic_edge.export.learned_decision import INT8_PROGRAM_LIMIT, PARITY_LIMIT, parity
    from epic_edge.memory import Memory
    from epic_edge.models import model_dir
    from epic_edge_lab.calibrate import load_verification_set

    bundle = load_bundle(phone_bundle, hashes=False)
    decision = registry.create("verifier", bundle.profile.verifier, bundle.model_dir)
    pairs = load_verification_set("test")[:80]
    source = LearnedVerifier(model_dir() / "epic-verifier-minilm" / "model.onnx")
    got = parity(source, decision, [p.preference for p in pairs], [p.passage for p in pairs],
                 threshold=float(bundle.profile.verifier["threshold"]))
    # the int8 program rounds (bench/results/int8_programs.json): held to its measured spread
    assert bundle.profile.verifier["model"].endswith("model.int8.xnnpack.pte")
    assert got["max_abs_delta"] <= INT8_PROGRAM_LIMIT
    assert got["mean_abs_delta"] <= PARITY_LIMIT / 2 and got["decisions_agree"] >= 0.97
    persona, corpus = load_sample_persona(), load_sample_corpus()
    with Memory.open(tmp_path / "phone.epic", bundle.profile, model_dir=bundle.model_dir) as mem:
        mem.add_preferences(persona["preferences"])
        kept = sum(s.kept for s in mem.ingest(corpus, batch_size=16))
        everything = StoreEverything(tmp_path / "all.sqlite", mem.embedder)
        everything.add(corpus)
        assert 0 < kept and mem.footprint()["total"] < everything.footprint()
        everything.close()


def test_cli_export_and_check(cpu_bundle: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from epic_edge.cli import main

    assert main(["export", "--device", "linux-cpu", "--out", str(cpu_bundle)]) == 0
    # re-export reuses the files and rewrites the manifest
    assert "bundle " in capsys.readouterr().out
    assert main(["export", "--check", str(cpu_bundle)]) == 0
    assert "all sha256 match" in capsys.readouterr().out
    assert main(["export", "--check", str(cpu_bundle / "nope")]) == 2
    assert "manifest.json is missing" in capsys.readouterr().err


def test_jetson_bundle(jetson_bundle) -> None:
    from epic_edge.export.bundle import load_bundle

    result = jetson_bundle
    bundle = load_bundle(result.root)
    assert bundle.profile.name == "jetson-orin-nano"
    assert bundle.profile.embedder["providers"][0] == "TensorrtExecutionProvider"
    assert "int8" not in bundle.manifest["embedder"]
    assert {"epic-minilm/model.onnx", "epic-verifier-minilm/model.onnx"} <= set(
        bundle.manifest["files"])
    assert bundle.manifest["llm"]["decision_format"] == "onnx"
    assert bundle.profile.verifier["providers"][0] == "CUDAExecutionProvider"
    assert [s["step"] for s in result.steps] == ["embedder onnx fp32", "learned decision onnx",
                                                 "python wheel + requirements"]
    requirements = (result.root / "python" / "requirements.txt").read_text()
    assert "onnxruntime-gpu" in requirements and "faiss-cpu==" in requirements
