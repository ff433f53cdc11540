"""Quality against budget: a run's judged figures per split, a replay's EPIC lists, the table."""

from __future__ import annotations

import json

import pytest

from epic_edge_lab import budget_curve
from epic_edge_lab.relevance import load_judgments, load_questions, primary_labels


def _run(tmp_path, name, epic):
    """A two-question run (one dev, one test) whose lists are judged passages."""
    labels = primary_labels(load_judgments(None))
    questions = {q.split: q for q in load_questions("all", None)}
    retrieved = {}
    for q in questions.values():
        judged = [pid for (qid, pid) in labels if qid == q.qid][:5]
        retrieved[q.qid] = {"store-everything": judged[::-1], "coarse+fine": judged,
                            "epic": judged if epic == "same" else []}
    path = tmp_path / name
    path.write_text(json.dumps({"retrieved": retrieved,
                                "per_persona": [{"systems": {"epic": {"bytes": 2_000_000}}}]}))
    return path, retrieved


def test_a_point_scores_each_split_and_takes_epic_from_a_replay(tmp_path):
    run, retrieved = _run(tmp_path, "run.json", epic="empty")
    plain = budget_curve.point(run, None, "t")
    assert plain["mb_median"] == 2.0 and set(plain) >= {"dev", "test"}
    assert plain["dev"]["epic"]["aligned"] == 0.0  # no lists: nothing found
    replay = tmp_path / "replay.json"
    replay.write_text(json.dumps({"retrieved": {q: {"t": v["coarse+fine"]}
                                                for q, v in retrieved.items()}}))
    replayed = budget_curve.point(run, replay, "t")
    for split in ("dev", "test"):
        assert replayed[split]["epic"] == {**replayed[split]["coarse+fine"],
                                           "vs_se": replayed[split]["epic"]["vs_se"]}
    assert replayed["epic_from"] == "replay.json"


def test_the_section_renders_every_point_and_split(tmp_path):
    run, _ = _run(tmp_path, "run.json", epic="same")
    point = budget_curve.point(run, None, "t")
    cell = {axis: {"estimate": 0.01} for axis in ("aligned", "answers", "both")}
    point["buffers"] = {"test": {"recency": cell, "random": {**cell, "both": {"estimate": 0.0}}}}
    curve = {"points": {"1MB": point},
             "personal": {"1MB": {"keep_recall": 0.9, "keep_precision": 0.6, "epic": 0.45,
                                  "store_everything": 0.5, "recency": 0.3}}, "note": "why"}
    (tmp_path / "budget-curve.json").write_text(json.dumps(curve))
    text = "\n".join(budget_curve.section(tmp_path))
    assert "why" in text and text.count("| 1MB ") == 2 and "0.90 at 0.60" in text
    assert "0.010 / 0.010 / 0.010; 0.010 / 0.010 / 0.000" in text
    assert budget_curve.section(tmp_path / "missing") == []


@pytest.mark.parametrize("spec", ["0.4MB", "huge=run.json", "1MB=missing.json"])
def test_a_bad_point_is_a_one_line_usage_error(tmp_path, capsys, spec):
    with pytest.raises(SystemExit) as stopped:
        budget_curve.main([spec, "--json", str(tmp_path / "curve.json")])
    assert stopped.value.code == 2 and not (tmp_path / "curve.json").exists()
    err = capsys.readouterr().err
    assert ("no such run file" if "missing" in spec else "bad point") in err


def test_buffers_for_a_point_not_given_are_a_one_line_usage_error(tmp_path, capsys):
    run, _ = _run(tmp_path, "run.json", epic="same")
    estimate = tmp_path / "est.json"
    estimate.write_text("{}")
    with pytest.raises(SystemExit) as stopped:
        budget_curve.main([f"1MB={run}", "--buffers", f"4MB:test={estimate}",
                           "--json", str(tmp_path / "curve.json")])
    assert stopped.value.code == 2 and "bad --buffers" in capsys.readouterr().err


def test_each_budget_is_compared_with_the_one_before(tmp_path):
    """steps: the larger budget's EPIC minus the smaller's, paired per question and split."""
    _, empty = _run(tmp_path, "small.json", epic="empty")
    _, same = _run(tmp_path, "large.json", epic="same")
    added = budget_curve.steps({name: {q: v["epic"] for q, v in found.items()}
                                for name, found in (("0.4MB", empty), ("1MB", same))})
    assert list(added) == ["0.4MB -> 1MB"]
    for split, figures in added["0.4MB -> 1MB"].items():
        judged = budget_curve.point(tmp_path / "large.json", None, "t")[split]["epic"]
        for axis in ("aligned", "answers", "both"):
            assert figures[axis][0] == pytest.approx(judged[axis])  # from nothing found
