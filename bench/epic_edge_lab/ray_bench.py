"""`bench quality|stream --engine ray`: the corpus embedded by the Ray pipeline (into the same
cache), the verifier's decisions judged ahead by the actor pool and replayed to each memory."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from epic_edge.errors import InvalidInputError
from epic_edge.stages import normalize_rows
from epic_edge.types import Item
from epic_edge_lab import corpora, ray_engine
from epic_edge_lab.replay import Job, ReplayVerifier, survivors
from epic_edge_lab.vectors import corpus_vectors


class RayBench:
    """One bench run's Ray side: where the cluster is, the profile, workers per stage."""

    def __init__(self, profile: Any, model_dir: Path, verifier: str, instructions: str, *,
                 address: str | None = None, workers: int = 2, progress: bool = True) -> None:
        ray_engine.start(address)
        name = profile if isinstance(profile, str) else profile.name
        self.spec = (name, str(model_dir))
        self.vspec = ("verifier", *self.spec, verifier, instructions, None)
        self.workers, self.progress = workers, progress
        self.pool: ray_engine.VerifierPool | None = None

    def corpus_vectors(self, name: str, items: Sequence[Item], model: Any,
                       kind: str = "embedder") -> tuple[np.ndarray, float]:
        """bench/vectors.corpus_vectors, the missing cache filled by the Ray pipeline."""
        spec = (kind, *self.spec) if kind == "embedder" else self.vspec

        def pipeline(texts: list[str]) -> tuple[np.ndarray, float]:
            vectors, _, seconds = ray_engine.embed_and_filter(texts, spec, self.workers,
                                                              progress=self.progress)
            return vectors, seconds

        return corpus_vectors(name, items, model, corpora.data_dir() / "vectors",
                              progress=self.progress, compute=pipeline)

    def start_pool(self, passages: tuple | None = None) -> None:
        self.pool = ray_engine.VerifierPool([self.vspec] * self.workers, passages)

    def judged_ahead(self, real: Any, items: Sequence[Item], vectors: np.ndarray,
                     personas: Sequence[tuple[Sequence[str], np.ndarray | None]],
                     embedder: Any, tau: float, replay: ReplayVerifier | None = None,
                     ) -> ReplayVerifier:
        """A verifier that replays the pool's verdicts for every item each persona's coarse
        filter passes (`real` answers anything else, counted as a miss). A persona is its
        preference texts and their vectors (None: embedded as Memory.add_preferences does)."""
        jobs: list[Job] = []
        for prefs, pref_vectors in personas:
            if pref_vectors is None:
                prefs = list(dict.fromkeys(prefs))
                pref_vectors = normalize_rows(embedder.embed(prefs))
            jobs += [(items[i].text, tuple(prefs[j] for j in row))
                     for i, row in enumerate(survivors(vectors, pref_vectors, tau)) if row]
        if self.pool is None:
            self.start_pool()
        assert self.pool is not None
        verdicts, _ = self.pool.judge(jobs, progress=self.progress)
        replay = replay or ReplayVerifier(fallback=lambda: real)
        replay.add(verdicts, verdicts.values())
        return replay

    def describe(self, replay: ReplayVerifier) -> dict[str, Any]:
        """The engine's part of a result: workers, and verdicts replayed vs judged again."""
        return {"name": "ray", "workers": self.workers, "replayed": replay.hits,
                "replay_misses": replay.misses}

    def close(self) -> None:
        if self.pool is not None:
            self.pool.close()


def engine_cluster(engine: str, profile: Any, model_dir: Path, verifier: str,
                   instructions: str, address: str | None, workers: int,
                   progress: bool) -> RayBench | None:
    """The Ray side of an --engine ray bench run; None for one process (--engine local)."""
    if engine not in ("local", "ray"):
        raise InvalidInputError(f"unknown engine {engine!r}; choose from local, ray")
    if engine == "local":
        return None
    return RayBench(profile, model_dir, verifier, instructions, address=address,
                    workers=workers, progress=progress)
