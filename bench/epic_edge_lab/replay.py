"""Verdicts judged ahead (by a worker pool) and replayed to a memory's ingest, in any engine."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

from epic_edge.stages import coarse_filter
from epic_edge.types import Preference, Verdict

# A job: the item's text and its coarse-filter survivors' texts, best first (what a verifier
# sees). Its verdict names survivors by position (0, 1, ...), not by a memory's row ids.
Job = tuple[str, tuple[str, ...]]
log = logging.getLogger(__name__)


def survivors(vectors: np.ndarray, pref_vectors: np.ndarray, tau: float) -> list[list[int]]:
    """Per item row, the preference rows that pass the coarse filter, best first (the
    ingest's own stage, epic_edge.stages.coarse_filter, with positions as ids)."""
    positions = [Preference(j, "") for j in range(len(pref_vectors))]
    return [[c.preference.id for c in row]
            for row in coarse_filter(vectors, positions, pref_vectors, tau)]


def judge(verifier: Any, jobs: Sequence[Job]) -> list[Verdict | None]:
    """Each job's verdict from a real verifier, called as the ingest calls it (one item, its
    survivors); the verdict's preference ids are survivor positions. A job the verifier
    failed on gets None: it is not replayed, so the persona's own ingest asks again (and, if
    that fails too, reports it and leaves it for the next ingest, as always). A verifier
    that cannot be built raises: every job would fail alike."""
    from epic_edge.faults import SETUP_ERRORS
    from epic_edge.stages import Candidate, fine_verify

    out: list[Verdict | None] = []
    for text, prefs in jobs:
        cands = [Candidate(Preference(j, p), 0.0) for j, p in enumerate(prefs)]
        try:
            out.append(fine_verify(verifier, text, cands))
        except SETUP_ERRORS:
            raise
        except Exception as exc:  # never log the item
            log.warning("the verifier failed on a job (%s); its persona asks again",
                        type(exc).__name__)
            out.append(None)
    return out


class ReplayVerifier:
    """Answers verify() from verdicts judged ahead; a call it has no verdict for goes to the
    real verifier (`fallback`, built on first use) and is counted in `misses`."""

    def __init__(self, verdicts: dict[Job, Verdict] | None = None,
                 fallback: Callable[[], Any] | None = None) -> None:
        self.verdicts: dict[Job, Verdict] = dict(verdicts or {})
        self._fallback = fallback
        self._real: Any = None
        self._lock = threading.Lock()
        self.hits = self.misses = 0

    def add(self, jobs: Iterable[Job], verdicts: Iterable[Verdict]) -> None:
        self.verdicts.update(zip(jobs, verdicts))

    @property
    def keep_score(self) -> Any:
        """The real verifier's keep score (epic_edge.keep_score), so ingest hands a rescore;
        none without a real verifier to ask."""
        if self._real is None and self._fallback is None:
            return None
        with self._lock:
            return getattr(self._real_verifier(), "keep_score", None)

    def verify(self, item: str, candidates: Sequence[Preference], rescore: Any = None
               ) -> Verdict:
        """The verdict judged ahead. With a `rescore` (the keep score, which depends on the
        memory's whole preference set) only a verdict the rescue cannot change replays (
        `rescue_proof`); any other goes to the real verifier."""
        candidates = list(candidates)
        known = self.verdicts.get((item, tuple(p.text for p in candidates)))
        if rescore is not None and known is not None and not rescue_proof(
                known, self._real_verifier(), len(candidates)):
            known = None
        with self._lock:
            if known is None:
                self.misses += 1
                real = self._real_verifier()
                return (real.verify(item, candidates) if rescore is None
                        else real.verify(item, candidates, rescore=rescore))
            self.hits += 1
        ids = [candidates[j].id for j in known.preference_ids]
        return Verdict(keep=known.keep, preference_ids=ids,
                       instructions={candidates[j].id: known.instructions[j]
                                     for j in known.preference_ids},
                       reason=known.reason, confidence=known.confidence,
                       llm_calls=known.llm_calls, threshold=known.threshold)

    def _real_verifier(self) -> Any:
        if self._real is None:
            if self._fallback is None:
                raise RuntimeError("no verdict judged ahead for this item and no fallback")
            self._real = self._fallback()
        return self._real


def rescue_proof(verdict: Verdict, verifier: Any, candidates: int) -> bool:
    """Whether the keep score's rescue would give this decision-only verdict unchanged: a
    keep of the decision's own (P(Keep) at or above the floor), filed alike. Under the
    threshold the rescue lowers the cut a second preference must pass (floor x the keep
    score's threshold), so a keep there that may be filed under more than one of several
    candidates is the real verifier's to give."""
    if not verdict.keep or verdict.confidence < verifier.rescue_below:
        return False
    filed_alike = candidates == 1 or getattr(verifier, "max_preferences_per_item", 1) == 1
    return filed_alike or verdict.confidence >= verifier.threshold
