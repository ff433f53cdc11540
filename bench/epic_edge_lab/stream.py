"""`bench stream`: batches arrive, preferences drift; memory bytes and PAP@5 after each step."""

from __future__ import annotations

import random
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from epic_edge.baseline import StoreEverything
from epic_edge.errors import InvalidInputError
from epic_edge.maintenance import Budget
from epic_edge.optional import optional_import
from epic_edge_lab import common, corpora, metrics
from epic_edge_lab.ray_bench import engine_cluster
from epic_edge_lab.replay import ReplayVerifier
from epic_edge_lab.systems import EpicMemory
from epic_edge_lab.vectors import CachedEmbedder, corpus_vectors


def run(*, dataset: str = "prefwiki", corpus: str | None = None, persona: int = 0,
        items: int = 12000, batches: int = 24, drift: float = 0.3, initial: int = 5,
        seed: int = 0, verifier: str | None = None, instructions: str = "template",
        profile: str = "linux-cpu",
        models: Path | None = None, tau: float | None = None, k: int = 5,
        plot: Path | None = None, progress: bool = True, log=print,
        embedder: Any = None, max_bytes: int | None = None,
        max_entries: int | None = None, engine: str = "local", address: str | None = None,
        workers: int = 2) -> dict[str, Any]:
    """Stream `items` chunks in `batches` steps; each step, with probability `drift`, one
    preference is added or removed (fixed `seed`). Returns the per-step JSON.

    `max_bytes` / `max_entries` give EPIC's memory a budget (Memory.set_budget) in place of the
    profile's: after each batch the preference holding the most entries gives up its least
    confident ones until it fits. engine "ray": the corpus
    is embedded and each batch's verdicts judged ahead on a Ray cluster, same figures."""
    if batches < 1 or items < batches:
        raise InvalidInputError("need at least one batch and one item per batch")
    loader, default_corpus = common.DATASETS[dataset]
    corpus = corpus or default_corpus
    prof, model_dir = common.profile_and_models(profile, models)
    tau = prof.tau if tau is None else float(tau)
    verifier = common.verifier_name(prof, verifier)
    prefs, questions = common.persona_questions(loader()[persona])
    emb = embedder or common.make_embedder(prof, model_dir)
    pool = corpora.load(corpus, limit=None if corpus != "chat" else 12_000)
    cluster = engine_cluster(engine, profile, model_dir, verifier, instructions, address,
                             workers, progress)
    vectors, _ = (cluster.corpus_vectors(corpus, pool, emb) if cluster else
                  corpus_vectors(corpus, pool, emb, corpora.data_dir() / "vectors",
                                 progress=progress))
    rng = random.Random(seed)
    order = rng.sample(range(len(pool)), min(items, len(pool)))
    cached = CachedEmbedder(emb, [pool[i].text for i in order], vectors[order])
    active = sorted(rng.sample(range(len(prefs)), min(initial, len(prefs))))
    steps, started = [], time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="epic-bench-stream-") as tmp:
        real = common.make_verifier(prof, model_dir, verifier, instructions)
        replay = ReplayVerifier(fallback=lambda: real) if cluster else None
        epic = EpicMemory(Path(tmp) / "stream.epic", prof, cached, replay or real, tau,
                          [prefs[j] for j in active])
        block_of = {p.id: j for p, j in zip(epic.prefs, active)}
        if max_bytes is not None or max_entries is not None:
            epic.memory.set_budget(max_entries=max_entries, max_bytes=max_bytes)
        budget = Budget.load(epic.memory.store)  # the profile's, unless given here
        everything = StoreEverything(Path(tmp) / "store-everything.sqlite", cached)
        stored: list[int] = []
        for step, chunk in enumerate(np.array_split(np.array(order), batches)):
            event = _drift(rng, drift, active, prefs, epic, block_of) if step else None
            batch = [pool[i] for i in chunk]
            if cluster is not None:
                steering = epic.memory.steering
                cluster.judged_ahead(real, batch, vectors[chunk], [(
                    [p.text for p in steering.preferences], steering.vectors)], cached, tau,
                    replay)
            epic.ingest(batch)
            everything.add(batch, vectors[chunk])
            stored.extend(int(i) for i in chunk)
            row = _score(epic, everything, vectors[stored], block_of, active, questions,
                         tau, k)
            row.update(step=step, items=len(stored), event=event,
                       active=[prefs[j][:60] for j in active])
            steps.append(row)
            log(f"  step {step}: {len(stored)} items, EPIC {row['epic_bytes'] / 1e6:.2f} MB "
                f"PAP {row['epic_pap']:.3f} | store-everything "
                f"{row['store_everything_bytes'] / 1e6:.2f} MB PAP "
                f"{row['store_everything_pap']:.3f}" + (f" | {event}" if event else ""))
        epic.close()
        everything.close()
        if cluster is not None:
            getattr(real, "close", lambda: None)()
            cluster.close()
    result = {"bench": "stream", "dataset": dataset, "corpus": corpus, "persona": persona,
              "seed": seed, "drift": drift, "verifier": verifier, "tau": tau, "k": k,
              "budget": {"max_bytes": budget.max_bytes, "max_entries": budget.max_entries},
              "steps": steps, "elapsed_s": time.perf_counter() - started,
              "engine": cluster.describe(replay) if cluster else {"name": "local"},
              "machine": common.machine()}
    result["summary"] = _summary(steps)
    if plot is not None:
        write_plot(result, plot)
        result["plot"] = str(plot)
    return result


def _drift(rng: random.Random, p: float, active: list[int], prefs: list[str],
           epic: EpicMemory, block_of: dict[int, int]) -> str | None:
    """With probability p, add an inactive preference or remove an active one."""
    if rng.random() >= p:
        return None
    inactive = [j for j in range(len(prefs)) if j not in active]
    if inactive and (len(active) <= 1 or rng.random() < 0.5):
        j = rng.choice(inactive)
        pref = epic.memory.add_preference(prefs[j])
        block_of[pref.id] = j
        active.append(j)
        active.sort()
        return f"added preference {j}"
    j = rng.choice(active)
    pid = next(pid for pid, b in block_of.items() if b == j)
    removed = epic.memory.remove_preference(pid)
    del block_of[pid]
    active.remove(j)
    epic.refresh()
    return f"removed preference {j} ({removed} entries)"


def _score(epic: EpicMemory, everything: StoreEverything, stored_vectors: np.ndarray,
           block_of: dict[int, int], active: list[int], questions: list[tuple[str, int]],
           tau: float, k: int) -> dict[str, Any]:
    """PAP@k over the questions whose gold preference is active, for both systems."""
    id_of = {b: pid for pid, b in block_of.items()}
    steering = epic.memory.steering
    pref_ids = [p.id for p in steering.preferences]
    links = [frozenset(pref_ids[j] for j in row)
             for row in metrics.assign_links(stored_vectors, steering.vectors, tau)]
    link_of = {text: links[i] for i, text in reversed(list(enumerate(everything._texts)))}
    epic_pap, se_pap = [], []
    for question, block in questions:
        if block not in id_of:
            continue
        gold = id_of[block]
        hits, _ = epic.retrieve(question, k, steer=True)
        epic_pap.append(metrics.pap_at_k(hits, gold, k))
        q = everything.embedder.embed([question])[0]
        raw = [(None, link_of.get(text, frozenset())) for _, text in everything.search(q, k)]
        se_pap.append(metrics.pap_at_k(raw, gold, k))
    return {"epic_bytes": epic.bytes(), "store_everything_bytes": everything.footprint(),
            "epic_entries": len(epic.memory.index), "epic_evicted": epic.evicted,
            "questions": len(epic_pap),
            "epic_pap": float(np.mean(epic_pap)) if epic_pap else float("nan"),
            "store_everything_pap": float(np.mean(se_pap)) if se_pap else float("nan")}


def _summary(steps: list[dict]) -> dict[str, Any]:
    first = steps[0]["epic_bytes"]
    settled = steps[min(3, len(steps) - 1):]
    epic_growth = steps[-1]["epic_bytes"] / max(first, 1)
    se_growth = steps[-1]["store_everything_bytes"] / max(steps[0]["store_everything_bytes"], 1)
    items = max(steps[-1]["items"] - steps[0]["items"], 1)

    def per_1000_items(key: str) -> float:
        return (steps[-1][key] - steps[0][key]) / items * 1000

    return {"epic_bytes_first": first, "epic_bytes_last": steps[-1]["epic_bytes"],
            "epic_bytes_peak": max(s["epic_bytes"] for s in steps),
            "epic_bytes_per_1000_items": per_1000_items("epic_bytes"),
            "store_everything_bytes_per_1000_items": per_1000_items("store_everything_bytes"),
            "epic_growth": epic_growth, "store_everything_growth": se_growth,
            "epic_flat_within_2x": all(s["epic_bytes"] <= 2 * first for s in settled),
            "epic_pap_mean": float(np.nanmean([s["epic_pap"] for s in steps])),
            "store_everything_pap_mean": float(np.nanmean([s["store_everything_pap"]
                                                           for s in steps])),
            "drift_events": sum(1 for s in steps if s["event"])}


def write_plot(result: dict[str, Any], path: Path) -> None:
    """Two panels: memory bytes per step (both systems) and PAP@k per step; drift marked."""
    optional_import("matplotlib", "lab", "the stream plot").use("Agg")
    plt = optional_import("matplotlib.pyplot", "lab", "the stream plot")
    steps = result["steps"]
    x = [s["step"] for s in steps]
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(8, 6.5), sharex=True)
    top.plot(x, [s["store_everything_bytes"] / 1e6 for s in steps], "o-", label="store-everything")
    top.plot(x, [s["epic_bytes"] / 1e6 for s in steps], "s-", label=f"EPIC ({result['verifier']})")
    budget = (result.get("budget") or {}).get("max_bytes")
    if budget:
        top.axhline(budget / 1e6, color="black", linestyle=":", label="EPIC byte budget")
    top.set_yscale("log")  # EPIC is ~200x smaller: on a linear axis it is a line at zero
    top.set_ylabel("memory on disk (MB, log scale)")
    top.legend()
    bottom.plot(x, [s["store_everything_pap"] for s in steps], "o-", label="store-everything")
    bottom.plot(x, [s["epic_pap"] for s in steps], "s-", label="EPIC")
    bottom.set_ylabel(f"PAP@{result['k']}")
    bottom.set_xlabel("step (one batch each)")
    for s in steps:
        if s["event"]:
            for ax in (top, bottom):
                ax.axvline(s["step"], color="grey", alpha=0.3, linestyle="--")
    fig.suptitle(f"{result['dataset']} persona {result['persona']}: streaming with preference "
                 f"drift (p={result['drift']}, seed {result['seed']})")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)


def render(result: dict[str, Any]) -> str:
    s = result["summary"]
    rows = [[str(r["step"]), str(r["items"]), f"{r['epic_bytes'] / 1e6:.3f}",
             f"{r['store_everything_bytes'] / 1e6:.3f}", f"{r['epic_pap']:.3f}",
             f"{r['store_everything_pap']:.3f}", r["event"] or ""] for r in result["steps"]]
    head = ["step", "items", "EPIC MB", "store-everything MB", "EPIC PAP", "SE PAP", "drift"]
    return "\n".join([common.table(rows, head), "",
                      f"- EPIC grew {s['epic_growth']:.1f}x from the first batch (flat within 2x "
                      f"after step 3: {'yes' if s['epic_flat_within_2x'] else 'no'}); "
                      f"store-everything grew {s['store_everything_growth']:.1f}x",
                      f"- growth per 1,000 items after the first batch: EPIC "
                      f"{s['epic_bytes_per_1000_items'] / 1e3:.1f} KB, store-everything "
                      f"{s['store_everything_bytes_per_1000_items'] / 1e3:.0f} KB; EPIC peak "
                      f"{s['epic_bytes_peak'] / 1e6:.3f} MB",
                      f"- mean PAP@{result['k']}: EPIC {s['epic_pap_mean']:.3f}, "
                      f"store-everything {s['store_everything_pap_mean']:.3f}; "
                      f"{s['drift_events']} drift events; verifier {result['verifier']}",
                      f"- EPIC budget: {_budget_text(result)}"])


def _budget_text(result: dict[str, Any]) -> str:
    budget = result.get("budget") or {}
    parts = [f"{budget['max_bytes']:,} bytes" if budget.get("max_bytes") else "",
             f"{budget['max_entries']} entries" if budget.get("max_entries") else ""]
    if not any(parts):
        return "none (the memory keeps every kept entry)"
    evicted = result["steps"][-1].get("epic_evicted", 0)
    return " and ".join(p for p in parts if p) + f"; {evicted} entries evicted over the stream"
