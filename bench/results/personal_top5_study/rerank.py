"""Study (issue 40, top-5 target): can a ranker learned on the personal dev questions find the
answer items better than MiniLM's cosine? Dev split only, cross-fitted by writer (each writer's
personas scored by a logistic fitted on the other seven writers'), over the items a saved
`bench personal` run's memories hold and over every item of the stream.

Candidates: cosine alone; a logistic over scalar features of the (question, item) pair (cosine,
its deviation and z-score and rank within the stream, the item's cosine to the preferences
weighted by the question's softmax over them, word overlap, length, place in the stream, the
question's closest-preference similarity); the same over MiniLM's elementwise product q*i (a
learned diagonal bilinear); both. Results: results.md.

    .venv/bin/python bench/results/personal_top5_study/rerank.py bench/results/personal.json
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import numpy as np
from sklearn.linear_model import LogisticRegression

from epic_edge import registry
from epic_edge.models import model_dir
from epic_edge.profiles import load_profile
from epic_edge_lab import personal_data
from epic_edge_lab.personal_walls import saved_memories, writer_of


def setup(run_path: str) -> tuple[Any, Callable[[list[str]], np.ndarray], dict]:
    """linux-cpu's embedder, an embed() of texts as the bench embeds them (whitespace folded),
    and the saved run's memories (persona number -> item id -> preferences filed under)."""
    embedder = registry.create("embedder", load_profile("linux-cpu").embedder, model_dir())

    def embed(texts: list[str]) -> np.ndarray:
        return np.asarray(embedder.embed([" ".join(str(t).split()) for t in texts]))

    return embedder, embed, saved_memories(Path(run_path))


def top5_share(scores: np.ndarray, answers: np.ndarray, held: np.ndarray) -> float:
    """Share of the answer items among the 5 best-scored items held (ties in stream order)."""
    top = np.flatnonzero(held)[np.argsort(-scores[held], kind="stable")[:5]]
    return float(answers[top].sum() / answers.sum())


def persona_mean(shares: Iterable[tuple[int, float]]) -> float:
    """The mean over personas of each persona's mean share: (persona, share) per question."""
    per: dict[int, list[float]] = {}
    for persona, share in shares:
        per.setdefault(persona, []).append(share)
    return float(np.mean([np.mean(v) for v in per.values()]))


def words(text: str) -> set[str]:
    return set(re.findall(r"\w+", text.lower()))


def features(q, items, prefs, question, persona):
    c = items @ q
    w = np.exp(20 * (prefs @ q))
    toward = (items @ prefs.T) @ (w / w.sum())
    qw = words(question)
    scalar = np.stack([
        c, c - c.mean(), (c - c.mean()) / (c.std() + 1e-6), np.argsort(np.argsort(-c)) / len(c),
        toward, [len(qw & words(i["text"])) / (1 + len(qw)) for i in persona.items],
        np.log1p([len(i["text"].split()) for i in persona.items]), np.arange(len(c)) / len(c),
        np.full(len(c), (prefs @ q).max())], 1)
    return {"scalar": scalar, "product": np.hstack([c[:, None], q[None, :] * items]),
            "both": np.hstack([scalar, q[None, :] * items])}


def main(run_path: str) -> None:
    _, embed, kept = setup(run_path)
    rows = []  # (writer, persona, features, answer mask, memory mask)
    for p in personal_data.load(None, "dev"):
        items = embed([i["text"] for i in p.items])
        prefs = embed(list(p.preferences.values()))
        held = np.array([i["id"] in kept[p.number] for i in p.items])
        for q, qv in zip(p.questions, embed([q.text for q in p.questions])):
            if q.prefs and q.answers:
                rows.append((writer_of(p.number), p.number,
                             features(qv, items, prefs, q.text, p),
                             np.array([i["id"] in q.answers for i in p.items]), held))
    writers = sorted({r[0] for r in rows})

    def recall(scores, over_memory):
        return persona_mean((persona, top5_share(s, answers, held if over_memory
                                                 else np.ones_like(held)))
                            for (_, persona, _, answers, held), s in zip(rows, scores))

    results = {"cosine": [r[2]["scalar"][:, 0] for r in rows]}
    for name in ("scalar", "product", "both"):
        for c in (0.01, 0.1, 1.0):
            scores = [None] * len(rows)
            for w in writers:
                train = [r for r in rows if r[0] != w]
                model = LogisticRegression(C=c, max_iter=2000).fit(
                    np.vstack([r[2][name] for r in train]), np.concatenate([r[3] for r in train]))
                for n, r in enumerate(rows):
                    if r[0] == w:
                        scores[n] = model.decision_function(r[2][name])
            results[f"{name}, C={c:g}"] = scores
    print("| ranker (dev, cross-fitted by writer) | top-5 over the memory | over every item |")
    print("|---|---|---|")
    for name, scores in results.items():
        print(f"| {name} | {recall(scores, True):.3f} | {recall(scores, False):.3f} |")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "bench/results/personal.json")
