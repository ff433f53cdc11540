"""Shared lab plumbing: datasets, persona specs; the product's bench plumbing re-exported."""

from __future__ import annotations

from epic_edge.datasets import load_prefeval, load_prefwiki
from epic_edge.errors import InvalidInputError
from epic_edge.measuring import (  # noqa: F401  (re-exported: the lab's benches use them)
    machine,
    make_embedder,
    make_verifier,
    peak_rss_mb,
    profile_and_models,
    table,
    verifier_name,
    write_json,
)

DATASETS = {"prefwiki": (load_prefwiki, "wiki"), "prefeval": (load_prefeval, "chat")}


def parse_personas(spec: str | None, total: int) -> list[int]:
    """"all", "0-9", "0,3,5" or "3" -> sorted persona indices."""
    if spec in (None, "", "all"):
        return list(range(total))
    chosen: set[int] = set()
    for part in str(spec).split(","):
        part = part.strip()
        try:
            if "-" in part:
                lo, hi = (int(x) for x in part.split("-", 1))
                chosen.update(range(lo, hi + 1))
            elif part:
                chosen.add(int(part))
        except ValueError:
            raise InvalidInputError(f"bad --personas {spec!r}; use all, 0-9 or 0,3,5") from None
    bad = sorted(i for i in chosen if not 0 <= i < total)
    if bad:
        raise InvalidInputError(f"persona index {bad[0]} out of range 0-{total - 1}")
    return sorted(chosen)


def persona_questions(persona: dict) -> tuple[list[str], list[tuple[str, int]]]:
    """(preference texts, [(question, gold block index)])."""
    prefs, questions = [], []
    for block_index, block in enumerate(persona["preference_blocks"]):
        prefs.append(block["preference"])
        questions += [(q["question"], block_index) for q in block.get("queries", [])]
    return prefs, questions
