"""Train the question gate (epic_edge.question_gate) on labelled everyday questions.

Data, dev splits only: the personal set's dev personas' questions (bench/personal/personas, odd
numbers); the written gate set (bench/personal/gate/questions.jsonl: personas with preferences
and 14 questions each, labelled by their writer and a blind reader, where both agree); the
judged set's dev questions and dev personas' implicit requests (preferences bear on all of
them); and the runtime's background questions (general knowledge, arithmetic, definitions,
chit-chat: none bears). A question is positive when no preference of its persona bears on it.
Recipe: an L2 logistic over the embedder's unit vector of the question and its hashed word
counts (epic_edge.question_gate.gate_features); a Platt fit on scores
cross-fitted over five persona folds makes it a probability; the threshold is the probability
at which those cross-fitted scores still give memory to `served` of the personal kinds'
preference questions (the personal set's and the written set's: the harder regime). The profile's
`question_gate_below` is chosen from `by_writer` (`personal_walls gate-writers`).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from epic_edge.background import background_questions
from epic_edge.errors import InvalidInputError
from epic_edge.question_gate import QuestionGate, gate_features
from epic_edge_lab import PERSONAL, relevance
from epic_edge_lab.keep_training import FOLDS, auc, logistic
from epic_edge_lab.personal_data import Persona

GATE_SET = PERSONAL.parent / "gate" / "questions.jsonl"
# the L2 strength and the word features' size and weight, chosen on the dev questions by the
# no-preference questions withheld at 97% of preference questions served, cross-fitted by
# persona and across writers (docs/personal-stream.md)
C = 3.0
BUCKETS = 2048
WORD_SCALE = 2.0


@dataclass
class Questions:
    """Labelled questions: text, 1 when no preference of its persona bears on it, persona."""

    text: list[str]
    unrelated: np.ndarray
    persona: list[str]
    source: list[str]  # "personal", "written", "judged" or "background" (see above)


def gate_set(path: Path = GATE_SET) -> list[dict[str, Any]]:
    """The written gate set's personas, one JSON object per line; a one-line error if bad."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
        rows = [json.loads(line) for line in lines if line.strip()]
        for row in rows:
            ids = {p["id"] for p in row["preferences"]}
            for q in row["questions"]:
                if not set(q["prefs"]) <= ids or not str(q["text"]).strip():
                    raise ValueError(f"{q['id']}: empty text or a preference it does not have")
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise InvalidInputError(f"gate set {path}: {type(exc).__name__}: {exc}") from None
    return rows


def judged_dev(root: Path | None = None) -> dict[str, list[str]]:
    """Per judged dev persona, its questions and implicit requests (preferences bear on all)."""
    out: dict[str, list[str]] = {}
    for q in relevance.load_questions("dev", root):
        out.setdefault(f"judged-{q.persona}", []).append(q.question)
    for row in relevance.read_jsonl((root or relevance.data_dir()) / "implicit_questions.jsonl"):
        if int(row["persona"]) % 2 == 0:  # the judged set's dev personas (policy.calibrate)
            out.setdefault(f"judged-{row['persona']}", []).append(row["question"])
    return out


def questions(personas: list[Persona], written: list[dict[str, Any]],
              judged: dict[str, list[str]] | None = None, background: bool = True) -> Questions:
    """Every question of the sources, labelled (background: ten to a fold group)."""
    rows: list[tuple[str, bool, str, str]] = []
    for persona in personas:
        rows += [(q.text, not q.prefs, f"p{persona.number:02d}", "personal")
                 for q in persona.questions]
    for row in written:  # where a blind reader labelled it too, both must agree
        rows += [(str(q["text"]), not q["prefs"], str(row["persona"]), "written")
                 for q in row["questions"]
                 if bool(q["prefs"]) == bool(q.get("reader_prefs", q["prefs"]))]
    for who, texts in (judged or {}).items():
        rows += [(text, False, who, "judged") for text in texts]
    if background:
        rows += [(text, True, f"background-{n // 10}", "background")
                 for n, text in enumerate(background_questions())]
    text, label, who, source = zip(*rows)
    return Questions(list(text), np.asarray(label, np.float64), list(who), list(source))


def folds(persona: list[str]) -> np.ndarray:
    """Five folds by persona, in the order personas first appear."""
    order = {name: n for n, name in enumerate(dict.fromkeys(persona))}
    return np.array([order[name] % FOLDS for name in persona])


def cross_fitted(x: np.ndarray, y: np.ndarray, fold: np.ndarray, c: float = C) -> np.ndarray:
    """Each question's raw score from a model fit without its persona's fold."""
    out = np.zeros(len(y))
    for f in range(FOLDS):
        w, b = logistic(x[fold != f], y[fold != f], c)
        out[fold == f] = x[fold == f] @ w + b
    return out


def rates(y: np.ndarray, withheld: np.ndarray) -> dict[str, float | None]:
    """Shares of no-preference questions withheld and of preference questions withheld."""
    def share(part: np.ndarray) -> float | None:
        return float(part.mean()) if len(part) else None

    return {"no_memory_no_preference": share(withheld[y == 1]),
            "no_memory_preference": share(withheld[y == 0])}


def check_served(served: float) -> None:
    """The share of preference questions a threshold serves must lie strictly in (0, 1)."""
    if not 0.0 < served < 1.0:
        raise InvalidInputError(f"--served must be in (0, 1), got {served}")


def train(data: Questions, vectors: np.ndarray, served: float, trained_on: str,
          c: float = C, buckets: int = BUCKETS, scale: float = WORD_SCALE
          ) -> tuple[QuestionGate, dict[str, Any]]:
    """Fit on every question; calibrate and set the threshold from cross-fitted scores."""
    check_served(served)
    x, y = gate_features(vectors, data.text, buckets, scale), data.unrelated
    held = cross_fitted(x, y, folds(data.persona), c)
    slope, offset = logistic(held[:, None], y, 1e6)
    prob = 1.0 / (1.0 + np.exp(-(slope[0] * held + offset)))
    source = np.asarray(data.source)
    personal_kinds = np.isin(source, ("personal", "written"))
    threshold = float(np.quantile(prob[personal_kinds & (y == 0)], served))
    weights, bias = logistic(x, y, c)
    withheld = prob >= threshold
    report = {"questions": int(len(y)), "no_preference": int(y.sum()),
              "auc_cross_fitted": auc(y, held),
              "cross_fitted": {"personal kinds": rates(y[personal_kinds],
                                                      withheld[personal_kinds])},
              "threshold": threshold, "served": served, "c": c, "buckets": buckets,
              "word_scale": scale}
    for name in dict.fromkeys(data.source):
        part = source == name
        report["cross_fitted"][name] = {"questions": int(part.sum()),
                                        **rates(y[part], withheld[part])}
    return QuestionGate(weights, bias, float(slope[0]), offset, threshold, trained_on, buckets,
                        scale), report


def personal_closest(personas: list[Persona], embed: Callable[[list[str]], np.ndarray]
                     ) -> np.ndarray:
    """Each personal question's closest-preference similarity E(q).E(p*), in `questions` order
    (what the profile's `question_gate_below` bounds)."""
    return np.concatenate([(embed([q.text for q in p.questions])
                            @ embed(list(p.preferences.values())).T).max(axis=1)
                           for p in personas])


def by_writer(data: Questions, vectors: np.ndarray, closest: np.ndarray, writer: np.ndarray,
              bounds: list[float], served: float = 0.97) -> dict[str, Any]:
    """The gate refit without one writer's personal questions at a time (the first
    len(writer) rows of `data`) and applied to them with its own threshold; per similarity
    bound, the shares withheld, pooled and per writer."""
    n = len(writer)
    prob, threshold = np.zeros(n), np.zeros(n)
    for w in np.unique(writer):
        out = np.zeros(len(data.text), bool)
        out[:n] = writer == w
        rest = np.flatnonzero(~out)
        gate, _ = train(Questions([data.text[i] for i in rest], data.unrelated[rest],
                                  [data.persona[i] for i in rest],
                                  [data.source[i] for i in rest]),
                        vectors[rest], served, "by writer")
        prob[out[:n]] = gate.probability(vectors[out], [t for t, o in zip(data.text, out) if o])
        threshold[out[:n]] = gate.threshold
    y = data.unrelated[:n]
    report: dict[str, Any] = {}
    for bound in bounds:
        withheld = (prob >= threshold) & (closest < bound)
        report[f"{bound:.2f}"] = {"pooled": rates(y, withheld),
                                  "per_writer": {int(w): rates(y[writer == w],
                                                               withheld[writer == w])
                                                 for w in np.unique(writer)}}
    return report
