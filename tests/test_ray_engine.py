"""The bench on a local Ray cluster (2 CPUs) builds the same memories as one process."""

from __future__ import annotations

import os
import sys

import pytest

from epic_edge.bench import build, common
from epic_edge.memory import Memory

ray = pytest.importorskip("ray", reason="the `ray` extra is not installed")

PERSONAS = "0-2"  # three PrefWiki personas over the 300-chunk sample corpus


@pytest.fixture(scope="module")
def both(tmp_path_factory, reference_models):
    """(single-process result, Ray result) of `build` on the same inputs; blocks of 100
    chunks so the pipeline's two actors both embed."""
    from epic_edge.bench import ray_engine, vectors

    mp = pytest.MonkeyPatch()
    tmp = tmp_path_factory.mktemp("build")
    mp.setenv("EPIC_EDGE_DATA", str(tmp / "data"))
    mp.setattr(vectors, "BLOCK", 100)
    mp.setattr(ray_engine, "BLOCK", 100)
    verifier = ("learned" if (reference_models / "epic-verifier-minilm" / "model.onnx").exists()
                else "template")
    options = dict(corpus="sample", personas=PERSONAS, verifier=verifier,
                   models=reference_models, progress=False, log=lambda *_: None)
    ray_engine.start(num_cpus=2)
    try:
        local = build.run(tmp / "local", engine="local", **options)
        on_ray = build.run(tmp / "ray", engine="ray", workers=2, **options)
    finally:
        ray.shutdown()
        mp.undo()
    return local, on_ray, reference_models


def test_ray_build_keeps_the_same_items_entries_and_scores(both):
    local, on_ray, _ = both
    assert on_ray["stages"]["verify_jobs"] > 0
    assert [r["persona"] for r in on_ray["per_persona"]] == common.parse_personas(PERSONAS, 57)
    assert sum(r["kept_items"] for r in local["per_persona"]) > 0
    for one, many in zip(local["per_persona"], on_ray["per_persona"]):
        assert many["replay_misses"] == 0  # every verdict came from the actor pool
        assert (many["kept_items"], many["entries"]) == (one["kept_items"], one["entries"])
        assert [r[:3] for r in many["entry_rows"]] == [r[:3] for r in one["entry_rows"]]
        for a, b in zip(one["entry_rows"], many["entry_rows"]):
            assert b[3] == pytest.approx(a[3], abs=1e-6)  # the verifier's confidence


def test_ray_memories_answer_with_the_same_scores(both):
    local, on_ray, models = both
    questions = ["What should I eat tonight?", "Which fabric should my new sweater be?",
                 "Any film for the weekend?"]
    for one, many in zip(local["per_persona"], on_ray["per_persona"]):
        hits = []
        for row in (one, many):
            memory = Memory.open(row["path"], "linux-cpu", model_dir=models)
            try:
                hits.append([[(h.item_text, h.score) for h in memory.retrieve(q, 5)]
                             for q in questions])
            finally:
                memory.close()
        for got, expected in zip(*hits):
            assert [t for t, _ in got] == [t for t, _ in expected]
            assert [s for _, s in got] == pytest.approx([s for _, s in expected], abs=1e-6)


def test_files_are_the_owners_only(both):
    _, on_ray, _ = both
    for row in on_ray["per_persona"]:
        assert os.stat(row["path"]).st_mode & 0o077 == 0


def test_runtime_never_imports_ray():
    import subprocess

    code = ("import sys, epic_edge.memory, epic_edge.cli, epic_edge.bench.build; "
            "print('ray' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "False"


def test_ray_switches_off_usage_stats(monkeypatch):
    from epic_edge.bench import ray_engine

    monkeypatch.delenv("RAY_USAGE_STATS_ENABLED", raising=False)
    ray_engine._ray()
    assert os.environ["RAY_USAGE_STATS_ENABLED"] == "0"
