"""The paper-scale projection of `python -m epic_edge_lab.scaling`: its arithmetic and page."""

from __future__ import annotations

import json

import pytest

from epic_edge_lab import scaling


def _result(embed: float, verify: float, personas: float, speedup: float,
            passages: float | None = None) -> dict:
    """Rates per CPU-second; with 2 workers each does speedup/2 of one worker's per CPU-s.
    `passages`: the rate of the shared passage pass (None: a run without one)."""
    rates = {"embed": embed, "passages": passages, "verify": verify, "personas": personas}
    def stage(rate: float, w: int) -> dict:
        per_cpu = rate * (speedup / 2 if w == 2 else 1)
        return {"items": 100, "seconds": 100 / (per_cpu * w), "per_s": per_cpu * w,
                "cpu_s": 100 / per_cpu, "per_cpu_s": per_cpu}

    rows = [{"workers": w, "load_avg_before": [1.0], "kept": 10,
             **{s: stage(r, w) for s, r in rates.items() if r is not None}} for w in (1, 2)]
    result = {"corpus": "wiki", "chunks": 4096, "personas": [0, 1], "rows": rows,
              "speedup": {s: rows[1][s]["per_s"] / rows[0][s]["per_s"]
                          for s in scaling.stages_of(rows)},
              "survivor_share": 0.1, "kept_share": 0.05}
    result["projection"] = scaling.project(result)
    return result


def test_worker_hours_are_work_over_the_one_worker_rate():
    pr = _result(embed=50.0, verify=20.0, personas=100.0, speedup=2.0)["projection"]
    assert pr["work"] == {"embed": 6_900_000, "verify": pytest.approx(69_000_000),
                          "personas": pytest.approx(69_000_000)}
    assert pr["worker_hours"]["embed"] == pytest.approx(6_900_000 / 50 / 3600)
    assert pr["worker_hours"]["verify"] == pytest.approx(69_000_000 / 20 / 3600)
    assert sum(pr["share_of_time"].values()) == pytest.approx(1.0)
    # perfect scaling: a one-day build needs total worker-hours / 24 workers
    assert pr["workers_for_one_day"] == pytest.approx(pr["worker_hours_total"] / 24)


def test_poor_scaling_asks_for_more_workers():
    good = _result(50.0, 20.0, 100.0, speedup=2.0)["projection"]
    poor = _result(50.0, 20.0, 100.0, speedup=1.0)["projection"]
    assert poor["workers_for_one_day"] == pytest.approx(2 * good["workers_for_one_day"])
    assert poor["wall_hours_64_workers"] > good["wall_hours_64_workers"]


def test_section_renders_from_the_json(tmp_path):
    assert scaling.section(tmp_path) == []
    result = _result(50.0, 20.0, 100.0, speedup=1.8)
    (tmp_path / "scaling.json").write_text(json.dumps(result))
    text = "\n".join(scaling.section(tmp_path))
    assert "## The bench at paper scale, on Ray" in text
    assert "6,900,000 articles x 100 personas" in text
    assert "**Assumptions.**" in text and "1.80x" in text and "0.90" in text


def test_shared_passages_count_once_per_corpus():
    """The verifier's passage pass is per corpus item, like embedding; verification stays
    per (item, persona) that passes, at the rate measured with the shared vectors."""
    pr = _result(50.0, 400.0, 100.0, speedup=2.0, passages=40.0)["projection"]
    assert list(pr["work"]) == ["embed", "passages", "verify", "personas"]
    assert pr["work"]["passages"] == 6_900_000
    assert pr["work"]["verify"] == pytest.approx(69_000_000)
    assert pr["worker_hours"]["passages"] == pytest.approx(6_900_000 / 40 / 3600)
    assert pr["worker_hours"]["verify"] == pytest.approx(69_000_000 / 400 / 3600)
    assert sum(pr["share_of_time"].values()) == pytest.approx(1.0)


def test_plan_says_what_the_run_shared(tmp_path):
    shared = _result(50.0, 400.0, 100.0, speedup=1.8, passages=40.0)
    (tmp_path / "scaling.json").write_text(json.dumps(shared))
    text = "\n".join(scaling.section(tmp_path))
    assert "| passages |" in text and "passages 1.80x" in text
    hours = shared["projection"]["worker_hours"]
    assert f"so the {max(hours, key=hours.get)} stage is the bottleneck" in text
    assert "rerun to measure" not in text
    older = _result(50.0, 20.0, 100.0, speedup=1.8)  # a run from before passages were shared
    (tmp_path / "scaling.json").write_text(json.dumps(older))
    text = "\n".join(scaling.section(tmp_path))
    assert "| passages |" not in text and "rerun to measure" in text
