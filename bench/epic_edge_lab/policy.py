"""Memory-policy figures: the memory-use gate on PrefWiki, and compressed vectors' agreement.

    python -m epic_edge_lab.policy [--json OUT] [--models DIR]
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from epic_edge.background import background_questions, item_threshold
from epic_edge.datasets import load_prefwiki, load_sample_corpus, load_sample_persona
from epic_edge.memory import Memory
from epic_edge.models import model_dir
from epic_edge.profiles import load_profile
from epic_edge.protocols import Embedder
from epic_edge.question_gate import QuestionGate
from epic_edge.registry import create
from epic_edge.retrieval import uses_memory

THRESHOLDS = (0.10, 0.15, 0.20, 0.25, 0.30, 0.35)
QUANTILES = tuple(np.round(np.arange(0.80, 0.995, 0.01), 2))  # item-gate quantiles tried
NO_PREFERENCE = "no_preference.jsonl"  # in bench/judged/: questions that bear on no preference
# in a judged set's folder: everyday requests per persona that its preferences bear on without
# naming them ("implicit") and that none of them bears on ("unrelated"): checks of the gate
REQUESTS = {"implicit": "implicit_questions.jsonl", "unrelated": "unrelated_requests.jsonl"}


def no_preference_questions() -> list[str]:
    """The held-out memory-use policy set: questions that bear on no preference
    (bench/judged/), less the half the runtime ships as its background (epic_edge.background)."""
    from epic_edge_lab.relevance import data_dir

    path = data_dir() / NO_PREFERENCE
    background = set(background_questions())
    return [q for q in (json.loads(line)["question"] for line in
                        path.read_text(encoding="utf-8").splitlines() if line.strip())
            if q not in background]


def persona_requests(kind: str, root: Path | None = None) -> dict[int, list[str]]:
    """Per persona, the everyday requests of one REQUESTS kind, where the judged set has them:
    checks of the gate that take no part in its choice."""
    from epic_edge_lab.relevance import data_dir, read_jsonl

    by_persona: dict[int, list[str]] = {}
    for row in read_jsonl((root or data_dir()) / REQUESTS[kind]):
        by_persona.setdefault(int(row["persona"]), []).append(row["question"])
    return by_persona


def evidence(question_vectors: np.ndarray, pref_vectors: np.ndarray,
             item_vectors: np.ndarray, question_gate: QuestionGate | None = None,
             texts: list[str] | None = None) -> np.ndarray:
    """Per question: (closest preference cosine, best kept item cosine, the question gate's
    P(no preference bears), which reads the questions' `texts` too), the signals a memory-use
    decision reads; -1 where the memory holds no item, NaN where there is no question gate."""
    pref = (question_vectors @ pref_vectors.T).max(axis=1)
    item = ((question_vectors @ item_vectors.T).max(axis=1) if len(item_vectors)
            else np.full(len(question_vectors), -1.0))
    unrelated = (question_gate.probability(question_vectors, texts or [])
                 if question_gate is not None
                 else np.full(len(question_vectors), np.nan))
    return np.stack([pref, item, unrelated], axis=1).astype(np.float64)


def question_cut(retrieval: dict[str, Any]) -> float | None:
    """The threshold of the question gate a profile's [retrieval] names (None: none)."""
    gate = QuestionGate.named(retrieval.get("question_gate"))
    return None if gate is None else gate.threshold


def with_cut(rows: Any, background: Any, quantile: float | None,
             item_gate: float | None = None) -> np.ndarray:
    """Evidence rows plus the item cut in force for their memory: a fixed item_gate, else the
    `quantile` of the background questions' best-entry scores (`background` evidence rows)."""
    rows = np.asarray([[row[0], row[1], row[2] if len(row) > 2 and row[2] is not None
                        else np.nan] for row in rows], np.float64).reshape(-1, 3)
    if item_gate is not None:
        cut = float(item_gate)
    elif quantile is not None and len(background):
        cut = item_threshold(np.asarray([row[1] for row in background], np.float64), quantile)
    else:
        cut = np.inf
    return np.column_stack([rows[:, :2], np.full(len(rows), cut), rows[:, 2]])


def used(rows: np.ndarray, gate: float | None, question: float | None = None,
         below: float | None = None) -> np.ndarray:
    """Which rows (closest preference, best entry, item cut, the question gate's P) get
    memory under `gate` and the question gate's threshold `question` (None: off), applied
    below the closest-preference similarity `below`: the runtime's rule,
    epic_edge.retrieval.uses_memory, over every row at once."""
    return uses_memory(rows[:, 0], rows[:, 1], gate, rows[:, 2], rows[:, 3], question, below)


def choose_gate(own: dict[float, np.ndarray], none: dict[float, np.ndarray],
                min_refused: float = 0.80, grid: np.ndarray | None = None,
                question: float | None = None, below: float | None = None) -> dict[str, float]:
    """Memory is used when the closest preference >= gate OR the best kept item beats the
    memory's background cut at quantile q (rows per q: preference, best entry, cut).

    Picks, on the given rows, the (gate, q) that refuses memory to at least `min_refused` of
    the questions that bear on no preference and withholds it from the fewest of the personas'
    own questions (implicit questions included); ties go to more refusals. `question`,
    `below`: the question gate's threshold and similarity bound, in force throughout."""
    grid = np.round(np.arange(0.10, 0.65, 0.01), 2) if grid is None else grid
    best: dict[str, float] = {}
    for quantile in own:
        for gate in grid:
            refused = 1.0 - float(used(none[quantile], gate, question, below).mean())
            if refused < min_refused:
                continue
            withheld = 1.0 - float(used(own[quantile], gate, question, below).mean())
            if not best or (withheld, -refused) < (best["no_memory_own"],
                                                   -best["no_memory_none"]):
                best = {"gate": float(gate), "item_gate_quantile": float(quantile),
                        "no_memory_own": withheld, "no_memory_none": refused}
    return best


def gate_rates(embedder: Embedder, thresholds=THRESHOLDS) -> dict[str, Any]:
    """Share of questions that get no memory, for a persona's own questions and for the same
    questions asked of the next persona (index + 29, mod 57: another user's preferences)."""
    personas = load_prefwiki()
    prefs = [[b["preference"] for b in p["preference_blocks"]] for p in personas]
    questions = [[q["question"] for b in p["preference_blocks"] for q in b["queries"]]
                 for p in personas]
    pref_vecs = [embedder.embed(p) for p in prefs]
    own, other = [], []
    for i, qs in enumerate(questions):
        q_vecs = embedder.embed(qs)
        own += list((q_vecs @ pref_vecs[i].T).max(axis=1))
        other += list((q_vecs @ pref_vecs[(i + 29) % len(personas)].T).max(axis=1))
    own_a, other_a = np.array(own), np.array(other)
    return {
        "questions": len(own),
        "rows": [{"gate": t, "no_memory_own": float((own_a < t).mean()),
                  "no_memory_other_persona": float((other_a < t).mean())} for t in thresholds],
        "own_percentiles": np.percentile(own_a, [5, 25, 50, 75, 95]).round(3).tolist(),
        "other_percentiles": np.percentile(other_a, [5, 25, 50, 75, 95]).round(3).tolist(),
    }


def calibrate(per_persona: list[dict[str, Any]], retrieval: dict[str, Any],
              split_of=lambda p: "dev" if p % 2 == 0 else "test") -> dict[str, Any]:
    """The memory-use gate chosen on dev personas' evidence, and no-memory rates per split
    (personas' own questions; held-out questions that bear on no preference; everyday implicit
    and unrelated requests, checks that take no part in the choice) for it and for the profile's
    current setting."""
    personas = [p for p in per_persona if p.get("policy_evidence")]
    if not any(split_of(p["persona"]) == "dev" for p in personas):
        return {}

    wiki = load_prefwiki()

    def own_rows(persona: dict[str, Any], kind: str) -> list:
        """"own" lists PrefWiki's questions, then PrefEval's: "own:prefwiki" / "own:prefeval"."""
        rows, source = list(persona["policy_evidence"]["own"]), kind.partition(":")[2]
        cut = sum(len(b["queries"]) for b in wiki[persona["persona"]]["preference_blocks"])
        return {"": rows, "prefwiki": rows[:cut], "prefeval": rows[cut:]}[source]

    def rows(split: str, kind: str, quantile: float | None, item_gate: float | None = None
             ) -> np.ndarray:
        parts = [with_cut(own_rows(p, kind) if kind.startswith("own") else
                          p["policy_evidence"][kind], p["policy_evidence"]["background"],
                          quantile, item_gate)
                 for p in personas if split_of(p["persona"]) == split]
        return np.concatenate(parts) if parts else np.empty((0, 4))

    extra = tuple(kind for kind in REQUESTS
                  if all(kind in p["policy_evidence"] for p in personas))
    # the question gate is in force for every setting below
    question, below = question_cut(retrieval), retrieval.get("question_gate_below")
    chosen = choose_gate({q: rows("dev", "own", q) for q in QUANTILES},
                         {q: rows("dev", "none", q) for q in QUANTILES}, question=question,
                         below=below)
    settings = {"chosen on dev": (chosen.get("gate"), chosen.get("item_gate_quantile"), None),
                "profile": (retrieval.get("gate"), retrieval.get("item_gate_quantile"),
                            retrieval.get("item_gate"))}
    return {"chosen_on_dev": chosen, "rates": {
        name: {split: {kind: 1.0 - float(used(rows(split, kind, q, fixed), gate, question,
                                              below).mean())
                       for kind in ("own", "own:prefwiki", "own:prefeval", "none", *extra)}
                for split in ("dev", "test")}
        for name, (gate, q, fixed) in settings.items()}}


def compression(models: Path, formats=("float32", "float16", "int8")) -> dict[str, Any]:
    """Build the sample persona's memory (template verifier) once per vector format and
    compare top-5 entries with float32 over all of the persona's PrefWiki questions."""
    persona = load_sample_persona()
    questions = [q["question"] for b in load_prefwiki()[persona["persona_index"]]
                 ["preference_blocks"] for q in b["queries"]]
    corpus = load_sample_corpus()
    prof = load_profile("linux-cpu")
    embedder = create("embedder", prof.embedder, models)
    results: dict[str, Any] = {}
    top: dict[str, list[list[int]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for fmt in formats:
            with Memory.open(Path(tmp) / f"{fmt}.epic", prof, embedder=embedder,
                             verifier=create("verifier", {"backend": "template"}, models),
                             tau=prof.tau, vector_format=fmt) as memory:
                memory.add_preferences(persona["preferences"])
                memory.ingest(corpus)
                hits = [memory.retrieve(q, 5, gate=-1.0) for q in questions]
                top[fmt] = [[h.entry_id for h in hs] for hs in hits]
                fp = memory.footprint()
                results[fmt] = {"vectors_bytes": fp["vectors"], "total_bytes": fp["total"],
                                "entries": memory.info()["entries"]}
    for fmt in formats:
        overlap = [len(set(a) & set(b)) / max(len(b), 1) for a, b in zip(top[fmt], top["float32"])]
        results[fmt]["top5_overlap_with_float32"] = float(np.mean(overlap))
        results[fmt]["vectors_smaller_x"] = (results["float32"]["vectors_bytes"]
                                             / max(results[fmt]["vectors_bytes"], 1))
    return {"questions": len(questions), "formats": results}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m epic_edge_lab.policy", description=__doc__)
    p.add_argument("--models", type=Path, default=None)
    p.add_argument("--json", type=Path, default=None, help="write the figures as JSON")
    args = p.parse_args(argv)
    models = args.models or model_dir()
    embedder = create("embedder", load_profile("linux-cpu").embedder, models)
    gate = gate_rates(embedder)
    print(f"Memory-use gate on PrefWiki ({gate['questions']} questions, MiniLM):")
    print(f"  {'gate':>6} {'no memory: own prefs':>22} {'no memory: other persona':>26}")
    for row in gate["rows"]:
        print(f"  {row['gate']:>6.2f} {row['no_memory_own']:>22.1%} "
              f"{row['no_memory_other_persona']:>26.1%}")
    comp = compression(models)
    print(f"\nCompressed entry vectors (linux-cpu: the item's own; sample persona, "
          f"{comp['questions']} questions):")
    for fmt, r in comp["formats"].items():
        print(f"  {fmt:>8}: vectors {r['vectors_bytes']:>8,} B ({r['vectors_smaller_x']:.2f}x "
              f"smaller), file {r['total_bytes']:>8,} B, top-5 overlap with float32 "
              f"{r['top5_overlap_with_float32']:.3f}")
    if args.json:
        args.json.write_text(json.dumps({"gate": gate, "compression": comp}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
