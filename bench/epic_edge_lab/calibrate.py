"""The labelled verification set, Keep precision/recall/F1, thresholds, and tau calibration."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from epic_edge.errors import EpicEdgeError, InvalidInputError
from epic_edge.protocols import Embedder
from epic_edge_lab import LABELS

SPLITS = ("train", "test")
FIRST_ROUND_IDS = 10_000  # pair ids below: the first labelling round; the second starts here
CLUSTER_COSINE = 0.75  # preferences this close (transitively) stay on one side of a split
DEFAULT_TARGET_RECALL = 0.95


@dataclass(frozen=True)
class LabelledPair:
    """One (preference, passage) judgment: keep = the passage helps answer under the preference."""

    id: int
    split: str
    preference: str
    title: str
    passage: str
    topic: str
    keep: bool
    reason: str


def _data_dir() -> Path:
    return LABELS


def load_verification_set(split: str = "test", path: Path | str | None = None
                          ) -> list[LabelledPair]:
    """The shipped labelled pairs of one split ("train", "test" or "all"), or a JSONL file."""
    if split not in (*SPLITS, "all"):
        raise InvalidInputError(f"split must be train, test or all, not {split!r}")
    files = [Path(path)] if path else [
        _data_dir() / f"{s}.jsonl" for s in (SPLITS if split == "all" else (split,))]
    pairs: list[LabelledPair] = []
    for file in files:
        if not file.is_file():
            raise EpicEdgeError(f"labelled verification set not found: {file}")
        for n, line in enumerate(file.read_text(encoding="utf-8").splitlines(), 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
                pair = LabelledPair(
                    id=int(row["id"]), split=str(row["split"]), preference=str(row["preference"]),
                    title=str(row.get("title", "")), passage=str(row["passage"]),
                    topic=str(row.get("topic", "")), keep=row["label"] == "Keep",
                    reason=str(row.get("reason", "")))
            except (ValueError, KeyError, TypeError) as exc:
                raise InvalidInputError(f"{file}:{n}: not a labelled pair ({exc})") from exc
            if path is None or split == "all" or pair.split == split:
                pairs.append(pair)
    return pairs


def linked_roots(vectors: np.ndarray, link: float = CLUSTER_COSINE) -> list[int]:
    """Single linkage of unit row vectors: each row's group, named by one member's index
    (rows linked by cosine >= `link`, transitively, share it). The merge of the labelled set
    splits by these groups and the learners study folds by them."""
    parent = list(range(len(vectors)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for i, j in zip(*np.nonzero(np.triu(vectors @ vectors.T >= link, 1))):
        parent[root(int(i))] = root(int(j))
    return [root(i) for i in range(len(vectors))]


def keep_metrics(labels: Sequence[bool], predictions: Sequence[bool]) -> dict[str, float]:
    """Precision, recall and F1 of the Keep class, with the counts they come from."""
    y = np.asarray(labels, dtype=bool)
    p = np.asarray(predictions, dtype=bool)
    tp, fp, fn = int(np.sum(y & p)), int(np.sum(~y & p)), int(np.sum(y & ~p))
    precision = tp / (tp + fp) if tp + fp else 0.0
    recall = tp / (tp + fn) if tp + fn else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {"precision": precision, "recall": recall, "f1": f1, "tp": tp, "fp": fp, "fn": fn,
            "n": int(len(y)), "kept": int(np.sum(p))}


def pr_curve(scores: Sequence[float], labels: Sequence[bool]) -> list[dict[str, float]]:
    """(threshold, precision, recall, f1) at every distinct score, highest threshold first."""
    s = np.asarray(scores, dtype=np.float64)
    y = np.asarray(labels, dtype=bool)
    curve = []
    for t in np.unique(s)[::-1]:
        m = keep_metrics(y, s >= t)
        curve.append({"threshold": float(t), "precision": m["precision"],
                      "recall": m["recall"], "f1": m["f1"]})
    return curve


def best_f1_threshold(scores: Sequence[float], labels: Sequence[bool]) -> float:
    """The threshold with the highest Keep F1 (the highest such threshold on ties)."""
    curve = pr_curve(scores, labels)
    if not curve:
        raise InvalidInputError("no scores to fit a threshold on")
    best = max(curve, key=lambda c: (round(c["f1"], 12), c["threshold"]))
    return best["threshold"]


def threshold_for_recall(scores: Sequence[float], labels: Sequence[bool],
                         target: float = DEFAULT_TARGET_RECALL) -> float:
    """The highest threshold t with recall(score >= t) >= target (deterministic)."""
    if not 0.0 < target <= 1.0:
        raise InvalidInputError(f"target recall must be in (0, 1], not {target}")
    pos = np.sort(np.asarray(scores, dtype=np.float64)[np.asarray(labels, dtype=bool)])[::-1]
    if pos.size == 0:
        raise InvalidInputError("the labelled set has no Keep pair")
    need = int(np.ceil(target * pos.size - 1e-9))
    return float(pos[max(need, 1) - 1])


def pair_cosines(embedder: Embedder, pairs: Sequence[LabelledPair]) -> np.ndarray:
    """E(preference)·E(passage) for each pair, embedding each distinct text once."""
    prefs = sorted({p.preference for p in pairs})
    passages = sorted({p.passage for p in pairs})
    pv = dict(zip(prefs, np.asarray(embedder.embed(prefs), dtype=np.float32)))
    xv = dict(zip(passages, np.asarray(embedder.embed(passages), dtype=np.float32)))
    return np.array([float(pv[p.preference] @ xv[p.passage]) for p in pairs])


@dataclass
class TauCalibration:
    """The calibrated tau and what it does on the labelled set."""

    tau: float
    target_recall: float
    recall: float
    pass_rate_discard: float
    keep_pairs: int
    discard_pairs: int
    embedder: str
    split: str

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def calibrate_tau(embedder: Embedder, pairs: Sequence[LabelledPair],
                  target_recall: float = DEFAULT_TARGET_RECALL, split: str = "all"
                  ) -> TauCalibration:
    """Pick tau so that >= target_recall of the Keep pairs pass the coarse filter; tau is
    rounded down to 4 decimals (never below the target), so the same inputs give the same tau."""
    scores = pair_cosines(embedder, pairs)
    labels = np.array([p.keep for p in pairs])
    tau = float(np.floor(threshold_for_recall(scores, labels, target_recall) * 1e4) / 1e4)
    passing = scores >= tau
    return TauCalibration(
        tau=tau, target_recall=target_recall, recall=float(np.mean(passing[labels])),
        pass_rate_discard=float(np.mean(passing[~labels])) if np.any(~labels) else 0.0,
        keep_pairs=int(labels.sum()), discard_pairs=int((~labels).sum()),
        embedder=str(getattr(embedder, "fingerprint", type(embedder).__name__)), split=split)


_TAU_LINE = re.compile(r"^(\s*tau\s*=\s*)([-+0-9.eE]+)(.*)$")


def write_tau(source: Path | str, out: Path | str, calibration: TauCalibration) -> Path:
    """Copy a profile TOML (tau replaced in [embedder]) or a bundle manifest JSON ("tau" set)."""
    source, out = Path(source), Path(out)
    text = source.read_text(encoding="utf-8")
    note = (f"calibrated: recall {calibration.recall:.3f} of {calibration.keep_pairs} Keep pairs "
            f"(target {calibration.target_recall}), {calibration.pass_rate_discard:.3f} of "
            f"Discard pairs pass")
    if out.suffix == ".json":
        data = json.loads(text)
        data["tau"] = calibration.tau
        data["tau_calibration"] = calibration.as_dict()
        out.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
        return out
    lines, section, done = text.splitlines(), "", False
    for k, line in enumerate(lines):
        if line.strip().startswith("["):
            section = line.strip()
        m = _TAU_LINE.match(line)
        if m and section == "[embedder]" and not done:
            lines[k] = f"{m.group(1)}{calibration.tau}  # {note}"
            done = True
    if not done:
        raise InvalidInputError(f"{source} has no tau line in its [embedder] section")
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return out
