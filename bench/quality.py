"""`bench quality`: five systems on the same embedder, corpus and questions, judge-free metrics."""

from __future__ import annotations

import functools
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from epic_edge.baseline import StoreEverything
from epic_edge.bench import common, corpora, metrics
from epic_edge.bench.quality_summary import aggregate, render, summary, verifier_note
from epic_edge.bench.systems import SYSTEMS, EpicMemory, RawItems, steer_vector
from epic_edge.bench.vectors import CachedEmbedder, corpus_vectors


def run(dataset: str = "prefwiki", *, corpus: str | None = None, personas: str | None = None,
        verifier: str | None = None, instructions: str = "template",
        profile: str = "linux-cpu", models: Path | None = None,
        limit: int | None = None, k: int = 5, tau: float | None = None,
        workdir: Path | None = None, progress: bool = True, log=print,
        embedder: Any = None) -> dict[str, Any]:
    """Build every system for each chosen persona and score its questions; return the JSON.

    `verifier` defaults to the profile's; a learned verifier's instructions come from the
    template by default (an LLM per kept item would not fit 57 personas in two hours).
    """
    started = time.perf_counter()
    loader, default_corpus = common.DATASETS[dataset]
    corpus = corpus or default_corpus
    if limit is None and corpus == "chat":
        limit = 12_000  # the ShareGPT dump has ~270k chunks; the first 12k are comparable to wiki
    prof, model_dir = common.profile_and_models(profile, models)
    tau = prof.tau if tau is None else float(tau)
    verifier = common.verifier_name(prof, verifier)
    data = loader()
    chosen = common.parse_personas(personas, len(data))
    embedder = embedder or common.make_embedder(prof, model_dir)
    items = corpora.load(corpus, limit=limit)
    vectors, embed_s = corpus_vectors(corpus, items, embedder, corpora.data_dir() / "vectors",
                                      progress=progress)
    cached = CachedEmbedder(embedder, [it.text for it in items], vectors)
    cached_view = _NoLearn(cached)
    tmp = tempfile.TemporaryDirectory(prefix="epic-bench-")
    root = Path(workdir or tmp.name)
    root.mkdir(parents=True, exist_ok=True)
    everything = RawItems(root / "store-everything.sqlite", cached_view, items, vectors,
                          [frozenset()] * len(items))
    everything_bytes = everything.bytes()
    same_format_bytes = _store_everything_bytes(root, cached_view, items, vectors,
                                                str((prof.index or {}).get("vectors", "float32")))
    llm_note = verifier_note(verifier, prof, instructions)
    log(f"bench quality: {dataset} on {corpus} ({len(items)} chunks), {len(chosen)} personas, "
        f"verifier {verifier}, tau {tau}; {llm_note}")
    per_persona = []
    setup_s = time.perf_counter() - started  # corpus load + (first time) corpus embedding
    try:
        for n, p_index in enumerate(chosen, 1):
            t0 = time.perf_counter()
            row = _persona(data[p_index], p_index, root, prof, cached_view,
                           common.make_verifier(prof, model_dir, verifier, instructions),
                           items, vectors, everything, everything_bytes, tau, k)
            row["seconds"] = time.perf_counter() - t0
            per_persona.append(row)
            log(f"  persona {p_index} ({n}/{len(chosen)}): {time.perf_counter() - t0:.1f} s, "
                f"PAP@{k} EPIC {row['systems']['epic']['pap']:.3f}, store-everything "
                f"{row['systems']['store-everything']['pap']:.3f}")
    finally:
        everything.close()
        tmp.cleanup()
    result = {
        "bench": "quality", "dataset": dataset, "corpus": corpus, "chunks": len(items),
        "personas": chosen, "verifier": verifier, "instructions": instructions,
        "verifier_config": {k: v for k, v in (prof.verifier or {}).items()
                            if k in ("threshold", "max_preferences_per_item", "model")},
        "verifier_note": llm_note, "tau": tau, "k": k,
        "profile": prof.name, "embedder": embedder.fingerprint,
        "corpus_embed_seconds": embed_s, "store_everything_bytes": everything_bytes,
        "store_everything_same_format": same_format_bytes,
        "systems": aggregate(per_persona, k), "per_persona": per_persona,
        "elapsed_s": time.perf_counter() - started, "setup_s": setup_s,
        "machine": common.machine(),
        "peak_rss_mb": common.peak_rss_mb(),
    }
    result["summary"] = summary(result)
    return result


def _store_everything_bytes(root: Path, embedder: Any, items: list, vectors: np.ndarray,
                            fmt: str) -> dict[str, Any]:
    """Store-everything with EPIC's vector format: the ratio without the quantisation win."""
    everything = StoreEverything(root / f"store-everything-{fmt}.sqlite", embedder, fmt)
    try:
        everything.add(items, vectors)
        return {"vector_format": fmt, "bytes": everything.footprint()}
    finally:
        everything.close()


class _NoLearn:
    """A view of a CachedEmbedder that never adds questions to the cache (honest timings)."""

    def __init__(self, cached: CachedEmbedder) -> None:
        self.cached, self.dim = cached, cached.dim

    @property
    def fingerprint(self) -> str:
        return self.cached.fingerprint

    def embed(self, texts):  # type: ignore[no-untyped-def]
        texts = list(texts)
        if all(t in self.cached._cache for t in texts):
            return self.cached.embed(texts)
        return self.cached.inner.embed(texts)


def _persona(persona: dict, p_index: int, root: Path, prof: Any, embedder: Any, verifier: Any,
             items: list, vectors: np.ndarray, everything: RawItems,
             everything_bytes: int, tau: float, k: int) -> dict[str, Any]:
    pref_texts, questions = common.persona_questions(persona)
    epic = EpicMemory(root / f"persona-{p_index}.epic", prof, embedder, verifier, tau,
                      pref_texts)
    empty_bytes = epic.bytes()  # the file's floor: SQLite pages and the preferences
    ids = [p.id for p in epic.prefs]  # block index -> preference key (duplicates share one)
    pref_vectors = epic.memory.steering.vectors[[epic.memory.steering.preferences.index(p)
                                                 for p in epic.prefs]]
    t0 = time.perf_counter()
    links = [frozenset(ids[j] for j in row) for row in metrics.assign_links(vectors, pref_vectors,
                                                                            tau)]
    assign_s = time.perf_counter() - t0
    everything.relink(items, links)
    keep = [i for i, row in enumerate(links) if row]
    coarse = RawItems(root / f"persona-{p_index}-coarse.sqlite", embedder,
                      [items[i] for i in keep], vectors[keep], [links[i] for i in keep])
    epic.ingest(items)
    systems = {
        "store-everything": (lambda q: everything.retrieve(q, k, None)),
        "store-everything+steer": (lambda q: everything.retrieve(q, k, pref_vectors)),
        "coarse": (lambda q: coarse.retrieve(q, k, None)),
        "coarse+fine": (lambda q: epic.retrieve(q, k, steer=False)),
        "epic": (lambda q: epic.retrieve(q, k, steer=True)),
    }
    scores: dict[str, dict[str, list[float]]] = {s: {} for s in SYSTEMS}
    routed = []
    trained_on = _verifier_train_preferences()
    for question, block in questions:
        gold = ids[block]
        q = embedder.embed([question])[0]
        routed.append(ids[steer_vector(q, pref_vectors)[1]])
        for name, retrieve in systems.items():
            hits, timings = retrieve(question)
            row = scores[name]
            row.setdefault("pap", []).append(metrics.pap_at_k(hits, gold, k))
            if pref_texts[block] not in trained_on:  # held out from the learned verifier
                row.setdefault("pap_heldout", []).append(row["pap"][-1])
            row.setdefault("hit", []).append(metrics.hit_at_k(hits, gold, k))
            row.setdefault("ms", []).append(
                sum(timings.get(s, 0.0) for s in ("embed", "steer", "search")))
    routing = metrics.routing_accuracy(routed, [ids[b] for _, b in questions])
    out = {
        "store-everything": (everything_bytes, everything.index_seconds, set().union(*links)),
        "store-everything+steer": (everything_bytes, everything.index_seconds,
                                   set().union(*links)),
        "coarse": (coarse.bytes(), coarse.index_seconds + assign_s, coarse.linked),
        "coarse+fine": (epic.bytes(), epic.index_seconds, epic.linked),
        "epic": (epic.bytes(), epic.index_seconds, epic.linked),
    }
    result: dict[str, Any] = {"persona": p_index, "questions": len(questions),
                              "kept_items": epic.kept, "coarse_items": len(keep),
                              "epic_empty_bytes": empty_bytes,
                              "llm_calls": epic.llm_calls, "ingest_stages_s": epic.stages,
                              "systems": {}}
    for name in SYSTEMS:
        size, index_s, linked = out[name]
        steered = name in ("store-everything+steer", "epic")
        result["systems"][name] = {
            "pap": float(np.mean(scores[name]["pap"])), "hit": float(np.mean(scores[name]["hit"])),
            "pap_heldout": _mean_or_none(scores[name].get("pap_heldout")),
            "heldout_questions": len(scores[name].get("pap_heldout", [])),
            "routing": routing if steered else None,
            "coverage": metrics.coverage(set(ids), linked), "bytes": size,
            "retrieval_ms": statistics.median(scores[name]["ms"]) * 1000,
            "indexing_s": index_s,
        }
    coarse.close()
    epic.close()
    for path in root.glob(f"persona-{p_index}[.-]*"):  # measured; keep /tmp small over 57
        path.unlink(missing_ok=True)
    return result


@functools.lru_cache(maxsize=1)
def _verifier_train_preferences() -> frozenset[str]:
    """Preference texts in the labelled set's train split (the learned verifier saw them)."""
    from epic_edge.calibrate import load_verification_set

    return frozenset(pair.preference for pair in load_verification_set("train"))


def _mean_or_none(values: list[float] | None) -> float | None:
    return float(np.mean(values)) if values else None


__all__ = ["render", "run"]
