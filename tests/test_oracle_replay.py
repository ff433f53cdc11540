"""The oracle replay: the judges' labels lifted into a recorded memory's ranking, as bounds."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from epic_edge_lab import oracle_replay, quality, relevance


def _quiet(*_args, **_kwargs):
    pass


@pytest.mark.parametrize("lift, message", [("a", "expected numbers"), ("0.5,0", "above 0")])
def test_a_bad_lift_is_one_clear_line(tmp_path: Path, lift: str, message: str) -> None:
    with pytest.raises(SystemExit, match=message):
        oracle_replay.main([str(tmp_path / "run.json"), "--lift", lift])


def test_labelled_passages_rise_and_the_both_oracle_puts_them_first(tmp_path: Path,
                                                                    monkeypatch) -> None:
    monkeypatch.setenv("EPIC_EDGE_DATA", str(tmp_path / "data"))
    relevance.write_questions(relevance.select_questions(personas=[0]), tmp_path)
    run = quality.run("all", corpus="sample", personas="0", tau=0.1, verifier="template",
                      progress=False, log=_quiet, variants=False, judged_root=tmp_path)
    run = json.loads(json.dumps(run, default=float))  # as saved
    memory = list(dict.fromkeys(run["per_persona"][0]["memory_pids"]))
    assert len(memory) > 10
    # each question: its profile list's last hit judged neither, the memory's last entry both
    labels = {}
    for qid, lists in run["retrieved"].items():
        labels[qid, lists["epic"][-1]] = (0, 0)
        labels[qid, memory[-1]] = (1, 1)
    with open(tmp_path / "judgments.jsonl", "w", encoding="utf-8") as fh:
        for (qid, pid), (answers, aligned) in labels.items():
            fh.write(json.dumps({"qid": qid, "pid": pid, "answers": answers,
                                 "aligned": aligned, "judge": "test"}) + "\n")
    result = oracle_replay.replay(run, (0.5, 2.0), tmp_path)
    assert result["tries"] == ["profile", "answers+0.5", "answers+2", "aligned", "both"]
    for lists in result["retrieved"].values():
        assert lists["both"][0] == lists["aligned"][0] == memory[-1]
        assert all(len(r) <= run["k"] and set(r) <= set(memory) for r in lists.values())
    auc = result["answers_auc"]
    assert auc and all(by["profile"] <= by["answers+0.5"] <= by["answers+2"] <= 1.0
                       for by in auc.values())
    for by_name in result["splits"].values():
        assert by_name["both"]["both"] >= by_name["profile"]["both"]
