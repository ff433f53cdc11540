"""The labelled verification set, Keep metrics, thresholds and tau calibration."""

from __future__ import annotations

import json

import numpy as np
import pytest

from epic_edge.errors import InvalidInputError
from epic_edge.profiles import load_profile
from epic_edge_lab.calibrate import (
    best_f1_threshold,
    calibrate_tau,
    keep_metrics,
    load_verification_set,
    pair_cosines,
    pr_curve,
    threshold_for_recall,
    write_tau,
)
from fakes import BagOfWordsEmbedder


def test_labelled_set_is_large_split_by_preference_and_balanced() -> None:
    train, test = load_verification_set("train"), load_verification_set("test")
    assert len(train) + len(test) >= 1000
    assert not {p.preference for p in train} & {p.preference for p in test}
    for split in (train, test):
        share = sum(p.keep for p in split) / len(split)
        assert 0.25 <= share <= 0.6  # second round (issue 13): test 29% Keep, train 34%
        assert all(p.reason.strip() and p.passage.strip() for p in split)
    assert len({p.id for p in train + test}) == len(train) + len(test)
    assert load_verification_set("all") == train + test


def test_bad_split_and_bad_file(tmp_path) -> None:
    with pytest.raises(InvalidInputError):
        load_verification_set("dev")
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": 1}\n', encoding="utf-8")
    with pytest.raises(InvalidInputError, match="bad.jsonl:1"):
        load_verification_set("all", bad)


def test_keep_metrics_counts() -> None:
    m = keep_metrics([True, True, False, False], [True, False, True, False])
    assert (m["tp"], m["fp"], m["fn"]) == (1, 1, 1)
    assert m["precision"] == m["recall"] == m["f1"] == 0.5
    assert keep_metrics([False], [False])["f1"] == 0.0


def test_thresholds_are_exact_and_deterministic() -> None:
    scores = [0.9, 0.8, 0.7, 0.6, 0.5, 0.4]
    labels = [True, False, True, True, False, False]
    assert threshold_for_recall(scores, labels, 1.0) == 0.6
    assert threshold_for_recall(scores, labels, 2 / 3) == 0.7
    assert threshold_for_recall(scores, labels, 0.5) == 0.7  # ceil(1.5) = 2 positives
    assert best_f1_threshold(scores, labels) == 0.6  # P 0.75, R 1.0
    curve = pr_curve(scores, labels)
    assert [c["threshold"] for c in curve] == sorted(scores, reverse=True)
    with pytest.raises(InvalidInputError):
        threshold_for_recall(scores, labels, 0.0)
    with pytest.raises(InvalidInputError):
        threshold_for_recall(scores, [False] * 6, 0.9)


def test_calibrate_tau_meets_target_and_repeats() -> None:
    pairs = load_verification_set("train")[:200]
    emb = BagOfWordsEmbedder()
    first = calibrate_tau(emb, pairs, 0.9)
    second = calibrate_tau(BagOfWordsEmbedder(), list(pairs), 0.9)
    assert first == second
    assert first.recall >= 0.9
    scores = pair_cosines(emb, pairs)
    keep = np.array([p.keep for p in pairs])
    assert np.mean(scores[keep] >= first.tau) == pytest.approx(first.recall)
    assert first.tau == round(first.tau, 4)


def test_write_tau_into_profile_copy_and_manifest(tmp_path) -> None:
    pairs = load_verification_set("train")[:120]
    cal = calibrate_tau(BagOfWordsEmbedder(), pairs, 0.95)
    source = load_profile("linux-cpu").path
    out = write_tau(source, tmp_path / "calibrated.toml", cal)
    prof = load_profile(out)
    assert prof.tau == cal.tau
    assert prof.verifier == load_profile("linux-cpu").verifier  # the rest is untouched
    manifest = tmp_path / "bundle.json"
    manifest.write_text(json.dumps({"name": "bundle", "tau": 0.3}), encoding="utf-8")
    written = json.loads(write_tau(manifest, tmp_path / "out.json", cal).read_text())
    assert written["tau"] == cal.tau and written["tau_calibration"]["target_recall"] == 0.95
    no_tau = tmp_path / "no_tau.toml"
    no_tau.write_text('name = "x"\n[embedder]\nbackend = "onnx"\n', encoding="utf-8")
    with pytest.raises(InvalidInputError):
        write_tau(no_tau, tmp_path / "y.toml", cal)


def test_calibrate_cli_with_real_embedder(reference_models, tmp_path, capsys) -> None:
    from epic_edge.cli import main

    subset = tmp_path / "subset.jsonl"
    rows = [json.dumps({"id": p.id, "split": p.split, "preference": p.preference,
                        "passage": p.passage, "label": "Keep" if p.keep else "Discard"})
            for p in load_verification_set("train")[:80]]
    subset.write_text("\n".join(rows) + "\n", encoding="utf-8")
    args = ["calibrate", "--labels", str(subset), "--models", str(reference_models), "--json"]
    results = []
    for k in range(2):
        out = tmp_path / f"p{k}.toml"
        assert main([*args, "--out", str(out)]) == 0
        results.append(json.loads(capsys.readouterr().out))
        assert load_profile(out).tau == results[-1]["tau"]
    assert results[0]["tau"] == results[1]["tau"]
    assert results[0]["recall"] >= 0.95
    assert 0.0 < results[0]["tau"] < 0.6  # MiniLM cosines of related texts
    assert main(["calibrate", "--target-recall", "1.5", "--labels", str(subset)]) == 2
