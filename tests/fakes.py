"""Deterministic stand-ins for the embedder and verifier, for tests of the layers above."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from typing import Any

import numpy as np

from epic_edge.types import Preference, Verdict

STOPWORDS = frozenset(
    "a an and the of in on to with for by i my is are be it as at or only".split()
)


class BagOfWordsEmbedder:
    """Hashes lower-cased words into `dim` buckets; shared words give positive cosine."""

    def __init__(self, dim: int = 256, name: str = "bow") -> None:
        self.dim = dim
        self.name = name
        self.calls: list[int] = []

    @property
    def fingerprint(self) -> str:
        return f"{self.name}:{self.dim}"

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.calls.append(len(texts))
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in re.findall(r"[a-z0-9]+", text.lower()):
                if word in STOPWORDS:
                    continue
                bucket = int.from_bytes(hashlib.md5(word.encode()).digest()[:4], "little")
                out[row, bucket % self.dim] += 1.0
            if not out[row].any():  # like a real embedder, never a zero vector
                out[row, len(text) % self.dim] = 1.0
            out[row] /= np.linalg.norm(out[row])
        return out


class KeywordVerifier:
    """Keeps a candidate when the item mentions one of its `keywords[pref_text]` words."""

    def __init__(self, keywords: dict[str, list[str]] | None = None) -> None:
        self.keywords = keywords or {}
        self.seen: list[tuple[str, list[int]]] = []

    def verify(self, item: str, candidates: Sequence[Preference]) -> Verdict:
        self.seen.append((item, [p.id for p in candidates]))
        words = set(re.findall(r"[a-z]+", item.lower()))
        kept = [p for p in candidates
                if words & set(self.keywords.get(p.text, p.text.lower().split()))]
        if not kept:
            return Verdict.discard("no keyword", llm_calls=1, confidence=0.1)
        return Verdict(True, [p.id for p in kept],
                       {p.id: f"Use for {p.text} when reading {item[:60]}" for p in kept},
                       "keyword", 0.9, 1 + len(kept))


def tiny_bert(seed: int = 0) -> Any:
    """A random-weight 2-layer BERT (hidden 32) over MiniLM's vocabulary, in eval mode."""
    import torch
    import transformers

    torch.manual_seed(seed)
    config = transformers.BertConfig(vocab_size=30522, hidden_size=32, num_hidden_layers=2,
                                     num_attention_heads=2, intermediate_size=64,
                                     attn_implementation="eager")
    return transformers.BertModel(config).eval()
