"""One lookup: embed, route, gate, steer, search, fetch; with the reason memory was (not) used."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from epic_edge.ranking import Evidence, fuse, weighted
from epic_edge.types import Hit, Preference

# entries looked at per hit asked for: an item filed under several preferences (the verifier's
# max_preferences_per_item) has an entry under each and is one hit, at its best-ranked entry
WIDEN = 4

if TYPE_CHECKING:
    from epic_edge.entry_index import EntryIndex
    from epic_edge.lexical import LexicalEvidence
    from epic_edge.protocols import Embedder
    from epic_edge.question_gate import QuestionGate
    from epic_edge.ranking import BrevityEvidence, ConfidenceEvidence
    from epic_edge.settings import MemorySettings
    from epic_edge.stages import Steering
    from epic_edge.store import MemoryStore


class Searched(Protocol):
    """What a lookup reads of a memory (epic_edge.memory.Memory is one)."""

    store: MemoryStore
    embedder: Embedder
    entry_index: EntryIndex
    steering: Steering
    lexical_evidence: LexicalEvidence
    confidence_evidence: ConfidenceEvidence
    brevity_evidence: BrevityEvidence

    @property
    def settings(self) -> MemorySettings: ...


@dataclass
class Retrieval:
    """What a lookup found, and why memory is or is not offered for this question."""

    hits: list[Hit]
    preference: Preference | None  # p*, the preference the question is closest to
    similarity: float  # E(q)·E(p*)
    used_memory: bool
    reason: str
    timings: dict[str, float] = field(default_factory=dict)


def lookup(
    memory: Searched,
    question: str,
    k: int,
    *,
    steer: bool = True,
    gate: float | None = None,
    item_gate: float | None = None,
    min_score: float | None = None,
    question_gate: QuestionGate | None = None,
    question_gate_below: float | None = None,
) -> Retrieval:
    """Gate: no memory when the question gate reads the question as one no preference bears
    on ("When's the plumber coming?") and its closest preference is below
    question_gate_below, or when E(q)·E(p*) < gate and no entry scores >=
    item_gate for the raw question (the evidence an implicit question leaves: "Where should we
    eat?" is far from "I am vegan" but close to a stored restaurant). Floor: hits below
    min_score drop."""
    timings: dict[str, float] = {}
    clock = [time.perf_counter()]

    def lap(step: str) -> None:
        clock.append(time.perf_counter())
        timings[step] = clock[-1] - clock[-2]

    if len(memory.entry_index) == 0:
        return Retrieval([], None, -1.0, False, "the memory holds no entries yet", timings)
    q = memory.embedder.embed([question])[0]
    lap("embed")
    settings = memory.settings
    easing = steer and settings.no_steering_from is not None
    raw = best_raw_score(memory, q) if easing else None
    weight = eased_weight(memory.steering.weight, raw, settings.ease_steering_from,
                          settings.no_steering_from) if easing else None
    query, preference, similarity = memory.steering.steer(q, weight)
    if not steer:
        query = q
    lap("steer")
    reason = f"closest preference at similarity {similarity:.3f}"
    if question_gate is not None:
        unrelated = float(question_gate.probability(q, question))
        if question_withholds(similarity, unrelated, question_gate.threshold,
                              question_gate_below):
            return Retrieval([], preference, similarity, False,
                             f"the question reads as one no preference bears on (question "
                             f"gate {unrelated:.3f} >= {question_gate.threshold:.3f})", timings)
    if gate is not None and similarity < gate:
        evidence = (raw if raw is not None else best_raw_score(memory, q)
                    ) if item_gate is not None else None
        if not uses_memory(similarity, evidence, gate, item_gate):
            found = "" if evidence is None else (f" and its best entry at {evidence:.3f} < "
                                                 f"{item_gate:.3f}")
            return Retrieval([], preference, similarity, False,
                             f"the question is far from every preference (closest similarity "
                             f"{similarity:.3f} < gate {gate:.3f}){found}", timings)
        reason = (f"its best entry scores {evidence:.3f} >= item_gate {item_gate:.3f} (closest "
                  f"preference at {similarity:.3f})")
    if steer and memory.steering.by == "text":  # after the gate: it costs an embedding
        query = memory.steering.search_vector(q, question, memory.embedder.embed)
        lap("steer by text")
    lifts = boosts(memory, question, q, steer)
    wide = min(len(memory.entry_index), k * WIDEN)
    if lifts:  # every entry's vector score, fused with the evidence (epic_edge.ranking)
        scores, ids = memory.entry_index.search(query, len(memory.entry_index))
        ranked, scores, ids = fuse(scores[0], ids[0], lifts, wide)
    else:
        scores, ids = memory.entry_index.search(query, wide)
        scores, ids = scores[0], ids[0]
        ranked = scores
    lap("search")
    hits = fetch_hits(memory, ranked, scores, ids, k, min_score)
    lap("fetch")
    if not hits:
        reason = (f"no entry scored at least {min_score:.3f}" if min_score is not None
                  else "no entry found")
        return Retrieval([], preference, similarity, False, reason, timings)
    return Retrieval(hits, preference, similarity, True, reason, timings)


def fetch_hits(memory: Searched, ranked: np.ndarray, scores: np.ndarray, ids: np.ndarray,
               k: int, min_score: float | None) -> list[Hit]:
    """The first k distinct items among the ranked entries, each at its best-ranked entry,
    read k entries at a time (one read when no item has a second entry among them)."""
    hits: list[Hit] = []
    items: set[int] = set()
    step = max(1, k)
    for start in range(0, len(ids), step):
        part = slice(start, start + step)
        rows = memory.store.entries_by_id(i for i in ids[part] if i >= 0)
        for rank_score, score, entry_id in zip(ranked[part], scores[part], ids[part]):
            row = rows.get(int(entry_id))
            if row is None or (min_score is not None and score < min_score):
                continue
            eid, instruction, confidence, item_text, source, pid, ptext, item_id, external = row
            if item_id in items:
                continue
            hits.append(Hit(eid, float(rank_score), instruction, item_text,
                            Preference(pid, ptext), source, float(confidence), item_id,
                            external, float(score)))
            items.add(item_id)
            if len(hits) == k:
                return hits
    return hits


def boosts(memory: Searched, question: str, q: np.ndarray, steer: bool) -> list[Evidence]:
    """The weighted evidence the memory's ranking adds to each entry's vector score (see
    `weighted`): lexical x the question's BM25 (divided by the best one); confidence x the
    entry's confidence x the steering weight of its preference for `q` (steered lookups only);
    minus brevity x the entry's shortfall."""
    found = []
    setting = memory.settings.ranking()
    if setting["lexical"]:
        ids, bm25 = memory.lexical_evidence.scores(memory.store, memory.entry_index, question)
        found.append((ids, weighted(setting, bm25=bm25)))
    if steer and setting["confidence"] and len(memory.steering):
        steering = memory.steering
        ids, lifted = memory.confidence_evidence.scores(
            memory.store, memory.entry_index, np.array([p.id for p in steering.preferences]),
            steering.weights(q))
        found.append((ids, weighted(setting, lifted=lifted)))
    if setting["brevity"]:
        ids, short = memory.brevity_evidence.scores(memory.store, memory.entry_index)
        found.append((ids, weighted(setting, short=short)))
    return found


def eased_weight(weight: float, best: float, ease_from: float | None, off_from: float) -> float:
    """Steering that backs off where the raw question already finds its entries: the full
    `weight` while its best entry scores under `ease_from`, none from `off_from` on, linear
    between (no `ease_from`: a step at `off_from`)."""
    start = off_from if ease_from is None else min(ease_from, off_from)
    if best < start:
        return weight
    if best >= off_from or off_from <= start:
        return 0.0
    return weight * (off_from - best) / (off_from - start)


def uses_memory(similarity: Any, best_entry: Any, gate: float | None, item_gate: Any,
                unrelated: Any = None, question_cut: float | None = None,
                question_below: float | None = None) -> Any:
    """The memory-use decision: the question gate's P(no preference bears) `unrelated` stays
    under `question_cut` (or the closest preference reaches `question_below`), and the closest
    preference passes `gate` or the best entry for the raw question passes `item_gate` (None
    switches a test off; no gate: always, the question gate too). Scalars for one lookup, or
    numpy arrays of recorded evidence (the bench decides them all at once)."""
    if gate is None:
        return np.ones(np.shape(similarity), dtype=bool) if np.ndim(similarity) else True
    by_entry = item_gate is not None and best_entry is not None and best_entry >= item_gate
    return ((similarity >= gate) | by_entry) & ~question_withholds(
        similarity, unrelated, question_cut, question_below)


def question_withholds(similarity: Any, unrelated: Any, cut: float | None,
                       below: float | None = None) -> Any:
    """The question gate's part of the decision: its P(no preference bears) `unrelated`
    reaches `cut` while the closest preference is below `below` (None: at any similarity).
    Never without a gate or a reading (None, or NaN where none was recorded). Numpy bools, for
    one lookup or an array of recorded evidence."""
    if cut is None or unrelated is None:
        return np.zeros(np.shape(similarity), dtype=bool) if np.ndim(similarity) else np.False_
    withheld = np.asarray(unrelated, np.float64) >= cut
    if below is not None:
        withheld = withheld & (np.asarray(similarity) < below)
    return withheld


def best_raw_score(memory: Searched, q: np.ndarray) -> float:
    """The best entry's score for the unsteered question vector (-1 for an empty memory)."""
    return memory.entry_index.best_score(q)
