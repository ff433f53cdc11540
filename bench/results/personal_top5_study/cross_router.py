"""Study (issue 40, top-5 target): does a cross-encoder read which preference a question
touches better than the embedder's cosine? Dev only; nothing shipped.

A MiniLM cross-encoder (the shipped epic-minilm weights with a new one-logit head) reads
(question, preference) together. Trained listwise: each preference question's softmax over its
persona's preferences against the preferences it touches (shared equally), AdamW 3e-5, batches
of 8 questions, two epochs, 10% warm-up then linear decay, seed 0; on the written gate set's
preference questions and those of the four dev writers the embedder was tuned on (1,935).
Scored on the 142 preference questions of the 20 dev personas whose writers neither the
embedder nor this model saw: top-1 accuracy (the first preference it names is one the question
touches), beside the closest preference by the embedder's cosine (fp32 torch vectors). About
30 minutes on 2 cores. Results: results.md.

    cd bench && ../.venv/bin/python results/personal_top5_study/cross_router.py
"""

from __future__ import annotations

import argparse
import random
import time

import torch
from transformers import AutoModel, AutoModelForSequenceClassification, AutoTokenizer

from epic_edge.export.minilm_onnx import embedder_weights
from epic_edge.models import model_dir
from epic_edge_lab import personal_data
from epic_edge_lab.embedder_training import FIT_ON, TUNED_ON, Encoder
from epic_edge_lab.gate_training import gate_set


def preference_questions(personas):
    """(question, its persona's preference texts, 1 where it touches that preference)."""
    out = []
    for p in personas:
        ids = sorted(p.preferences)
        out += [(q.text, [p.preferences[i] for i in ids], [int(i in q.prefs) for i in ids])
                for q in p.questions if q.prefs]
    return out


def main() -> None:
    argparse.ArgumentParser(description=__doc__,
                            formatter_class=argparse.RawDescriptionHelpFormatter).parse_args()
    torch.manual_seed(0)
    rng = random.Random(0)
    folder = embedder_weights(model_dir())
    tok = AutoTokenizer.from_pretrained(str(folder))
    model = AutoModelForSequenceClassification.from_pretrained(str(folder), num_labels=1,
                                                               dtype=torch.float32)
    groups = []
    for g in gate_set():
        ids = [p["id"] for p in g["preferences"]]
        texts = [p["text"] for p in g["preferences"]]
        groups += [(q["text"], texts, [int(i in q["prefs"]) for i in ids])
                   for q in g["questions"] if q["prefs"]]
    groups += preference_questions(personal_data.load(None, "dev",
                                                      personal_data.number_range(TUNED_ON)))
    unseen = personal_data.load(None, "dev", personal_data.number_range(FIT_ON))
    scored = preference_questions(unseen)
    print(f"{len(groups)} training questions, {len(scored)} scored", flush=True)

    def logits(q, prefs):
        b = tok([q] * len(prefs), prefs, padding=True, truncation=True, max_length=96,
                return_tensors="pt")
        return model(**b).logits.squeeze(-1)

    def top1() -> float:
        model.eval()
        with torch.no_grad():
            hits = sum(y[int(logits(q, prefs).argmax())] for q, prefs, y in scored)
        model.train()
        return hits / len(scored)

    opt = torch.optim.AdamW(model.parameters(), lr=3e-5)
    epochs, batch = 2, 8
    steps, done, start = epochs * len(groups) // batch, 0, time.time()
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda i: min(1.0, (i + 1) / (0.1 * steps)) * max(0.0, 1 - i / steps))
    for epoch in range(epochs):
        rng.shuffle(groups)
        for i in range(0, len(groups), batch):
            loss = 0
            for q, prefs, y in groups[i:i + batch]:
                target = torch.tensor(y, dtype=torch.float32)
                loss = loss - (target / target.sum() * torch.log_softmax(logits(q, prefs), 0)).sum()
            opt.zero_grad()
            (loss / batch).backward()
            opt.step()
            sched.step()
            done += 1
            if done % 100 == 0:
                print(f"step {done}/{steps}, {time.time() - start:.0f} s", flush=True)
        print(f"epoch {epoch}: cross-encoder top-1 {top1():.3f}", flush=True)

    enc = Encoder(AutoModel.from_pretrained(folder, dtype=torch.float32), tok)
    hits = 0
    for q, prefs, y in scored:
        hits += y[int((enc.embed(prefs) @ enc.embed([q])[0]).argmax())]
    print(f"closest preference by cosine: top-1 {hits / len(scored):.3f}")


if __name__ == "__main__":
    main()
