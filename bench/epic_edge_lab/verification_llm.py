"""Score (preference, passage) pairs with the small LLM in each decision mode, with a cache."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from epic_edge.types import Preference
from epic_edge_lab.calibrate import LabelledPair

# mode -> what the score is: P(Keep) / P(yes) read from logits, or 1/0 parsed from JSON text
LLM_MODES = ("keep-discard", "per-preference", "few-shot", "json")
FEW_SHOT = 4  # worked examples from the train split (half Keep, half Discard)


def few_shot_examples(train: Sequence[LabelledPair], n: int = FEW_SHOT
                      ) -> list[tuple[str, str, bool]]:
    """Deterministic worked examples: the first n/2 Keep and n/2 Discard train pairs by id,
    with passages cut to 60 words to keep the shared prefix short."""
    ordered = sorted(train, key=lambda p: p.id)
    keep = [p for p in ordered if p.keep][: n // 2]
    drop = [p for p in ordered if not p.keep][: n - n // 2]
    mixed = [x for pair in zip(keep, drop) for x in pair]
    return [(p.preference, " ".join(p.passage.split()[:60]), p.keep) for p in mixed]


def _cache_key(mode: str, pair: LabelledPair) -> str:
    return f"{mode}\t{pair.preference}\t{pair.passage[:200]}"


def score_pairs(verifier: Any, pairs: Sequence[LabelledPair], modes: Sequence[str],
                examples: Sequence[tuple[str, str, bool]] = (), cache: Path | None = None,
                progress: Callable[[str], None] | None = None) -> dict[str, dict[str, Any]]:
    """{mode: {"scores": [...], "seconds": [...], "raw": [...] (json mode)}} in pair order.

    Each pair is judged alone (one candidate preference), as the labels are per pair. The
    cache (JSON) keeps finished scores, so an interrupted run resumes; it holds pair text,
    so keep it out of the repository.
    """
    stored: dict[str, Any] = {}
    if cache and cache.is_file():
        stored = json.loads(cache.read_text(encoding="utf-8"))
    out: dict[str, dict[str, Any]] = {}
    for mode in modes:
        scores, seconds, raws = [], [], []
        for n, pair in enumerate(pairs):
            key = _cache_key(mode, pair)
            if key not in stored:
                pref = [Preference(1, pair.preference)]
                t0 = time.perf_counter()
                if mode == "json":
                    from epic_edge.backends.verifier_prompts import parse_json_decision

                    raw = verifier.generate_free(pair.passage, pref, max_tokens=24)
                    verdict = parse_json_decision(raw)
                    value = 1.0 if verdict else 0.0  # unreadable counts as Discard
                else:
                    raw = ""
                    value = verifier.score(pair.passage, pref, mode=mode, examples=examples)[0]
                stored[key] = [float(value), time.perf_counter() - t0, raw]
                if cache and n % 20 == 19:
                    cache.write_text(json.dumps(stored), encoding="utf-8")
                    if progress:
                        progress(f"{mode}: {n + 1}/{len(pairs)}")
            value, secs, raw = stored[key]
            scores.append(value)
            seconds.append(secs)
            raws.append(raw)
        out[mode] = {"scores": scores, "seconds": seconds, "raw": raws}
        if cache:
            cache.write_text(json.dumps(stored), encoding="utf-8")
    return out
