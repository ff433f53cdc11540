"""`python -m epic_edge_lab.scaling`: each stage of `build --engine ray` with 1 and 2 workers,
and the arithmetic that projects it to the paper's scale (6.9M articles x 100 personas)."""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from epic_edge.datasets import load_prefwiki
from epic_edge.stages import normalize_rows
from epic_edge_lab import common, corpora, ray_engine
from epic_edge_lab.build import _jobs, build_persona, siamese_verifier
from epic_edge_lab.scaling_plan import INTRO, plan

PAPER = {"items": 6_900_000, "personas": 100}  # EPIC's Wikipedia memory build
STAGES = ("embed", "passages", "verify", "personas")  # "passages": a siamese verifier only


def run(*, corpus: str = "wiki", chunks: int = 4096, personas: str = "0-3",
        workers: tuple[int, ...] = (1, 2), profile: str = "linux-cpu",
        models: Path | None = None, out: Path | None = None, progress: bool = True,
        log=print) -> dict[str, Any]:
    """Run the stages on `chunks` chunks for each worker count (a fresh local cluster with
    that many CPUs each time); items per second per stage, speed-ups, projection. A siamese
    learned verifier's passage vectors are a shared stage ("passages": its encoder over the
    corpus once), and the verify stage decides from them as `build` does."""
    import ray

    prof, model_dir = common.profile_and_models(profile, models)
    items = corpora.load(corpus, limit=chunks)
    wiki = load_prefwiki()
    chosen = common.parse_personas(personas, len(wiki))
    prefs = {p: list(dict.fromkeys(common.persona_questions(wiki[p])[0])) for p in chosen}
    spec = (profile, str(model_dir))
    vspec = ("verifier", *spec, common.verifier_name(prof, None), "template")
    embedder = ray_engine.load("embedder", *spec)
    shared = siamese_verifier(vspec) is not None
    texts = [it.text for it in items]
    pref_vectors = [normalize_rows(embedder.embed(prefs[p])) for p in chosen]
    scratch = tempfile.TemporaryDirectory(prefix="epic-scaling-")
    folder = Path(out or scratch.name)
    rows = []
    for w in workers:
        ray.shutdown()
        ray_engine.start(num_cpus=w)
        row: dict[str, Any] = {"workers": w, "load_avg_before": list(os.getloadavg())}
        stats: dict[str, float] = {}
        vectors, cands, seconds = ray_engine.embed_and_filter(
            texts, ("embedder", *spec), w, pref_vectors, prof.tau, progress=progress,
            stats=stats)
        row["embed"] = {**_rate(len(items), seconds, stats["cpu_s"]),
                        "busy_s": stats["busy_s"]}  # actors' wall time inside their calls
        passages = None
        if shared:
            found, _, seconds = ray_engine.embed_and_filter(texts, (*vspec, None), w,
                                                            progress=progress, stats=stats)
            row["passages"] = {**_rate(len(items), seconds, stats["cpu_s"]),
                               "busy_s": stats["busy_s"]}
            passages = (texts, found)
        jobs = {p: _jobs(items, prefs[p], cands[:, n]) for n, p in enumerate(chosen)}
        every = list(dict.fromkeys(j for js in jobs.values() for j in js))
        pool = ray_engine.VerifierPool([(*vspec, None)] * w, passages)
        warm = ray_engine.JOBS_PER_CALL * w  # the first calls wait for the models to load
        verdicts, _ = pool.judge(every[:warm], progress=False)
        cpu = pool.cpu_s
        rest, seconds = pool.judge(every[warm:], progress=progress)
        verdicts.update(rest)
        pool.close()
        row["verify"] = _rate(len(every) - warm, seconds, pool.cpu_s - cpu)
        passed = {p: np.flatnonzero(cands[:, n, 0] >= 0) for n, p in enumerate(chosen)}
        started = time.perf_counter()
        built = ray_engine.per_persona(build_persona, [
            (p, prefs[p], folder / f"w{w}", vspec, prof.tau, [items[i] for i in passed[p]],
             vectors[passed[p]], {j: verdicts[j] for j in jobs[p] if j in verdicts})
            for p in chosen],
            progress=progress)
        row["personas"] = _rate(sum(len(v) for v in passed.values()),
                                time.perf_counter() - started, sum(r["cpu_s"] for r in built))
        row["kept"] = sum(r["kept_items"] for r in built)
        row["load_avg_after"] = list(os.getloadavg())
        rows.append(row)
        log(f"  {w} worker(s): " + ", ".join(f"{s} {row[s]['per_s']:.1f}/s"
                                             for s in STAGES if s in row))
    ray.shutdown()
    scratch.cleanup()
    first, last = rows[0], rows[-1]
    survivors = sum(len(js) for js in jobs.values()) / (len(items) * len(chosen))
    result = {"bench": "scaling", "corpus": corpus, "chunks": len(items), "personas": chosen,
              "profile": prof.name, "tau": prof.tau, "rows": rows,
              "speedup": {s: last[s]["per_s"] / first[s]["per_s"] for s in stages_of(rows)},
              "dims": {"embed": int(vectors.shape[1]),
                       **({"passages": int(passages[1].shape[1])} if passages else {})},
              "survivor_share": survivors,
              "kept_share": first["kept"] / max(sum(len(js) for js in jobs.values()), 1),
              "machine": common.machine()}
    result["projection"] = project(result)
    return result


def stages_of(rows: list[dict[str, Any]]) -> list[str]:
    """The stages a run measured (no "passages" when the verifier shares none, or in a run
    from before they were shared)."""
    return [s for s in STAGES if s in rows[0]]


def _rate(count: int, seconds: float, cpu_s: float) -> dict[str, float]:
    """Wall-clock items/s of the stage, and items per CPU-second of its workers (what one
    worker does on a core of its own: the rate the projection uses)."""
    return {"items": count, "seconds": seconds, "per_s": count / max(seconds, 1e-9),
            "cpu_s": cpu_s, "per_cpu_s": count / max(cpu_s, 1e-9)}


def project(result: dict[str, Any], day_s: float = 86_400.0) -> dict[str, Any]:
    """Worker-hours per stage at the paper's scale from one worker's items per CPU-second
    measured here; workers for a one-day build at the efficiency of two workers (their items
    per CPU-second over one worker's: the per-item work that parallelism adds). The shared
    stages (embed, passages) count once per corpus item, verify and personas once per
    (item, persona) that passes the coarse filter, at the rate measured for them."""
    one, two = result["rows"][0], result["rows"][-1]
    n, p, share = PAPER["items"], PAPER["personas"], result["survivor_share"]
    stages = stages_of(result["rows"])
    per_corpus = {"embed": n, "passages": n}
    work = {s: per_corpus.get(s, n * p * share) for s in stages}
    hours = {s: work[s] / one[s]["per_cpu_s"] / 3600 for s in stages}
    efficiency = {s: two[s]["per_cpu_s"] / one[s]["per_cpu_s"] for s in stages}
    total = sum(hours.values())
    workers_day = sum(hours[s] * 3600 / max(min(efficiency[s], 1.0), 0.1) for s in stages) / day_s
    return {"items": n, "personas": p, "work": work, "worker_hours": hours,
            "share_of_time": {s: hours[s] / total for s in stages},
            "efficiency_2_workers": efficiency, "worker_hours_total": total,
            "workers_for_one_day": workers_day,
            "wall_hours_one_process": total,
            "wall_hours_64_workers": sum(hours[s] / (64 * max(min(efficiency[s], 1.0), 0.1))
                                         for s in stages)}


def render(result: dict[str, Any]) -> str:
    rows = [[s, str(r["workers"]), f"{r[s]['items']:,}", f"{r[s]['seconds']:.1f}",
             f"{r[s]['per_s']:.1f}", f"{r[s]['cpu_s']:.1f}", f"{r[s]['per_cpu_s']:.1f}",
             f"{r['load_avg_before'][0]:.1f}"]
            for s in stages_of(result["rows"]) for r in result["rows"]]
    head = ["stage", "workers", "items", "wall s", "items/s", "workers' CPU s",
            "items per CPU-s", "load (1 min)"]
    pr = result["projection"]
    plan = [[s, f"{pr['work'][s]:,.0f}", f"{result['rows'][0][s]['per_cpu_s']:.1f}",
             f"{pr['worker_hours'][s]:,.0f}", f"{pr['share_of_time'][s]:.0%}",
             f"{pr['efficiency_2_workers'][s]:.2f}"] for s in pr["work"]]
    plan_head = ["stage", "work at paper scale", "items/s/worker (per CPU-s)", "worker-hours",
                 "share", "2-worker efficiency"]
    return "\n".join([
        common.table(rows, head), "",
        f"- {result['chunks']:,} {result['corpus']} chunks, personas "
        f"{', '.join(map(str, result['personas']))}; each persona's coarse filter passes "
        f"{result['survivor_share']:.1%} of the chunks; the verifier keeps "
        f"{result['kept_share']:.1%} of those.",
        "- Wall-clock speed-up of 2 workers over 1 (load above): " + ", ".join(
            f"{s} {result['speedup'][s]:.2f}x" for s in result["speedup"]) + ".",
        f"- Target, embedding with 2 workers >= 1.7x one: {result['speedup']['embed']:.2f}x "
        f"wall-clock at a load of {result['rows'][-1]['load_avg_before'][0]:.1f} on 2 shared "
        f"cores ({'met' if result['speedup']['embed'] >= 1.7 else 'not shown here'}); the "
        f"CPU efficiency {pr['efficiency_2_workers']['embed']:.2f} means "
        f"{2 * min(pr['efficiency_2_workers']['embed'], 1.0):.2f}x on two cores of their own."
        + _contention(result["rows"][-1]["embed"]),
        "",
        f"Projection to {pr['items']:,} articles x {pr['personas']} personas:", "",
        common.table(plan, plan_head), "",
        f"- In all {pr['worker_hours_total']:,.0f} worker-hours: one process would take "
        f"{pr['wall_hours_one_process'] / 24:,.0f} days; a one-day build needs about "
        f"{pr['workers_for_one_day']:,.0f} workers at the measured 2-worker efficiency; 64 "
        f"workers take about {pr['wall_hours_64_workers']:,.1f} hours.",
    ])


def section(out: Path) -> list[str]:
    """BENCHMARKS.md's section, when `python -m epic_edge_lab.scaling` left its JSON."""
    path = out / "scaling.json"
    if not path.exists():
        return []
    result = json.loads(path.read_text(encoding="utf-8"))
    return ["## The bench at paper scale, on Ray", "", INTRO, "", render(result), "",
            *plan(result), ""]


def _contention(embed: dict[str, float]) -> str:
    """How many embedding actors worked at once, and how much of a core each got meanwhile."""
    if "busy_s" not in embed:
        return ""
    share = embed["cpu_s"] / embed["busy_s"]
    return (f" The actors worked at once {embed['busy_s'] / embed['seconds']:.2f} of the wall "
            f"time, each getting {share:.2f} of a core while busy"
            + (": the other jobs on the machine held the speed-up back." if share < 0.8
               else "."))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m epic_edge_lab.scaling", description=__doc__)
    p.add_argument("--corpus", default="wiki")
    p.add_argument("--chunks", type=int, default=4096)
    p.add_argument("--personas", default="0-3")
    p.add_argument("--json", type=Path, default=Path("bench/results/scaling.json"))
    p.add_argument("--out", type=Path, default=None, help="folder for the memories built")
    args = p.parse_args(argv)
    result = run(corpus=args.corpus, chunks=args.chunks, personas=args.personas, out=args.out)
    common.write_json(result, args.json)
    print(render(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
