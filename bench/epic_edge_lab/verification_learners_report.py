"""The learners' study rows: metrics per split, issue 13's targets, the table, the PR curves,
the choice."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from epic_edge_lab.calibrate import LabelledPair, best_f1_threshold, keep_metrics, pr_curve

from .verification import roc_auc


def split_metrics(scores: np.ndarray, labels: np.ndarray, threshold: float) -> dict[str, Any]:
    """F1, precision, recall at `threshold`, ROC AUC and a thinned PR curve of one split."""
    s = np.asarray(scores, np.float64)
    m = keep_metrics(labels, s >= threshold)
    return {"f1": m["f1"], "precision": m["precision"], "recall": m["recall"],
            "roc_auc": roc_auc(s, labels), "n": m["n"],
            "curve": pr_curve(s, labels)[:: max(1, len(np.unique(s)) // 60)]}


def make_row(method: str, scores: dict[str, np.ndarray], splits: dict[str, list[LabelledPair]],
             **info: Any) -> dict[str, Any]:
    """One learner's row: threshold fitted on its train (out-of-fold) scores, every split."""
    labels = {n: np.array([p.keep for p in ps]) for n, ps in splits.items()}
    threshold = best_f1_threshold(scores["train"], labels["train"])
    return {"method": method, "threshold": threshold, **info,
            "splits": {n: split_metrics(scores[n], labels[n], threshold) for n in splits}}


def onnx_row(model_path: Path, splits: dict[str, list[LabelledPair]], method: str
             ) -> dict[str, Any]:
    """An exported model through the runtime verifier, on the test splits, at its threshold."""
    from epic_edge.backends.learned_verifier import LearnedVerifier

    verifier = LearnedVerifier(model_path)
    out = {}
    for name, ps in splits.items():
        if name != "train":
            s = verifier.score_pairs([q.preference for q in ps], [q.passage for q in ps])
            out[name] = split_metrics(s, np.array([q.keep for q in ps]), verifier.threshold)
    return {"method": method, "threshold": verifier.threshold, "kind": verifier.kind,
            "exportable": False, "splits": out}


def test_score(row: dict[str, Any]) -> float:
    """F1 + ROC AUC summed over the test splits (reported: 'best on test')."""
    return sum(m["f1"] + m["roc_auc"] for n, m in row["splits"].items() if n != "train")


def oof_score(row: dict[str, Any]) -> float:
    """What `choose` maximises: out-of-fold F1 + ROC AUC on train."""
    return row["splits"]["train"]["f1"] + row["splits"]["train"]["roc_auc"]


TARGETS = {"test": {"f1": 0.85, "roc_auc": 0.93},
           "test_style": {"f1": 0.80, "auc_over_coarse": 0.12}}


def targets(row: dict[str, Any], coarse: dict[str, Any]) -> dict[str, bool]:
    """Issue 13's targets for one row: per test split, met or not."""
    out = {}
    for name, t in TARGETS.items():
        m = row["splits"].get(name)
        if m is None:
            continue
        auc_floor = t.get("roc_auc",
                          coarse["splits"][name]["roc_auc"] + t.get("auc_over_coarse", 0.0))
        out[name] = bool(m["f1"] >= t["f1"] and m["roc_auc"] >= auc_floor)
    return out


def render(result: dict[str, Any]) -> str:
    """Markdown: per split F1 at the out-of-fold threshold and ROC AUC, and the targets."""
    from .common import table

    rows, names = result["rows"], list(result["pairs"])
    head = ["learner", "threshold", *[f"{n} {m}" for n in names for m in ("F1", "AUC")],
            "train s"]
    body = [[r["method"], f"{r['threshold']:.3f}",
             *[f"{r['splits'][n][m]:.3f}" if n in r["splits"] else "-" for n in names
               for m in ("f1", "roc_auc")], str(r.get("train_seconds", "-"))] for r in rows]
    lines = [table(body, head), ""]
    shipped = next((r for r in rows if r["method"].startswith("study default")), None)
    if shipped:
        met = targets(shipped, rows[0])
        lines.append("Targets (issue 13; test: F1 >= 0.85 and AUC >= 0.93; test_style: F1 >= "
                     "0.80 and AUC >= coarse + 0.12), study default: " + ", ".join(
                         f"{n} {'met' if ok else 'not met'}" for n, ok in met.items()))
    return "\n".join(lines)


def plot(rows: list[dict[str, Any]], names: list[str], path: Path) -> Path:
    """Every row's precision-recall curve, one panel per split, saved at `path`."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(names), figsize=(6 * len(names), 5.5), squeeze=False)
    for ax, name in zip(axes[0], names):
        for r in (r for r in rows if name in r["splits"]):
            pts = sorted((c["recall"], c["precision"]) for c in r["splits"][name]["curve"])
            ax.plot([x[0] for x in pts], [x[1] for x in pts], "--" if r.get("blend") else "-",
                    lw=2 if r.get("kind") == "coarse" else 1.2, label=r["method"])
        ax.set(xlim=(0, 1.02), ylim=(0, 1.02), xlabel="recall of Keep",
               ylabel="precision of Keep", title=f"{name} ({rows[0]['splits'][name]['n']} pairs"
                                                 + (", out-of-fold)" if name == "train" else ")"))
    axes[0][-1].legend(fontsize=7, loc="lower left")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


TIE = 0.01  # summed F1 + AUC closer than this is a tie (noise at these sizes)


def choose(rows: list[dict[str, Any]]) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """(winner, best on the test splits) among exportable rows. The winner is chosen on train
    alone, by out-of-fold F1 + ROC AUC: rows within TIE of the best tie, and a tie goes to the
    cheaper model: no blend (one encoder pass per text, the embedder's 384 values), then the
    shorter training. The test splits only report (best on test: summed F1 + AUC)."""
    shippable = [r for r in rows if r.get("exportable")]
    if not shippable:  # --learners none: references only
        return None, None
    best = max(map(oof_score, shippable))
    tied = [r for r in shippable if oof_score(r) >= best - TIE]
    winner = min(tied, key=lambda r: (bool(r.get("blend")), r.get("train_seconds", 0),
                                      -oof_score(r)))
    return winner, max(shippable, key=test_score)
