"""`bench latency`: per-query and per-item component breakdown (the paper's Table 3 rows)."""

from __future__ import annotations

import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from epic_edge import measuring
from epic_edge.datasets import load_prefwiki, load_sample_corpus, load_sample_persona
from epic_edge.measuring import summarize
from epic_edge.memory import Memory
from epic_edge.stages import normalize_rows
from epic_edge.types import BatchStats

QUERY_ROWS = ("embed", "steer", "search", "total", "fetch", "reference_total", "steer_warm",
              "question_gate")
ITEM_ROWS = ("embed", "filter", "verify", "embed_instructions", "index", "write", "total")
RANKING = ("hedge", "steer_weight", "steer_by", "lexical", "confidence", "brevity")


def reference_retrieve(memory: Memory, question: str, preferences: list[str], k: int,
                       ) -> dict[str, float]:
    """The paper's reference retrieval path: re-embeds every preference for every query."""
    t0 = time.perf_counter()
    vectors = memory.embedder.embed([question, *preferences])
    t1 = time.perf_counter()
    q, prefs = vectors[0], vectors[1:]
    steered = normalize_rows(q + prefs[int(np.argmax(prefs @ q))])
    t2 = time.perf_counter()
    memory.index.search(steered.reshape(1, -1), k)
    t3 = time.perf_counter()
    return {"embed": t1 - t0, "steer": t2 - t1, "search": t3 - t2, "total": t3 - t0}


def run(*, profile: str = "linux-cpu", models: Path | None = None, verifier: str | None = None,
        items: int = 48, batch_size: int = 8, runs: int = 200, warmup: int = 10, k: int = 5,
        log=print, embedder: Any = None, embed_threads: int | None = None,
        llm_threads: int | None = None) -> dict[str, Any]:
    """Build a memory from the sample corpus with the profile's backends, then time queries.

    `embed_threads` / `llm_threads` override the profile's thread counts (on a shared or
    small machine one thread per runtime often beats oversubscribed thread pools).
    """
    prof, model_dir = measuring.profile_and_models(profile, models)
    if embed_threads is not None:
        prof = replace(prof, embedder={**prof.embedder, "threads": embed_threads})
    if llm_threads is not None and prof.verifier:
        prof = replace(prof, verifier={**prof.verifier, "threads": llm_threads})
    persona = load_sample_persona()
    questions = [q["question"] for block in load_prefwiki()[persona["persona_index"]]
                 ["preference_blocks"] for q in block["queries"]]
    corpus = load_sample_corpus()
    with tempfile.TemporaryDirectory(prefix="epic-bench-latency-") as tmp:
        t0 = time.perf_counter()
        ver = measuring.make_verifier(prof, model_dir, verifier)
        verifier_name = verifier or prof.verifier.get("backend", "template")
        # no explicit embedder: the memory loads the profile's own with the ranking calibrated
        # for it, as an app would (one of another model runs the paper's steering, evidence off)
        memory = Memory.open(Path(tmp) / "latency.epic", prof, embedder=embedder, verifier=ver,
                             model_dir=model_dir)
        load_s = time.perf_counter() - t0
        with memory:
            ranking = {key: getattr(memory.settings, key) for key in RANKING}
            memory.add_preferences(persona["preferences"])
            log(f"bench latency: ingesting {items} items with verifier {verifier_name} ...")
            batches = list(memory.ingest_batches(corpus[:items], batch_size))
            rest = corpus[items:]
            if rest:  # fill the index to the demo's size with the (fast) template verifier
                memory._verifier = measuring.make_verifier(prof, model_dir, "template")
                memory.ingest(rest, 64)
            per_item = _item_rows(batches)
            log(f"bench latency: {runs} queries after {warmup} warm-up ...")
            per_query = _query_rows(memory, questions, persona["preferences"], runs, warmup, k)
            entries = len(memory.index)
    result = {
        "bench": "latency", "profile": prof.name, "embedder": prof.embedder.get("backend"),
        "verifier": verifier_name, "index": (prof.index or {}).get("backend", "numpy"),
        "ranking": ranking,
        "preferences": len(persona["preferences"]), "index_entries": entries,
        "items_timed": items, "batch_size": batch_size, "runs": runs, "warmup": warmup,
        "embed_threads": prof.embedder.get("threads"),
        "llm_threads": (prof.verifier or {}).get("threads"), "load_s": load_s,
        "per_query": per_query, "per_item": per_item,
        "peak_rss_mb": measuring.peak_rss_mb(), "machine": measuring.machine(),
    }
    ours, ref = per_query["total"]["median_ms"], per_query["reference_total"]["median_ms"]
    result["summary"] = {
        "retrieval_median_ms": ours, "reference_median_ms": ref,
        "reference_over_ours": ref / ours if ours else float("nan"),
        "steer_median_ms": per_query["steer"]["median_ms"],
        "steer_warm_median_ms": per_query["steer_warm"]["median_ms"],
        "retrieval_target_3ms_met": ours <= 3.0,
        "steer_target_0.02ms_met": per_query["steer"]["median_ms"] <= 0.02,
    }
    return result


def _query_rows(memory: Memory, questions: list[str], prefs: list[str], runs: int,
                warmup: int, k: int) -> dict[str, dict[str, float]]:
    """Each path runs back to back (warm-up, then `runs` queries), as an app asking questions
    would; interleaving them would let one path's model weights evict the other's caches."""
    samples: dict[str, list[float]] = {row: [] for row in QUERY_ROWS}
    for n in range(warmup + runs):
        timings: dict[str, float] = {}
        # the gate off: every query runs the whole path (a withheld one stops after steering)
        memory.retrieve(questions[n % len(questions)], k, timings=timings, gate=-1.0)
        if n >= warmup:
            # a profile that steers by text embeds again past the gate: part of its steering
            timings["steer"] += timings.get("steer by text", 0.0)
            for step in ("embed", "steer", "search", "fetch"):
                samples[step].append(timings[step])
            samples["total"].append(timings["embed"] + timings["steer"] + timings["search"])
    for n in range(warmup + runs):
        ref = reference_retrieve(memory, questions[n % len(questions)], prefs, k)
        if n >= warmup:
            samples["reference_total"].append(ref["total"])
    query = memory.embedder.embed([questions[0]])[0]
    for n in range(warmup + runs):  # steering alone, caches warm: its cost without the embed's
        t0 = time.perf_counter()
        memory.steering.steer(query)
        if n >= warmup:
            samples["steer_warm"].append(time.perf_counter() - t0)
    asks = getattr(memory, "question_gate", None)
    for n in range(warmup + runs if asks is not None else 0):  # the gate that runs first
        t0 = time.perf_counter()
        asks.probability(query, questions[0])
        if n >= warmup:
            samples["question_gate"].append(time.perf_counter() - t0)
    return {row: summarize(values) for row, values in samples.items()
            if values or row != "question_gate"}


def _item_rows(batches: list[BatchStats]) -> dict[str, Any]:
    rows: dict[str, Any] = {}
    seen = [b for b in batches if b.seen]
    for stage in ITEM_ROWS[:-1]:
        rows[stage] = summarize([b.seconds.get(stage, 0.0) / b.seen for b in seen])
    rows["total"] = summarize([sum(v for s, v in b.seconds.items() if s != "index") / b.seen
                               for b in seen])  # "index" is inside "write"
    verified = [b for b in seen if b.verified]
    rows["verify_per_verified_item"] = summarize([b.seconds["verify"] / b.verified
                                                  for b in verified])
    calls = [b for b in seen if b.llm_calls]
    rows["verify_per_llm_call"] = summarize([b.seconds["verify"] / b.llm_calls for b in calls])
    total = BatchStats()
    for b in seen:
        total.merge(b)
    rows["counts"] = {"items": total.seen, "passed_filter": total.passed_filter,
                      "kept": total.kept, "entries": total.entries_added,
                      "llm_calls": total.llm_calls,
                      "llm_calls_per_item": total.llm_calls / max(total.seen, 1)}
    return rows


def render(result: dict[str, Any]) -> str:
    q, it, s = result["per_query"], result["per_item"], result["summary"]
    row = lambda name, c: [name, f"{c['median_ms']:.3f}", f"{c['p95_ms']:.3f}", str(c["n"])]  # noqa: E731
    head = ["per query", "median ms", "p95 ms", "n"]
    names = {"embed": "embed query", "steer": "steering", "search": "index search",
             "total": "total (embed + steer + search)", "fetch": "fetch entries (SQLite)",
             "reference_total": "paper reference path (re-embeds preferences)",
             "steer_warm": "steering alone, back to back (warm caches)",
             "question_gate": "question gate alone, back to back (warm caches)"}
    query_table = measuring.table([row(names[n], q[n]) for n in names if n in q], head)
    item_names = {"embed": "embed item", "filter": "coarse filter",
                  "verify": "fine verification (amortised)",
                  "verify_per_verified_item": "fine verification per verified item",
                  "verify_per_llm_call": "fine verification per LLM call",
                  "embed_instructions": "embed instructions", "index": "index add",
                  "write": "write (SQLite, incl. index add)", "total": "total per item"}
    item_table = measuring.table([row(item_names[n], it[n]) for n in item_names],
                              ["per ingested item", "median ms", "p95 ms", "batches"])
    c = it["counts"]
    return "\n".join([
        query_table, "", item_table, "",
        f"- profile {result['profile']}, verifier {result['verifier']}, index {result['index']}, "
        f"{result['preferences']} preferences, {result['index_entries']} entries in the index; "
        f"threads: embedder {result.get('embed_threads')}, LLM {result.get('llm_threads')}",
        f"- ranking timed: {_ranking(result.get('ranking'))}",
        f"- {c['items']} items timed: {c['passed_filter']} passed the coarse filter, "
        f"{c['kept']} kept, {c['llm_calls']} LLM calls ({c['llm_calls_per_item']:.2f} per item)",
        f"- retrieval median {s['retrieval_median_ms']:.2f} ms (target <= 3 ms: "
        f"{'met' if s['retrieval_target_3ms_met'] else 'not met'}); reference path "
        f"{s['reference_median_ms']:.2f} ms = {s['reference_over_ours']:.1f}x ours",
        f"- steering median {s['steer_median_ms']:.4f} ms (target <= 0.02 ms: "
        f"{'met' if s['steer_target_0.02ms_met'] else 'not met'}; right after the query "
        f"embedding, whose weights have flushed the CPU caches); warm, back to back "
        f"{s['steer_warm_median_ms']:.4f} ms",
        f"- peak RSS {result['peak_rss_mb']:.0f} MiB; model load {result['load_s']:.1f} s",
        *([f"- machine: {measuring.machine_line(result['machine'])}"]
          if result.get("machine") else []),
    ])


def _ranking(ranking: dict[str, Any] | None) -> str:
    """The ranking settings a run timed, in words ("not recorded" for runs before they were)."""
    if ranking is None:
        return "not recorded"
    on = [f"{key} {value}" for key, value in ranking.items()
          if value is not None and key not in ("steer_weight", "steer_by")]
    steering = f"steering by {ranking['steer_by']}, weight {ranking['steer_weight']}"
    return (f"{steering}; {', '.join(on)}" if on
            else f"{steering}; every evidence off (the paper's ranking)")
