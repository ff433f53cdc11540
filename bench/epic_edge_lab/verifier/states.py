"""MiniLM's frozen lower layers run once per text (or pair) with ONNX Runtime; the top layers train.

Training every layer of MiniLM on a few thousand pairs takes tens of minutes on two shared
cores, most of it in the embeddings' and lower layers' backward pass. Freezing them changes
nothing they compute, so their output is computed once per distinct text (siamese) or pair
(cross-encoder) by an ONNX export of those layers (ONNX Runtime runs them ~6x faster than
torch here), kept in memory as float16, and only the top layers run in each training step.
"""

from __future__ import annotations

import pickle
import tempfile
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .nets import INPUT_NAMES, _torch

MASK_VALUE = -1.0e4  # additive attention mask, as in torch_encoder


def additive_mask(torch: Any, mask: Any, dtype: Any) -> Any:
    """(batch, seq) 0/1 mask -> the (batch, 1, 1, seq) additive mask BERT layers take."""
    return (1.0 - mask[:, None, None, :].to(dtype)) * MASK_VALUE


def run_layers(torch: Any, layers: Sequence[Any], hidden: Any, mask: Any) -> Any:
    """Hidden states through BERT `layers` (eager attention, additive mask)."""
    add = additive_mask(torch, mask, hidden.dtype)
    for layer in layers:
        out = layer(hidden, attention_mask=add)
        hidden = out[0] if isinstance(out, tuple) else out
    return hidden


def _lower_module(torch: Any, bert: Any, frozen: int) -> Any:
    class Lower(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.bert = bert

        def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any) -> Any:
            hidden = self.bert.embeddings(input_ids=input_ids, token_type_ids=token_type_ids)
            return run_layers(torch, self.bert.encoder.layer[:frozen], hidden, attention_mask)

    return Lower().eval()


def export_lower_onnx(bert: Any, frozen: int, path: Path, opset: int = 17) -> Path:
    """ONNX of the embeddings + the first `frozen` layers: token ids -> hidden states (fp32)."""
    torch = _torch()
    sample = torch.tensor([[101, 7592, 2088, 102], [101, 7592, 102, 0]])
    dynamic = {n: {0: "batch", 1: "sequence"} for n in INPUT_NAMES}
    dynamic["hidden"] = {0: "batch", 1: "sequence"}
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(_lower_module(torch, bert, frozen),
                          (sample, (sample != 0).long(), torch.zeros_like(sample)), str(path),
                          input_names=list(INPUT_NAMES), output_names=["hidden"],
                          dynamic_axes=dynamic, opset_version=opset, do_constant_folding=True,
                          dynamo=False)
    return path


class FrozenStates:
    """Lower-layer states of texts and (preference, passage) pairs, computed once each."""

    def __init__(self, bert: Any, tokenizer: Any, frozen: int, *, text_length: int = 128,
                 pair_length: int = 160, threads: int = 1, batch_size: int = 32) -> None:
        self.frozen, self.batch_size, self.threads = frozen, batch_size, threads
        self._bert, self._tok = bert, tokenizer
        self.text_length, self.pair_length = text_length, pair_length
        self._session: Any = None  # exported on the first text that is not stored
        self._inputs: set[str] = set()  # its inputs (no mask when nothing is frozen)
        self._store: dict[Any, np.ndarray] = {}

    def save(self, path: Path) -> None:
        """Write the stored states (so other processes need not recompute them)."""
        with open(path, "wb") as fh:
            pickle.dump({"frozen": self.frozen, "lengths": (self.text_length, self.pair_length),
                         "store": self._store}, fh, protocol=pickle.HIGHEST_PROTOCOL)

    def load(self, path: Path) -> None:
        """Add the states `save` wrote (from this project's own temporary file)."""
        with open(path, "rb") as fh:
            saved = pickle.load(fh)  # noqa: S301 (written by save() in this run)
        if saved["frozen"] != self.frozen or saved["lengths"] != (self.text_length,
                                                                   self.pair_length):
            raise ValueError(f"{path} holds states of another cut or length")
        self._store.update(saved["store"])

    def _run(self, feed: dict[str, np.ndarray]) -> np.ndarray:
        if self._session is None:
            import onnxruntime as ort

            with tempfile.TemporaryDirectory() as tmp:
                path = export_lower_onnx(self._bert, self.frozen, Path(tmp) / "lower.onnx")
                opts = ort.SessionOptions()
                opts.intra_op_num_threads = max(1, int(self.threads))
                self._session = ort.InferenceSession(str(path), opts,
                                                     providers=["CPUExecutionProvider"])
                self._inputs = {i.name for i in self._session.get_inputs()}
        return self._session.run(None, {n: v for n, v in feed.items() if n in self._inputs})[0]

    def texts(self, texts: Sequence[str]) -> list[np.ndarray]:
        """(tokens, hidden) float16 states of each text, truncated to text_length tokens."""
        return self._get(list(texts), self._encode_texts)

    def pairs(self, prefs: Sequence[str], passages: Sequence[str]) -> list[np.ndarray]:
        """States of "[CLS] preference [SEP] passage [SEP]" (passage truncated first)."""
        return self._get(list(zip(prefs, passages)), self._encode_pairs)

    def _encode_texts(self, keys: list[Any]) -> list[Any]:
        self._tok.enable_truncation(max_length=self.text_length)
        return self._tok.encode_batch(keys)

    def _encode_pairs(self, keys: list[Any]) -> list[Any]:
        self._tok.enable_truncation(max_length=self.pair_length, strategy="only_second")
        return self._tok.encode_batch([tuple(k) for k in keys])

    def _get(self, keys: list[Any], encode: Any) -> list[np.ndarray]:
        missing = [k for k in dict.fromkeys(keys) if k not in self._store]
        if missing:
            encs = encode(missing)
            order = sorted(range(len(missing)), key=lambda i: len(encs[i].ids))  # less padding
            for s in range(0, len(order), self.batch_size):
                chunk = order[s:s + self.batch_size]
                width = max(len(encs[i].ids) for i in chunk)
                feed = {n: np.zeros((len(chunk), width), dtype=np.int64) for n in INPUT_NAMES}
                for row, i in enumerate(chunk):
                    e, n = encs[i], len(encs[i].ids)
                    feed["input_ids"][row, :n] = e.ids
                    feed["attention_mask"][row, :n] = 1
                    feed["token_type_ids"][row, :n] = e.type_ids
                hidden = self._run(feed)
                for row, i in enumerate(chunk):
                    self._store[missing[i]] = hidden[row, :len(encs[i].ids)].astype(np.float16)
        return [self._store[k] for k in keys]


def pad_states(torch: Any, states: Sequence[np.ndarray]) -> tuple[Any, Any]:
    """Stack variable-length states into (batch, width, hidden) float32 and a 0/1 mask."""
    width = max(len(s) for s in states)
    hidden = np.zeros((len(states), width, states[0].shape[1]), dtype=np.float32)
    mask = np.zeros((len(states), width), dtype=np.int64)
    for row, s in enumerate(states):
        hidden[row, :len(s)] = s
        mask[row, :len(s)] = 1
    return torch.from_numpy(hidden), torch.from_numpy(mask)


def mean_pool(torch: Any, hidden: Any, mask: Any) -> Any:
    m = mask.unsqueeze(-1).to(hidden.dtype)
    return (hidden * m).sum(1) / m.sum(1).clamp(min=1e-9)
