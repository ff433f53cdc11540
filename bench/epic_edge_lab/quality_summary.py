"""`bench quality`'s figures: the judged table, the target checks, the self-graded figures."""

from __future__ import annotations

from typing import Any

import numpy as np

from epic_edge_lab import common
from epic_edge_lab.systems import LABELS

VARIANT_LABELS = {
    "epic:instruction+steer": "EPIC indexed by instructions (the paper's design), steered",
    "epic:item+steer": "EPIC, item vectors, argmax steering (unhedged)",
    "epic:sum+steer": "EPIC, item + instruction vectors, steered",
    "epic:item+hedge": "EPIC without lexical, confidence or brevity evidence (vector score alone)",
    "epic:item+lexical": "EPIC with lexical evidence only (vector + lexical score)",
    "epic:item+confidence": "EPIC without brevity evidence (vector + lexical + confidence score)",
    "epic:text-steer": "EPIC steering by text (question + preference embedded together)",
    "epic:item+prior": "EPIC + 2 x the question's similarity to each entry's preference",
}


def label(name: str) -> str:
    return LABELS.get(name) or VARIANT_LABELS.get(name, name)


def verifier_note(verifier: str, prof: Any, instructions: str | None = "template") -> str:
    if verifier == "template":
        return "fine verification = template verifier (no decision model, no LLM)"
    if verifier == "learned":
        return ("fine verification = learned MiniLM decision (no LLM call), instructions by "
                f"{instructions or 'the profile'}")
    return f"fine verification = {verifier} verifier"


def summary(result: dict[str, Any], split: str | None = None) -> dict[str, Any]:
    """The targets of the judged-quality issue, on `split` (default: test when judged)."""
    systems = result["systems"]
    if not systems:
        return {}
    split = split or ("test" if systems["epic"].get("test") else None)
    cell = (lambda name: systems[name][split]) if split else (lambda name: systems[name])
    epic, se = cell("epic"), cell("store-everything")
    others = [n for n in systems if n != "epic" and not n.startswith("epic:")]
    best_aligned = max(others, key=lambda n: cell(n)["aligned"])
    return {
        "split": split or "all",
        "aligned_margin_over_se": epic["aligned"] - se["aligned"],
        "both_margin_over_se": epic["both"] - se["both"],
        "answers_margin_over_se": epic["answers"] - se["answers"],
        "aligned_above_every_other": epic["aligned"] > cell(best_aligned)["aligned"],
        "best_other_aligned": best_aligned,
        "unjudged_max": max(cell(n)["unjudged"] for n in systems),
        "epic_bytes_median": systems["epic"]["bytes_median"],
        "epic_bytes_max": systems["epic"]["bytes_max"],
        "epic_no_memory_share": systems["epic"].get("no_memory_share"),
        "margin_intervals": margin_intervals(result, split) if split else {},
        "store_everything_over_epic": result["store_everything_bytes"]
        / max(systems["epic"]["bytes_median"], 1),
        "targets_met": {
            "aligned >= SE + 0.15": epic["aligned"] - se["aligned"] >= 0.15,
            "aligned above every other system": epic["aligned"] > cell(best_aligned)["aligned"],
            "both >= SE + 0.02": epic["both"] - se["both"] >= 0.02,
            "answers >= SE - 0.02": epic["answers"] - se["answers"] >= -0.02,
            "<= 1 MB median": systems["epic"]["bytes_median"] <= 1_000_000,
            "unjudged < 5%": max(cell(n)["unjudged"] for n in systems) < 0.05,
        },
    }


def margin_intervals(result: dict[str, Any], split: str, draws: int = 2000,
                     seed: int = 0) -> dict[str, list[float]]:
    """EPIC minus store-everything per axis on `split`: [mean, low, high], the interval a 95%
    paired bootstrap over the split's questions gives (what the targets' margins can trust)."""
    splits = result.get("per_question_split") or {}
    qids = [qid for qid, part in splits.items() if part == split]
    if not qids:
        return {}
    epic, se = (result["systems"][n]["per_question"] for n in ("epic", "store-everything"))
    picks = np.random.default_rng(seed).integers(0, len(qids), (draws, len(qids)))
    out = {}
    for axis in ("aligned", "answers", "both"):
        diff = np.array([epic[q][axis] - se[q][axis] for q in qids])
        means = diff[picks].mean(axis=1)
        out[axis] = [float(diff.mean()), *(float(np.percentile(means, p)) for p in (2.5, 97.5))]
    return out


def _row(name: str, c: dict[str, Any], split: str | None) -> list[str]:
    s = c[split] if split else c
    return [label(name), f"{s['aligned']:.3f}", f"{s['answers']:.3f}", f"{s['both']:.3f}",
            f"{s['ndcg']:.3f}", f"{s['unjudged']:.1%}", f"{c['bytes_median'] / 1e6:.3f}",
            f"{c['retrieval_ms_median']:.2f}"]


def table(result: dict[str, Any], split: str | None) -> str:
    k = result["k"]
    head = ["system", f"P@{k} aligned", f"P@{k} answers", f"P@{k} both", f"nDCG@{k}",
            "unjudged", "MB (median)", "ms/query"]
    return common.table([_row(n, c, split) for n, c in result["systems"].items()], head)


def render(result: dict[str, Any]) -> str:
    """The judged tables (test, dev, all) and the target checks, as markdown."""
    k, s = result["k"], summary(result)
    systems = result["systems"]
    lines = []
    for split in ("test", "dev"):
        if systems and next(iter(systems.values())).get(split):
            n = sum(1 for q in result.get("per_question_split", {}).values() if q == split)
            lines += [f"Judged {split} split" + (f" ({n} questions)" if n else "") + ":", "",
                      table(result, split), ""]
    if not lines:
        lines = [table(result, None), ""]
    kpi = s.get("targets_met", {})
    lines += [
        f"- {result['questions']} judged questions ({result['split']}), "
        f"{len(result['personas'])} personas, {result['corpus']} corpus ({result['chunks']} "
        f"chunks), tau {result['tau']}; {result['verifier_note']}",
        f"- targets on the {s.get('split')} split: "
        + ", ".join(f"{name} {'met' if ok else 'NOT met'}" for name, ok in kpi.items()),
        *([f"- EPIC minus store-everything on the {s['split']} split, with a 95% paired "
           "bootstrap interval over its questions: " + ", ".join(
               f"{axis} {m:+.3f} ({lo:+.3f} to {hi:+.3f})"
               for axis, (m, lo, hi) in s["margin_intervals"].items())]
          if s.get("margin_intervals") else []),
        f"- EPIC memory: median {s['epic_bytes_median'] / 1e6:.3f} MB, max "
        f"{s['epic_bytes_max'] / 1e6:.3f} MB per persona; store-everything "
        f"{result['store_everything_bytes'] / 1e6:.1f} MB = "
        f"{s['store_everything_over_epic']:.0f}x",
        f"- EPIC gives no memory to {s['epic_no_memory_share']:.1%} of these questions"
        if s.get("epic_no_memory_share") is not None else "- memory-use gate: n/a",
        "- self-graded, not quality (an EPIC entry counts when EPIC filed it under the gold "
        "preference): " + ", ".join(
            f"{label(n)} PAP@{k} {c[f'pap@{k}_self_graded']:.3f}" for n, c in systems.items()
            if c.get(f"pap@{k}_self_graded") is not None),
        f"- routing accuracy (p* = gold): "
        f"{np.mean([p['routing_accuracy'] for p in result['per_persona']]):.3f}; elapsed "
        f"{result['elapsed_s']:.0f} s",
    ]
    return "\n".join(lines + _ceiling_lines(result, s) + _policy_lines(result.get("policy") or {}))


def _ceiling_lines(result: dict[str, Any], s: dict[str, Any]) -> list[str]:
    """What a perfect ranking could reach, beside what the both target asks."""
    ceilings, split = result.get("ceilings") or {}, s.get("split")
    cells = [f"{name}: aligned {c[split]['aligned']:.3f}, answers {c[split]['answers']:.3f}, "
             f"both {c[split]['both']:.3f}" for name, c in ceilings.items() if split in c]
    if not cells:
        return []
    se = result["systems"]["store-everything"][split]
    return [f"- best possible P@{result['k']} on the {split} split, any ranking of the "
            f"passages judged so far (unjudged ones count as misses) in " + "; in ".join(cells)
            + f" (the both target is {se['both'] + 0.05:.3f}, answers "
            f"{se['answers'] - 0.02:.3f}, aligned {se['aligned'] + 0.15:.3f})"] + _fate_lines(
        result, split)


def _fate_lines(result: dict[str, Any], split: str) -> list[str]:
    """Where the split's judged both-passages went in EPIC's memories (bench.losses)."""
    counts = (result.get("both_fates") or {}).get(split)
    if not counts or not sum(counts.values()):
        return []
    total = sum(counts.values())
    words = {"memory": "in EPIC's memory", "evicted": "kept, then evicted by the budget",
             "verifier": "not kept by the verifier", "coarse": "dropped by the coarse filter",
             "unknown": "not followed by this run"}
    return [f"- the {total} judged both-passages of the {split} questions: " + ", ".join(
        f"{words[fate]} {n / total:.0%}" for fate, n in counts.items() if n)]


def _policy_lines(pol: dict[str, Any]) -> list[str]:
    """The memory-use gate: no-memory rates for the personas' own questions, the held-out
    no-preference set and the everyday request checks, on dev and test, chosen on dev and as
    the profile sets it."""
    if not pol:
        return []
    chosen = pol["chosen_on_dev"]
    lines = [f"- memory-use gate chosen on dev evidence: gate {chosen['gate']:.2f} (closest "
             f"preference) or the best kept item above the "
             f"{chosen['item_gate_quantile']:.2f} quantile of the background questions' best "
             f"items in the same memory" if chosen else
             "- memory-use gate chosen on dev evidence: none (no setting of the grid refuses "
             "memory to enough of the held-out no-preference questions; the chosen row is off)"]
    for name, by_split in pol["rates"].items():
        cells = [f"{split}: {r['own']:.1%} of own questions (PrefWiki "
                 f"{r.get('own:prefwiki', float('nan')):.1%}, PrefEval "
                 f"{r.get('own:prefeval', float('nan')):.1%}), "
                 + (f"{r['implicit']:.1%} of everyday implicit requests, " if "implicit" in r
                    else "") + f"{r['none']:.1%} of held-out no-preference questions"
                 + (f", {r['unrelated']:.1%} of everyday requests no preference bears on"
                    if "unrelated" in r else "")
                 for split, r in by_split.items() if r and not np.isnan(r['own'])]  # asked
        lines.append(f"  - no memory with the {name} setting: " + "; ".join(cells))
    return lines
