"""Study (issue 40, top-5 target): does pseudo-relevance feedback find more of a question's
answer items? Dev only. Rocchio on the embedder's vectors: the question's vector plus beta x
the mean of the m best items' vectors (over what is searched), renormalised, searched again;
and neighbour smoothing: each item's cosine plus gamma x its mean similarity to those m items.
Over the items a saved `bench personal` run's memories hold and over every item. Results:
results.md.

    .venv/bin/python bench/results/personal_top5_study/feedback.py bench/results/personal.json \
        [--personas 11-20,31-40,61-70,81-90]
"""

from __future__ import annotations

import argparse

import numpy as np
from rerank import persona_mean, setup, top5_share  # this folder's other study

from epic_edge_lab import personal_data
from epic_edge_lab.personal_data import number_range


def fed_back(q: np.ndarray, items: np.ndarray, held: np.ndarray, m: int, beta: float,
             gamma: float) -> np.ndarray:
    """Scores of every item after feedback from the m best held items for q."""
    c = items @ q
    top = np.flatnonzero(held)[np.argsort(-c[held], kind="stable")[:m]]
    centre = items[top].mean(0)
    query = q + beta * centre
    query = query / np.linalg.norm(query)
    return items @ query + gamma * (items @ items[top].T).mean(1)


def main(run_path: str, scored: frozenset[int] | None) -> None:
    _, embed, kept = setup(run_path)
    cases = []
    for p in personal_data.load(None, "dev"):
        if scored is not None and p.number not in scored:
            continue
        items = embed([i["text"] for i in p.items])
        ids = [i["id"] for i in p.items]
        held = np.array([i in kept[p.number] for i in ids])
        for q, qv in zip(p.questions, embed([q.text for q in p.questions])):
            if q.prefs and q.answers:
                cases.append((p.number, items, qv, np.array([i in q.answers for i in ids]), held))
    print(f"{len(cases)} preference questions")
    print("| m | beta | gamma | over the memory | over every item |")
    print("|---|---|---|---|---|")
    for m, beta, gamma in ((1, 0, 0), (3, 0.3, 0), (3, 0.6, 0), (3, 1, 0), (5, 0.5, 0),
                           (2, 0.5, 0), (3, 0, 0.2), (3, 0, 0.5), (5, 0, 0.3)):
        cells = []
        for over_memory in (True, False):
            rows = []
            for n, items, q, a, held in cases:
                pool = held if over_memory else np.ones_like(held)
                rows.append((n, top5_share(fed_back(q, items, pool, m, beta, gamma), a, pool)))
            cells.append(persona_mean(rows))
        print(f"| {m} | {beta:g} | {gamma:g} | {cells[0]:.3f} | {cells[1]:.3f} |")


if __name__ == "__main__":
    args = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    args.add_argument("run", nargs="?", default="bench/results/personal.json")
    args.add_argument("--personas", type=number_range, default=None)
    parsed = args.parse_args()
    main(parsed.run, parsed.personas)
