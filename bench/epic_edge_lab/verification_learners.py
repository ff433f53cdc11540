"""Learned-verifier learners side by side: out-of-fold on train, every test split, PR curves.

Each learner (epic_edge_lab.verifier.learners) is trained K times on train, once per fold of
preference clusters, so every train pair gets an out-of-fold score; its Keep threshold (and a
blend with the coarse cosine) is fitted on those scores. The test splits are scored by the
learner trained once more on all of train (what would ship); trainings run side by side.
The default learner is the exportable one with the best out-of-fold score (chosen on train
alone; the test splits only report); `--export` writes that all-of-train model as ONNX and
records the choice (learner, blend, threshold) in
bench/labels/learned_default.json for bench/epic_edge_lab/verifier/train.py.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from epic_edge_lab.calibrate import (
    CLUSTER_COSINE,
    LabelledPair,
    linked_roots,
)
from epic_edge_lab.verifier.blend import blend_scores, fit_blend
from epic_edge_lab.verifier.cv import preference_folds
from epic_edge_lab.verifier.learners import LearnerSpec, Workbench, fit, score
from epic_edge_lab.verifier.saving import from_state, to_state

from . import judged_split
from .corpus_sources import CorpusError
from .verification_learners_report import TIE, choose, make_row, onnx_row, plot, render

LEARNERS = (
    LearnerSpec("siamese, top layer, 1 epoch"),
    LearnerSpec("siamese, top layer, 2 epochs, hard negatives", epochs=2, hard_negatives=1),
    LearnerSpec("adapter on coarse vectors, 20 epochs, hard negatives", kind="adapter",
                epochs=20, lr=1e-3, batch_size=32, hard_negatives=3),
    LearnerSpec("siamese, top layer, 3 epochs", epochs=3),
    LearnerSpec("siamese, top layer, 3 epochs, hard negatives", epochs=3, hard_negatives=1),
    LearnerSpec("siamese, top 2 layers, 3 epochs", frozen=4, epochs=3),
    LearnerSpec("cross-encoder, top 2 layers, 3 epochs", kind="cross-encoder", frozen=4,
                epochs=3),
    LearnerSpec("siamese, all layers, 3 epochs, hard negatives", frozen=0, epochs=3, lr=5e-5,
                hard_negatives=1),
    LearnerSpec("siamese, all layers, 1 epoch", frozen=0, epochs=1, lr=5e-5),
    LearnerSpec("siamese, all layers, 1 epoch, in-batch negatives", frozen=0, epochs=1,
                lr=5e-5, in_batch=1.0),
)
BLEND = " + coarse-cosine blend"


def load_splits(data_dir: Path, log: Any = print) -> dict[str, list[LabelledPair]]:
    """train plus every test*.jsonl beside it (test: by preference; test_style: held-out style),
    and test_judged (the blind relevance judges' aligned labels, judged_split.py) when
    the bench corpus that holds its passages is fetched."""
    from epic_edge_lab.calibrate import load_verification_set

    files = {"train": data_dir / "train.jsonl",
             **{f.stem: f for f in sorted(data_dir.glob("test*.jsonl"))}}
    splits = {name: load_verification_set("all", f) for name, f in files.items()}
    try:
        pairs = judged_split.load(judged_split.corpus_texts())
    except CorpusError as exc:
        log(f"no {judged_split.SPLIT} split: {exc}")
    else:
        splits.update({judged_split.SPLIT: pairs} if pairs else {})
    return splits


def cluster_folds(pairs: list[LabelledPair], vectors: dict[str, np.ndarray], k: int,
                  link: float = CLUSTER_COSINE) -> np.ndarray:
    """Fold of each pair; preferences linked by cosine >= `link` (transitively) share one."""
    prefs = sorted({p.preference for p in pairs})
    roots = linked_roots(np.stack([vectors[t] for t in prefs]), link)
    rep = {t: prefs[roots[i]] for i, t in enumerate(prefs)}
    return preference_folds([replace(p, preference=rep[p.preference]) for p in pairs], k)


def fit_job(spec: LearnerSpec, splits: dict[str, list[LabelledPair]], folds: np.ndarray,
            fold: int, vectors: dict[str, np.ndarray], threads: int,
            states_file: Path | None = None) -> dict[str, Any]:
    """One training in its own process (its own frozen states), so trainings run side by side.

    fold >= 0: train on the other folds, score this fold (out-of-fold scores); fold -1: train
    on all of train, score the test splits and return the model (what would ship)."""
    log = lambda msg: print(msg, file=sys.stderr, flush=True)  # noqa: E731
    bench, train = Workbench(threads=threads), splits["train"]
    if states_file is not None:
        bench.states(spec.frozen).load(states_file)
    if fold >= 0:
        model = fit(spec, [p for p, g in zip(train, folds) if g != fold], bench, vectors, log)
        held = np.flatnonzero(folds == fold)
        log(f"  {spec.name}: fold {fold + 1} trained ({model.seconds:.0f} s)")
        return {"held": held, "scores": score(model, [train[i] for i in held], bench, vectors),
                "seconds": model.seconds}
    model = fit(spec, train, bench, vectors, log)
    log(f"  {spec.name}: trained on all of train ({model.seconds:.0f} s)")
    return {"model": to_state(model), "seconds": model.seconds,
            **{n: score(model, ps, bench, vectors) for n, ps in splits.items() if n != "train"}}


def shared_states(splits: dict[str, list[LabelledPair]], learners: tuple[LearnerSpec, ...],
                  threads: int, folder: Path, log: Any) -> dict[int, Path]:
    """Frozen-layer states of every text / pair the learners need, computed once per cut and
    saved for the training processes: {frozen layers: file}."""
    cuts = {s.frozen for s in learners if s.kind != "adapter"}
    if not cuts:
        return {}
    bench, files = Workbench(threads=threads), {}
    pairs = [p for ps in splits.values() for p in ps]
    texts = sorted({t for p in pairs for t in (p.preference, p.passage)})
    for frozen in sorted(cuts):
        t0, states = time.perf_counter(), bench.states(frozen)
        kinds = {s.kind for s in learners if s.frozen == frozen}
        if "siamese" in kinds:
            states.texts(texts)
        if "cross-encoder" in kinds:
            states.pairs([p.preference for p in pairs], [p.passage for p in pairs])
        files[frozen] = folder / f"states-{frozen}.pkl"
        states.save(files[frozen])
        log(f"frozen states after {frozen} layers ({', '.join(sorted(kinds))}): "
            f"{time.perf_counter() - t0:.0f} s")
    return files


def run_study(splits: dict[str, list[LabelledPair]], learners: tuple[LearnerSpec, ...],
              folds_k: int, embedder: Any, *, jobs: int = 1, threads: int = 1,
              log: Any = print) -> tuple[list[dict[str, Any]], dict[str, Any], dict[str, Any]]:
    """(rows, blends, models): a coarse row, and per learner a row and a blended row (train:
    out-of-fold scores; test splits: the model trained on all of train); the blend weights
    and the all-of-train model of each learner."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    texts = sorted({t for ps in splits.values() for p in ps for t in (p.preference, p.passage)})
    t0 = time.perf_counter()
    vectors = dict(zip(texts, np.asarray(embedder.embed(texts), np.float64)))
    log(f"coarse vectors of {len(texts)} texts: {time.perf_counter() - t0:.0f} s")
    cos = {n: np.array([vectors[p.preference] @ vectors[p.passage] for p in ps])
           for n, ps in splits.items()}
    folds = cluster_folds(splits["train"], vectors, folds_k)
    labels = np.array([p.keep for p in splits["train"]])
    rows = [make_row("coarse cosine (MiniLM)", cos, splits, kind="coarse", exportable=False)]
    blends: dict[str, dict[str, Any]] = {}
    models: dict[str, Any] = {}
    tmp = tempfile.TemporaryDirectory()
    states = shared_states(splits, learners, threads, Path(tmp.name), log)
    with tmp, ProcessPoolExecutor(max(1, jobs), multiprocessing.get_context("spawn")) as pool:
        futures = {(spec.name, f): pool.submit(fit_job, spec, splits, folds, f, vectors, threads,
                                               states.get(spec.frozen))
                   for spec in learners for f in [-1, *range(folds_k)]}
        for spec in learners:
            sc = {"train": np.zeros(len(labels))}
            oof_seconds = 0.0
            for f in range(folds_k):
                done = futures[(spec.name, f)].result()
                sc["train"][done["held"]] = done["scores"]
                oof_seconds += done["seconds"]
            final = futures[(spec.name, -1)].result()
            models[spec.name] = final.pop("model")
            info = {"kind": spec.kind, "spec": spec.name, "train_seconds": round(final["seconds"]),
                    "out_of_fold_seconds": round(oof_seconds)}
            sc.update((n, final[n]) for n in splits if n != "train")
            rows.append(make_row(spec.name, sc, splits, exportable=True, blend=False, **info))
            params = fit_blend(sc["train"], cos["train"], labels)
            blended = {n: blend_scores(params, sc[n], cos[n]) for n in splits}
            blends[spec.name] = {"a": params[0], "b": params[1], "c": params[2]}
            rows.append(make_row(spec.name + BLEND, blended, splits, blend=True,
                                 blend_params=params, **info,
                                 exportable=spec.kind != "cross-encoder" and params[1] >= 0))
    for r in rows:
        r["coarse_auc"] = {n: rows[0]["splits"][n]["roc_auc"] for n in splits}
    return rows, blends, models


def pick_learners(numbers: str, error: Any) -> tuple[LearnerSpec, ...]:
    """The learners a comma list of 1-based numbers names; `error` (argparse's) otherwise."""
    try:
        picked = [int(n) for n in numbers.split(",")]
    except ValueError:
        picked = [0]
    if not all(1 <= n <= len(LEARNERS) for n in picked):
        error(f"--learners takes 'all', 'none' or numbers 1-{len(LEARNERS)}, not {numbers!r}")
    return tuple(LEARNERS[n - 1] for n in picked)


def main(argv: list[str] | None = None) -> int:
    from epic_edge_lab.verifier.default import (
        choice_path,
        coarse_embedder,
        train_default,
        write_choice,
    )

    p = argparse.ArgumentParser(prog="python -m epic_edge_lab.verification_learners",
                                description=__doc__)
    p.add_argument("--data", type=Path, default=None,
                   help="folder with train.jsonl and test*.jsonl (default: the shipped set)")
    p.add_argument("--folds", type=int, default=3, help="out-of-fold folds on train")
    p.add_argument("--learners", default="all",
                   help="comma list of learner numbers (1-based, see LEARNERS), 'all', or 'none' "
                        "(score only the coarse cosine and the --reference models)")
    p.add_argument("--threads", type=int, default=1, help="torch / ONNX Runtime threads")
    p.add_argument("--jobs", type=int, default=2, help="learners trained side by side")
    p.add_argument("--out", type=Path, default=Path("bench/results/verification_learners.json"))
    p.add_argument("--plot", type=Path, default=Path("bench/results/verification_learners.png"))
    p.add_argument("--reference", type=Path, action="append", default=None,
                   help="an exported verifier ONNX to score on the test splits as it is "
                        "(e.g. the model shipped before), repeatable")
    p.add_argument("--export", type=Path, default=None,
                   help="retrain the winner on all of train into this folder (e.g. "
                        "MODELS/epic-verifier-minilm) and record the choice")
    args = p.parse_args(argv)
    if args.export and args.learners == "none":
        p.error("--export needs a learner to train (--learners all or numbers)")
    learners = (LEARNERS if args.learners == "all" else () if args.learners == "none"
                else pick_learners(args.learners, p.error))
    data = args.data or choice_path().parent
    log = lambda msg: print(msg, file=sys.stderr, flush=True)  # noqa: E731
    splits = load_splits(data, log=log)
    log("labelled set: " + ", ".join(f"{n} {len(ps)} ({sum(q.keep for q in ps)} Keep)"
                                     for n, ps in splits.items()))
    rows, blends, models = run_study(splits, learners, args.folds, coarse_embedder(),
                                     jobs=args.jobs, threads=args.threads, log=log)
    for ref in args.reference or []:
        meta = json.loads((ref.parent / "model.json").read_text(encoding="utf-8"))
        rows.append(onnx_row(ref, splits, f"reference: {ref.parent.name} ({meta.get('kind')}, "
                                          f"{meta.get('train_pairs')} train pairs)"))
    names = list(splits)
    winner, on_test = choose(rows)
    result: dict[str, Any] = {
        "bench": "verification_learners", "folds": args.folds,
        "pairs": {n: len(ps) for n, ps in splits.items()},
        "keep": {n: int(sum(q.keep for q in ps)) for n, ps in splits.items()},
        "winner": winner and winner["method"], "best_on_test": on_test and on_test["method"],
        "note": "train = out-of-fold scores (folds of preference clusters); test splits "
                "scored by the learner trained on all of train; thresholds fitted on the "
                "out-of-fold scores; "
                "a blend's 3 weights are fitted on the same out-of-fold scores. Seconds: the "
                "all-of-train training (train_seconds) and the fold trainings together, each in "
                "its own process with 1 thread, side by side on a shared 2-core machine.",
        "rows": rows}
    if args.export:
        spec = next(s for s in learners if s.name == winner["spec"])
        bench = Workbench(threads=args.threads)
        choice = write_choice(spec, blends[spec.name] if winner.get("blend") else None,
                              winner["threshold"], {"chosen_by": "best out-of-fold F1 + ROC AUC "
                              f"on train, ties (within {TIE}) to the cheaper model "
                              "(bench/results/verification_learners.json)",
                                                    "learner_row": winner["method"]})
        log(f"recorded {choice}")
        manifest = train_default(args.export, train_pairs=splits["train"], bench=bench,
                                 model=from_state(models[spec.name], bench), quantize=False,
                                 log=log)
        result["default"] = manifest
        rows.append(onnx_row(args.export / "model.onnx", splits, "study default (fp32 "
                             f"ONNX, all of train): {winner['method']}"))
        log(json.dumps(result["default"], indent=2, default=str))
    print(render(result))
    args.out.write_text(json.dumps(result, indent=2, default=float) + "\n", encoding="utf-8")
    print(f"written {args.out}; {plot(rows, names, args.plot)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
