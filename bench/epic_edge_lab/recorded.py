"""A saved `bench quality --json` run's memories, rebuilt for offline re-ranking (replays)."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from epic_edge import vectors as vector_codec
from epic_edge.lexical import BM25
from epic_edge.ranking import shortfall, weighted
from epic_edge.retrieval import eased_weight
from epic_edge.stages import PAPER_STEER_BY, PAPER_STEER_WEIGHT, Steering
from epic_edge.types import Preference
from epic_edge_lab import common, corpora, relevance
from epic_edge_lab.judged_metrics import aggregate, bootstrap_ci, score_list
from epic_edge_lab.vectors import CachedEmbedder, corpus_vectors

RUN_KEYS = {"per_persona", "retrieved", "corpus", "profile", "k"}  # what a replay reads
AXES = ("aligned", "answers", "both", "ndcg")


@dataclass
class RecordedMemory:
    """One persona's recorded entries: item ids (pids, one per entry: an item filed under two
    preferences appears twice, ranked once by `distinct_top`), vectors as the memory stored them,
    the lexical index, each entry's shortfall, and (when the run recorded them) the
    preference row and confidence each was filed with."""

    persona: int
    pids: list[str]
    texts: list[str]
    steering: Steering
    entries: np.ndarray
    lexical: BM25
    short: np.ndarray
    rows: np.ndarray | None
    sure: np.ndarray | None
    embed: Callable[[list[str]], np.ndarray]  # for steering by text

    def scores(self, q: np.ndarray, question: str, setting: Mapping[str, Any]) -> np.ndarray:
        """Every entry's score as a lookup under `setting` ranks it (its steering as built)."""
        lifted = (self.steering.weights(q)[self.rows] * self.sure if self.rows is not None
                  else 0.0)
        if setting.get("no_steering_from") is not None and self.steering.by == PAPER_STEER_BY:
            best = float((self.entries @ q).max()) if len(self.entries) else -1.0
            weight = eased_weight(self.steering.weight, best, setting.get("ease_steering_from"),
                                  setting["no_steering_from"])
            vector = self.steering.steer(q, weight)[0]
        else:
            vector = self.steering.search_vector(q, question, self.embed)
        return self.entries @ vector + weighted(
            setting, bm25=self.lexical.normalised(question), lifted=lifted, short=self.short)


class RecordedRun:
    """The run's profile, embedder and questions, and its memories one persona at a time."""

    def __init__(self, run: dict[str, Any], root: Path | None = None,
                 models: Path | None = None) -> None:
        missing = RUN_KEYS - set(run) if isinstance(run, dict) else RUN_KEYS
        if missing:
            raise ValueError(f"not a saved `bench quality --json` run (no "
                             f"{', '.join(sorted(missing))})")
        self.run, self.root = run, root
        self.profile, model_dir = common.profile_and_models(run["profile"], models)
        self.embedder = common.make_embedder(self.profile, model_dir)
        self.setting = dict(self.profile.retrieval or {})
        self.k = int(run["k"])
        self._items = corpora.load(run["corpus"])
        self._vecs, _ = corpus_vectors(run["corpus"], self._items, self.embedder,
                                       corpora.data_dir() / "vectors", progress=False)
        self._row_of = relevance.passage_index(item.text for item in self._items)
        self._personas = relevance.persona_sets(root)[0]
        self.asked = [q for q in relevance.load_questions("all", root)
                      if q.qid in run["retrieved"]]
        self._texts_once = CachedEmbedder(self.embedder)  # tries repeat a steering's texts

    def memories(self, setting: Mapping[str, Any] | None = None) -> Iterator[RecordedMemory]:
        """Each recorded memory, steered as `setting` (default: the profile's) says: its hedge,
        steer_weight and steer_by."""
        setting = self.setting if setting is None else setting
        fmt = str((self.profile.index or {}).get("vectors", "float32"))
        dim = self.embedder.dim
        for record in self.run["per_persona"]:
            filed = record.get("memory_confidence")  # (preference row, confidence) per entry
            if filed is None:  # an older run: one entry per item, its filing unrecorded
                kept = [(p, None) for p in dict.fromkeys(record["memory_pids"])]
            else:  # every entry: an item filed under two preferences is ranked at each
                kept = list(zip(record["memory_pids"], filed))
            kept = [(p, f) for p, f in kept if p in self._row_of]
            if not kept:
                continue
            pids = [p for p, _ in kept]
            prefs = list(dict.fromkeys(common.persona_questions(
                self._personas[record["persona"]])[0]))
            steering = Steering(
                [Preference(i, t) for i, t in enumerate(prefs)], self.embedder.embed(prefs),
                hedge=setting.get("hedge"),
                weight=setting.get("steer_weight", PAPER_STEER_WEIGHT),
                by=setting.get("steer_by", PAPER_STEER_BY))
            texts = [self._items[self._row_of[p]].text for p in pids]
            rows = sure = None
            if filed is not None:
                rows_, sure_ = np.array([f for _, f in kept], np.float64).T
                rows, sure = rows_.astype(np.int64), sure_
            yield RecordedMemory(
                record["persona"], pids, texts, steering,
                np.stack([vector_codec.decode(vector_codec.encode(self._vecs[self._row_of[p]],
                                                                  fmt), dim, fmt)
                          for p in pids]),
                BM25(texts), shortfall(np.array([len(t.split()) for t in texts])), rows, sure,
                self._texts_once.embed)

    def questions(self, memory: RecordedMemory) -> list[relevance.Question]:
        return [q for q in self.asked if q.persona == memory.persona]


def score(retrieved: dict[str, dict[str, list[str]]], names: Sequence[str],
          root: Path | None) -> dict[str, Any]:
    """Judged figures per split and name, each with its paired interval against the first."""
    labels = relevance.primary_labels(relevance.load_judgments(root))
    asked = [q for q in relevance.load_questions("all", root) if q.qid in retrieved]
    out: dict[str, Any] = {}
    for split in sorted({q.split for q in asked}):
        qids = [q.qid for q in asked if q.split == split]
        rows = {n: [score_list(qid, retrieved[qid][n], labels) for qid in qids] for n in names}
        out[split] = {}
        for n in names:
            figures = aggregate(rows[n])
            for axis in AXES:
                diff = [a[axis] - b[axis] for a, b in zip(rows[n], rows[names[0]])]
                figures[f"{axis}_vs_first"] = [float(np.mean(diff)), *bootstrap_ci(diff)]
            out[split][n] = figures
    return out


def render(splits: dict[str, Any]) -> list[str]:
    """One line per split and name: each axis with its paired difference from the first."""
    return [f"{split:5s} {name:18s} " + "  ".join(
        f"{a} {f[a]:.3f} ({f[a + '_vs_first'][0]:+.3f}, {f[a + '_vs_first'][1]:+.3f}.."
        f"{f[a + '_vs_first'][2]:+.3f})" for a in AXES) + f"  unjudged {f['unjudged']:.3f}"
        for split, by_name in splits.items() for name, f in by_name.items()]


def replay_parser(prog: str, doc: str) -> argparse.ArgumentParser:
    """A replay command's parser with the arguments every replay takes: the run, --judged,
    --models and --json (add the replay's own)."""
    p = argparse.ArgumentParser(prog=f"python -m epic_edge_lab.{prog}",
                                description=doc.split("\n\n")[0])
    p.add_argument("run", type=Path, help="a saved `bench quality --json` run")
    p.add_argument("--judged", type=Path, help="the judged set the run scored (default PrefWiki)")
    p.add_argument("--models", type=Path, help="model folder (default ~/.cache/epic-edge/models)")
    p.add_argument("--json", type=Path, help="write the replay here (pool its unjudged hits "
                   "with `epic-edge bench pool --from`)")
    return p


def read_run(path: Path) -> dict[str, Any]:
    """A saved run, or one clear line saying why the file is not one."""
    try:
        run = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise SystemExit(f"{path} is not a saved `bench quality --json` run ({exc})") from None
    missing = RUN_KEYS - set(run) if isinstance(run, dict) else RUN_KEYS
    if missing:
        raise SystemExit(f"{path} is not a saved `bench quality --json` run (no "
                         f"{', '.join(sorted(missing))})")
    return run


def report(result: dict[str, Any], path: Path | None, *head: str) -> int:
    """Print a replay's head lines and its judged figures; save it to `path` when given."""
    print("\n".join([*head, *render(result["splits"])]))
    if path:
        common.write_json(result, path)
    return 0
