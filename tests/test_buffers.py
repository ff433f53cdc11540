"""Equal-size buffers beside a judged run: what they hold and rank, and the sampled estimate."""

from __future__ import annotations

import numpy as np
import pytest

from epic_edge_lab import buffers
from epic_edge_lab.relevance import load_judgments, load_questions, primary_labels


def test_each_buffer_holds_what_fits_the_bytes_and_ranks_it_by_cosine():
    vectors = np.eye(6, dtype=np.float32)
    found = buffers.ranked(vectors, [10] * 6, 30, vectors[[5, 3]], k=2, seed=1)
    chosen, lists, ms = found["recency"]
    assert chosen == [5, 4, 3]  # the most recent three fit 30 bytes
    assert [top[0] for top in lists] == [5, 3] and len(ms) == 2
    held, lists, _ = found["random"]
    assert len(held) == 3 and set(held) <= set(range(6))
    assert all(set(top) <= set(held) for top in lists)
    empty = buffers.ranked(vectors, [10] * 6, 5, vectors[:1], k=2, seed=1)
    assert empty["recency"][1] == [[]]


def test_the_wilson_interval_holds_the_rate_and_stays_in_zero_one():
    assert buffers.wilson(0, 0) == (0.0, 1.0)
    low, high = buffers.wilson(0, 100)
    assert low == 0.0 and 0.03 < high < 0.04
    low, high = buffers.wilson(50, 100)
    assert low < 0.5 < high


@pytest.fixture()
def run():
    """A test-split run: each buffer's first hit judged, four hits nobody judged."""
    labels = primary_labels(load_judgments(None))
    qids = [q.qid for q in load_questions("test", None)][:4]
    retrieved = {}
    for n, qid in enumerate(qids):
        judged = [pid for (q, pid) in labels if q == qid][:1]
        retrieved[qid] = {name: judged + [f"unjudged-{name}-{n}-{i}" for i in range(4)]
                          for name in buffers.BUFFERS}
    return {"retrieved": retrieved, "k": 5}, labels, qids


def test_the_estimate_adds_the_sampled_rate_for_the_hits_left_unjudged(run):
    result, labels, qids = run
    left = buffers.unjudged(result, "test", labels)
    assert all(len(pairs) == 16 for pairs in left.values())
    # the "sample": each question's judged first hit, standing in for drawn pairs now judged
    sampled = {"pairs": {name: [[qid, result["retrieved"][qid][name][0]] for qid in qids]
                         for name in buffers.BUFFERS}}
    found = buffers.estimate(result, "test", sampled)
    rates = [labels[(qid, result["retrieved"][qid]["recency"][0])] for qid in qids]
    aligned_rate = np.mean([b for _, b in rates])
    cell = found["recency"]["aligned"]
    assert found["recency"]["unjudged_share"] == pytest.approx(16 / 20)
    assert cell["judged_only"] == pytest.approx(aligned_rate / 5)
    assert cell["estimate"] == pytest.approx(aligned_rate / 5 + 0.8 * aligned_rate)
    low, high = cell["interval"]
    assert low <= cell["estimate"] <= high


@pytest.mark.parametrize("argv, message", [
    (["add", "missing.json", "--json", "out.json"], "not a saved `bench quality --json` run"),
    (["sample", "missing.json", "--pairs", "0", "--out", "out"], "--pairs must be at least 1"),
    (["estimate", "missing.json", "--sampled", "s.json"], "cannot read the run"),
    (["estimate", "run.json", "--sampled", "s.json"], "holds no buffers"),
])
def test_bad_input_is_a_one_line_usage_error(tmp_path, monkeypatch, capsys, argv, message):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "run.json").write_text('{"retrieved": {"q": {"epic": []}}}')
    (tmp_path / "s.json").write_text('{"pairs": {}}')
    with pytest.raises(SystemExit) as stopped:
        buffers.main(argv)
    err = capsys.readouterr().err
    assert stopped.value.code == 2 and message in err and "Traceback" not in err
