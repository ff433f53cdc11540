"""`bench personal` on a hand-made four-persona fixture: metrics, buffers, CLI and a real run."""

from __future__ import annotations

import json
import math
import re
import shutil
from pathlib import Path

import pytest

from epic_edge.cli import main
from epic_edge.errors import InvalidInputError
from epic_edge.profiles import load_profile
from epic_edge.retrieval import uses_memory
from epic_edge_lab import common, personal, personal_data, personal_report
from epic_edge_lab import personal_metrics as pm
from fakes import BagOfWordsEmbedder, KeywordVerifier

FIXTURE = Path(__file__).parent / "personal_fixture"


def _quiet(*_args, **_kwargs):
    pass


def _persona(number: int = 1) -> personal_data.Persona:
    return personal_data.read(FIXTURE / f"p{number:02d}.json", number)


def test_keep_figures_of_a_known_subset():
    # p01: items bearing on a preference i01 i03 i04 i06 i07 i09 i11 (prefs a b b c d d a)
    kept = {"i01": {"a"}, "i03": {"a"}, "i06": {"c"}, "i02": {"b"}}
    figures = pm.keep_figures(_persona(1), kept)
    assert figures["relevant"] == 7 and figures["kept"] == 4 and figures["kept_relevant"] == 3
    assert figures["keep_recall"] == pytest.approx(3 / 7)
    assert figures["keep_precision"] == pytest.approx(3 / 4)
    assert figures["no_entry"] == ["d"]  # b has an entry (i02, though i02 bears on nothing)
    assert figures["filing_accuracy"] == pytest.approx(2 / 3)  # i03 bears on b, filed under a
    assert figures["kept_by"] == {  # i01 implicit, i03 bad experience, i06 explicit
        "how": {"implicit": [1, 3], "bad_experience": [1, 1], "alternative": [0, 1],
                "explicit": [1, 1], "fact": [0, 1]},
        "kind": {"note": [1, 2], "chat": [1, 1], "web": [0, 1], "review": [1, 1],
                 "reminder": [0, 1], "post": [0, 1]},
        "near_miss": {"all": [0, 2]}}
    empty = pm.keep_figures(_persona(1), {})
    assert empty["keep_recall"] == 0 and math.isnan(empty["keep_precision"])
    assert empty["no_entry"] == ["a", "b", "c", "d"]


def test_recall_counts_distinct_items_within_k():
    assert pm.recall_at_k(["x", "x", "a", "b"], ["a", "c"], k=2) == 0.5
    assert pm.recall_at_k(["b", "c", "d", "e", "f", "a"], ["a"], k=5) == 0.0


def test_buffers_fit_the_byte_budget():
    persona = _persona(1)
    ids = [item["id"] for item in persona.items]
    sizes = {item["id"]: personal.item_bytes(item, "int8", 384) for item in persona.items}
    assert all(size > 388 + 16 for size in sizes.values())
    budget = sizes["i12"] + sizes["i11"] + sizes["i10"] + 1
    assert pm.recency_buffer(ids, sizes, budget) == ["i12", "i11", "i10"]
    for seed in range(5):
        held = pm.random_buffer(ids, sizes, budget, seed)
        assert held == pm.random_buffer(ids, sizes, budget, seed)  # a fixed seed
        assert sum(sizes[i] for i in held) <= budget
        assert len(held) == len(set(held)) >= 2
    assert pm.recency_buffer(ids, sizes, 10) == [] and len(pm.recency_buffer(ids, sizes, 1e9)) == 12


def test_budgets_parse_units_and_reject_nonsense():
    assert personal.parse_budgets("profile, 8000,16KB,0.4MB,none,8000") == [
        "profile", 8000, 16000, 400000, "none"]
    for bad in ("0", "-5", "12 parsecs", ""):
        with pytest.raises(InvalidInputError, match="--budgets"):
            personal.parse_budgets(bad)


def test_split_is_by_persona_number_and_bad_data_gives_one_line(tmp_path):
    assert [p.number for p in personal_data.load(FIXTURE, "dev")] == [1, 3]
    assert [p.number for p in personal_data.load(FIXTURE, "test")] == [2, 4]
    assert [p.split for p in personal_data.load(FIXTURE, "all")] == ["dev", "test"] * 2
    chosen = personal_data.load(FIXTURE, "all", numbers=personal_data.number_range("2-3"))
    assert [p.number for p in chosen] == [2, 3]
    with pytest.raises(InvalidInputError, match="no dev personas numbered 4-9"):
        personal_data.load(FIXTURE, "dev", numbers=range(4, 10))
    assert personal_data.number_range("1-2,5-6") == {1, 2, 5, 6}
    with pytest.raises(InvalidInputError, match="FIRST-LAST"):
        personal_data.number_range("40-1")
    with pytest.raises(InvalidInputError, match="FIRST-LAST"):
        personal_data.number_range("1-2,x")
    with pytest.raises(InvalidInputError, match="not a folder"):
        personal_data.load(tmp_path / "missing")
    with pytest.raises(InvalidInputError, match="no persona files"):
        personal_data.load(tmp_path)
    broken = json.loads((FIXTURE / "p01.json").read_text())
    broken["questions"][0]["answers"] = ["i99"]
    (tmp_path / "p01.json").write_text(json.dumps(broken))
    with pytest.raises(InvalidInputError, match="p01.json: question q1 names an unknown"):
        personal_data.load(tmp_path)
    (tmp_path / "p01.json").write_text("{")
    with pytest.raises(InvalidInputError, match="p01.json"):
        personal_data.load(tmp_path)


def test_cli_help_and_a_bad_data_folder(tmp_path, capsys):
    with pytest.raises(SystemExit) as done:
        main(["bench", "personal", "--help"])
    assert done.value.code == 0 and "--budgets" in capsys.readouterr().out
    assert main(["bench", "personal", "--data", str(tmp_path / "nowhere")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("epic-edge bench: error: no personal-stream set") and "\n" not in err


def _fake_run(tmp_path, budgets: str) -> dict:
    data = tmp_path / "set"
    shutil.copytree(FIXTURE, data)
    # the bag-of-words fake's cosines run lower than the shipped embedder's: its own tau
    shipped = load_profile("linux-cpu").path.read_text(encoding="utf-8")
    profile = tmp_path / "fake.toml"
    profile.write_text(re.sub(r"(?m)^tau = .*$", "tau = 0.15", shipped), encoding="utf-8")
    with pytest.warns(RuntimeWarning, match="calibrated for"):  # the fake is not the embedder
        return personal.run(data, "all", budgets=budgets, profile=str(profile),
                            embedder=BagOfWordsEmbedder(), verifier=KeywordVerifier(),
                            progress=False, log=_quiet)


def test_a_run_records_what_each_memory_kept_and_pools_it(tmp_path):
    result = _fake_run(tmp_path, "none,2000")
    assert result["personas"] == [1, 2, 3, 4] and result["budgets"] == ["none", "2000"]
    full, tight = (result["per_budget"][b]["per_persona"] for b in ("none", "2000"))
    for row in full:
        persona = _persona(row["persona"])
        measured = pm.keep_figures(persona, row["kept"])
        assert json.dumps(row["keep"]) == json.dumps(measured)  # NaN where nothing was kept
        assert row["keep"]["kept"] == len(row["kept"]) and row["evicted"] == 0
        for q in row["per_question"]:
            assert set(q["ranked"]) == set(personal.SYSTEMS)
            assert all(len(r) <= 5 for r in q["ranked"].values())
            assert set(q["ranked"]["epic-ungated"]) <= set(row["kept"])
            held = len(set(q["answers"]) & set(row["kept"])) / len(q["answers"])
            assert q["held"] == held >= q["recall"]["epic-ungated"]  # EPIC's ceiling
        assert row["bytes"]["recency_payload"] <= row["bytes"]["epic_payload"]
        assert row["bytes"]["random_payload"] <= row["bytes"]["epic_payload"]
    assert sum(row["keep"]["kept"] for row in full) >= 4
    # a budget below an empty memory's pages evicts everything it kept
    for roomy, cramped in zip(full, tight):
        assert cramped["keep"]["kept"] == 0 and cramped["evicted"] >= roomy["keep"]["kept"]
    summary = result["per_budget"]["none"]["summary"]
    assert summary["keep"]["keep_recall"]["mean"] == pytest.approx(
        sum(r["keep"]["keep_recall"] for r in full) / 4)
    assert summary["keep"]["keep_recall_over_items"] == pytest.approx(
        sum(r["keep"]["kept_relevant"] for r in full) / sum(r["keep"]["relevant"] for r in full))
    given = summary["memory_given_by"]
    no_pref = [q for r in full for q in r["per_question"] if not q["prefs"]]
    assert given["questions"] == len(no_pref) == 8 and given["given"] == sum(
        q["used_memory"] for q in no_pref) == given["by_preference"] + given["by_entry_only"]
    by_kind = summary["keep"]["kept_by"]["kind"].values()
    assert [sum(c[0] for c in by_kind), sum(c[1] for c in by_kind)] == [
        summary["keep"]["kept_relevant"], summary["keep"]["relevant"]]
    assert result["per_budget"]["2000"]["summary"]["keep"]["evicted"] == sum(
        r["evicted"] for r in tight) > 0
    epic = summary["recall"]["all"]["epic"]["mean"]
    se = summary["recall"]["all"]["store-everything"]
    assert se["vs_epic"]["mean"] == pytest.approx(epic - se["mean"])
    common.write_json({**result, "note": "Read me first."}, tmp_path / "out" / "personal.json")
    text = "\n".join(personal_report.section(tmp_path / "out"))
    assert text.startswith("## A person's own stream") and "Budget none" in text
    assert "\n\nRead me first.\n\nBudget none" in text
    assert "store-everything (cosine)" in text and personal_report.section(tmp_path) == []


def test_a_real_run_with_the_linux_cpu_models(tmp_path):
    from epic_edge.models import model_dir

    needed = ("epic-minilm/model.int8.onnx", "epic-verifier-minilm/model.onnx")
    missing = [name for name in needed if not (model_dir() / name).exists()]
    if missing:
        pytest.skip(f"linux-cpu models not installed ({', '.join(missing)}): epic-edge setup")
    result = personal.run(FIXTURE, "dev", progress=False, log=_quiet)
    summary = result["per_budget"]["profile"]["summary"]
    assert result["embedder"].startswith("epic-minilm-l6") and summary["personas"] == 2
    shipped = load_profile("linux-cpu").retrieval["gate"]
    for row in result["per_budget"]["profile"]["per_persona"]:
        assert row["bytes"]["epic_file"] > 0 and row["keep"]["kept"] <= 12
        assert row["gate"] == shipped  # the profile's gate holds for its own embedder
        for q in row["per_question"]:  # the recorded evidence replays the gate's decision
            similarity, best, unrelated = q["evidence"]
            assert q["used_memory"] == bool(uses_memory(similarity, best, row["gate"],
                                                        row["item_cut"], unrelated,
                                                        row["question_cut"],
                                                        row["question_below"]))
    se = summary["recall"]["all"]["store-everything"]["mean"]
    assert 0 < se <= 1  # the same embedder's cosine finds some answer item
    for kind in ("preference", "no_preference"):
        assert 0 <= summary["no_memory"][kind]["mean"] <= 1


def _profile_run(profile: str, split: str, data: str, recall: float, pref_withheld: float
                 ) -> dict:
    """A saved `bench personal` run at the profile's budget with the figures the per-profile
    table reads."""
    cell = lambda mean: {"mean": mean, "ci": [mean - 0.05, mean + 0.05], "n": 20}  # noqa: E731
    summary = {
        "keep": {"keep_recall": cell(recall), "keep_precision": cell(0.61), "no_entry": 0,
                 "preferences_with_items": 96},
        "recall": {"preference": {"epic": cell(0.60), "recency": cell(0.45),
                                  "random": cell(0.44),
                                  "store-everything": {**cell(0.48), "vs_epic": cell(0.12)}}},
        "no_memory": {"no_preference": cell(0.95), "preference": cell(pref_withheld)}}
    return {"bench": "personal", "profile": profile, "embedder": "m:mean:384:int8",
            "split": split, "data": data, "budgets": ["profile"],
            "per_budget": {"profile": {"summary": summary}}}


def test_the_per_profile_table_lists_each_profile_and_set_with_the_targets_it_misses(tmp_path):
    runs = {"personal.json": ("linux-cpu", "dev", "personas", 0.94, 0.02),
            "personal-test.json": ("linux-cpu", "test", "personas", 0.88, 0.03)}
    for name, (profile, split, data, recall, withheld) in runs.items():
        common.write_json(_profile_run(profile, split, data, recall, withheld), tmp_path / name)
    assert personal_report.profiles_section(tmp_path) == []  # one profile: nothing to compare
    common.write_json({**_profile_run("phone", "dev", "personas", 0.9, 0.0),
                       "budgets": ["100000"]}, tmp_path / "personal-budgets.json")
    assert personal_report.profiles_section(tmp_path) == []  # a budget curve is not a row
    common.write_json(_profile_run("phone", "all", "heldout/personas", 0.80, 0.08),
                      tmp_path / "personal-phone-heldout.json")
    common.write_json(_profile_run("phone", "test", "personas", 0.86, 0.05),
                      tmp_path / "personal-phone-test.json")
    rows = [line for line in "\n".join(personal_report.profiles_section(tmp_path)).splitlines()
            if line.startswith(("| linux-cpu", "| phone"))]
    cells = [[c.strip() for c in row.strip("|").split("|")] for row in rows]
    assert [c[:3] for c in cells] == [["linux-cpu", "int8", "dev"], ["linux-cpu", "int8", "test"],
                                      ["phone", "int8", "test"], ["phone", "int8", "held out"]]
    assert [c[-1] for c in cells] == ["none", "none", "none", "keep, pref gate"]
    assert cells[0][5] == "0.600 vs 0.480 (+0.120 (+0.070 to +0.170))"
