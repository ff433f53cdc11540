"""`bench personal`: a fresh memory per persona over its own labelled stream; what it kept, how
it answers beside store-everything and equal-size recency and random buffers, per byte budget."""

from __future__ import annotations

import re
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from epic_edge.baseline import StoreEverything
from epic_edge.crypto import Sealer
from epic_edge.errors import InvalidInputError
from epic_edge.memory import Memory
from epic_edge.retrieval import best_raw_score
from epic_edge.types import Item
from epic_edge.vectors import bytes_per_vector
from epic_edge_lab import common, personal_data
from epic_edge_lab import personal_metrics as pm
from epic_edge_lab.systems import Borrowed
from epic_edge_lab.vectors import CachedEmbedder

SYSTEMS = ("epic", "epic-unsteered", "epic-ungated", "store-everything", "recency", "random")
PROFILE_BUDGET = "profile"  # the profile's own [budget] (the sparse regime: far above 60 items)
NO_BUDGET = "none"
UNITS = {"": 1, "b": 1, "kb": 1_000, "mb": 1_000_000, "gb": 1_000_000_000}


def parse_budgets(spec: str) -> list[str | int]:
    """"profile,8000,16KB,0.4MB,none" -> ["profile", 8000, 16000, 400000, "none"]."""
    out: list[str | int] = []
    for part in (p.strip().lower() for p in str(spec).split(",")):
        if part in (PROFILE_BUDGET, NO_BUDGET):
            out.append(part)
            continue
        m = re.fullmatch(r"(\d+(?:\.\d*)?|\.\d+)\s*([kmg]?b?)", part)
        if not m or float(m.group(1)) * UNITS[m.group(2)] < 1:
            raise InvalidInputError(f"bad --budgets entry {part!r}; use bytes (8000, 16KB, "
                                    "0.4MB), profile or none, comma-separated")
        out.append(int(round(float(m.group(1)) * UNITS[m.group(2)])))
    return list(dict.fromkeys(out))


def item_bytes(item: dict[str, Any], vector_format: str, dim: int) -> int:
    """What one item costs a memory: its stored (packed) text, kind and id as the footprint
    counts them (epic_edge.schema.FOOTPRINT_SQL) and one vector in the memory's format."""
    text = Sealer().seal(_clean(item["text"]))
    size = len(text.encode("utf-8")) if isinstance(text, str) else len(text)
    return size + len(str(item["kind"])) + len(str(item["id"])) + 16 + bytes_per_vector(
        vector_format, dim)


def run(data: Path | None = None, split: str = "dev", *, budgets: str = PROFILE_BUDGET,
        profile: str = "linux-cpu", models: Path | None = None, k: int = 5, batch: int = 8,
        seed: int = 0, progress: bool = True, embedder: Any = None, verifier: Any = None,
        log=print) -> dict[str, Any]:
    """Every persona of `split` under every budget; the per-persona rows and pooled figures."""
    started = time.perf_counter()
    if k < 1 or batch < 1:
        raise InvalidInputError("k and --batch must be at least 1")
    chosen = parse_budgets(budgets)
    personas = personal_data.load(data, split)
    prof, model_dir = common.profile_and_models(profile, models)
    cached = CachedEmbedder(embedder or common.make_embedder(prof, model_dir))
    judge = verifier or common.make_verifier(prof, model_dir, None)
    fmt = str((prof.index or {}).get("vectors", "float32"))
    source = data or personal_data.default_dir()
    log(f"bench personal: {len(personas)} {split} personas from {source}, "
        f"profile {prof.name}, budgets {', '.join(map(str, chosen))}, batches of {batch}")
    rows: dict[str, list[dict[str, Any]]] = {str(b): [] for b in chosen}
    try:
        with tempfile.TemporaryDirectory(prefix="epic-bench-personal-") as tmp:
            for persona in tqdm(personas, desc="personas", unit="persona", disable=not progress):
                for budget, row in run_persona(persona, chosen, prof, cached, judge, Path(tmp),
                                               k, batch, seed, fmt).items():
                    rows[budget].append(row)
    finally:
        if verifier is None and hasattr(judge, "close"):
            judge.close()
    return {"bench": "personal", "data": str(data or personal_data.default_dir()),
            "split": split, "profile": prof.name, "embedder": cached.fingerprint,
            "verifier": common.verifier_name(prof, None), "tau": prof.tau, "k": k,
            "batch": batch, "seed": seed, "vector_format": fmt, "systems": list(SYSTEMS),
            "personas": [p.number for p in personas], "budgets": [str(b) for b in chosen],
            "profile_budget": dict(prof.budget or {}),
            "per_budget": {b: {"summary": pm.summarize(r, SYSTEMS), "per_persona": r}
                           for b, r in rows.items()},
            "elapsed_s": time.perf_counter() - started, "machine": common.machine()}


def run_persona(persona: personal_data.Persona, budgets: list[str | int], prof: Any,
                embedder: CachedEmbedder, verifier: Any, root: Path, k: int, batch: int,
                seed: int, fmt: str) -> dict[str, dict[str, Any]]:
    """One persona under each budget: a fresh memory fed its stream in time order."""
    ids = [str(item["id"]) for item in persona.items]
    vectors = embedder.embed([_clean(item["text"]) for item in persona.items])
    questions = embedder.embed([q.text for q in persona.questions])
    sizes = {i: item_bytes(item, fmt, embedder.dim) for i, item in zip(ids, persona.items)}
    everything = StoreEverything(root / f"p{persona.number}-everything.sqlite", embedder)
    everything.add([_item(item) for item in persona.items], vectors)
    se_file = everything.footprint()
    everything.close()
    out = {}
    for budget in budgets:
        t0 = time.perf_counter()
        path = root / f"p{persona.number}-{budget}.epic"
        memory = Memory.open(path, prof, embedder=embedder, verifier=Borrowed(verifier))
        try:
            if budget != PROFILE_BUDGET:
                memory.set_budget(max_bytes=None if budget == NO_BUDGET else int(budget))
            row = _measure(persona, memory, ids, vectors, questions, sizes, k, batch,
                           seed + persona.number)
        finally:
            memory.close()
        for leftover in root.glob(f"{path.name}*"):
            leftover.unlink()
        row["bytes"].update(store_everything_file=se_file,
                            store_everything_payload=sum(sizes.values()))
        row["seconds"] = time.perf_counter() - t0
        out[str(budget)] = row
    return out


def _measure(persona: personal_data.Persona, memory: Memory, ids: list[str],
             vectors: np.ndarray, questions: np.ndarray, sizes: dict[str, int], k: int,
             batch: int, seed: int) -> dict[str, Any]:
    prefs = memory.add_preferences(list(persona.preferences.values()))
    pref_of = {p.id: key for p, key in zip(prefs, persona.preferences)}
    evicted = sum(s.evicted for s in memory.ingest_batches(
        [_item(item) for item in persona.items], batch))
    item_of, kept = _entries(memory, pref_of)
    parts = memory.footprint()
    payload = sum(parts[part] for part in ("items", "instructions", "vectors"))
    buffers = {"recency": pm.recency_buffer(ids, sizes, payload),
               "random": pm.random_buffer(ids, sizes, payload, seed)}
    where = {i: n for n, i in enumerate(ids)}
    rows = []
    asks = memory.question_gate
    for question, qv in zip(persona.questions, questions):
        found = memory.lookup(question.text, k)
        ranked = {"epic": [item_of[h.entry_id] for h in found.hits],
                  "epic-unsteered": [item_of[h.entry_id] for h in
                                     memory.lookup(question.text, k, steer=False).hits],
                  "epic-ungated": [item_of[h.entry_id] for h in
                                   memory.lookup(question.text, k, gate=-1.0).hits],
                  "store-everything": pm.cosine_top(qv, vectors, ids, k)}
        for name, held in buffers.items():
            rows_of = [where[i] for i in held]
            ranked[name] = pm.cosine_top(qv, vectors[rows_of], held, k)
        rows.append({"id": question.id, "prefs": list(question.prefs),
                     "answers": list(question.answers), "used_memory": bool(found.used_memory),
                     "held": pm.recall_at_k(list(kept), question.answers, len(kept)),
                     # the gate's evidence: closest preference, best entry for the raw
                     # question, the question gate's P(no preference bears) (None: no gate)
                     "evidence": [found.similarity, best_raw_score(memory, qv),
                                  None if asks is None else
                                  float(asks.probability(qv, question.text))],
                     "ranked": ranked,
                     "recall": {name: pm.recall_at_k(r, question.answers, k)
                                for name, r in ranked.items()}})
    return {"persona": persona.number, "name": persona.name,
            "keep": pm.keep_figures(persona, kept),
            "questions": pm.question_figures(rows, SYSTEMS), "per_question": rows,
            "kept": {item: sorted(p) for item, p in kept.items()}, "evicted": evicted,
            "gate": memory.settings.gate, "item_cut": memory.item_gate_now(),
            "question_cut": None if asks is None else asks.threshold,
            "question_below": memory.settings.question_gate_below,
            "buffers": {name: len(held) for name, held in buffers.items()},
            "bytes": {"epic_file": int(parts["total"]), "epic_payload": int(payload),
                      "recency_payload": sum(sizes[i] for i in buffers["recency"]),
                      "random_payload": sum(sizes[i] for i in buffers["random"])}}


def _entries(memory: Memory, pref_of: dict[int, str]
             ) -> tuple[dict[int, str], dict[str, set[str]]]:
    """(entry id -> item id, item id -> persona preference ids its entries are filed under);
    a chunk's id "<id>#<n>" counts as its item's."""
    rows = memory.store.query("SELECT e.id, i.external_id, e.preference_id FROM entries e "
                              "JOIN items i ON i.id = e.item_id")
    item_of, kept = {}, {}
    for entry_id, external, pid in rows:
        item = str(external).split("#", 1)[0]
        item_of[int(entry_id)] = item
        kept.setdefault(item, set()).add(pref_of[int(pid)])
    return item_of, kept


def _item(item: dict[str, Any]) -> Item:
    return Item(_clean(item["text"]), str(item["kind"]), str(item["id"]))


def _clean(text: str) -> str:
    return " ".join(str(text).split())  # as epic_edge.items cleans it, so vectors are shared
