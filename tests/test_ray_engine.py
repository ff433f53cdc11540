"""The bench on a local Ray cluster (2 CPUs) builds the same memories as one process."""

from __future__ import annotations

import os
import sys

import pytest

from epic_edge.memory import Memory
from epic_edge_lab import build, common

ray = pytest.importorskip("ray", reason="the `ray` extra is not installed")

PERSONAS = "0-1"  # two PrefWiki personas over the 300-chunk sample corpus


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """One local 2-CPU Ray cluster for the module; corpus caches in a fresh folder."""
    from epic_edge_lab import ray_engine

    mp = pytest.MonkeyPatch()
    mp.setenv("EPIC_EDGE_DATA", str(tmp_path_factory.mktemp("data")))
    ray_engine.start(num_cpus=2)
    yield
    ray.shutdown()
    mp.undo()


def _quiet(*_args) -> None:
    pass


def _verifier(models) -> str:
    return ("learned" if (models / "epic-verifier-minilm" / "model.onnx").exists()
            else "template")


@pytest.fixture(scope="module")
def both(cluster, tmp_path_factory, reference_models):
    """(single-process result, Ray result) of `build` on the same inputs; blocks of 100
    chunks so the pipeline's two actors both embed."""
    from epic_edge_lab import ray_engine, vectors

    mp = pytest.MonkeyPatch()
    tmp = tmp_path_factory.mktemp("build")
    mp.setattr(vectors, "BLOCK", 100)
    mp.setattr(ray_engine, "BLOCK", 100)
    options = dict(corpus="sample", personas=PERSONAS, verifier=_verifier(reference_models),
                   models=reference_models, progress=False, log=_quiet)
    try:
        local = build.run(tmp / "local", engine="local", **options)
        on_ray = build.run(tmp / "ray", engine="ray", workers=2, **options)
    finally:
        mp.undo()
    return local, on_ray, reference_models


def test_ray_build_keeps_the_same_items_entries_and_scores(both):
    local, on_ray, _ = both
    assert on_ray["stages"]["verify_jobs"] > 0
    if on_ray["verifier"] == "learned":  # its passage vectors came once from the pipeline
        assert "passages_s" in on_ray["stages"] and "passages_s" in local["stages"]
    assert [r["persona"] for r in on_ray["per_persona"]] == common.parse_personas(PERSONAS, 57)
    assert sum(r["kept_items"] for r in local["per_persona"]) > 0
    for one, many in zip(local["per_persona"], on_ray["per_persona"]):
        # the pool's keeps replay; a decision's discard goes to the persona's own verifier,
        # whose keep score (over the persona's whole preference set) may rescue it
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

    code = ("import sys, epic_edge.memory, epic_edge.cli, epic_edge_lab.build; "
            "print('ray' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "False"


def test_ray_switches_off_usage_stats(monkeypatch):
    from epic_edge_lab import ray_engine

    monkeypatch.delenv("RAY_USAGE_STATS_ENABLED", raising=False)
    ray_engine._ray()
    assert os.environ["RAY_USAGE_STATS_ENABLED"] == "0"


def test_bench_quality_on_ray_gives_the_same_figures(cluster, tmp_path, reference_models):
    from epic_edge_lab import quality, relevance

    relevance.write_questions(relevance.select_questions(personas=[0]), tmp_path)
    options = dict(corpus="sample", personas="0", verifier=_verifier(reference_models),
                   models=reference_models, variants=False, progress=False, log=_quiet,
                   judged_root=tmp_path)
    local = quality.run("all", **options)
    on_ray = quality.run("all", engine="ray", **options)
    assert on_ray["engine"]["replayed"] > 0  # discards go to the persona's verifier (rescue)
    assert [r["kept_items"] for r in on_ray["per_persona"]] == \
        [r["kept_items"] for r in local["per_persona"]]
    assert on_ray["retrieved"] == local["retrieved"]
    for qid, evidence in local["epic_evidence"].items():
        assert on_ray["epic_evidence"][qid] == pytest.approx(evidence, abs=1e-6)
    for name, cell in local["systems"].items():
        assert on_ray["systems"][name]["per_question"] == cell["per_question"]


def test_bench_stream_on_ray_gives_the_same_steps(cluster, reference_models):
    from epic_edge_lab import stream

    options = dict(corpus="sample", items=120, batches=3, drift=1.0, seed=3,
                   verifier=_verifier(reference_models), models=reference_models,
                   progress=False, log=_quiet)
    local = stream.run(**options)
    on_ray = stream.run(engine="ray", **options)
    assert on_ray["engine"]["replayed"] > 0
    assert [s["event"] for s in on_ray["steps"]] == [s["event"] for s in local["steps"]]
    for one, many in zip(local["steps"], on_ray["steps"]):
        assert (many["epic_bytes"], many["epic_entries"]) == (one["epic_bytes"],
                                                              one["epic_entries"])
        assert many["epic_pap"] == pytest.approx(one["epic_pap"], abs=1e-6, nan_ok=True)


def test_each_verification_worker_can_have_its_own_server(tmp_path, reference_models):
    """--servers: worker i talks to server i (round robin); loading does not connect."""
    from test_cli import PROFILE

    from epic_edge_lab import ray_engine

    profile = tmp_path / "test-cpu.toml"
    profile.write_text(PROFILE)
    urls = ["http://127.0.0.1:8081", "http://127.0.0.1:8082"]
    made = [ray_engine.load("verifier", str(profile), str(reference_models), "llama-server",
                            "template", url) for url in urls]
    assert [v.url for v in made] == urls
