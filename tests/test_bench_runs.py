"""Bench runs on a corpus slice with the fake embedder and template verifier: JSON shape, plot."""

from __future__ import annotations

import json
import math
import shutil

import pytest

from epic_edge import latency
from epic_edge.background import background_questions
from epic_edge.errors import InvalidInputError
from epic_edge_lab import common, pooling, quality, relevance, report, stream, variants
from epic_edge_lab.policy import REQUESTS, no_preference_questions
from epic_edge_lab.quality_summary import render
from epic_edge_lab.systems import SYSTEMS
from epic_edge_lab.variants import VARIANTS
from fakes import BagOfWordsEmbedder


@pytest.fixture(autouse=True)
def _data_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("EPIC_EDGE_DATA", str(tmp_path / "data"))


def _quiet(*_args, **_kwargs):
    pass


@pytest.fixture(scope="module")
def quality_result(tmp_path_factory):
    mp = pytest.MonkeyPatch()
    mp.setenv("EPIC_EDGE_DATA", str(tmp_path_factory.mktemp("data")))
    root = tmp_path_factory.mktemp("judged")
    relevance.write_questions(relevance.select_questions(personas=[0, 1]), root)
    for name in REQUESTS.values():
        shutil.copy(relevance.data_dir() / name, root)
    first = quality.run("all", corpus="sample", personas="0,1", tau=0.1, verifier="template",
                        embedder=BagOfWordsEmbedder(), progress=False, log=_quiet,
                        judged_root=root)
    # a reader judges every passage the first run pooled: the second run is fully judged
    pooling.pool(first, root / "batches", root=root)
    rows = [json.loads(line) for path in sorted((root / "batches").glob("*.jsonl"))
            for line in path.read_text().splitlines()]
    judged = root / "reader.jsonl"
    judged.write_text("".join(json.dumps({"qid": r["qid"], "pid": r["pid"],
                                          "answers": int("car" in r["passage"].lower()),
                                          "aligned": 1}) + "\n" for r in rows))
    pooling.add_judgments(judged, "reader", root)
    result = quality.run("all", corpus="sample", personas="0,1", tau=0.1, verifier="template",
                         embedder=BagOfWordsEmbedder(), progress=False, log=_quiet,
                         judged_root=root)
    mp.undo()
    return result


def test_quality_json_has_every_system_and_judged_metric(quality_result):
    r = json.loads(json.dumps(quality_result, default=float))
    assert r["personas"] == [0, 1] and r["chunks"] == 300 and r["verifier"] == "template"
    assert r["questions"] == 10 and "template verifier" in r["verifier_note"]
    assert list(r["systems"])[:5] == list(SYSTEMS)
    assert {f"epic:{v}" for v in VARIANTS} <= set(r["systems"])
    for name, row in r["systems"].items():
        for key in ("aligned", "answers", "both", "ndcg", "unjudged", "bytes_median",
                    "retrieval_ms_median"):
            assert isinstance(row[key], float), (name, key)
        assert row["unjudged"] == 0.0  # the reader judged the whole pool
        assert 0.0 <= row["both"] <= min(row["aligned"], row["answers"]) <= 1.0
        assert row["dev"] and row["test"]  # persona 0 is dev, persona 1 test
    assert r["systems"]["epic"]["pap@5_self_graded"] is not None
    assert r["systems"]["epic:item+steer"]["pap@5_self_graded"] is None
    assert set(r["summary"]["targets_met"]) >= {"aligned >= SE + 0.15", "unjudged < 5%"}
    for low_mean_high in r["summary"]["margin_intervals"].values():  # test split, 5 questions
        assert low_mean_high[1] <= low_mean_high[0] <= low_mean_high[2]
    assert set(r["summary"]["margin_intervals"]) == {"aligned", "answers", "both"}
    fates = r["both_fates"]  # every judged both-passage was followed by the run
    assert fates["dev"]["unknown"] == fates["test"]["unknown"] == 0
    assert sum(fates["dev"].values()) > 0 and fates["dev"]["memory"] > 0
    evidence = r["per_persona"][0]["policy_evidence"]
    assert len(evidence["own"]) == 60 and len(evidence["none"]) >= 200
    assert len(evidence["implicit"]) == len(evidence["unrelated"]) == 2  # persona 0's requests
    assert set(r["policy"]["rates"]["profile"]["test"]) >= {"own", "implicit", "none",
                                                            "unrelated"}
    assert "of everyday requests no preference bears on" in render(quality_result)
    assert len(evidence["background"]) == len(background_questions())
    assert not set(background_questions()) & set(no_preference_questions())


def test_pool_from_a_saved_run_writes_the_same_batches(tmp_path, quality_result):
    root = tmp_path / "judged"  # nothing judged here: every hit goes to the readers
    relevance.write_questions(relevance.select_questions(personas=[0, 1]), root)
    saved = tmp_path / "run.json"
    saved.write_text(json.dumps({k: v for k, v in quality_result.items() if k != "passages"},
                                default=float))
    live = pooling.pool(quality_result, tmp_path / "live", root=root)
    again = pooling.pool(pooling.saved_run(saved), tmp_path / "saved", root=root)
    assert live["rows"] == again["rows"] > 0
    def batches(name: str) -> list[str]:
        return sorted(p.read_text() for p in (tmp_path / name).glob("*.jsonl"))

    assert batches("saved") == batches("live")  # the same rows, passage text included
    five = pooling.saved_run(saved, variants=False)  # `--from RUN --no-variants`
    assert {name for lists in five["retrieved"].values() for name in lists} == set(SYSTEMS)
    assert 0 < pooling.pool(five, tmp_path / "five", root=root)["rows"] < live["rows"]
    broken = json.loads(saved.read_text())
    next(iter(broken["retrieved"].values()))["store-everything"].append("0123456789ab")
    saved.write_text(json.dumps(broken))
    with pytest.raises(InvalidInputError, match="1 passages of .* are not in the 'sample'"):
        pooling.saved_run(saved)
    with pytest.raises(InvalidInputError, match="not a saved"):
        pooling.saved_run(tmp_path / "live")
    from epic_edge.cli import main

    with pytest.raises(SystemExit) as refused:  # --json would silently not be written
        main(["bench", "pool", "--from", str(saved), "--json", str(tmp_path / "x.json"),
              "--out", str(tmp_path / "none")])
    assert refused.value.code == 2 and not (tmp_path / "none").exists()


def test_prior_variant_at_weight_zero_is_the_shipped_ranking(tmp_path, monkeypatch):
    monkeypatch.setenv("EPIC_EDGE_DATA", str(tmp_path / "data"))
    monkeypatch.setattr(variants, "PRIOR_WEIGHT", 0.0)  # the shipped ranking, replayed
    relevance.write_questions(relevance.select_questions(personas=[0]), tmp_path)
    result = quality.run("all", corpus="sample", personas="0", tau=0.1, verifier="template",
                         embedder=BagOfWordsEmbedder(), progress=False, log=_quiet,
                         judged_root=tmp_path)
    lists = list(result["retrieved"].values())

    def differ(variant: str, shipped: str = "epic") -> list[int]:  # passages not shared
        return [5 - len(set(ranked[shipped]) & set(ranked[variant])) for ranked in lists]

    # the same top 5 (the variant scores float vectors, the memory its int8 copies: a near-tie
    # may swap the fifth place, in one list at most)
    assert sum(differ("epic:item+prior")) <= 1
    # each piece of evidence changes the ranking: variants alike but for it, all float vectors
    assert sum(differ("epic:item+confidence", "epic:item+prior")) > 0  # brevity on
    assert sum(differ("epic:item+hedge")) > 1  # lexical on
    assert sum(differ("epic:text-steer")) > 1  # steering by text, an option


def test_a_judged_set_written_here_brings_its_own_personas(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("EPIC_EDGE_DATA", str(tmp_path / "data"))
    root = tmp_path / "written"
    with pytest.raises(InvalidInputError, match="questions.jsonl"):  # not a judged set yet
        relevance.load_questions("all", root)
    prefs = ["I only drive electric cars.", "I avoid spicy food."]
    asks = ["Which car should I buy for my commute?", "Where should we eat tonight?"]
    root.mkdir()
    (root / "personas.json").write_text(json.dumps([{"persona_index": 0, "preference_blocks": [
        {"preference": p, "queries": [{"question": q}]} for p, q in zip(prefs, asks)]}]))
    relevance.write_questions([relevance.Question(f"w-0-{b}", "written", 0, b, "test", q, p)
                               for b, (p, q) in enumerate(zip(prefs, asks))], root)
    result = quality.run("all", corpus="sample", tau=0.1, verifier="template",
                         embedder=BagOfWordsEmbedder(), progress=False, log=_quiet,
                         variants=False, judged_root=root)
    assert result["personas"] == [0] and set(result["retrieved"]) == {"w-0-0", "w-0-1"}
    assert result["judged_set"] == str(root)
    # memory-use evidence for the written persona's own two questions, not PrefWiki's 60
    assert len(result["per_persona"][0]["policy_evidence"]["own"]) == 2
    assert not {"implicit", "unrelated"} & set(result["per_persona"][0]["policy_evidence"])
    assert result["policy"] == {}  # the gate is calibrated on PrefWiki's dev personas only
    from epic_edge.cli import main

    assert main(["bench", "judgments", "--judged", str(root)]) == 0
    assert "0 judgments on 0" in capsys.readouterr().out  # this set's file, not PrefWiki's
    # the report finds a written set's run beside the others and scores it with its judgments
    out = tmp_path / "results"
    out.mkdir()
    for name in ("written-written.json", "written-written-other.json"):
        (out / name).write_text(json.dumps(result, default=float))
    monkeypatch.setattr(relevance, "data_dir", lambda: tmp_path)
    section = "\n".join(report._written_sets(out))
    assert "never tuned on (`written`)" in section
    assert "Judged test split (2 questions)" in section and "- `other`: EPIC " in section


def test_quality_memories_are_real_files(quality_result):
    systems = quality_result["systems"]
    # store-everything holds all 300 chunks with vectors: bigger than the coarse-only store
    assert systems["store-everything"]["bytes_median"] > systems["coarse"]["bytes_median"] > 0
    assert systems["epic"]["bytes_median"] == systems["coarse+fine"]["bytes_median"] > 0
    assert quality_result["per_persona"][0]["coarse_items"] <= 300
    text = quality.render(quality_result)
    assert "| coarse + fine + steering (EPIC) " in text and "Judged test split" in text
    assert "self-graded, not quality" in text
    same = quality_result["store_everything_same_format"]
    assert same["vector_format"] == "int8"
    assert 0 < same["bytes"] < quality_result["store_everything_bytes"]


def test_rescore_applies_a_memory_use_setting_to_epic_only(quality_result):
    import copy

    labels = {(q, p): (1, 1) for q, systems in quality_result["retrieved"].items()
              for pids in systems.values() for p in pids}
    closed = quality.rescore(copy.deepcopy(quality_result), labels,
                             {"gate": 2.0, "item_gate": 2.0})
    assert closed["systems"]["epic"]["no_memory_share"] == 1.0
    assert closed["systems"]["epic"]["aligned"] == 0.0
    assert closed["systems"]["coarse+fine"]["aligned"] > 0  # ungated systems keep their hits
    opened = quality.rescore(copy.deepcopy(quality_result), labels, {"gate": None})
    assert opened["systems"]["epic"]["no_memory_share"] == 0.0
    assert opened["systems"]["epic"]["aligned"] > 0


def test_quality_rejects_bad_persona_spec():
    from epic_edge.errors import InvalidInputError

    with pytest.raises(InvalidInputError):
        quality.run("all", corpus="sample", personas="99", embedder=BagOfWordsEmbedder(),
                    progress=False, log=_quiet)


def test_stream_writes_plot_and_steps(tmp_path):
    plot = tmp_path / "out" / "stream.png"
    r = stream.run(corpus="sample", items=120, batches=4, drift=1.0, seed=3, tau=0.1,
                   verifier="template", embedder=BagOfWordsEmbedder(), plot=plot,
                   progress=False, log=_quiet)
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    steps = r["steps"]
    assert [s["items"] for s in steps] == [30, 60, 90, 120]
    assert steps[0]["event"] is None and all(s["event"] for s in steps[1:])  # drift=1.0
    se = [s["store_everything_bytes"] for s in steps]
    assert se == sorted(se) and se[-1] > se[0]
    assert all(not math.isnan(s["epic_pap"]) for s in steps)
    assert "drift" in stream.render(r)


def test_stream_budget_caps_epic_memory(tmp_path):
    common = dict(corpus="sample", items=240, batches=4, drift=0.0, tau=0.05,
                  verifier="template", embedder=BagOfWordsEmbedder(), progress=False,
                  log=_quiet)
    free = stream.run(**common)
    cap = free["steps"][0]["epic_bytes"] + 4096
    assert free["steps"][-1]["epic_bytes"] > cap  # without a budget it outgrows the cap
    capped = stream.run(**common, max_bytes=cap)
    assert all(s["epic_bytes"] <= cap for s in capped["steps"])
    assert capped["steps"][-1]["epic_evicted"] > 0 and capped["budget"]["max_bytes"] == cap
    assert f"{cap:,} bytes" in stream.render(capped)


def test_latency_json_shape_with_template_verifier():
    r = latency.run(verifier="template", items=16, batch_size=4, runs=12, warmup=2,
                    embedder=BagOfWordsEmbedder(), log=_quiet)
    q = r["per_query"]
    for row in ("embed", "steer", "search", "total", "reference_total"):
        assert q[row]["n"] == 12 and q[row]["median_ms"] >= 0
    assert r["per_item"]["counts"]["items"] == 16 and r["per_item"]["counts"]["llm_calls"] == 0
    assert r["summary"]["reference_over_ours"] > 0 and r["peak_rss_mb"] > 0
    assert "paper reference path" in latency.render(r)
    assert f"- machine: {r['machine']['cpu']}, {r['machine']['cores']} cores" in latency.render(r)


def test_latency_times_the_profiles_own_ranking_unless_given_an_embedder(monkeypatch):
    from epic_edge import registry
    from epic_edge.profiles import load_profile

    create = registry.create
    shipped = load_profile("linux-cpu").retrieval
    model = BagOfWordsEmbedder(dim=384, name=shipped["calibrated_for"])  # stands in for MiniLM
    monkeypatch.setattr(registry, "create", lambda kind, config, *a, **kw: model
                        if kind == "embedder" else create(kind, config, *a, **kw))
    run = dict(verifier="template", items=8, batch_size=4, runs=3, warmup=1, log=_quiet)
    own = latency.run(**run)["ranking"]  # the memory loads the profile's embedder, as an app
    assert (own["hedge"], own["lexical"], own["brevity"]) == (
        shipped["hedge"], shipped["lexical"], shipped["brevity"])
    given = latency.run(**run, embedder=BagOfWordsEmbedder())
    assert given["ranking"]["lexical"] is None  # an explicit embedder: the paper's ranking
    assert "every evidence off" in latency.render(given)


def test_report_markdown_renders_from_results(tmp_path, quality_result):
    lat = latency.run(verifier="template", items=8, batch_size=4, runs=4, warmup=1,
                      embedder=BagOfWordsEmbedder(), log=_quiet)
    st = stream.run(corpus="sample", items=60, batches=2, tau=0.1, verifier="template",
                    embedder=BagOfWordsEmbedder(), progress=False, log=_quiet)
    text = report.markdown({"latency": lat, "quality": quality_result, "stream": st,
                            "stream_budget": {**st, "budget": {"max_bytes": 99_000}}}, tmp_path)
    assert text.startswith("# Benchmarks") and "stream.png" in text
    assert "--max-bytes 99000" in text and "stream-budget.png" in text
    assert report.COMMAND in text
    assert "## Fine verification" not in text  # no verification.json in this folder

    row = {"method": "learned siamese", "precision": 0.75, "recall": 0.7, "f1": 0.724,
           "roc_auc": 0.88, "best_precision_at_recall_0.8": {"precision": 0.69}, "n": 370}
    (tmp_path / "verification.json").write_text(json.dumps(
        {"rows": [row], "test_pairs": 370, "test_keep": 142, "train_pairs": 754,
         "model_size": {"statement": "task training, not size"}}))
    text = report.markdown({"latency": lat, "quality": quality_result, "stream": st}, tmp_path)
    assert "| learned siamese | 0.750     | 0.700  | 0.724 | 0.880   | 0.690" in text
    assert "- task training, not size" in text
    assert "each setting tried" not in text  # no quality-*.json runs beside quality.json

    # every quality-*.json beside quality.json is a setting tried: a dev row each, rescored
    run = json.dumps(quality_result, default=float)
    (tmp_path / "quality.json").write_text(run)
    (tmp_path / "quality-steer-weight-0.5.json").write_text(run)
    text = report.markdown({"latency": lat, "quality": quality_result, "stream": st}, tmp_path)
    assert "### EPIC on the dev split under each setting tried" in text
    assert "| shipped default " in text and "| steer-weight-0.5 " in text
    assert "under each device profile" not in text  # no profile-*.json runs

    # every profile-*.json is a device profile's run: a test row each, beside the shipped one
    (tmp_path / "profile-other.json").write_text(json.dumps(
        {**json.loads(run), "profile": "other-device"}))
    text = report.markdown({"latency": lat, "quality": quality_result, "stream": st}, tmp_path)
    assert "### EPIC under each device profile (judged test split)" in text
    assert f"| {quality_result['profile']} " in text and "| other-device " in text


def test_a_run_records_each_entry_s_preference_and_confidence_for_replays(quality_result):
    for row in quality_result["per_persona"]:
        filed = row["memory_confidence"]
        assert len(filed) == len(row["memory_pids"]) > 0
        persona = relevance.persona_sets()[0][row["persona"]]
        distinct = len(dict.fromkeys(common.persona_questions(persona)[0]))
        assert all(0 <= place < distinct and 0.0 <= sure <= 1.0 for place, sure in filed)


def test_a_dev_policy_without_a_gate_renders_instead_of_crashing_the_run():
    from epic_edge_lab.quality_summary import _policy_lines

    rates = {"dev": {"own": 0.0, "none": 0.5}, "test": {"own": 0.0, "none": 0.5}}
    lines = _policy_lines({"chosen_on_dev": {}, "rates": {"chosen on dev": rates}})
    assert "none (no setting of the grid" in lines[0] and len(lines) == 2
