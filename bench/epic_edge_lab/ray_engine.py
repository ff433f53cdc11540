"""The bench on Ray: corpus embedding and coarse filter as a Ray Data pipeline, verification
as an actor pool, one task per persona. Optional extra `ray`; the runtime never imports it."""

from __future__ import annotations

import atexit
import dataclasses
import logging
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from epic_edge.optional import optional_import
from epic_edge.types import Verdict
from epic_edge_lab.replay import Job, judge, survivors
from epic_edge_lab.vectors import BLOCK

JOBS_PER_CALL = 64  # verification jobs per actor call

LOOPBACK_NODE = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"  # "0": a one-machine cluster on loopback
_MODELS: dict[tuple, Any] = {}  # per worker process: each model is loaded once


def _ray() -> Any:
    os.environ["RAY_USAGE_STATS_ENABLED"] = "0"  # the project sends no telemetry
    os.environ.setdefault("RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO", "0")  # CPU workers: no warning
    return optional_import("ray", "ray", "the bench's Ray engine (--engine ray)")


def start(address: str | None = None, num_cpus: int | None = None) -> Any:
    """Connect to the cluster at `address` (default: start a local one, on loopback only); no
    dashboard, no usage stats. Returns the ray module."""
    if address is None:  # workers name their node by loopback, not by a route to 8.8.8.8
        os.environ[LOOPBACK_NODE] = "0"
    ray = _ray()
    if not ray.is_initialized():
        env = {"env_vars": {"RAY_USAGE_STATS_ENABLED": "0", "HOME": str(Path.home()),
                            **({} if address else {LOOPBACK_NODE: "0"})}}
        local = {} if address else {"num_cpus": num_cpus, "_node_ip_address": "127.0.0.1"}
        with _head_home():
            ray.init(address=address, include_dashboard=False, runtime_env=env,
                     log_to_driver=False, logging_level=logging.WARNING,
                     **local)  # type: ignore[arg-type]
        from ray.data import DataContext

        ctx = DataContext.get_current()
        ctx.execution_options.preserve_order = True
    return ray


@contextmanager
def _head_home() -> Iterator[None]:
    """HOME, while a local cluster's head processes start, is a private folder holding a
    cluster config: with none, Ray's head asks the cloud metadata hosts (169.254.169.254,
    metadata.google.internal) which cloud it runs on, usage stats on or off. Workers get the
    real HOME back through the runtime env."""
    home = os.environ.get("HOME")
    folder = tempfile.mkdtemp(prefix="epic-edge-ray-")  # read by the head after init returns
    atexit.register(shutil.rmtree, folder, True)
    (Path(folder) / "ray_bootstrap_config.yaml").write_text("provider: {type: local}\n")
    os.environ["HOME"] = folder
    try:
        yield
    finally:
        if home is None:
            os.environ.pop("HOME", None)
        else:
            os.environ["HOME"] = home


def load(kind: str, profile: str, models: str, name: str | None = None,
         instructions: str | None = None, url: str | None = None) -> Any:
    """The profile's embedder (kind "embedder") or verifier ("verifier"), once per process."""
    key = (kind, profile, models, name, instructions, url)
    if key not in _MODELS:
        from epic_edge_lab import common

        prof, model_dir = common.profile_and_models(profile, Path(models))
        if kind == "embedder":
            _MODELS[key] = common.make_embedder(prof, model_dir)
        else:
            if url:  # an OpenAI-compatible server of this worker's own
                prof = dataclasses.replace(prof, verifier={**(prof.verifier or {}), "url": url})
            _MODELS[key] = common.make_verifier(prof, model_dir, name, instructions)
    return _MODELS[key]


def load_verifier(spec: tuple, passages: tuple | None = None) -> Any:
    """load(*spec), given the corpus's shared passage vectors (texts, vectors) when it takes
    them (a siamese learned verifier; bench/vectors.warm_passages)."""
    verifier = load(*spec)
    if passages is not None and hasattr(verifier, "remember_passages"):
        verifier.remember_passages(*passages)
    return verifier


class EmbedFilter:
    """Ray Data stage: embed blocks of rows (model loaded once per actor) and give each row its
    coarse-filter survivors per persona: an (personas, max prefs) array, best first, -1 padded.

    A row of the input is one block of `vectors.BLOCK` texts, embedded in one call as
    bench/vectors.corpus_vectors does: an int8 model scales each batch by its own range, so
    the same blocks give the same vectors as one process."""

    def __init__(self, spec: tuple, pref_vectors: Sequence[np.ndarray] = (),
                 tau: float = 0.0) -> None:
        self.embedder = load(*spec)
        self.pref_vectors, self.tau = list(pref_vectors), tau
        self.width = max((len(v) for v in self.pref_vectors), default=0)

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        cpu, wall = time.process_time(), time.perf_counter()
        index, vectors = [], []
        for start, texts in zip(batch["start"], batch["texts"]):
            vectors.append(np.asarray(self.embedder.embed(list(texts)), np.float32))
            index.append(np.arange(start, start + len(texts)))
        out = {"i": np.concatenate(index), "vector": np.concatenate(vectors)}
        if self.pref_vectors:
            cands = np.full((len(out["i"]), len(self.pref_vectors), self.width), -1, np.int16)
            for p, prefs in enumerate(self.pref_vectors):
                for row, kept in enumerate(survivors(out["vector"], prefs, self.tau)):
                    cands[row, p, :len(kept)] = kept
            out["cands"] = cands
        out["cpu_s"] = np.full(len(out["i"]), (time.process_time() - cpu) / len(out["i"]))
        out["busy_s"] = np.full(len(out["i"]), (time.perf_counter() - wall) / len(out["i"]))
        return out


def embed_and_filter(texts: Sequence[str], spec: tuple, workers: int,
                     pref_vectors: Sequence[np.ndarray] = (), tau: float = 0.0,
                     progress: bool = True, stats: dict[str, float] | None = None,
                     ) -> tuple[np.ndarray, np.ndarray | None, float]:
    """(vectors, survivors or None, seconds) of `texts` through the pipeline, in input order;
    `stats` gets the actors' CPU seconds ("cpu_s") and busy seconds ("busy_s": busy over wall
    time is how many actors worked at once)."""
    ray = start()
    ray.data.DataContext.get_current().enable_progress_bars = progress
    started = time.perf_counter()
    blocks = [{"start": s, "texts": list(texts[s:s + BLOCK])} for s in range(0, len(texts), BLOCK)]
    ds = ray.data.from_items(blocks, override_num_blocks=len(blocks))
    ds = ds.map_batches(EmbedFilter, fn_constructor_args=(spec, list(pref_vectors), tau),
                        batch_size=1, batch_format="numpy", num_cpus=1,
                        compute=ray.data.ActorPoolStrategy(size=workers))
    index, vectors, cands = [], [], []
    cpu = busy = 0.0
    for batch in ds.iter_batches(batch_size=None, batch_format="numpy"):
        cpu += float(batch["cpu_s"].sum())
        busy += float(batch["busy_s"].sum())
        index.append(batch["i"])
        vectors.append(batch["vector"])
        if "cands" in batch:
            cands.append(batch["cands"])
    order = np.argsort(np.concatenate(index), kind="stable")
    vectors_out = np.concatenate(vectors)[order].astype(np.float32)
    cands_out = np.concatenate(cands)[order] if cands else None
    if stats is not None:
        stats.update(cpu_s=cpu, busy_s=busy)
    return vectors_out, cands_out, time.perf_counter() - started


class VerifyWorker:
    """Actor: the verifier, loaded once, judges lists of jobs (the learned decision, or an LLM
    at this worker's OpenAI-compatible server when configured)."""

    def __init__(self, spec: tuple, passages: tuple | None = None) -> None:
        self.verifier = load_verifier(spec, passages)

    def judge(self, index: int, jobs: list[Job]) -> tuple[int, list[Verdict | None], float]:
        cpu = time.process_time()
        verdicts = judge(self.verifier, jobs)
        return index, verdicts, time.process_time() - cpu


class VerifierPool:
    """A pool of one VerifyWorker actor per spec (each loads its verifier once); judge() sends
    it lists of jobs, as many at a time as there are actors."""

    def __init__(self, specs: Sequence[tuple], passages: tuple | None = None) -> None:
        ray = start()
        worker = ray.remote(num_cpus=1)(VerifyWorker)
        shared = ray.put(passages) if passages is not None else None
        self.actors = [worker.remote(spec, shared) for spec in specs]
        self.cpu_s = 0.0  # the actors' CPU seconds in judge() calls so far
        self.failed = 0  # jobs the verifier failed on: left to each persona's own ingest

    def judge(self, jobs: Sequence[Job], progress: bool = True,
              ) -> tuple[dict[Job, Verdict], float]:
        """Every distinct job's verdict (but those the verifier failed on: counted in
        `failed`), and the seconds it took."""
        from ray.util import ActorPool

        started = time.perf_counter()
        distinct = list(dict.fromkeys(jobs))
        chunks = [distinct[s:s + JOBS_PER_CALL] for s in range(0, len(distinct), JOBS_PER_CALL)]
        verdicts: dict[Job, Verdict] = {}
        bar = _bar(len(distinct), "verify", "item", progress)
        calls = ActorPool(self.actors).map_unordered(
            lambda actor, n: actor.judge.remote(n, chunks[n]), range(len(chunks)))
        for chunk, done, cpu in calls:
            verdicts.update((j, v) for j, v in zip(chunks[chunk], done) if v is not None)
            self.failed += sum(v is None for v in done)
            self.cpu_s += cpu
            bar.update(len(done))
        bar.close()
        return verdicts, time.perf_counter() - started

    def close(self) -> None:
        ray = start()
        for actor in self.actors:
            ray.kill(actor)


def per_persona(fn: Callable[..., dict], calls: Sequence[tuple], progress: bool = True,
                desc: str = "personas") -> list[dict]:
    """One Ray task per persona: fn(*args) for each args in `calls`, results in call order."""
    ray = start()
    task = ray.remote(num_cpus=1)(fn)
    refs = [task.remote(*args) for args in calls]
    bar = _bar(len(refs), desc, "persona", progress)
    pending = list(refs)
    while pending:
        done, pending = ray.wait(pending, num_returns=1)
        bar.update(len(done))
    bar.close()
    return ray.get(refs)


def _bar(total: int, desc: str, unit: str, progress: bool) -> Any:
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, unit=unit, disable=not progress)
