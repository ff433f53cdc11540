"""`epic-edge build`: a memory file per persona from one corpus, in one process or on Ray.

The corpus is embedded once for every persona (shared), and so are a siamese learned
verifier's passage vectors; the coarse filter, the verifier's decisions (then a dot product
per candidate preference) and the memory file are per persona. On Ray the embedding and
coarse filter run as a Ray Data pipeline (the passage vectors too), verification as an actor
pool and each persona's file as one task; the files are the same as one process writes
(tests/test_ray_engine.py)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np

from epic_edge.datasets import load_prefwiki
from epic_edge.errors import InvalidInputError
from epic_edge.stages import normalize_rows
from epic_edge.types import Item, Verdict
from epic_edge_lab import common, corpora
from epic_edge_lab.ray_bench import engine_cluster
from epic_edge_lab.replay import Job, ReplayVerifier
from epic_edge_lab.systems import Borrowed, EpicMemory
from epic_edge_lab.vectors import CachedEmbedder, corpus_vectors, shares_passages, warm_passages

ENGINES = ("local", "ray")


def run(out: Path, *, corpus: str = "sample", personas: str | None = "0-1",
        engine: str = "local", address: str | None = None, workers: int = 2,
        verifier: str | None = None, instructions: str = "template",
        profile: str = "linux-cpu", models: Path | None = None, tau: float | None = None,
        servers: list[str] | None = None, limit: int | None = None, progress: bool = True,
        log=print) -> dict[str, Any]:
    """Write `out`/persona-<i>.epic for each chosen PrefWiki persona; return the JSON."""
    if engine not in ENGINES:
        raise InvalidInputError(f"unknown engine {engine!r}; choose from {', '.join(ENGINES)}")
    if workers < 1:
        raise InvalidInputError("--workers must be at least 1")
    started = time.perf_counter()
    prof, model_dir = common.profile_and_models(profile, models)
    tau = prof.tau if tau is None else float(tau)
    wiki = load_prefwiki()
    chosen = common.parse_personas(personas, len(wiki))
    prefs = {p: list(dict.fromkeys(common.persona_questions(wiki[p])[0])) for p in chosen}
    items = corpora.load(corpus, limit=limit)
    out.mkdir(parents=True, exist_ok=True)
    out.chmod(0o700)
    name = common.verifier_name(prof, verifier)
    log(f"build: {len(chosen)} personas from the {corpus} corpus ({len(items)} chunks), "
        f"engine {engine}, verifier {name}, tau {tau}")
    spec = (str(profile), str(model_dir))  # a name or a .toml path each worker can read
    vspec = ("verifier", *spec, name, instructions)
    stages: dict[str, float] = {}
    cluster = engine_cluster(engine, profile, model_dir, name, instructions, address, workers,
                             progress)
    if engine == "local":
        embedder = common.make_embedder(prof, model_dir)
        vectors, stages["embed_s"] = corpus_vectors(corpus, items, embedder,
                                                    corpora.data_dir() / "vectors",
                                                    progress=progress)
        passages = _shared_passages(vspec, items, corpus, progress, None, stages)
        t0 = time.perf_counter()
        rows = [build_persona(p, prefs[p], out, vspec, tau, items, vectors, None, passages)
                for p in chosen]
        stages["personas_s"] = time.perf_counter() - t0
    else:
        from epic_edge_lab import ray_engine

        embedder = ray_engine.load("embedder", *spec)
        pref_vectors = [normalize_rows(embedder.embed(prefs[p])) for p in chosen]
        vectors, cands, stages["embed_filter_s"] = ray_engine.embed_and_filter(
            [it.text for it in items], ("embedder", *spec), workers, pref_vectors, tau,
            progress=progress)
        passages = _shared_passages(vspec, items, corpus, progress, cluster, stages)
        jobs = {p: _jobs(items, prefs[p], cands[:, n]) for n, p in enumerate(chosen)}
        urls = servers or [None]
        vspecs = [(*vspec, urls[w % len(urls)]) for w in range(workers)]
        pool = ray_engine.VerifierPool(vspecs, passages)
        verdicts, stages["verify_s"] = pool.judge([j for js in jobs.values() for j in js],
                                                  progress=progress)
        pool.close()
        stages["verify_failed"] = pool.failed
        t0 = time.perf_counter()
        # a persona's task ingests only the items its coarse filter passed (in corpus order):
        # the ingest drops the others unrecorded, so its file is the same
        passed = {p: np.flatnonzero(cands[:, n, 0] >= 0) for n, p in enumerate(chosen)}
        rows = ray_engine.per_persona(build_persona, [
            (p, prefs[p], out, vspec, tau, [items[i] for i in passed[p]], vectors[passed[p]],
             {j: verdicts[j] for j in jobs[p] if j in verdicts}) for p in chosen],
            progress=progress)
        stages["personas_s"] = time.perf_counter() - t0
        stages["verify_jobs"] = len(verdicts)
    for row in rows:
        log(f"  persona {row['persona']}: kept {row['kept_items']} items, "
            f"{row['entries']} entries, {row['seconds']:.1f} s")
    return {"bench": "build", "engine": engine, "workers": workers if engine == "ray" else 1,
            "corpus": corpus, "chunks": len(items), "personas": chosen, "tau": tau,
            "verifier": name, "instructions": instructions, "profile": prof.name,
            "stages": stages, "per_persona": rows, "out": str(out),
            "elapsed_s": time.perf_counter() - started, "machine": common.machine()}


def siamese_verifier(vspec: tuple) -> Any:
    """The build's verifier, loaded in this process, when it is a siamese learned one (its
    passage vectors can serve every persona); None for any other, which is not loaded here
    (an LLM would load once more)."""
    from epic_edge_lab.ray_engine import load

    if vspec[3] != "learned":
        return None
    verifier = load(*vspec[:5])
    return verifier if shares_passages(verifier) else None


def _shared_passages(vspec: tuple, items: list[Item], corpus: str, progress: bool,
                     cluster: Any, stages: dict[str, float]) -> tuple | None:
    """The corpus's passage vectors of a siamese learned verifier, once for every persona
    (cached; on Ray computed by the cluster's pipeline); `stages` gets their seconds."""
    t0 = time.perf_counter()
    verifier = siamese_verifier(vspec)
    if verifier is None:
        return None
    passages = warm_passages(verifier, items, corpus, progress=progress, cluster=cluster)
    stages["passages_s"] = time.perf_counter() - t0
    return passages


def _jobs(items: list[Item], prefs: list[str], cands: np.ndarray) -> list[Job]:
    """The verification jobs of one persona: items with survivors, and the survivors' texts."""
    return [(items[i].text, tuple(prefs[j] for j in row if j >= 0))
            for i, row in enumerate(cands) if row[0] >= 0]


def build_persona(p_index: int, prefs: list[str], out: Path, vspec: tuple, tau: float,
                  items: list[Item], vectors: np.ndarray,
                  verdicts: dict[Job, Verdict] | None,
                  passages: tuple | None = None) -> dict[str, Any]:
    """One persona's memory file through the runtime's own ingest. With `verdicts` (judged
    ahead by a pool) the verifier replays them; any call not judged ahead goes to the real
    verifier and counts as a replay miss. `passages`: the corpus's shared passage vectors
    (texts, vectors) for a siamese learned verifier."""
    from epic_edge_lab.ray_engine import load, load_verifier

    t0, cpu = time.perf_counter(), time.process_time()
    kind, prof_name, models = vspec[:3]
    prof, _ = common.profile_and_models(prof_name, Path(models))
    embedder = CachedEmbedder(load("embedder", prof_name, models), [it.text for it in items],
                              vectors)
    real = lambda: load_verifier(vspec, passages)  # noqa: E731  (loaded once per process, lent to each memory)
    verifier = real() if verdicts is None else ReplayVerifier(verdicts, fallback=real)
    path = out / f"persona-{p_index}.epic"
    for old in out.glob(f"persona-{p_index}.epic*"):
        old.unlink()
    epic = EpicMemory(path, prof, embedder, Borrowed(verifier), tau, prefs)
    try:
        epic.ingest(items)
        entries = entry_rows(epic)
        size = epic.bytes()
    finally:
        epic.close()
    return {"persona": p_index, "kept_items": epic.kept, "verified": epic.verified,
            "entries": len(entries), "llm_calls": epic.llm_calls, "bytes": size,
            "replay_misses": getattr(verifier, "misses", None), "path": str(path),
            "seconds": time.perf_counter() - t0, "cpu_s": time.process_time() - cpu,
            "entry_rows": entries}


def entry_rows(epic: EpicMemory) -> list[list]:
    """Every stored entry as [item text, preference text, instruction, confidence], sorted:
    what two builds must agree on."""
    o = epic.memory.store.sealer.open
    rows = epic.memory.store.conn.execute(
        "SELECT i.text, p.text, e.instruction, e.confidence FROM entries e "
        "JOIN items i ON i.id = e.item_id JOIN preferences p ON p.id = e.preference_id"
    ).fetchall()
    return sorted([[o(item), o(pref), o(instruction), confidence]
                   for item, pref, instruction, confidence in rows])


def render(result: dict[str, Any]) -> str:
    rows = [[str(r["persona"]), str(r["kept_items"]), str(r["entries"]),
             f"{r['bytes'] / 1e3:.1f}", f"{r['seconds']:.1f}", str(r["replay_misses"] or 0)]
            for r in result["per_persona"]]
    stages = ", ".join(f"{k} {v:.1f}" for k, v in result["stages"].items())
    return "\n".join([common.table(rows, ["persona", "kept items", "entries", "KB", "s",
                                          "replay misses"]), "",
                      f"- engine {result['engine']} ({result['workers']} workers), "
                      f"{result['chunks']} chunks; {stages}; total "
                      f"{result['elapsed_s']:.1f} s; files in {result['out']}"])
