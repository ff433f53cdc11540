"""`epic-edge demo`: the main job on the embedded sample persona and Wikipedia corpus."""

from __future__ import annotations

import statistics
import tempfile
from pathlib import Path

from tqdm import tqdm

from epic_edge.baseline import StoreEverything
from epic_edge.cli.common import add_profile_options, human_bytes, parser
from epic_edge.datasets import load_sample_corpus, load_sample_persona
from epic_edge.memory import Memory
from epic_edge.retrieval import Retrieval
from epic_edge.types import BatchStats

STAGES = ("embed", "filter", "verify", "embed_instructions", "write")


def _show(label: str, found: Retrieval, width: int = 110) -> None:
    print(f"  {label}:")
    if not found.hits:
        print(f"    (no memory: {found.reason})")
    for n, hit in enumerate(found.hits, 1):
        print(f"    {n}. [{hit.score:.3f}] {hit.source.rsplit('/', 1)[-1] or 'item'}"
              f" <- preference: {hit.preference.text[:60]}")
        print(f"       instruction: {hit.instruction[:width]}")


def _ms(values: list[float]) -> str:
    return f"{1000 * statistics.median(values):8.2f} ms" if values else "       n/a"


def main(argv: list[str]) -> int:
    p = parser("demo", "Build a memory for the sample persona (PrefWiki persona 0) from the "
                       "shipped Wikipedia sample corpus, then answer its questions with and "
                       "without steering, and compare the memory with storing every item.")
    p.add_argument("--memory", type=Path, default=None,
                   help="memory file to build (default: a temporary file, removed at the end)")
    p.add_argument("--limit", type=int, default=None, help="ingest only the first N items")
    p.add_argument("--questions", type=int, default=4, help="questions to show (4)")
    p.add_argument("-k", type=int, default=3, help="entries shown per question (3)")
    p.add_argument("--batch-size", type=int, default=16, help="items per ingest batch (16)")
    add_profile_options(p)
    args = p.parse_args(argv)

    persona, corpus = load_sample_persona(), load_sample_corpus()[: args.limit]
    with tempfile.TemporaryDirectory(prefix="epic-edge-demo-") as tmp:
        path = args.memory or Path(tmp) / "demo.epic"
        print(f"epic-edge demo: persona {persona['persona_index']} of {persona['dataset']}, "
              f"{len(persona['preferences'])} preferences, {len(corpus)} Wikipedia passages")
        with Memory.open(path, args.profile, model_dir=args.models) as memory:
            memory.add_preferences(persona["preferences"])
            batches = _ingest(memory, corpus, args.batch_size)
            baseline = StoreEverything(Path(tmp) / "store-everything.sqlite", memory.embedder)
            baseline.add(corpus)
            query_times = _questions(memory, persona, args.questions, args.k)
            _report(memory, baseline.footprint(), batches, query_times, len(corpus))
            baseline.close()
    return 0


def _ingest(memory: Memory, corpus: list, batch_size: int) -> list[BatchStats]:
    batches = []
    with tqdm(total=len(corpus), desc="ingest", unit="item") as bar:
        for stats in memory.ingest_batches(corpus, batch_size):
            batches.append(stats)
            bar.update(stats.seen)
            bar.set_postfix(kept=sum(b.kept for b in batches))
    return batches


def _questions(memory: Memory, persona: dict, count: int, k: int) -> dict[str, list[float]]:
    times: dict[str, list[float]] = {}
    prefs = persona["preferences"]
    for q in persona["questions"][:count]:
        print(f"\nQ: {q['question']}\n   (gold preference: {prefs[q['gold_preference_index']]})")
        _show("without steering", memory.lookup(q["question"], k, steer=False))
        found = memory.lookup(q["question"], k)
        _show("with steering (EPIC)", found)
        for step, secs in found.timings.items():
            times.setdefault(step, []).append(secs)
    return times


def _report(memory: Memory, baseline_bytes: int, batches: list[BatchStats],
            query_times: dict[str, list[float]], n_items: int) -> None:
    total = BatchStats()
    for b in batches:
        total.merge(b)
    fp = memory.footprint()
    print("\nMemory")
    print(f"  kept {total.kept} of {n_items} items as {memory.info()['entries']} entries; "
          f"{total.passed_filter} passed the coarse filter (tau {memory.tau}); "
          f"{total.llm_calls} LLM calls ({total.llm_calls / max(n_items, 1):.2f} per item)")
    parts = ", ".join(f"{k} {human_bytes(v)}" for k, v in fp.items() if k != "total")
    print(f"  EPIC memory file:      {human_bytes(fp['total']):>10}  ({parts})")
    print(f"  store-everything file: {human_bytes(baseline_bytes):>10}  "
          f"({baseline_bytes / max(fp['total'], 1):.1f}x larger)")
    print("\nPer-stage time, median over ingest batches, per item seen")
    for stage in STAGES:
        values = [b.seconds.get(stage, 0.0) / b.seen for b in batches if b.seen]
        print(f"  {stage:<20}{_ms(values)}")
    verify = [b.seconds["verify"] / b.verified for b in batches if b.verified]
    print(f"  {'verify per verified item':<20}{_ms(verify)}")
    print("Per-query time, median")
    for step in ("embed", "steer", "search", "fetch"):
        print(f"  {step:<20}{_ms(query_times.get(step, []))}")
    total_q = [sum(parts) for parts in zip(*query_times.values())]
    print(f"  {'total':<20}{_ms(total_q)}")
