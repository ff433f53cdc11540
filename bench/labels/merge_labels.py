"""Merge blind labellers' files into the labelled set: train, test and held-out-style test.

Run: python bench/labels/merge_labels.py PAIRS_JSONL LABELS_DIR [--out DIR]
     [--held-out-style values]

PAIRS_JSONL is propose_more.py's pairs.jsonl; LABELS_DIR holds batch-NN.jsonl files of rows
{id, label: "Keep"|"Discard", reason}. Every pair already on file (the earlier rounds) keeps
its split. A new pair goes to test_style when its preference has the held-out style; otherwise
its preference cluster (MiniLM cosine >= 0.75 between preferences) decides, by the first
round's rule: the split of the cluster's earlier preferences, else test when sha256 of the
cluster's smallest text mod 100 is < 37. A new pair whose preference is a near-duplicate of a
held-out one goes to test, never train (unless the cluster holds an earlier train preference:
reported).
Pairs labelled twice report Cohen's kappa; a disagreement is
resolved to Discard (the stricter reading). A pair with no label stops the merge.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from epic_edge_lab.calibrate import linked_roots

HERE = Path(__file__).resolve().parent
LABELS = ("Keep", "Discard")
TEST_PERCENT = 37
FIELDS = ("id", "split", "preference", "style", "source", "title", "topic", "passage", "label",
          "reason", "minilm_cosine")


class MergeError(ValueError):
    """Labels or pairs that cannot be merged (missing, unknown or malformed)."""


def read_jsonl(path: Path) -> list[dict]:
    rows = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if line.strip():
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise MergeError(f"{path}:{n}: not JSON ({exc.msg})") from exc
    return rows


def read_labels(files: Sequence[Path]) -> dict[int, list[dict]]:
    """Every label given to each pair id, in file order."""
    labels: dict[int, list[dict]] = {}
    for path in files:
        for n, row in enumerate(read_jsonl(path), 1):
            if row.get("label") not in LABELS or "id" not in row:
                raise MergeError(f"{path}:{n}: needs an id and a label Keep or Discard")
            labels.setdefault(int(row["id"]), []).append(
                {"label": row["label"], "reason": str(row.get("reason", "")).strip()})
    return labels


def cohen_kappa(first: Sequence[str], second: Sequence[str]) -> float:
    """Agreement of two label lists beyond chance (1 = perfect, 0 = chance)."""
    n = len(first)
    if n == 0:
        return float("nan")
    observed = sum(a == b for a, b in zip(first, second)) / n
    expected = sum((first.count(c) / n) * (second.count(c) / n) for c in LABELS)
    return 1.0 if expected == 1 else (observed - expected) / (1 - expected)


def clusters(texts: Sequence[str], vectors: np.ndarray) -> list[list[int]]:
    """Groups of preferences linked by cosine >= calibrate.CLUSTER_COSINE (single linkage)."""
    groups: dict[int, list[int]] = {}
    for i, group in enumerate(linked_roots(vectors)):
        groups.setdefault(group, []).append(i)
    return list(groups.values())


def hash_split(members: Sequence[str]) -> str:
    h = int(hashlib.sha256(min(members).encode()).hexdigest(), 16) % 100
    return "test" if h < TEST_PERCENT else "train"


def preference_splits(old: list[dict], new: list[dict], embed: Callable, held_out: str
                      ) -> tuple[dict[str, str], dict[str, int]]:
    """Split of each new pair's preference, and counts of clusters that break the rules
    (mixing first-round train and test; joining a held-out preference to train)."""
    # an earlier held-out preference pulls its new near-duplicates to test, never train
    old_split = {r["preference"]: r["split"] for r in old}
    held = {t for t, sp in old_split.items() if sp == "test_style"}
    style = {p["preference"]: p["style"] for p in new}
    texts = list(dict.fromkeys([*old_split, *style]))
    vectors = np.asarray(embed(texts), np.float32)
    split: dict[str, str] = {}
    breaks = {"clusters_mixing_old_splits": 0, "held_out_clusters_with_train": 0}
    for group in clusters(texts, vectors):
        members = [texts[i] for i in group]
        known = Counter("test" if old_split[t] == "test_style" else old_split[t]
                        for t in members if t in old_split)
        near_held = any(style.get(t) == held_out or t in held for t in members)
        if known:  # earlier preferences keep their split; new near-duplicates follow
            base = known.most_common(1)[0][0]
        else:
            base = "test" if near_held else hash_split(members)
        for t in members:
            if t in style:
                split[t] = "test_style" if style[t] == held_out else base
        breaks["clusters_mixing_old_splits"] += len(known) > 1
        breaks["held_out_clusters_with_train"] += near_held and (
            "train" in known or any(split.get(t) == "train" for t in members))
    return split, breaks


def merge(pairs: list[dict], labels: dict[int, list[dict]], old: list[dict], embed: Callable,
          held_out: str) -> tuple[dict[str, list[dict]], dict]:
    """Rows per split (old pairs first, unchanged but for style/source) and a report."""
    ids = {int(p["id"]) for p in pairs}
    missing = sorted(ids - labels.keys())
    if missing:
        raise MergeError(f"{len(missing)} pairs have no label (first: {missing[:5]})")
    unknown = sorted(labels.keys() - ids)
    if unknown:
        raise MergeError(f"labels for ids not in the pairs: {unknown[:5]}")
    if ids & {int(r["id"]) for r in old}:
        raise MergeError("new pair ids collide with the ids of pairs on file")
    split_of, breaks = preference_splits(old, pairs, embed, held_out)
    out: dict[str, list[dict]] = {"train": [], "test": [], "test_style": []}
    for row in old:
        out[row["split"]].append(row if {"style", "source"} <= row.keys()
                                 else {"style": "consumer", "source": "wiki", **row})
    twice, disagreements = [], 0
    for p in pairs:
        given = labels[int(p["id"])]
        if len(given) > 1:
            twice.append((given[0]["label"], given[1]["label"]))
        final = given[0] if len({g["label"] for g in given}) == 1 else \
            {"label": "Discard", "reason": " / ".join(g["reason"] for g in given)}
        disagreements += final is not given[0]
        row = {**p, "split": split_of[p["preference"]], "topic": "", **final}
        out[row["split"]].append({k: row.get(k, "") for k in FIELDS})
    report = {
        "pairs": {s: len(rows) for s, rows in out.items()},
        "keep": {s: sum(r["label"] == "Keep" for r in rows) for s, rows in out.items()},
        "held_out_style": held_out,
        "double_labelled": len(twice), "disagreements": disagreements,
        "cohen_kappa": round(cohen_kappa([a for a, _ in twice], [b for _, b in twice]), 4)
        if twice else None,
        **breaks,
    }
    return out, report


def earlier(folder: Path, new_ids: set[int]) -> list[dict]:
    """The pairs on file that are not this round's (so a merge can rerun over its output)."""
    return [r for s in ("train", "test", "test_style") if (folder / f"{s}.jsonl").exists()
            for r in read_jsonl(folder / f"{s}.jsonl") if int(r["id"]) not in new_ids]


def minilm_fp32() -> Callable:
    """The embedder the first round clustered with: all-MiniLM-L6-v2 fp32 ONNX."""
    from epic_edge.backends.onnx_embedder import OnnxEmbedder
    from epic_edge.export.minilm_onnx import export_base_onnx

    m = export_base_onnx().parent
    return OnnxEmbedder(m / "model.onnx", m / "tokenizer.json", max_length=256).embed


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("pairs", type=Path)
    p.add_argument("labels", type=Path, help="folder of batch-NN.jsonl label files")
    p.add_argument("--out", type=Path, default=HERE)
    p.add_argument("--held-out-style", default="values")
    args = p.parse_args(argv)
    try:
        pairs = read_jsonl(args.pairs)
        old = earlier(HERE, {int(p["id"]) for p in pairs})
        out, report = merge(pairs, read_labels(
            sorted(args.labels.glob("batch-*.jsonl"))), old, minilm_fp32(), args.held_out_style)
    except MergeError as exc:
        print(f"merge_labels: {exc}", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    for split, rows in out.items():
        with open(args.out / f"{split}.jsonl", "w", encoding="utf-8") as fh:
            for row in sorted(rows, key=lambda r: int(r["id"])):
                fh.write(json.dumps(row, ensure_ascii=False) + "\n")
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
