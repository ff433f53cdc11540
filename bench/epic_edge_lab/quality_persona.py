"""One persona of `bench quality`: build every system over the corpus, rank the persona's
judged questions with each, and record the evidence the judged figures are computed from."""

from __future__ import annotations

import time
from collections import defaultdict
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from epic_edge.background import background_questions
from epic_edge.baseline import StoreEverything
from epic_edge.retrieval import best_raw_score, uses_memory
from epic_edge_lab import common, metrics, policy, relevance
from epic_edge_lab.losses import passage_fates
from epic_edge_lab.systems import SYSTEMS, Borrowed, EpicMemory, RawItems, steer_vector
from epic_edge_lab.variants import VARIANTS, KeptEntries, entry_rows, texts_only


class Followed:
    """The passages whose fate in each memory a run records (bench.losses): every judged one
    of the persona's questions and every one a system retrieved for them."""

    def __init__(self, labels: dict, items: list) -> None:
        self.judged: dict[str, set[str]] = defaultdict(set)
        for qid, pid in labels:
            self.judged[qid].add(pid)
        self.index_of = relevance.passage_index(it.text for it in items)

    def pids(self, questions: list, retrieved: dict) -> set[str]:
        return {pid for q in questions
                for pid in self.judged[q.qid].union(*retrieved[q.qid].values())}


def store_everything_bytes(root: Path, embedder: Any, items: list, vectors: np.ndarray,
                            fmt: str) -> dict[str, Any]:
    """Store-everything with EPIC's vector format and packed text: the ratio without those
    format wins."""
    everything = StoreEverything(root / f"store-everything-{fmt}.sqlite", embedder, fmt,
                                 packed_text=True)
    try:
        everything.add(items, vectors)
        return {"vector_format": fmt, "bytes": everything.footprint()}
    finally:
        everything.close()


def _search(store: StoreEverything, vector: np.ndarray, k: int) -> list[str]:
    return [text for _, text in store.search(vector, k)]


def _timed(fn, *args):  # type: ignore[no-untyped-def]
    t0 = time.perf_counter()
    out = fn(*args)
    return out, (time.perf_counter() - t0) * 1000


def run_persona(persona: dict, question_sets: dict[str, list[str]], p_index: int,
                questions: list, root: Path, prof: Any, embedder: Any, verifier: Any,
                items: list, vectors: np.ndarray,
                everything: RawItems, tau: float, k: int, variants: bool,
                retrieved: dict, passages: dict, evidence: dict,
                followed: Followed) -> dict[str, Any]:
    pref_texts, _ = common.persona_questions(persona)
    epic = EpicMemory(root / f"persona-{p_index}.epic", prof, embedder, Borrowed(verifier), tau,
                      pref_texts)
    ids = [p.id for p in epic.prefs]  # block index -> preference key (duplicates share one)
    steering = epic.memory.steering
    pref_vectors = steering.vectors[[steering.preferences.index(p) for p in epic.prefs]]
    links = [frozenset(ids[j] for j in row)
             for row in metrics.assign_links(vectors, pref_vectors, tau)]
    everything.relink(items, links)
    keep = [i for i, row in enumerate(links) if row]
    coarse = RawItems(root / f"persona-{p_index}-coarse.sqlite", embedder,
                      [items[i] for i in keep], vectors[keep], [links[i] for i in keep])
    epic.ingest(items)
    kept = KeptEntries(epic.memory, embedder) if variants else None
    source = {it.text: it for it in items}
    cells: dict[str, dict[str, list]] = defaultdict(lambda: defaultdict(list))
    routed = []
    for q in questions:
        gold = ids[q.block]
        qv = embedder.embed([q.question])[0]
        steered, best = steer_vector(qv, pref_vectors)
        routed.append(ids[best] == gold)
        ranked: dict[str, list[str]] = {}
        ranked["store-everything"], ms0 = _timed(_search, everything.store, qv, k)
        ranked["store-everything+steer"], ms1 = _timed(_search, everything.store, steered, k)
        ranked["coarse"], ms2 = _timed(_search, coarse.store, qv, k)
        found_raw, ms3 = _timed(partial(epic.memory.lookup, steer=False, gate=-1.0,
                                        min_score=-1.0), q.question, k)
        found, ms4 = _timed(epic.memory.lookup, q.question, k)
        ungated = epic.memory.lookup(q.question, k, gate=-1.0)  # same ranking, gate off
        ranked["coarse+fine"] = [h.item_text for h in found_raw.hits]
        ranked["epic"] = [h.item_text for h in ungated.hits]
        asks = epic.memory.question_gate
        evidence[q.qid] = [ungated.similarity, best_raw_score(epic.memory, qv),
                           None if asks is None else float(asks.probability(qv, q.question))]
        assert found.used_memory == uses_memory(
            *evidence[q.qid][:2], epic.memory.settings.gate, epic.memory.item_gate_now(),
            evidence[q.qid][2], None if asks is None else asks.threshold,
            epic.memory.settings.question_gate_below)
        for name, ms in zip(SYSTEMS, (ms0, ms1, ms2, ms3, ms4)):
            cells[name]["ms"].append(ms)
        for name, raw in (("store-everything", None), ("store-everything+steer", pref_vectors),
                          ("coarse", None)):
            system = coarse if name == "coarse" else everything
            hits, _ = system.retrieve(q.question, k, raw)
            cells[name]["pap"].append(metrics.pap_at_k(hits, gold, k))
            cells[name]["hit"].append(metrics.hit_at_k(hits, gold, k))
        for name, steer in (("coarse+fine", False), ("epic", True)):
            hits, _ = epic.retrieve(q.question, k, steer=steer)
            cells[name]["pap"].append(metrics.pap_at_k(hits, gold, k))
            cells[name]["hit"].append(metrics.hit_at_k(hits, gold, k))
        if kept is not None:
            for name in VARIANTS:
                ranked[f"epic:{name}"], ms = _timed(kept.rank, name, qv, pref_vectors, k,
                                                    q.question)
                ranked[f"epic:{name}"] = texts_only(ranked[f"epic:{name}"])
                cells[f"epic:{name}"]["ms"].append(ms)
        retrieved[q.qid] = {}
        for name, texts in ranked.items():
            retrieved[q.qid][name] = [relevance.passage_id(t) for t in texts]
            for t in texts:
                passages[relevance.passage_id(t)] = relevance.passage_record(t, source.get(t))
    policy_rows = _policy_evidence(question_sets, embedder, pref_vectors,
                                   epic.memory.store.entry_vectors(embedder.dim)[1],
                                   epic.memory.question_gate)
    rows, unique = entry_rows(epic.memory), list(dict.fromkeys(pref_texts))
    sizes = {"store-everything": everything.bytes(), "coarse": coarse.bytes(),
             "epic": epic.bytes()}
    result: dict[str, Any] = {"persona": p_index, "questions": len(questions),
                              "kept_items": epic.kept, "coarse_items": len(keep),
                              "llm_calls": epic.llm_calls, "ingest_stages_s": epic.stages,
                              "indexing_s": epic.index_seconds,
                              "routing_accuracy": float(np.mean(routed)),
                              "item_cut": epic.memory.item_gate_now(),
                              "memory_pids": [relevance.passage_id(row[3]) for row in rows],
                              # (its preference's place among the persona's distinct ones,
                              # confidence) per entry: what a replay of the ranking needs
                              "memory_confidence": [[unique.index(row[6]), round(row[2], 4)]
                                                    for row in rows],
                              "policy_evidence": policy_rows, "systems": {}}
    result["passage_fates"] = passage_fates(
        followed.pids(questions, retrieved), set(result["memory_pids"]), followed.index_of,
        items, vectors, epic.prefs, pref_vectors, tau, verifier)
    for name, cell in cells.items():
        family = name.split(":")[0].split("+")[0] if name != "coarse+fine" else "epic"
        result["systems"][name] = {**{key: list(v) for key, v in cell.items()},
                                   "bytes": sizes.get(family, sizes["epic"])}
    coarse.close()
    epic.close()
    for path in root.glob(f"persona-{p_index}[.-]*"):  # measured; keep /tmp small
        path.unlink(missing_ok=True)
    return result


def _policy_evidence(question_sets: dict[str, list[str]], embedder: Any, pref_vectors: np.ndarray,
                     entry_vectors: np.ndarray, question_gate: Any = None) -> dict[str, list]:
    """Memory-use evidence for the persona's `question_sets` ("own": all its questions,
    PrefWiki's personas: theirs and PrefEval's; "implicit" / "unrelated": everyday requests
    its preferences bear on without naming them / none of them bears on, where the judged set
    has them), the held-out no-preference set and the
    runtime's background questions (from which a memory's item cut is set), against this
    persona's memory's entries."""
    rows = {}
    for name, texts in (*question_sets.items(), ("none", policy.no_preference_questions()),
                        ("background", background_questions())):
        found = policy.evidence(embedder.embed(texts), pref_vectors, entry_vectors,
                                question_gate, texts).round(4)
        rows[name] = [[*row[:2], None if np.isnan(row[2]) else row[2]] for row in found.tolist()]
    return rows

