"""Study (issue 40, top-5 target): how far routing a question to the preferences it touches, and
filing items softly under every preference, could take the top 5; and whether a router learned
on MiniLM's vectors finds those preferences better than the closest one by text. Dev only.

Soft filing: each (item, preference) pair's P(bears) from the keep score's recipe, cross-fitted
by writer (fitted on the other seven writers' dev personas). A ranking is cosine + lam x the sum,
over preferences, of the router's weight times the item's filing under it; the router is the
question's labelled preferences (an oracle no lookup has), a softmax over its cosine to each
preference (temperature 1/20), or that softmax over cosine plus the best filed items' cosine.
The learned router: a logistic over (question, preference) features (cosine and its margin,
z-score and rank among the persona's preferences; MiniLM's elementwise product q*p), trained on
the written gate set's 1,536 preference questions (bench/personal/gate/), top-1 accuracy on the
dev personas' preference questions; and the closest preference by text read through the
questions written for its nearest gate-set preferences. Results: results.md.

    .venv/bin/python bench/results/personal_top5_study/route.py bench/results/personal.json \
        [--personas 11-20,31-40,61-70,81-90]    # score only these dev personas' questions
"""

from __future__ import annotations

import argparse
import json

import numpy as np
from rerank import persona_mean, setup, top5_share  # this folder's other study
from sklearn.linear_model import LogisticRegression

from epic_edge import registry
from epic_edge.models import model_dir
from epic_edge.profiles import load_profile
from epic_edge_lab import keep_training, personal_data
from epic_edge_lab.personal_data import number_range
from epic_edge_lab.personal_walls import writer_of


def soft_filing(personas, embedder, verifier) -> list[np.ndarray]:
    """Per persona, P(bears) of every (item, preference), cross-fitted by writer."""
    data = keep_training.pairs(personas, embedder, verifier)
    writer = np.array([writer_of(personas[i].number) for i in data.persona])
    raw = np.zeros(len(data.y))
    for w in set(writer.tolist()):
        weights, bias = keep_training.linear_score(data.x[writer != w], data.y[writer != w])
        raw[writer == w] = data.x[writer == w] @ weights + bias
    slope, offset = keep_training.logistic(raw[:, None], data.y.astype(float), 1e6)
    prob = 1.0 / (1.0 + np.exp(-(slope[0] * raw + offset)))
    return [prob[data.persona == n].reshape(len(p.items), len(p.preferences))
            for n, p in enumerate(personas)]


def router_features(q: np.ndarray, prefs: np.ndarray) -> np.ndarray:
    c = prefs @ q
    return np.hstack([np.stack([c, c - c.max(), (c - c.mean()) / (c.std() + 1e-6),
                                np.argsort(np.argsort(-c)) == 0], 1), q[None, :] * prefs])


def main(run_path: str, scored: frozenset[int] | None = None) -> None:
    embedder, embed, kept = setup(run_path)
    verifier = registry.create("verifier", {**load_profile("linux-cpu").verifier,
                                            "keep_score": None}, model_dir())
    personas = personal_data.load(None, "dev")
    soft = soft_filing(personas, embedder, verifier)
    cases = []  # (persona, item vectors, pref vectors, q, touched, answers, held, filings)
    for p, filed_softly in zip(personas, soft):
        items, prefs = embed([i["text"] for i in p.items]), embed(list(p.preferences.values()))
        memory = kept[p.number]
        ids, order = [i["id"] for i in p.items], list(p.preferences)
        filings = {"memory": np.array([[x in memory.get(i, ()) for x in order] for i in ids],
                                      float),
                   "soft": filed_softly,
                   "labels": np.array([[x in p.bears_on.get(i, ()) for x in order] for i in ids],
                                      float)}
        for q, qv in zip(p.questions, embed([q.text for q in p.questions])):
            if q.prefs and q.answers and (scored is None or p.number in scored):
                cases.append((p.number, items, prefs, qv, np.array([x in q.prefs for x in order]),
                              np.array([i in q.answers for i in ids]),
                              np.array([i in memory for i in ids]), filings))

    def routed(case, router, filing):
        _, items, prefs, q, touched, _, _, filings = case
        if router == "oracle":
            return touched.astype(float)
        evidence = prefs @ q
        if router == "entries":
            c = items @ q
            f = filings[filing]
            evidence = evidence + np.array([np.sort(c * f[:, j])[-3:].mean()
                                            for j in range(f.shape[1])])
        w = np.exp(20 * evidence)
        return w / w.sum()

    def top5(router, filing, lam):
        return persona_mean(
            (case[0], top5_share(case[1] @ case[3] + lam * case[7][filing] @ routed(
                case, router, filing), case[5], case[6])) for case in cases)

    everything = persona_mean((case[0], top5_share(case[1] @ case[3], case[5],
                                                   np.ones_like(case[6]))) for case in cases)
    print(f"{len(cases)} preference questions; store-everything {everything:.3f}, "
          f"cosine over the memory: {top5('oracle', 'memory', 0.0):.3f}\n")
    print("| filing | lam | oracle router | softmax over preference cosine | + filed items |")
    print("|---|---|---|---|---|")
    for filing in ("memory", "soft", "labels"):
        for lam in (0.2, 0.4, 1.0):
            print(f"| {filing} | {lam:g} | " + " | ".join(
                f"{top5(r, filing, lam):.3f}" for r in ("oracle", "softmax", "entries")) + " |")
    gate = [json.loads(line) for line in open(personal_data.default_dir().parent / "gate" /
                                              "questions.jsonl", encoding="utf-8")]
    x, y = [], []
    for g in gate:
        prefs = embed([p["text"] for p in g["preferences"]])
        for q in (q for q in g["questions"] if q["prefs"]):
            x.append(router_features(embed([q["text"]])[0], prefs))
            y.append([p["id"] in q["prefs"] for p in g["preferences"]])
    closest = np.mean([case[4][np.argmax(case[2] @ case[3])] for case in cases])
    print(f"\nrouter top-1 accuracy, dev preference questions: closest by text {closest:.3f}")
    for name, cols in (("scalar", slice(0, 4)), ("q*p", slice(4, None)), ("both", slice(None))):
        model = LogisticRegression(C=1.0, max_iter=3000).fit(
            np.vstack(x)[:, cols], np.concatenate(y))
        hit = [case[4][np.argmax(model.decision_function(
            router_features(case[3], case[2])[:, cols]))] for case in cases]
        print(f"learned on the gate set ({len(y)} questions), {name}: {np.mean(hit):.3f}")
    # each preference read through the questions written for its k nearest gate-set preferences
    texts = [(p["text"], [q["text"] for q in g["questions"] if p["id"] in q["prefs"]])
             for g in gate for p in g["preferences"]]
    neighbours = embed([t for t, _ in texts])
    asked = [embed(qs) if qs else np.zeros((0, neighbours.shape[1])) for _, qs in texts]
    for k in (5, 10):
        hit = []
        for case in cases:
            near = [np.argsort(-(neighbours @ p))[:k] for p in case[2]]
            written = [np.vstack([asked[n] for n in ns]) @ case[3] for ns in near]
            score = case[2] @ case[3] + np.array([w.max() if len(w) else 0.0 for w in written])
            hit.append(case[4][np.argmax(score)])
        print(f"closest by text + best question written for its {k} nearest gate-set "
              f"preferences: {np.mean(hit):.3f}")


if __name__ == "__main__":
    args = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    args.add_argument("run", nargs="?", default="bench/results/personal.json")
    args.add_argument("--personas", type=number_range, default=None,
                      help="score only these dev personas' questions (FIRST-LAST[,...])")
    parsed = args.parse_args()
    main(parsed.run, parsed.personas)
