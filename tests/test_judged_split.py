"""The judged verification split: neutral passages only, majority labels, texts from the corpus."""

from __future__ import annotations

import json

import pytest

from epic_edge.errors import InvalidInputError
from epic_edge_lab import judged_split, relevance

VEGAN = "I strictly follow a vegan diet."


@pytest.fixture
def judged(monkeypatch):
    questions = [relevance.Question(qid, "prefwiki", 1, 0, split, "Where should we eat?", VEGAN)
                 for qid, split in (("q1", "test"), ("q2", "test"), ("d1", "dev"))]
    judgments = [relevance.Judgment("q1", "bistro", 1, 1, "reader-a"),
                 relevance.Judgment("q2", "bistro", 1, 1, "reader-b"),
                 relevance.Judgment("q1", "tax", 0, 0, "reader-a"),
                 relevance.Judgment("q1", "farm", 0, 1, "reader-a"),
                 relevance.Judgment("q2", "farm", 0, 0, "reader-b"),
                 relevance.Judgment("q1", "steak", 1, 1, "reader-a"),
                 relevance.Judgment("d1", "park", 0, 1, "reader-a")]
    monkeypatch.setattr(relevance, "load_questions",
                        lambda split="all": [q for q in questions if split in ("all", q.split)])
    monkeypatch.setattr(relevance, "load_judgments", lambda root=None: judgments)


def test_only_test_questions_and_passages_a_verifier_free_system_found(judged) -> None:
    retrieved = {"q1": {"store-everything": ["bistro", "tax", "farm"], "epic": ["steak"]},
                 "q2": {"coarse": ["bistro", "farm"]},
                 "d1": {"store-everything": ["park"]}}
    rows = {r["pid"]: r for r in judged_split.build(retrieved)}
    assert set(rows) == {"bistro", "tax", "farm"}  # steak: EPIC's own keep; park: a dev question
    assert rows["bistro"]["label"] == "Keep" and rows["bistro"]["aligned_votes"] == "2/2"
    assert rows["farm"]["label"] == "Discard"  # 1 of 2: a tie is Discard
    assert rows["tax"]["label"] == "Discard"
    assert rows["bistro"]["judges"] == ["reader-a", "reader-b"]


def test_load_takes_texts_from_the_corpus_and_names_a_missing_passage(judged, tmp_path) -> None:
    rows = judged_split.build({"q1": {"store-everything": ["bistro", "tax"]}})
    (tmp_path / judged_split.FILE).write_text("".join(json.dumps(r) + "\n" for r in rows))
    pairs = judged_split.load({"bistro": "A vegan bistro.", "tax": "Income tax."}, tmp_path)
    assert [(p.passage, p.keep, p.split) for p in pairs] == [
        ("A vegan bistro.", True, "test_judged"), ("Income tax.", False, "test_judged")]
    with pytest.raises(InvalidInputError, match="tax.*fetch the bench corpus"):
        judged_split.load({"bistro": "A vegan bistro."}, tmp_path)
    assert judged_split.load({}, tmp_path / "none") == []


def refused(tmp_path, capsys, body: str | None) -> str:
    """main's error for a quality file holding `body` (None: no file); the split it would
    replace must be left as it was."""
    path, out = tmp_path / "quality.json", tmp_path / judged_split.FILE
    if body is not None:
        path.write_text(body)
    out.write_text("kept\n")
    with pytest.raises(SystemExit) as caught:
        judged_split.main(["--quality", str(path), "--out", str(out)])
    assert caught.value.code == 2 and out.read_text() == "kept\n"
    return capsys.readouterr().err


@pytest.mark.parametrize("body", [None, "{}", "not json"])
def test_a_bad_quality_file_is_a_one_line_error_and_the_split_is_kept(tmp_path, capsys, body):
    assert "not a quality run's JSON" in refused(tmp_path, capsys, body)


def test_without_the_corpus_the_split_is_kept_and_the_error_says_fetch(tmp_path, capsys,
                                                                       monkeypatch):
    from epic_edge_lab.corpus_sources import CorpusError

    def no_corpus():
        raise CorpusError("corpus 'device' is not cached; run `epic-edge data fetch device`")

    monkeypatch.setattr(judged_split, "corpus_texts", no_corpus)
    assert "data fetch device" in refused(tmp_path, capsys, json.dumps({"retrieved": {}}))
