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
from epic_edge.bench.systems import LABELS, SYSTEMS, EpicMemory, RawItems, steer_vector
from epic_edge.bench.vectors import CachedEmbedder, corpus_vectors

LLM_SECONDS_PER_ITEM = 1.6  # SmolLM2 135M, 1 thread, shared 2-core CPU (`bench latency`)
LLM_BUDGET_S = 2 * 3600


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
    llm_note = _verifier_note(verifier, prof, instructions)
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
        "systems": _aggregate(per_persona, k), "per_persona": per_persona,
        "elapsed_s": time.perf_counter() - started, "setup_s": setup_s,
        "machine": common.machine(),
        "peak_rss_mb": common.peak_rss_mb(),
    }
    result["summary"] = _summary(result)
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


def _verifier_note(verifier: str, prof: Any, instructions: str | None = "template") -> str:
    if verifier == "template":
        return ("fine verification = template verifier (no LLM; keeps the top-2 coarse-filter "
                "candidates of every item): the LLM verifier would exceed the 2-hour budget "
                f"at ~{LLM_SECONDS_PER_ITEM} s per surviving item")
    if verifier == "learned":
        return ("fine verification = learned MiniLM decision (no LLM call), instructions by "
                f"{instructions or 'the profile'}")
    return f"fine verification = {verifier} verifier"


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


def _heldout_mean(cells: list[dict]) -> float | None:
    """PAP over questions whose gold preference is outside the learned verifier's train split."""
    n = sum(c.get("heldout_questions", 0) for c in cells)
    total = sum(c["pap_heldout"] * c["heldout_questions"] for c in cells
                if c.get("heldout_questions"))
    return total / n if n else None


def _aggregate(rows: list[dict], k: int) -> dict[str, dict[str, Any]]:
    agg = {}
    for name in SYSTEMS:
        cells = [r["systems"][name] for r in rows]
        weights = [r["questions"] for r in rows]

        def mean(key: str, cells: list = cells, weights: list = weights) -> float:
            return float(np.average([c[key] for c in cells], weights=weights))

        agg[name] = {
            "label": LABELS[name], f"pap@{k}": mean("pap"), f"hit@{k}": mean("hit"),
            "routing_accuracy": mean("routing") if cells[0]["routing"] is not None else None,
            f"pap@{k}_heldout": _heldout_mean(cells),
            "coverage": float(np.mean([c["coverage"] for c in cells])),
            "bytes_median": float(np.median([c["bytes"] for c in cells])),
            "bytes_max": float(np.max([c["bytes"] for c in cells])),
            "retrieval_ms_median": float(np.median([c["retrieval_ms"] for c in cells])),
            "indexing_s_mean": float(np.mean([c["indexing_s"] for c in cells])),
        }
    return agg


def _summary(result: dict[str, Any]) -> dict[str, Any]:
    k, systems = result["k"], result["systems"]
    epic_pap = systems["epic"][f"pap@{k}"]
    best_other = max((s for s in SYSTEMS if s != "epic"), key=lambda s: systems[s][f"pap@{k}"])
    ratio = result["store_everything_bytes"] / max(systems["epic"]["bytes_median"], 1)
    empty = [r["epic_empty_bytes"] for r in result["per_persona"] if "epic_empty_bytes" in r]
    per_persona_s = ((result["elapsed_s"] - result.get("setup_s", 0.0))
                     / max(len(result["personas"]), 1))
    return {
        "epic_pap_margin": epic_pap - systems[best_other][f"pap@{k}"],
        "heldout_pap": {name: systems[name].get(f"pap@{k}_heldout") for name in SYSTEMS},
        "best_other_system": best_other,
        "epic_above_all": epic_pap > systems[best_other][f"pap@{k}"],
        "epic_bytes_median": systems["epic"]["bytes_median"],
        "epic_bytes_max": systems["epic"]["bytes_max"],
        "epic_under_1mb": systems["epic"]["bytes_max"] <= 1_000_000,
        "store_everything_over_epic": ratio,
        "epic_empty_bytes_median": float(np.median(empty)) if empty else None,
        "same_format_over_epic": (result["store_everything_same_format"]["bytes"]
                                  / max(systems["epic"]["bytes_median"], 1)
                                  if result.get("store_everything_same_format") else None),
        "seconds_per_persona": per_persona_s,
        "projected_all_57_s": result.get("setup_s", 0.0) + per_persona_s * 57,
        "llm_verifier_projected_all_57_s": float(np.mean(
            [r["coarse_items"] for r in result["per_persona"]])) * 57 * LLM_SECONDS_PER_ITEM,
    }


def _same_format_text(result: dict[str, Any], s: dict[str, Any]) -> str:
    same, text = result.get("store_everything_same_format"), ""
    if same and same["vector_format"] != "float32":
        text += (f"; with {same['vector_format']} vectors like EPIC's, store-everything is "
                 f"{same['bytes'] / 1e6:.1f} MB = {s['same_format_over_epic']:.1f}x")
    if s.get("epic_empty_bytes_median"):
        text += (f". An empty EPIC file with a persona's preferences (no entry yet) is "
                 f"{s['epic_empty_bytes_median'] / 1e3:.0f} KB = store-everything / "
                 f"{result['store_everything_bytes'] / s['epic_empty_bytes_median']:.0f}")
    return text


def _heldout_line(heldout: dict[str, float | None], k: int) -> str:
    if heldout.get("epic") is None:
        return "- every gold preference is in the learned verifier's train split"
    others = {n: v for n, v in heldout.items() if n != "epic" and v is not None}
    best = max(others, key=lambda n: others[n])
    return (f"- questions whose preference the learned verifier never saw in training: EPIC "
            f"PAP@{k} {heldout['epic']:.3f} vs {others[best]:.3f} ({best}), margin "
            f"{heldout['epic'] - others[best]:+.3f}")


def render(result: dict[str, Any]) -> str:
    """The table and the target checks as text (markdown)."""
    k, s = result["k"], _summary(result)
    fmt = lambda v, f: "n/a" if v is None else format(v, f)  # noqa: E731
    rows = [[c["label"], fmt(c[f"pap@{k}"], ".3f"), fmt(c[f"hit@{k}"], ".3f"),
             fmt(c["routing_accuracy"], ".3f"), fmt(c["coverage"], ".2f"),
             f"{c['bytes_median'] / 1e6:.3f}", f"{c['retrieval_ms_median']:.2f}",
             f"{c['indexing_s_mean']:.1f}"] for c in result["systems"].values()]
    head = ["system", f"PAP@{k}", f"Hit@{k}", "routing", "coverage", "MB (median)",
            "retrieval ms", "indexing s"]
    lines = [common.table(rows, head), "",
             f"- {result['dataset']} on {result['corpus']} ({result['chunks']} chunks), "
             f"{len(result['personas'])} personas, tau {result['tau']}; "
             f"{_verifier_note(result['verifier'], None, result.get('instructions'))}",
             f"- EPIC PAP@{k} margin over the best other system ({s['best_other_system']}): "
             f"{s['epic_pap_margin']:+.3f} "
             f"({'above all' if s['epic_above_all'] else 'NOT above all'})",
             _heldout_line(s["heldout_pap"], k),
             f"- EPIC memory: median {s['epic_bytes_median'] / 1e6:.3f} MB, max "
             f"{s['epic_bytes_max'] / 1e6:.3f} MB per persona (target <= 1 MB: "
             f"{'met' if s['epic_under_1mb'] else 'not met'}); store-everything "
             f"{result['store_everything_bytes'] / 1e6:.1f} MB = "
             f"{s['store_everything_over_epic']:.1f}x EPIC (target >= 500x)"
             + _same_format_text(result, s),
             f"- elapsed {result['elapsed_s']:.0f} s ({s['seconds_per_persona']:.1f} s per "
             f"persona; all 57 projected {s['projected_all_57_s'] / 60:.0f} min; corpus embedded "
             f"once in {result['corpus_embed_seconds']:.0f} s, then cached"
             + ("" if "setup_s" in result else "; elapsed includes it when this run embedded it")
             + ")",
             f"- an LLM verifier at ~{LLM_SECONDS_PER_ITEM} s per coarse-filter survivor would "
             f"need ~{s['llm_verifier_projected_all_57_s'] / 3600:.1f} h for all 57 personas"]
    return "\n".join(lines)
