"""BENCHMARKS.md: runs (or reloads) the latency, quality and stream benches and writes one page."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from epic_edge import latency, measuring
from epic_edge_lab import (
    budget_curve,
    common,
    personal_report,
    quality,
    ranking_replay,
    relevance,
    scaling,
    stream,
    verification_agreement,
    verification_data_curve,
)
from epic_edge_lab.judged_metrics import agreement

FILES = {"latency": "latency.json", "quality": "quality.json", "stream": "stream.json",
         "stream_budget": "stream-budget.json"}
# The budgeted stream run caps EPIC at 64 KB, a page or two above its first-batch size on the
# wiki corpus (persona 0): what the memory costs in PAP@5 when it may hardly grow any further.
STREAM_BUDGET_BYTES = 65_536
COMMAND = "epic-edge bench report --out bench/results --markdown BENCHMARKS.md"


def run_all(out: Path, *, personas: str | None = None, verifier: str | None = None,
            instructions: str = "template", profile: str = "linux-cpu", reuse: bool = False,
            log=print) -> dict[str, Any]:
    """Each bench's JSON in `out` (re-run unless `reuse` and the file is there)."""
    results: dict[str, Any] = {}
    runners = {
        "latency": lambda: latency.run(profile=profile, log=log),
        "quality": lambda: quality.run("all", personas=personas, verifier=verifier,
                                       instructions=instructions, profile=profile, log=log),
        "stream": lambda: stream.run(profile=profile, verifier=verifier,
                                     instructions=instructions, plot=out / "stream.png", log=log),
        "stream_budget": lambda: stream.run(profile=profile, verifier=verifier,
                                            instructions=instructions, log=log,
                                            plot=out / "stream-budget.png",
                                            max_bytes=STREAM_BUDGET_BYTES),
    }
    for name, runner in runners.items():
        path = out / FILES[name]
        if reuse and path.exists():
            results[name] = json.loads(path.read_text(encoding="utf-8"))
            if name == "quality":  # with today's judgments (a judging round may have added some)
                results[name] = quality.rescore(results[name], _labels())
                common.write_json(results[name], path)
            continue
        results[name] = runner()
        common.write_json(results[name], path)
    return results


def markdown(results: dict[str, Any], out: Path, command: str = COMMAND) -> str:
    m, labels = results["quality"]["machine"], _labels()  # the dev and profile runs' rescoring
    parts = [
        "# Benchmarks",
        "",
        f"Regenerate with `{command}` (about 35-60 min on a 2-core CPU; `--personas 0-4` for a "
        "quick run; `--reuse` re-renders from the JSON files). Figures from 2-core VMs, "
        "measured while other jobs shared them: timings are noisy, read medians. Each run's "
        "JSON records its machine; the latency breakdown names its own.",
        "",
        f"Machine of the judged run: {measuring.machine_line(m)}.",
        "",
        "## Judged retrieval quality (`epic-edge bench quality`)",
        "",
        "Every system ranks the judged questions (PrefWiki and PrefEval, split by persona) "
        "over the mixed device corpus; their top-5 passages were pooled per question and "
        "judged blind on two axes (answers, aligned): see bench/judged/PROVENANCE.md and "
        "RUBRIC.md. Unjudged passages count as not relevant.",
        "",
        quality.render(results["quality"]),
        "",
        *_dev_settings(out, results["quality"], labels),
        *_profiles(out, results["quality"], labels),
        *_written_sets(out),
        *ranking_replay.section(out),
        *budget_curve.section(out),
        *personal_report.section(out),
        "## Latency breakdown (`epic-edge bench latency`)",
        "",
        latency.render(results["latency"]),
        "",
        *_verification(out),
        *_verification_learners(out),
        *verification_data_curve.section(out),
        *verification_agreement.section(out),
        "## Streaming with preference drift (`epic-edge bench stream`)",
        "",
        f"![memory and PAP@5 per step]({(out / 'stream.png').as_posix()})",
        "",
        stream.render(results["stream"]),
        "",
        *_stream_budget(results.get("stream_budget"), out),
        *scaling.section(out),
        "## Judged quality (`epic-edge eval judge --endpoint URL`)",
        "",
        "Runs the PrefEval protocol against any OpenAI-compatible endpoint. Not on this page: "
        "the only model that runs here, SmolLM2-135M, answers, but as a judge it often replies "
        "with something other than yes or no (unparsed checks count as errors), so its "
        "accuracy figures would say nothing about the memory. Point it at a capable model.",
        "",
        "Data: PrefWiki / PrefEval question sets from EPIC (CC BY-NC 4.0, derived from "
        "PrefEval); the device corpus's sources and licences: `epic-edge data fetch --help`.",
    ]
    return "\n".join(parts) + "\n"


def _labels() -> dict:
    return relevance.primary_labels(relevance.load_judgments())


def _saved_runs(out: Path, pattern: str, labels: dict) -> list[tuple[str, dict[str, Any]]]:
    """(file stem, run) of each saved quality run in `out` matching `pattern`, rescored with
    today's judgments; a run of an older format (no ranked lists) is left out."""
    runs = [(path.stem, json.loads(path.read_text(encoding="utf-8")))
            for path in sorted(out.glob(pattern))]
    return [(stem, quality.rescore(result, labels)) for stem, result in runs
            if "retrieved" in result]


def _dev_settings(out: Path, shipped: dict[str, Any], labels: dict) -> list[str]:
    """EPIC on the dev split under each setting tried (`out`/quality-*.json), rescored with
    today's judgments, beside the shipped default's run (`shipped`, scored already)."""
    rows = []
    runs = [("shipped default", shipped)] + [
        (stem.removeprefix("quality-"), result)
        for stem, result in _saved_runs(out, "quality-*.json", labels)]
    for name, result in runs:
        epic = result["systems"].get("epic") or {}
        dev = epic.get("dev")
        if dev:
            rows.append([name, str(result.get("profile")),
                         str(result.get("verifier_config", {}).get("threshold", "-")),
                         *(f"{dev[key]:.3f}" for key in ("aligned", "answers", "both", "ndcg")),
                         f"{dev['unjudged']:.1%}", f"{epic['bytes_median'] / 1e6:.3f}"])
    if len(rows) < 2:
        return []
    head = ["run", "profile", "P(Keep) threshold", "P@5 aligned", "P@5 answers", "P@5 both",
            "nDCG@5", "unjudged", "MB (median)"]
    return ["### EPIC on the dev split under each setting tried", "",
            "The shipped settings are the ones these runs chose on the dev split (by nDCG@5; "
            "the confidence weight by P@5 both, the target still unmet, ties by nDCG@5). "
            f"Each run's JSON is in {out.as_posix()}/, rescored here with today's judgments; "
            "MB is the median over the personas the run built (52, or 26 for a dev-only run). "
            "Each other row is the default of the day it ran with one setting changed (its name "
            "says which): it compares with that day's default, not with today's.",
            "",
            common.table(rows, head), ""]


def _profiles(out: Path, shipped: dict[str, Any], labels: dict) -> list[str]:
    """EPIC and store-everything on the test split under each device profile that ran here
    (`out`/profile-*.json, `bench quality --profile NAME`), rescored with today's judgments."""
    rows = []
    runs = [shipped] + [result for _, result in _saved_runs(out, "profile-*.json", labels)]
    for result in runs:
        s, systems = result["summary"], result["systems"]
        epic, se = systems["epic"].get("test"), systems["store-everything"].get("test")
        if not epic or not se:  # a run without the test split
            continue
        missed = [name for name, met in s["targets_met"].items() if not met]
        rows.append([str(result["profile"]), str(result["embedder"]),
                     *(f"{epic[key]:.3f}" for key in ("aligned", "answers", "both", "ndcg")),
                     f"{se['aligned']:.3f} / {se['answers']:.3f} / {se['both']:.3f}",
                     f"{max(c['test']['unjudged'] for c in systems.values()):.1%}",
                     f"{systems['epic']['bytes_median'] / 1e6:.3f}",
                     ", ".join(missed) or "none",
                     str(result.get("machine", {}).get("date", ""))[:10]])
    if len(rows) < 2:
        return []
    head = ["profile", "embedder (as run here)", "P@5 aligned", "P@5 answers", "P@5 both",
            "nDCG@5", "SE aligned / answers / both", "unjudged", "MB (median)",
            "targets not met", "run on"]
    return ["### EPIC under each device profile (judged test split)", "",
            "`epic-edge bench quality --profile NAME` with each profile's own models and "
            "settings, on this machine's CPU (a profile's GPU or NPU provider falls back to "
            f"CPU here); JSON in {out.as_posix()}/profile-*.json, rescored with today's "
            "judgments. A profile whose runtime does not run here (Core ML) has no row. An "
            "embedder with the fingerprint of one run before reuses that run's cached corpus "
            "vectors (galaxy-z-flip6's ExecuTorch program and the fp32 ONNX model); the "
            "profile's own programs embed the preferences and questions and encode every "
            "passage for the decision. A run dates from the profile's settings of its day "
            "(those before 2026-12-05: the decision alone, 0.4 MB, no eased steering; before "
            "2026-12-06: the base all-MiniLM-L6-v2 embedder, as its column says).",
            "", common.table(rows, head), ""]


def _written_sets(out: Path) -> list[str]:
    """Each judged set written here, from its runs in `out` (written-NAME.json: the shipped
    settings, in full; written-NAME-SETTING.json: one line each), rescored with the set's own
    judgments (`bench quality --judged bench/judged/NAME`)."""
    runs: dict[str, list[tuple[str, dict[str, Any]]]] = {}
    for path in sorted(out.glob("written-*.json")):
        result = json.loads(path.read_text(encoding="utf-8"))
        name = Path(str(result.get("judged_set", ""))).name
        if name and (relevance.data_dir() / name / "questions.jsonl").exists():
            setting = path.stem.removeprefix(f"written-{name}").lstrip("-")
            runs.setdefault(name, []).append((setting, result))
    parts = []
    for name, found in runs.items():
        root = relevance.data_dir() / name
        judgments = relevance.load_judgments(root)
        labels = relevance.primary_labels(judgments)
        scored = {setting: quality.rescore(result, labels, judged_root=root)
                  for setting, result in found}
        agree = agreement(judgments)
        kappas = ", ".join(f"{axis} {agree[axis]['kappa']:.3f}" for axis in relevance.AXES
                           if agree[axis])
        parts += [f"### Preferences written here, never tuned on (`{name}`)", "",
                  f"`epic-edge bench quality --judged bench/judged/{name} --no-variants`: "
                  f"personas and questions written by the team (bench/judged/{name}/"
                  "PROVENANCE.md), judged blind with the same rubric; nothing was tuned on "
                  f"them. {len(judgments)} judgments, {agree['double_judged']} pairs judged "
                  "twice" + (f" (Cohen's kappa {kappas})" if kappas else "") + ".", ""]
        if "" in scored:
            parts += [quality.render(scored[""]), ""]
        parts += [_setting_line(setting, result) for setting, result in scored.items()
                  if setting] + [""]
    return parts


def _setting_line(setting: str, result: dict[str, Any]) -> str:
    """One run of a written set under another setting: EPIC's figures and margins."""
    epic, s = result["systems"]["epic"]["test"], result["summary"]
    margins = ", ".join(f"{axis} {m:+.3f} ({lo:+.3f} to {hi:+.3f})"
                        for axis, (m, lo, hi) in s["margin_intervals"].items())
    return (f"- `{setting}`: EPIC {epic['aligned']:.3f} / {epic['answers']:.3f} / "
            f"{epic['both']:.3f} (aligned / answers / both), nDCG@5 {epic['ndcg']:.3f}, "
            f"median {s['epic_bytes_median'] / 1e6:.3f} MB; minus store-everything: {margins}")


def _stream_budget(result: dict[str, Any] | None, out: Path) -> list[str]:
    """The budgeted stream run, when there is one."""
    if result is None:
        return []
    budget = result["budget"]["max_bytes"]
    return [f"The same stream with a byte budget of {budget:,} bytes (`epic-edge bench stream "
            f"--max-bytes {budget}`; after each batch the preference holding the most entries "
            "gives up its least confident ones until the file fits):", "",
            f"![memory and PAP@5 per step, budgeted]({(out / 'stream-budget.png').as_posix()})",
            "", stream.render(result), ""]


def _verification(out: Path) -> list[str]:
    """The fine-verification table, when `python -m epic_edge_lab.verification` left one."""
    path = out / "verification.json"
    if not path.exists():
        return []
    result = json.loads(path.read_text(encoding="utf-8"))
    rows = [[r["method"], f"{r['precision']:.3f}", f"{r['recall']:.3f}", f"{r['f1']:.3f}",
             "n/a" if r.get("roc_auc") is None else f"{r['roc_auc']:.3f}",
             f"{r.get('best_precision_at_recall_0.8', {}).get('precision', float('nan')):.3f}",
             str(r.get("n", ""))] for r in result["rows"]]
    head = ["decision", "precision", "recall", "F1", "ROC AUC", "precision at recall 0.8", "n"]
    lines = ["## Fine verification (`python -m epic_edge_lab.verification`)", "",
             f"{result.get('test_pairs')} held-out labelled (preference, passage) pairs "
             f"({result.get('test_keep')} Keep), split by preference from the "
             f"{result.get('train_pairs')} training pairs.", "", common.table(rows, head), ""]
    statement = (result.get("model_size") or {}).get("statement")
    if statement:
        lines += [f"- {statement}", ""]
    if (out / "verification_curve.png").exists():
        lines += [f"![precision-recall curves]({(out / 'verification_curve.png').as_posix()})",
                  ""]
    return lines


def _verification_learners(out: Path) -> list[str]:
    """The learners side by side, when `python -m epic_edge_lab.verification_learners` ran."""
    path = out / "verification_learners.json"
    if not path.exists():
        return []
    from .verification_learners_report import render

    result = json.loads(path.read_text(encoding="utf-8"))
    pairs = ", ".join(f"{n} {k} ({result['keep'][n]} Keep)" for n, k in result["pairs"].items())
    lines = ["## Learned-verifier learners (`python -m epic_edge_lab.verification_learners`)",
             "", f"Labelled pairs: {pairs}. {result['note']} Default: {result['winner']} "
             f"(best on the test splits: {result.get('best_on_test', '-')}). "
             f"{result.get('choice_note', '')}",
             "", render(result), ""]
    if (out / "verification_learners.png").exists():
        png = (out / "verification_learners.png").as_posix()
        lines += [f"![learners' precision-recall]({png})", ""]
    first = out / "verification_learners_754.json"
    if first.exists():  # the costlier learners, run before the second round was labelled
        lines += ["The same study on the first-round pairs only (train 754 / test 370; 3-fold "
                  "out of fold; test scored by the mean of the fold models; seconds: all fold "
                  "trainings), where every learner could be afforded:", "",
                  render(json.loads(first.read_text(encoding="utf-8"))), ""]
    return lines
