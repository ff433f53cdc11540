"""The judged relevance set: question split, blind pooling, judgments, metrics, agreement."""

from __future__ import annotations

import json

import numpy as np
import pytest

from epic_edge.errors import InvalidInputError
from epic_edge.types import Item, Preference
from epic_edge_lab import pooling, relevance
from epic_edge_lab.judged_metrics import agreement, ceilings, cohen_kappa, score_list
from epic_edge_lab.losses import judged_fates, passage_fates
from epic_edge_lab.policy import choose_gate, used, with_cut
from fakes import KeywordVerifier


@pytest.fixture
def root(tmp_path):
    relevance.write_questions(relevance.select_questions(personas=[0, 1, 2]), tmp_path)
    return tmp_path


def test_questions_split_by_persona_from_distinct_blocks(root):
    questions = relevance.load_questions("all", root)
    assert len(questions) == 15 and len({q.qid for q in questions}) == 15
    assert {q.persona for q in relevance.load_questions("dev", root)} == {0, 2}
    assert {q.persona for q in relevance.load_questions("test", root)} == {1}
    for p in (0, 1, 2):
        blocks = [q.block for q in questions if q.persona == p]
        assert len(set(blocks)) == 5  # 3 PrefWiki + 2 PrefEval, never the same preference
    assert relevance.select_questions(personas=[0, 1, 2]) == questions  # seeded
    with pytest.raises(InvalidInputError, match="unknown split"):
        relevance.load_questions("train", root)


def _result(questions, texts):
    retrieved = {questions[0].qid: {"a": [relevance.passage_id(t) for t in texts[:2]],
                                    "b": [relevance.passage_id(t) for t in texts[1:]]}}
    passages = {relevance.passage_id(t): {"text": t, "item_id": f"x:{n}", "source": "s"}
                for n, t in enumerate(texts)}
    return {"retrieved": retrieved, "passages": passages}


def test_pool_is_blind_deduplicated_and_only_unjudged(root, tmp_path):
    questions = relevance.load_questions("all", root)
    texts = ["alpha passage", "beta passage", "gamma passage"]
    done = pooling.pool(_result(questions, texts), tmp_path / "batches", root=root)
    assert done["rows"] == 3 and done["new_passages"] == 3
    rows = [json.loads(x) for x in open(done["batches"][0], encoding="utf-8")]
    assert set(rows[0]) == {"qid", "question", "preference", "pid", "passage"}  # no system
    assert sorted(r["passage"] for r in rows) == texts
    stored = relevance.load_passages(root)
    assert all("text" not in p for p in stored.values())  # provenance only, never the text
    judged = tmp_path / "judged.jsonl"
    judged.write_text("".join(json.dumps({"qid": r["qid"], "pid": r["pid"], "answers": 1,
                                          "aligned": int(n == 0)}) + "\n"
                              for n, r in enumerate(rows[:2])))
    assert pooling.add_judgments(judged, "reader-1", root) == 2
    assert pooling.add_judgments(judged, "reader-1", root) == 0  # same reader: once
    again = pooling.pool(_result(questions, texts), tmp_path / "again", root=root)
    assert again["rows"] == 1  # only the passage nobody judged goes out again


def test_bad_judgments_are_refused_whole(root, tmp_path):
    questions = relevance.load_questions("all", root)
    pooling.pool(_result(questions, ["one", "two"]), tmp_path / "b", root=root)
    pid = relevance.passage_id("one")
    bad = tmp_path / "bad.jsonl"
    for line, message in (
        ({"qid": questions[0].qid, "pid": pid, "answers": 2, "aligned": 0}, "0 or 1"),
        ({"qid": "nope", "pid": pid, "answers": 1, "aligned": 0}, "unknown question"),
        ({"qid": questions[0].qid, "pid": pid, "answers": 1}, "not a judgment"),
    ):
        bad.write_text(json.dumps(line) + "\n")
        with pytest.raises(InvalidInputError, match=message):
            pooling.add_judgments(bad, "reader-1", root)
    assert relevance.load_judgments(root) == []
    with pytest.raises(InvalidInputError, match="reader"):
        pooling.add_judgments(bad, " ", root)


def test_score_list_counts_axes_gain_and_unjudged():
    labels = {("q", "a"): (1, 1), ("q", "b"): (1, 0), ("q", "c"): (0, 1), ("q", "d"): (0, 0)}
    s = score_list("q", ["a", "b", "x"], labels, k=5)
    assert s["aligned"] == pytest.approx(1 / 5) and s["answers"] == pytest.approx(2 / 5)
    assert s["both"] == pytest.approx(1 / 5) and s["unjudged"] == pytest.approx(1 / 3)
    assert s["returned"] == pytest.approx(3 / 5)
    assert score_list("q", ["a", "b", "c"], labels, k=3)["ndcg"] == pytest.approx(1.0)
    worse = score_list("q", ["d", "c", "a"], labels, k=3)["ndcg"]
    assert 0 < worse < 1
    assert score_list("q", [], labels)["ndcg"] == 0.0  # memory withheld: nothing found


def test_ceilings_count_the_judged_positives_a_perfect_ranking_could_reach():
    labels = {("w", p): (1, 1) for p in "abcdef"} | {("w", "g"): (0, 1), ("t", "a"): (1, 0)}
    questions = [relevance.Question("w", "wiki", 0, 0, "dev", "?", "pref"),
                 relevance.Question("t", "wiki", 1, 0, "test", "?", "pref")]
    memory = [{"persona": 0, "memory_pids": ["a", "g", "x"]}, {"persona": 1, "memory_pids": []}]
    got = ceilings(questions, memory, labels, k=5)
    assert got["EPIC's memory"]["dev"] == {"aligned": 0.4, "answers": 0.2, "both": 0.2}
    assert got["EPIC's memory"]["test"] == {"aligned": 0.0, "answers": 0.0, "both": 0.0}
    assert got["judged pool"]["dev"] == {"aligned": 1.0, "answers": 1.0, "both": 1.0}
    assert got["judged pool"]["test"]["answers"] == 0.2
    assert list(ceilings(questions, [{"persona": 0}], labels)) == ["judged pool"]  # old runs


def test_passage_fates_follow_ingest_decisions_and_count_per_split():
    items = [Item(t) for t in ("vegan bistro", "steakhouse grill", "vegan tax form", "opera")]
    vectors = np.array([[1, 0], [0.6, 0.8], [1, 0], [0, 1]], dtype=np.float32)
    prefs, pref_vectors = [Preference(1, "vegan")], np.array([[1, 0]], dtype=np.float32)
    index_of = {f"p{i}": i for i in range(4)}
    fates = passage_fates([*index_of, "elsewhere"], {"p0"}, index_of, items, vectors, prefs,
                          pref_vectors, tau=0.5, verifier=KeywordVerifier())
    # in the memory; the verifier said no; kept, so the budget evicted it; below tau
    assert fates == {"p0": "memory", "p1": "verifier", "p2": "evicted", "p3": "coarse"}
    labels = {("w", "p0"): (1, 1), ("w", "p1"): (1, 1), ("w", "p3"): (1, 0),
              ("w", "new"): (1, 1), ("t", "p2"): (1, 1)}
    questions = [relevance.Question("w", "wiki", 0, 0, "dev", "?", "pref"),
                 relevance.Question("t", "wiki", 1, 0, "test", "?", "pref")]
    runs = [{"persona": 0, "passage_fates": fates}, {"persona": 1, "passage_fates": fates}]
    got = judged_fates(questions, runs, labels)
    assert got["dev"] == {"memory": 1, "evicted": 0, "verifier": 1, "coarse": 0, "unknown": 1}
    assert got["test"]["evicted"] == 1 and sum(got["test"].values()) == 1
    assert judged_fates(questions, runs, labels, "answers")["dev"]["coarse"] == 1
    assert judged_fates(questions, [{"persona": 0}], labels) == {}  # runs before fates


def test_cohen_kappa_and_agreement():
    assert cohen_kappa([1, 0, 1, 0], [1, 0, 1, 0]) == pytest.approx(1.0)
    assert cohen_kappa([1, 1, 0, 0], [1, 0, 1, 0]) == pytest.approx(0.0)
    J = relevance.Judgment
    js = [J("q", "a", 1, 1, "r1"), J("q", "a", 1, 0, "r2"), J("q", "b", 0, 0, "r1"),
          J("q", "b", 0, 1, "r2"), J("q", "c", 1, 1, "r1")]
    out = agreement(js)
    assert out["double_judged"] == 2
    assert out["answers"]["agreement"] == 1.0 and out["aligned"]["agreement"] == 0.0
    assert relevance.primary_labels(js)[("q", "a")] == (1, 1)  # the first reader's labels


def test_choose_gate_keeps_own_questions_and_refuses_the_rest():
    # rows: closest preference, best entry, the memory's item cut at that quantile, the
    # question gate's P(no preference bears) (NaN: no question gate)
    nan = np.nan
    own = np.array([[0.5, 0.1, 0.3, nan], [0.05, 0.45, 0.3, nan], [0.4, 0.4, 0.3, nan],
                    [0.3, 0.25, 0.2, nan]])
    none = np.array([[0.1, 0.2, 0.3, nan], [0.15, 0.1, 0.3, nan], [0.35, 0.1, 0.3, nan]])
    loose = own.copy()
    loose[:, 2] = 0.0  # a quantile so low that every question passes
    best = choose_gate({0.9: own, 0.5: loose}, {0.9: none, 0.5: none * [1, 1, 0, 1]},
                       min_refused=1.0)
    assert best["no_memory_own"] == 0.0 and best["item_gate_quantile"] == 0.9
    assert used(own, best["gate"]).all() and best["no_memory_none"] == pytest.approx(1.0)


def test_the_question_gate_withholds_what_it_reads_as_unrelated_whatever_the_rest():
    rows = np.array([[0.9, 0.9, 0.3, 0.8], [0.9, 0.9, 0.3, 0.2], [0.9, 0.9, 0.3, np.nan]])
    assert used(rows, 0.2, question=0.7).tolist() == [False, True, True]
    assert used(rows, 0.2).all()  # no question gate in force
    # the closest preference alone cannot pass a question the gate withholds, so the
    # choice can refuse the no-preference row with a low gate that keeps every own question
    own = np.array([[0.3, 0.1, 0.5, 0.1], [0.25, 0.1, 0.5, 0.2]])
    none = np.array([[0.4, 0.1, 0.5, 0.9]])
    best = choose_gate({0.9: own}, {0.9: none}, min_refused=1.0, question=0.7)
    assert best["no_memory_own"] == 0.0 and best["gate"] <= 0.25
    assert choose_gate({0.9: own}, {0.9: none}, min_refused=1.0)["no_memory_own"] == 1.0


def test_an_item_cut_follows_the_memory_it_is_measured_in():
    background = [[0.1, s] for s in np.linspace(0.0, 0.5, 101)]
    rows = with_cut([[0.1, 0.46], [0.1, 0.44]], background, 0.9)
    assert rows[0, 2] == pytest.approx(0.45)
    assert used(rows, gate=0.2).tolist() == [True, False]
    assert with_cut([[0.1, 0.3]], background, 0.9, item_gate=0.25)[0, 2] == 0.25
    assert not used(with_cut([[0.1, 0.9]], [], 0.9), gate=0.2)[0]  # no background: no cut
    # a recorded question gate P travels as the last column (None: there was none)
    assert with_cut([[0.1, 0.46, 0.8], [0.1, 0.46, None]], background, 0.9)[:, 3].tolist()[0] \
        == 0.8 and np.isnan(with_cut([[0.1, 0.46, None]], background, 0.9)[0, 3])


