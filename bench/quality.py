"""`bench quality`: every system on the judged question set, scored by blind judgments."""

from __future__ import annotations

import tempfile
import time
from collections import defaultdict
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from epic_edge.background import background_questions
from epic_edge.baseline import StoreEverything
from epic_edge.bench import common, corpora, metrics, policy, relevance
from epic_edge.bench.judged_metrics import aggregate as judged_aggregate
from epic_edge.bench.judged_metrics import ceilings, score_list
from epic_edge.bench.losses import judged_fates, passage_fates
from epic_edge.bench.quality_summary import render, summary, verifier_note
from epic_edge.bench.ray_bench import engine_cluster
from epic_edge.bench.systems import SYSTEMS, Borrowed, EpicMemory, RawItems, steer_vector
from epic_edge.bench.variants import VARIANTS, KeptEntries, entry_rows, texts_only
from epic_edge.bench.vectors import CachedEmbedder, corpus_vectors, warm_passages
from epic_edge.datasets import load_prefeval, load_prefwiki
from epic_edge.errors import InvalidInputError
from epic_edge.retrieval import best_raw_score, uses_memory

SELF_GRADED = ("pap", "hit")  # figures where EPIC's own filing decides: self-consistency only


def run(split: str = "all", *, corpus: str = "device", personas: str | None = None,
        verifier: str | None = None, instructions: str = "template",
        profile: str = "linux-cpu", models: Path | None = None, k: int = 5,
        tau: float | None = None, variants: bool = True, workdir: Path | None = None,
        progress: bool = True, log=print, embedder: Any = None,
        judged_root: Path | None = None, engine: str = "local", address: str | None = None,
        workers: int = 2) -> dict[str, Any]:
    """Build every system per persona of the judged set and rank its questions; return the JSON.

    Judged figures come from bench/judged/judgments.jsonl; `retrieved` (qid -> system ->
    passage ids) is kept in the result so that `bench pool` can send unjudged hits to readers.
    engine "ray": the corpus is embedded and the verdicts judged on a Ray cluster (`address`,
    default a local one; `workers` actors per stage), with the same figures.
    """
    started = time.perf_counter()
    prof, model_dir = common.profile_and_models(profile, models)
    tau = prof.tau if tau is None else float(tau)
    verifier = common.verifier_name(prof, verifier)
    chosen = set(common.parse_personas(personas, len(load_prefwiki())))
    questions = [q for q in relevance.load_questions(split, judged_root) if q.persona in chosen]
    if not questions:
        raise InvalidInputError(f"no judged questions for split {split!r} and personas "
                                f"{personas!r}")
    by_persona: dict[int, list[relevance.Question]] = defaultdict(list)
    for q in questions:
        by_persona[q.persona].append(q)
    embedder = embedder or common.make_embedder(prof, model_dir)
    items = corpora.load(corpus)
    cluster = engine_cluster(engine, profile, model_dir, verifier, instructions, address,
                             workers, progress)
    vectors, embed_s = (cluster.corpus_vectors(corpus, items, embedder) if cluster else
                        corpus_vectors(corpus, items, embedder, corpora.data_dir() / "vectors",
                                       progress=progress))
    cached = CachedEmbedder(embedder, [it.text for it in items], vectors)
    root_tmp = tempfile.TemporaryDirectory(prefix="epic-bench-")
    root = Path(workdir or root_tmp.name)
    root.mkdir(parents=True, exist_ok=True)
    everything = RawItems(root / "store-everything.sqlite", cached, items, vectors,
                          [frozenset()] * len(items))
    fmt = str((prof.index or {}).get("vectors", "float32"))
    same_format = _store_everything_bytes(root, cached, items, vectors, fmt)
    everything_bytes = everything.bytes()
    note = verifier_note(verifier, prof, instructions)
    log(f"bench quality: {len(questions)} judged questions ({split}), {len(by_persona)} "
        f"personas, {corpus} corpus ({len(items)} chunks), verifier {verifier}, tau {tau}; {note}")
    verifier_obj = common.make_verifier(prof, model_dir, verifier, instructions)
    passages = warm_passages(verifier_obj, items, corpus, progress=progress,
                             cluster=cluster)
    wiki = load_prefwiki()
    if cluster is not None:
        cluster.start_pool(passages)
        personas_prefs = [(common.persona_questions(wiki[p])[0], None) for p in by_persona]
        verifier_obj = cluster.judged_ahead(verifier_obj, items, vectors, personas_prefs,
                                            cached, tau)
    per_persona, retrieved, passages, evidence = [], {}, {}, {}
    labels = relevance.primary_labels(relevance.load_judgments(judged_root))
    followed = Followed(labels, items)
    try:
        for n, (p_index, qs) in enumerate(sorted(by_persona.items()), 1):
            t0 = time.perf_counter()
            row = _persona(wiki[p_index], p_index, qs, root, prof, cached, verifier_obj, items,
                           vectors, everything, tau, k, variants, retrieved, passages, evidence,
                           followed)
            row["seconds"] = time.perf_counter() - t0
            per_persona.append(row)
            log(f"  persona {p_index} ({n}/{len(by_persona)}): {row['seconds']:.1f} s, "
                f"kept {row['kept_items']} items")
    finally:
        everything.close()
        root_tmp.cleanup()
        if hasattr(verifier_obj, "close"):
            verifier_obj.close()
        if cluster is not None:
            cluster.close()
    config = {key: prof.retrieval.get(key) for key in ("gate", "item_gate", "item_gate_quantile")}
    result = {
        "bench": "quality", "split": split, "corpus": corpus, "chunks": len(items),
        "personas": sorted(by_persona), "questions": len(questions), "verifier": verifier,
        "instructions": instructions, "verifier_note": note, "tau": tau, "k": k,
        "profile": prof.name, "embedder": embedder.fingerprint,
        "verifier_config": {key: v for key, v in (prof.verifier or {}).items()
                            if key in ("threshold", "max_preferences_per_item", "model")},
        "retrieval_config": config, "corpus_embed_seconds": embed_s,
        "store_everything_bytes": everything_bytes, "store_everything_same_format": same_format,
        "systems": {}, "per_persona": per_persona, "retrieved": retrieved,
        "passages": passages, "epic_evidence": evidence,
        "elapsed_s": time.perf_counter() - started, "machine": common.machine(),
        "engine": cluster.describe(verifier_obj) if cluster else {"name": "local"},
        "peak_rss_mb": common.peak_rss_mb(),
    }
    result["policy"] = policy.calibrate(per_persona, dict(prof.retrieval))
    return rescore(result, labels, judged_root=judged_root)


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


def withheld_questions(result: dict[str, Any], questions: list[relevance.Question],
                       config: dict[str, Any]) -> set[str]:
    """The questions EPIC's memory-use decision (epic_edge.retrieval.lookup) gives no memory
    under `config`, from recorded evidence (closest preference similarity, best entry for the
    raw question) and each memory's background evidence (its item cut at a quantile)."""
    personas = {p["persona"]: p.get("policy_evidence") or {} for p in result["per_persona"]}
    out = set()
    for q in questions:
        row = policy.with_cut([result["epic_evidence"][q.qid][:2]],
                              personas[q.persona].get("background", []),
                              config.get("item_gate_quantile"), config.get("item_gate"))
        if not policy.used(row, config.get("gate"))[0]:
            out.add(q.qid)
    return out


def rescore(result: dict[str, Any], labels: dict, config: dict[str, Any] | None = None,
            judged_root: Path | None = None) -> dict[str, Any]:
    """Judged figures of a run again, with today's judgments and a memory-use setting
    (default: the run's): what a new judging round or a re-calibrated gate changes."""
    questions = [q for q in relevance.load_questions("all", judged_root)
                 if q.qid in result["retrieved"]]
    config = dict(result["retrieval_config"] if config is None else config)
    withheld = withheld_questions(result, questions, config)
    result["retrieval_config"] = config
    result["per_question_split"] = {q.qid: q.split for q in questions}
    result["systems"] = judged_systems(questions, result["retrieved"], result["per_persona"],
                                       labels, result["k"], withheld)
    result["ceilings"] = ceilings(questions, result["per_persona"], labels, result["k"])
    result["both_fates"] = judged_fates(questions, result["per_persona"], labels)
    result["summary"] = summary(result)
    return result


def judged_systems(questions: list[relevance.Question], retrieved: dict, per_persona: list,
                   labels: dict, k: int, withheld: set[str]) -> dict[str, dict[str, Any]]:
    """Per system: judged means (all, dev, test), bytes, ms, and the self-graded figures.
    EPIC, as shipped, returns nothing for the questions its memory-use gate `withheld`."""
    names = list(retrieved[questions[0].qid]) if questions else []
    out: dict[str, dict[str, Any]] = {}
    for name in names:
        rows = {q.qid: score_list(q.qid, [] if name == "epic" and q.qid in withheld
                                  else retrieved[q.qid][name], labels, k) for q in questions}
        cell: dict[str, Any] = judged_aggregate(list(rows.values()))
        for split in ("dev", "test"):
            part = [rows[q.qid] for q in questions if q.split == split]
            cell[split] = judged_aggregate(part) if part else None
        cells = [p["systems"][name] for p in per_persona if name in p["systems"]]
        cell["bytes_median"] = float(np.median([c["bytes"] for c in cells]))
        cell["bytes_max"] = float(np.max([c["bytes"] for c in cells]))
        cell["retrieval_ms_median"] = float(np.median([m for c in cells for m in c["ms"]]))
        cell["per_question"] = {qid: rows[qid] for qid in rows}
        for key in SELF_GRADED:
            values = [v for c in cells for v in c.get(key, [])]
            cell[f"{key}@{k}_self_graded"] = float(np.mean(values)) if values else None
        cell["no_memory_share"] = (len(withheld & set(rows)) / len(rows)
                                   if name == "epic" else None)
        out[name] = cell
    return out


def _store_everything_bytes(root: Path, embedder: Any, items: list, vectors: np.ndarray,
                            fmt: str) -> dict[str, Any]:
    """Store-everything with EPIC's vector format: the ratio without the quantisation win."""
    everything = StoreEverything(root / f"store-everything-{fmt}.sqlite", embedder, fmt)
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


def _persona(persona: dict, p_index: int, questions: list, root: Path, prof: Any,
             embedder: Any, verifier: Any, items: list, vectors: np.ndarray,
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
        evidence[q.qid] = [ungated.similarity, best_raw_score(epic.memory, qv)]
        assert found.used_memory == uses_memory(*evidence[q.qid], epic.memory.gate,
                                                epic.memory.item_gate_now())
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
    policy_rows = _policy_evidence(p_index, embedder, pref_vectors,
                                   epic.memory.store.entry_vectors(embedder.dim)[1])
    sizes = {"store-everything": everything.bytes(), "coarse": coarse.bytes(),
             "epic": epic.bytes()}
    result: dict[str, Any] = {"persona": p_index, "questions": len(questions),
                              "kept_items": epic.kept, "coarse_items": len(keep),
                              "llm_calls": epic.llm_calls, "ingest_stages_s": epic.stages,
                              "indexing_s": epic.index_seconds,
                              "routing_accuracy": float(np.mean(routed)),
                              "item_cut": epic.memory.item_gate_now(),
                              "memory_pids": [relevance.passage_id(row[3])
                                              for row in entry_rows(epic.memory)],
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


def _policy_evidence(p_index: int, embedder: Any, pref_vectors: np.ndarray,
                     entry_vectors: np.ndarray) -> dict[str, list]:
    """Memory-use evidence for all of the persona's own questions (PrefWiki and PrefEval), the
    held-out no-preference set and the runtime's background questions (from which a memory's
    item cut is set), against this persona's memory's entries."""
    own = [q["question"] for data in (load_prefwiki(), load_prefeval())
           for b in data[p_index]["preference_blocks"] for q in b["queries"]]
    rows = {}
    for name, texts in (("own", own), ("none", policy.no_preference_questions()),
                        ("background", background_questions())):
        rows[name] = policy.evidence(embedder.embed(texts), pref_vectors,
                                     entry_vectors).round(4).tolist()
    return rows


__all__ = ["render", "run"]
