"""`bench quality`: every system on the judged question set, scored by blind judgments."""

from __future__ import annotations

import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

from epic_edge.errors import InvalidInputError
from epic_edge_lab import common, corpora, policy, relevance
from epic_edge_lab.judged_metrics import aggregate as judged_aggregate
from epic_edge_lab.judged_metrics import ceilings, score_list
from epic_edge_lab.losses import judged_fates
from epic_edge_lab.quality_persona import Followed, run_persona, store_everything_bytes
from epic_edge_lab.quality_summary import render, summary, verifier_note
from epic_edge_lab.ray_bench import engine_cluster
from epic_edge_lab.systems import RawItems
from epic_edge_lab.vectors import CachedEmbedder, corpus_vectors, warm_passages

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
    persona_sets = relevance.persona_sets(judged_root)
    wiki = persona_sets[0]
    chosen = set(common.parse_personas(personas, len(wiki)))
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
    same_format = store_everything_bytes(root, cached, items, vectors, fmt)
    everything_bytes = everything.bytes()
    note = verifier_note(verifier, prof, instructions)
    log(f"bench quality: {len(questions)} judged questions ({split}), {len(by_persona)} "
        f"personas, {corpus} corpus ({len(items)} chunks), verifier {verifier}, tau {tau}; {note}")
    verifier_obj = common.make_verifier(prof, model_dir, verifier, instructions)
    passages = warm_passages(verifier_obj, items, corpus, progress=progress,
                             cluster=cluster)
    if cluster is not None:
        cluster.start_pool(passages)
        personas_prefs = [(common.persona_questions(wiki[p])[0], None) for p in by_persona]
        verifier_obj = cluster.judged_ahead(verifier_obj, items, vectors, personas_prefs,
                                            cached, tau)
    per_persona, retrieved, passages, evidence = [], {}, {}, {}
    labels = relevance.primary_labels(relevance.load_judgments(judged_root))
    followed = Followed(labels, items)
    requests = {kind: policy.persona_requests(kind, judged_root) for kind in policy.REQUESTS}
    try:
        for n, (p_index, qs) in enumerate(sorted(by_persona.items()), 1):
            t0 = time.perf_counter()
            question_sets = {"own": [question for data in persona_sets
                                     for question, _ in common.persona_questions(data[p_index])[1]]}
            question_sets.update({kind: found[p_index] for kind, found in requests.items()
                                  if p_index in found})
            row = run_persona(wiki[p_index], question_sets, p_index, qs, root, prof, cached,
                              verifier_obj, items, vectors, everything, tau, k, variants,
                              retrieved, passages, evidence, followed)
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
    config.update(question_cut=policy.question_cut(prof.retrieval),
                  question_below=prof.retrieval.get("question_gate_below"))
    result = {
        "bench": "quality", "split": split, "corpus": corpus, "chunks": len(items),
        "judged_set": str(judged_root or "bench/judged"),
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
    # the gate is calibrated on PrefWiki's dev personas; a written set reports its share only
    result["policy"] = (policy.calibrate(per_persona, dict(prof.retrieval))
                        if len(persona_sets) > 1 else {})
    return rescore(result, labels, judged_root=judged_root)


def withheld_questions(result: dict[str, Any], questions: list[relevance.Question],
                       config: dict[str, Any]) -> set[str]:
    """The questions EPIC's memory-use decision (epic_edge.retrieval.lookup) gives no memory
    under `config`, from recorded evidence (closest preference similarity, best entry for the
    raw question, the question gate's P where recorded) and each memory's background evidence
    (its item cut at a quantile)."""
    personas = {p["persona"]: p.get("policy_evidence") or {} for p in result["per_persona"]}
    out = set()
    for q in questions:
        row = policy.with_cut([result["epic_evidence"][q.qid]],
                              personas[q.persona].get("background", []),
                              config.get("item_gate_quantile"), config.get("item_gate"))
        if not policy.used(row, config.get("gate"), config.get("question_cut"),
                           config.get("question_below"))[0]:
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


__all__ = ["render", "run"]
