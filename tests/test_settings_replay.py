"""The settings replay: a saved run's memories re-ranked under other [retrieval] weights."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from epic_edge_lab import quality, relevance, settings_replay


def _quiet(*_args, **_kwargs):
    pass


@pytest.mark.parametrize("pair, message", [
    ("gate=0.1", "KEY one of lexical, confidence, brevity"), ("brevity", "KEY=V1,V2"),
    ("brevity=a", "must be numbers"), ("hedge=0", "above 0"),
])
def test_a_bad_setting_is_one_clear_line(pair: str, message: str) -> None:
    with pytest.raises(SystemExit, match=message):
        settings_replay.parse([pair])


def test_a_file_that_is_not_a_saved_run_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "run.json"
    path.write_text(json.dumps({"retrieved": {}}))
    with pytest.raises(SystemExit, match="not a saved `bench quality --json` run"):
        settings_replay.main([str(path), "--set", "brevity=0"])


def test_each_value_is_ranked_beside_the_profiles_own(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("EPIC_EDGE_DATA", str(tmp_path / "data"))
    relevance.write_questions(relevance.select_questions(personas=[0]), tmp_path)
    run = quality.run("all", corpus="sample", personas="0", tau=0.1, verifier="template",
                      progress=False, log=_quiet, variants=False, judged_root=tmp_path)
    run = json.loads(json.dumps(run, default=float))  # as saved
    result = settings_replay.replay(run, [("brevity", 0.3), ("brevity", 0.0), ("hedge", 0.2)],
                                    tmp_path)
    assert result["tries"] == ["profile", "brevity=0.3", "brevity=0", "hedge=0.2"]
    lists = result["retrieved"].values()
    memory = set(run["per_persona"][0]["memory_pids"])
    assert lists and all(set(ranked) == set(result["tries"]) for ranked in lists)
    assert all(len(r) <= run["k"] and set(r) <= memory for ranked in lists
               for r in ranked.values())
    # linux-cpu ranks with brevity 0.3: the same value is the same ranking
    assert all(ranked["brevity=0.3"] == ranked["profile"] for ranked in lists)
    assert result["replay_equals_run"] >= 0.8  # the memory's own lookups, replayed (here: all)
    assert set(result["splits"]) == {q.split for q in relevance.load_questions("all", tmp_path)}
