"""Verification bench summary: the best honest point, the target, model size, and the PR plot."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

TARGET_F1 = 0.8
TARGET_GAIN = 0.2  # Keep precision at recall >= 0.8, above the coarse filter's
RECALL_FLOOR = 0.8

# Cited, not measured here: the figure the issue quotes from the EPIC paper for its LLMs.
PAPER = {
    "source": "EPIC, arXiv 2605.18271 (as quoted in the issue; not re-measured here)",
    "verifier_llms": ["Qwen3-4B", "Llama-3.1-8B"],
    "smallest_params_m": 4000,
    "fine_verification_gain_points": [13, 34],
    "measured_here": False,
}
MINILM_PARAMS_M = 22.7  # all-MiniLM-L6-v2 (the learned verifier's encoder), per its model card


def _p_at_r(row: dict[str, Any]) -> float:
    return float(row["best_precision_at_recall_0.8"]["precision"])


def _honest(row: dict[str, Any]) -> bool:
    """Rows whose threshold was not fitted on the test split itself."""
    return not str(row.get("fitted_on", "")).startswith("test")


def _point(row: dict[str, Any], coarse_p: float) -> dict[str, Any]:
    at = row["best_precision_at_recall_0.8"]
    return {"method": row["method"], "threshold": row["threshold"],
            "precision": row["precision"], "recall": row["recall"], "f1": row["f1"],
            "roc_auc": row["roc_auc"], "precision_at_recall_0.8": at["precision"],
            "recall_there": at["recall"], "threshold_there": at["threshold"],
            "gain_points_at_recall_0.8": round(100 * (at["precision"] - coarse_p), 1)}


def best_point(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The best Keep F1 at a threshold fitted on train, the best precision at recall >= 0.8
    (a threshold read off the test curve, so an upper bound), and the distance to the target."""
    coarse_p = _p_at_r(rows[0])
    fair = [r for r in rows if _honest(r)]
    by_f1 = max(fair, key=lambda r: r["f1"])
    by_p = max(fair, key=_p_at_r)
    target_p = coarse_p + TARGET_GAIN
    return {
        "target": {"f1": TARGET_F1, "precision_at_recall_0.8": round(target_p, 4),
                   "coarse_precision_at_recall_0.8": round(coarse_p, 4)},
        "best_f1": _point(by_f1, coarse_p),
        "best_precision_at_recall_0.8": _point(by_p, coarse_p),
        "f1_gap": round(TARGET_F1 - by_f1["f1"], 4),
        "precision_gap_points": round(100 * (target_p - _p_at_r(by_p)), 1),
        "meets_target": any(r.get("meets_target") for r in fair),
        "note": "best F1 uses thresholds fitted on train; precision at recall >= 0.8 is the "
                "best threshold on the test curve (an upper bound for every method alike)",
    }


def size_statement(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Per model size, the best measured AUC / F1 / precision at recall 0.8 (any mode), the
    cited paper figures, and a sentence on the size that would reach the target."""
    coarse_p = _p_at_r(rows[0])
    sizes: dict[str, dict[str, Any]] = {}
    for r in rows:
        if not _honest(r) or r.get("params_m") is None:
            continue
        key = r["model"]
        best = sizes.setdefault(key, {"model": key, "params_m": r["params_m"],
                                      "kind": r.get("kind", ""), "roc_auc": -1.0, "f1": -1.0,
                                      "precision_at_recall_0.8": -1.0})
        if not math.isnan(r["roc_auc"]):
            best["roc_auc"] = max(best["roc_auc"], round(r["roc_auc"], 3))
        best["f1"] = max(best["f1"], round(r["f1"], 3))
        best["precision_at_recall_0.8"] = max(best["precision_at_recall_0.8"], _p_at_r(r))
    measured = sorted(sizes.values(), key=lambda s: s["params_m"])
    for s in measured:
        s["gain_points_at_recall_0.8"] = round(100 * (s["precision_at_recall_0.8"] - coarse_p), 1)
        s["precision_at_recall_0.8"] = round(s["precision_at_recall_0.8"], 3)
    share = (rows[0]["tp"] + rows[0]["fn"]) / rows[0]["n"]
    keep_all_f1 = 2 * share / (1 + share)
    return {"measured": measured, "cited": PAPER, "keep_all_f1": round(keep_all_f1, 3),
            "statement": _sentence(measured, coarse_p, keep_all_f1)}


def _sentence(measured: list[dict[str, Any]], coarse_p: float, keep_all_f1: float) -> str:
    llms = [s for s in measured if s["kind"] == "prompted LLM"]
    learned = [s for s in measured if s["kind"] == "learned"]
    parts = []
    if llms:
        trend = ", ".join(f"{s['model']} ({s['params_m']:.0f}M) AUC {s['roc_auc']:.2f}, "
                          f"F1 {s['f1']:.2f}, {s['gain_points_at_recall_0.8']:+.1f} pts"
                          for s in llms)
        chance = all(s["roc_auc"] < 0.6 for s in llms)
        parts.append(f"Measured, prompted (best of four modes, 370 test pairs; keeping every "
                     f"pair scores F1 {keep_all_f1:.2f}): {trend}; "
                     + ("no better than chance at either size, so doubling 135M to 270M did "
                        "not move it." if chance else "the trend is with size."))
    if learned:
        s = max(learned, key=lambda x: x["f1"])
        short = []
        if s["f1"] < TARGET_F1:
            short.append(f"F1 {TARGET_F1} (by {TARGET_F1 - s['f1']:.3f})")
        if s["gain_points_at_recall_0.8"] < 100 * TARGET_GAIN:
            short.append("+20 pts")
        parts.append(f"Measured, learned: {s['model']} ({s['params_m']:.1f}M, trained on "
                     f"754 labelled pairs) AUC {s['roc_auc']:.2f}, F1 {s['f1']:.3f}, "
                     f"{s['gain_points_at_recall_0.8']:+.1f} pts: task training, not size, "
                     "is what moves a sub-300M verifier; "
                     + (f"it is still short of {' and of '.join(short)}." if short
                        else "it meets both halves of the target."))
    parts.append(f"Cited (not measured here): the EPIC paper reports fine-verification gains "
                 f"of +{PAPER['fine_verification_gain_points'][0]} to "
                 f"+{PAPER['fine_verification_gain_points'][1]} points with "
                 f"{' / '.join(PAPER['verifier_llms'])}, so a prompted LLM of about 4B "
                 "parameters (15x Gemma 3 270M) is the smallest size with published evidence "
                 "of reaching the target; nothing between 270M and 4B installs offline here, "
                 "so where between them the target is crossed is unmeasured.")
    parts.append(f"Target: F1 >= {TARGET_F1} and Keep precision >= "
                 f"{coarse_p + TARGET_GAIN:.3f} (coarse {coarse_p:.3f} + 20 pts) at recall "
                 f">= {RECALL_FLOOR}.")
    return " ".join(parts)


def print_summary(best: dict[str, Any], size: dict[str, Any]) -> None:
    b, p = best["best_f1"], best["best_precision_at_recall_0.8"]
    print(f"\nbest F1 (train-fitted threshold): {b['method']}: F1 {b['f1']:.3f} "
          f"(P {b['precision']:.3f}, R {b['recall']:.3f}); {best['f1_gap']:+.3f} to F1 0.8")
    print(f"best precision at recall >= 0.8: {p['method']}: {p['precision_at_recall_0.8']:.3f} "
          f"({p['gain_points_at_recall_0.8']:+.1f} pts over coarse; target "
          f"{best['target']['precision_at_recall_0.8']:.3f}, "
          + (f"{best['precision_gap_points']:.1f} pts short)" if best["precision_gap_points"] > 0
             else f"met, {-best['precision_gap_points']:.1f} pts above)"))
    print(f"meets the target: {'yes' if best['meets_target'] else 'no'}")
    print("model size:", size["statement"])


def plot_curves(rows: list[dict[str, Any]], path: Path) -> Path:
    """Precision-recall of Keep, one curve per method (one point for binary outputs), the
    target point and the F1 = 0.8 contour."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    fig, ax = plt.subplots(figsize=(11, 6))
    solid = iter(["black", "tab:green", "tab:olive", "tab:cyan", "tab:brown", "tab:pink"] * 4)
    dashed = iter(list(plt.get_cmap("Dark2").colors) * 4)
    seen: set[str] = set()
    for r in rows:
        label = "coarse cosine (MiniLM)" if r["method"].startswith("coarse") else r["method"]
        if label in seen:
            continue
        seen.add(label)
        llm = r.get("kind") == "prompted LLM"
        color = next(dashed if llm else solid)
        pts = sorted((c["recall"], c["precision"]) for c in r["curve"])
        if len(pts) <= 2:  # a binary decision (parsed JSON): its one operating point
            ax.scatter([r["recall"]], [r["precision"]], marker="s", s=36, color=color,
                       label=label)
        else:
            ax.plot([x[0] for x in pts], [x[1] for x in pts], "--" if llm else "-",
                    lw=1.0 if llm else 2.0, color=color, label=label)
    coarse_p = _p_at_r(rows[0])
    ax.scatter([RECALL_FLOOR], [coarse_p + TARGET_GAIN], marker="*", s=260, c="red",
               zorder=5, label=f"target: P {coarse_p + TARGET_GAIN:.2f} at R {RECALL_FLOOR}")
    r = np.linspace(0.41, 1.0, 200)
    ax.plot(r, TARGET_F1 * r / (2 * r - TARGET_F1), ":", c="grey", label="F1 = 0.8")
    share = (rows[0]["tp"] + rows[0]["fn"]) / rows[0]["n"]
    ax.axhline(share, c="lightgrey", lw=0.8, label=f"Keep share {share:.2f} (chance)")
    ax.set(xlim=(0, 1.02), ylim=(0, 1.02), xlabel="recall of Keep", ylabel="precision of Keep",
           title="Fine verification on the 370 held-out pairs")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
