"""Learned-verifier learners on frozen lower MiniLM layers: siamese, cross-encoder, negatives.

A learner is a LearnerSpec; `fit` trains its top layers (and head) on labelled pairs over the
states FrozenStates computed once, `score` gives P(Keep); saving.py keeps and exports it.
"""

from __future__ import annotations

import copy
import dataclasses
import os
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from tqdm import tqdm

from epic_edge.export.minilm_onnx import find_minilm_weights, load_minilm_encoder
from epic_edge_lab.calibrate import LabelledPair

from .adapter import adapter_logits, fit_adapter
from .nets import _torch, clipped_step, warmup_decay
from .nets import load_tokenizer as _load_tokenizer
from .states import FrozenStates, mean_pool, pad_states, run_layers

KINDS = ("siamese", "cross-encoder", "adapter")
ADAPTER_LENGTH = 256  # the embedder's max_length: the adapter learns on its vectors
IN_BATCH_SCALE = 20.0  # cosine -> logit of the in-batch softmax (sentence-transformers' MNRL)


@dataclass(frozen=True)
class LearnerSpec:
    """One way to train the learned verifier (what the side-by-side study compares)."""

    name: str
    kind: str = "siamese"
    frozen: int = 5            # embeddings + this many of MiniLM's 6 layers stay as they are
    epochs: int = 1
    lr: float = 1e-4           # top layers; heads and the siamese scale / bias train at 10x
    batch_size: int = 16
    hard_negatives: int = 0    # mined Discard pairs per preference (0 = none)
    seed: int = 0
    hidden: int = 256          # adapter only: its hidden width (no MiniLM layer trains)
    in_batch: float = 0.0      # siamese only: weight of a softmax loss ranking each Keep pair's
    #                            passage above the batch's other preferences' passages

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"kind must be one of {', '.join(KINDS)}, not {self.kind!r}")
        if not 0 <= self.frozen <= 6:
            raise ValueError(f"frozen layers must be 0..6, not {self.frozen}")
        if self.in_batch and self.kind != "siamese":
            raise ValueError("in-batch negatives need a siamese learner")


class Workbench:
    """MiniLM's weights, tokenizer and the frozen states every learner of a run shares."""

    def __init__(self, threads: int = 1, text_length: int = 128, pair_length: int = 160,
                 bert: Any = None) -> None:
        torch = _torch()
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        if threads:
            torch.set_num_threads(int(threads))
        self.threads, self.text_length, self.pair_length = threads, text_length, pair_length
        self.weights = find_minilm_weights()  # the tokenizer comes from here in every case
        self.bert = bert if bert is not None else load_minilm_encoder(self.weights)
        self._states: dict[int, FrozenStates] = {}

    def states(self, frozen: int) -> FrozenStates:
        if frozen not in self._states:
            self._states[frozen] = FrozenStates(
                self.bert, _load_tokenizer(self.weights / "tokenizer.json"), frozen,
                text_length=self.text_length, pair_length=self.pair_length,
                threads=self.threads)
        return self._states[frozen]


@dataclass
class Trained:
    """A fitted learner: its spec, trained top layers and head (scale/bias or a linear)."""

    spec: LearnerSpec
    top: Any
    head: Any
    seconds: float = 0.0


def mine_hard_negatives(pairs: Sequence[LabelledPair], vectors: dict[str, np.ndarray],
                        per_preference: int, exclude_cos: float = 0.6) -> list[LabelledPair]:
    """Discard pairs: each preference with the closest passages (by coarse cosine) that were
    labelled for *other* preferences, skipping passages whose preference is close to this one
    (cosine >= exclude_cos) so a near-duplicate preference's Keep is never mined as Discard."""
    prefs = sorted({p.preference for p in pairs})
    owners: dict[str, set[str]] = {}
    for p in pairs:
        owners.setdefault(p.passage, set()).add(p.preference)
    passages = sorted(owners)
    pv = np.stack([vectors[t] for t in prefs])
    sims, pref_sims = pv @ np.stack([vectors[t] for t in passages]).T, pv @ pv.T
    index = {t: i for i, t in enumerate(prefs)}
    mined, next_id = [], max(p.id for p in pairs) + 1
    for i, pref in enumerate(prefs):
        taken = 0
        for j in np.argsort(-sims[i], kind="stable"):
            if taken == per_preference:
                break
            if any(pref_sims[i, index[o]] >= exclude_cos for o in owners[passages[j]]):
                continue
            mined.append(LabelledPair(id=next_id, split="mined", preference=pref, title="",
                                      passage=passages[j], topic="", keep=False,
                                      reason="mined hard negative"))
            next_id, taken = next_id + 1, taken + 1
    return mined


def length_batches(pairs: Sequence[LabelledPair], batch_size: int, rng: Any,
                   pool: int = 8) -> list[np.ndarray]:
    """Shuffled batches of indices; within each pool of `pool` batches the passages are sorted
    by length, so a batch pads little (a quarter of the top layers' work on these passages)."""
    order = rng.permutation(len(pairs))
    batches = []
    for s in range(0, len(order), batch_size * pool):
        chunk = sorted(order[s:s + batch_size * pool], key=lambda i: len(pairs[i].passage))
        batches += [np.array(chunk[b:b + batch_size]) for b in range(0, len(chunk), batch_size)]
    return [batches[i] for i in rng.permutation(len(batches))]


def _vectors(torch: Any, bench: Workbench, model: Trained, chunk: Sequence[LabelledPair]
             ) -> tuple[Any, Any]:
    """A siamese learner's unit vectors of the chunk's preferences and passages."""
    states, vecs = bench.states(model.spec.frozen), []
    for texts in ([p.preference for p in chunk], [p.passage for p in chunk]):
        h, m = pad_states(torch, states.texts(texts))
        vecs.append(torch.nn.functional.normalize(
            mean_pool(torch, run_layers(torch, model.top, h, m), m), dim=1))
    return vecs[0], vecs[1]


def _logits(torch: Any, bench: Workbench, model: Trained, chunk: Sequence[LabelledPair]) -> Any:
    if model.spec.kind == "cross-encoder":
        states = bench.states(model.spec.frozen)
        h, m = pad_states(torch, states.pairs([p.preference for p in chunk],
                                              [p.passage for p in chunk]))
        return model.head(mean_pool(torch, run_layers(torch, model.top, h, m), m)).squeeze(-1)
    return _siamese_logits(model.head, *_vectors(torch, bench, model, chunk))


def _siamese_logits(head: Any, prefs: Any, passages: Any) -> Any:
    scale, bias = head
    return scale * (prefs * passages).sum(1) + bias


def in_batch_loss(torch: Any, prefs: Any, passages: Any, chunk: Sequence[LabelledPair]) -> Any:
    """For each Keep pair, softmax cross-entropy of its passage against every passage the
    batch holds for another preference (cosines x IN_BATCH_SCALE); 0 without a Keep pair."""
    keep = [i for i, p in enumerate(chunk) if p.keep]
    if not keep:
        return torch.zeros(())
    sims = IN_BATCH_SCALE * prefs[keep] @ passages.T
    other = torch.tensor([[chunk[j].preference != chunk[i].preference or j == i
                           for j in range(len(chunk))] for i in keep])
    return torch.nn.functional.cross_entropy(sims.masked_fill(~other, float("-inf")),
                                             torch.tensor(keep))


def fit(spec: LearnerSpec, pairs: Sequence[LabelledPair], bench: Workbench,
        vectors: dict[str, np.ndarray] | None = None,
        log: Callable[[str], None] = print, progress: bool = False) -> Trained:
    """Train `spec` on `pairs` (deterministic for its seed); `vectors` (coarse embeddings of
    the pairs' texts) are needed only for hard-negative mining; `progress` shows a bar of
    batches per epoch on stderr."""
    torch = _torch()
    random.seed(spec.seed)
    np.random.seed(spec.seed)
    torch.manual_seed(spec.seed)
    pairs = list(pairs)
    if (spec.hard_negatives or spec.kind == "adapter") and vectors is None:
        raise ValueError(f"{spec.name} needs the coarse vectors of the pairs' texts")
    if spec.hard_negatives:
        pairs += mine_hard_negatives(pairs, vectors, spec.hard_negatives)
    if spec.kind == "adapter":
        t0 = time.perf_counter()
        adapter, head = fit_adapter(pairs, vectors, hidden=spec.hidden, epochs=spec.epochs,
                                    lr=spec.lr, batch_size=spec.batch_size, seed=spec.seed)
        return Trained(spec, adapter, head, time.perf_counter() - t0)
    top = copy.deepcopy(bench.bert.encoder.layer[spec.frozen:])
    if spec.kind == "cross-encoder":
        head = torch.nn.Linear(bench.bert.config.hidden_size, 1)
        head_params = list(head.parameters())
    else:
        head = (torch.nn.Parameter(torch.tensor(10.0)), torch.nn.Parameter(torch.tensor(-3.3)))
        head_params = list(head)
    model = Trained(spec, top, head)
    y = torch.tensor([p.keep for p in pairs], dtype=torch.float)
    pos_weight = (1 - y).sum() / y.sum().clamp(min=1)
    opt = torch.optim.AdamW([{"params": list(top.parameters()), "lr": spec.lr},
                             {"params": head_params, "lr": spec.lr * 10}], weight_decay=0.01)
    sched = warmup_decay(torch, opt, spec.epochs, len(pairs), spec.batch_size)
    rng, t_start = np.random.default_rng(spec.seed), time.perf_counter()
    for epoch in range(spec.epochs):
        top.train()
        total = 0.0
        for idx in tqdm(length_batches(pairs, spec.batch_size, rng), unit="batch",
                        desc=f"train epoch {epoch + 1}/{spec.epochs}", mininterval=2.0,
                        disable=not progress):
            chunk = [pairs[i] for i in idx]
            if spec.in_batch:
                prefs, passages = _vectors(torch, bench, model, chunk)
                logits = _siamese_logits(head, prefs, passages)
                extra = spec.in_batch * in_batch_loss(torch, prefs, passages, chunk)
            else:
                logits, extra = _logits(torch, bench, model, chunk), 0.0
            loss = torch.nn.functional.binary_cross_entropy_with_logits(
                logits, y[idx], pos_weight=pos_weight) + extra
            clipped_step(torch, loss, opt, sched, top)
            total += loss.item() * len(idx)
        log(f"  {spec.name}: epoch {epoch + 1}/{spec.epochs} loss {total / len(pairs):.4f} "
            f"({len(pairs)} pairs, {time.perf_counter() - t_start:.0f} s so far)")
    top.eval()
    model.seconds = time.perf_counter() - t_start
    return model


def score(model: Trained, pairs: Sequence[LabelledPair], bench: Workbench,
          vectors: dict[str, np.ndarray] | None = None, batch_size: int = 64) -> np.ndarray:
    """P(Keep) for each pair, in the pairs' order (an adapter reads the pairs' `vectors`)."""
    torch = _torch()
    if model.spec.kind == "adapter":
        if vectors is None:
            raise ValueError("an adapter scores the coarse vectors of the pairs' texts")
        return torch.sigmoid(adapter_logits(model.top, model.head, vectors, pairs)
                             ).numpy().astype(np.float64)
    model.top.eval()
    out = []
    with torch.no_grad():
        for s in range(0, len(pairs), batch_size):
            out.append(torch.sigmoid(_logits(torch, bench, model,
                                             pairs[s:s + batch_size])).numpy())
    return np.concatenate(out).astype(np.float64) if out else np.zeros(0)


def spec_dict(spec: LearnerSpec) -> dict[str, Any]:
    return dataclasses.asdict(spec)
