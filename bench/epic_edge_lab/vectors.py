"""Corpus vectors embedded once and cached (npy, keyed by embedder fingerprint and texts)."""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from epic_edge.export.bundle import sha256_file
from epic_edge.protocols import Embedder
from epic_edge.types import Item
from epic_edge_lab import corpora

BLOCK = 1024  # rows embedded between two saves of the partial cache


def _key(embedder: Embedder, texts: Sequence[str]) -> str:
    """The cache key: the embedder's fingerprint, its weights' sha256 where its model.json
    names one (a retrained artifact under the same name), the bytes of its model file where it
    has one (the same weights quantised or stored otherwise embed otherwise), and the texts."""
    digest = hashlib.sha256(embedder.fingerprint.encode())
    weights = (getattr(embedder, "meta", None) or {}).get("weights_sha256")
    if weights:
        digest.update(str(weights).encode())
    model = getattr(embedder, "model_path", None)
    if model is not None and Path(model).is_file():
        digest.update(bytes.fromhex(sha256_file(model)))
    for text in texts:
        digest.update(hashlib.sha256(text.encode("utf-8")).digest())
    return digest.hexdigest()[:16]


def corpus_vectors(
    name: str, items: Sequence[Item], embedder: Embedder, cache_dir: Path, *,
    progress: bool = True, compute: Callable[[list[str]], tuple[np.ndarray, float]] | None = None,
) -> tuple[np.ndarray, float]:
    """(n, dim) unit vectors of `items`, and the seconds the embedding took when first made.

    The first call embeds (resuming a partial run; or all at once by `compute`, e.g. a Ray
    pipeline, which returns (vectors, seconds)) and writes `<cache_dir>/<name>-<key>.npy`;
    later calls load it.
    """
    texts = [it.text for it in items]
    key = _key(embedder, texts)
    cache_dir.mkdir(parents=True, exist_ok=True)
    final, partial = cache_dir / f"{name}-{key}.npy", cache_dir / f"{name}-{key}.partial.npy"
    meta_path = cache_dir / f"{name}-{key}.json"
    if final.exists():
        meta = json.loads(meta_path.read_text()) if meta_path.exists() else {}
        return np.load(final), float(meta.get("seconds", float("nan")))
    done = np.load(partial) if partial.exists() else np.empty((0, embedder.dim), np.float32)
    meta = json.loads(meta_path.read_text()) if meta_path.exists() else {"seconds": 0.0}
    if compute is not None and not len(done):
        done, meta["seconds"] = compute(texts)
        meta.update(fingerprint=embedder.fingerprint, count=len(done))
        meta_path.write_text(json.dumps(meta))
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=len(texts), initial=len(done), desc=f"embed {name}", unit="chunk")
    while len(done) < len(texts):
        start = time.perf_counter()
        block = embedder.embed(texts[len(done):len(done) + BLOCK])
        meta["seconds"] += time.perf_counter() - start
        done = np.concatenate([done, np.asarray(block, np.float32)])
        np.save(partial, done)
        meta.update(fingerprint=embedder.fingerprint, count=len(done))
        meta_path.write_text(json.dumps(meta))
        if bar is not None:
            bar.update(len(block))
    if bar is not None:
        bar.close()
    np.save(final, done)
    partial.unlink(missing_ok=True)
    return done, float(meta["seconds"])


def shares_passages(verifier: Any) -> bool:
    """Whether `verifier` compares its own vector of a passage with each preference's (a
    siamese learned verifier): then a corpus's passage vectors serve every persona."""
    return getattr(verifier, "kind", None) == "siamese"


def warm_passages(verifier: Any, items: Sequence[Item], corpus: str, *, progress: bool = True,
                  cluster: Any = None) -> tuple[list[str], np.ndarray] | None:
    """Give a siamese learned verifier the corpus's passage vectors, computed once and cached
    as `<corpus>-verifier` (the same vectors it would compute item by item, so kept items do
    not change; on Ray `cluster`, a bench/ray_bench.RayBench, fills the cache); returns them
    (None for another verifier) for other processes' verifiers."""
    if not shares_passages(verifier):
        return None
    name = f"{corpus}-verifier"
    vectors, _ = (cluster.corpus_vectors(name, items, verifier, kind="verifier") if cluster
                  else corpus_vectors(name, items, verifier, corpora.data_dir() / "vectors",
                                      progress=progress))
    texts = [it.text for it in items]
    verifier.remember_passages(texts, vectors)
    return texts, vectors


class CachedEmbedder:
    """Serves known texts from precomputed vectors, embeds the rest with the real embedder.

    Same fingerprint and dim as the wrapped embedder, so memories built through it are
    identical to memories built with the real one. `misses` counts texts really embedded.
    """

    def __init__(self, embedder: Embedder, texts: Sequence[str] = (),
                 vectors: np.ndarray | None = None) -> None:
        self.inner = embedder
        self.dim = embedder.dim
        self._cache: dict[str, np.ndarray] = {}
        self.misses = 0
        if vectors is not None:
            self.remember(texts, vectors)

    @property
    def fingerprint(self) -> str:
        return self.inner.fingerprint

    def remember(self, texts: Sequence[str], vectors: np.ndarray) -> None:
        for text, vector in zip(texts, np.asarray(vectors, np.float32)):
            self._cache[text] = vector

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        texts = list(texts)
        missing = list(dict.fromkeys(t for t in texts if t not in self._cache))
        if missing:
            self.misses += len(missing)
            fresh = self.inner.embed(missing)
            if len(missing) < 4096:  # questions and instructions; keep the cache bounded
                self.remember(missing, fresh)
            else:
                lookup = dict(zip(missing, fresh))
                return np.stack([self._cache.get(t, lookup.get(t)) for t in texts])
        if not texts:
            return np.empty((0, self.dim), np.float32)
        return np.stack([self._cache[t] for t in texts])
