"""Where the judged passages that EPIC's memory lacks were lost: the coarse filter, the
verifier, or the budget (kept, then evicted): which stage caps what a ranking can reach."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from epic_edge.stages import coarse_filter, fine_verify
from epic_edge.types import Item, Preference
from epic_edge_lab.judged_metrics import Labels
from epic_edge_lab.relevance import Question

FATES = ("memory", "evicted", "verifier", "coarse")


def passage_fates(pids: Iterable[str], memory_pids: set[str], index_of: Mapping[str, int],
                  items: Sequence[Item], vectors: np.ndarray, prefs: Sequence[Preference],
                  pref_vectors: np.ndarray, tau: float, verifier: Any) -> dict[str, str]:
    """Each corpus passage's fate in one persona's memory, as its ingest decided it: in the
    memory, kept by the verifier and then evicted by the budget, not kept by the verifier,
    or dropped by the coarse filter. Passages not in this corpus are left out."""
    out: dict[str, str] = {}
    for pid in pids:
        if pid in memory_pids:
            out[pid] = "memory"
        elif (i := index_of.get(pid)) is not None:
            candidates = coarse_filter(vectors[i:i + 1], prefs, pref_vectors, tau)[0]
            if not candidates:
                out[pid] = "coarse"
            else:
                verdict = fine_verify(verifier, items[i].text, candidates)
                out[pid] = "evicted" if verdict.keep else "verifier"
    return out


def judged_fates(questions: Sequence[Question], per_persona: Sequence[Mapping], labels: Labels,
                 axis: str = "both") -> dict[str, dict[str, int]]:
    """Per split, how many of the questions' judged positives on `axis` ("both", "answers",
    "aligned") met each fate; "unknown" for a passage the run did not follow (judged after
    it, or from another corpus). Runs that recorded no fates give {}."""
    fates = {p["persona"]: p["passage_fates"] for p in per_persona if "passage_fates" in p}
    if not fates:
        return {}
    positive = {"both": lambda a, b: a and b, "answers": lambda a, b: a,
                "aligned": lambda a, b: b}[axis]
    by_question: dict[str, list[str]] = {}
    for (qid, pid), (a, b) in labels.items():
        if positive(a, b):
            by_question.setdefault(qid, []).append(pid)
    out: dict[str, dict[str, int]] = {}
    for q in questions:
        if q.persona in fates:
            counts = out.setdefault(q.split, dict.fromkeys((*FATES, "unknown"), 0))
            for fate, n in Counter(fates[q.persona].get(pid, "unknown")
                                   for pid in by_question.get(q.qid, [])).items():
                counts[fate] += n
    return out
