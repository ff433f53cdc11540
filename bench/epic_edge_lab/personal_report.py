"""The tables `bench personal` prints: per budget, the systems' answer recall, the memory's keep
figures and gate, and one line per persona."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from epic_edge_lab import common

LABELS = {"epic": "EPIC as shipped (gate on)", "epic-unsteered": "EPIC unsteered (gate on)",
          "epic-ungated": "EPIC, gate off", "store-everything": "store-everything (cosine)",
          "recency": "recency buffer, EPIC's bytes", "random": "random sample, EPIC's bytes"}


INTRO = ("A fresh memory per persona of the personal-stream set, its preferences added first, "
         "then its own stream (notes, emails, chats, calendar entries, receipts, reminders, "
         "posts, reviews, web snippets) in time order, in batches as a device sees them. Each "
         "item is labelled with the preferences it bears on and each question with the items "
         "that help answer it. Keep recall: items bearing on a preference that the memory kept; "
         "top-5 recall: answer items among a system's first five. Store-everything ranks every "
         "item by the same embedder's cosine; the recency buffer (the latest items) and the "
         "random sample hold what fits the EPIC memory's payload bytes (items, instructions and "
         "vectors as its footprint counts them, each buffered item costed the same way) and rank "
         "by cosine. Means over personas, 95% bootstrap intervals over personas.")


def section(out: Path) -> list[str]:
    """BENCHMARKS.md's section, when `bench personal --json out/personal.json` ran."""
    path = out / "personal.json"
    if not path.exists():
        return []
    result = json.loads(path.read_text(encoding="utf-8"))
    note = [result["note"], ""] if result.get("note") else []  # the reading, where one was added
    return ["## A person's own stream (`epic-edge bench personal`)", "", INTRO, "", *note,
            render(result), ""]


def render(result: dict[str, Any]) -> str:
    parts = []
    for budget in result["budgets"]:
        cell = result["per_budget"][budget]
        parts += budget_section(result, budget, cell["summary"], cell["per_persona"])
    parts.append(f"- {result['profile']} profile ({result['embedder']}, verifier "
                 f"{result['verifier']}, tau {result['tau']}), {result['split']} split of "
                 f"{result['data']}: personas {_numbers(result['personas'])}; items in time "
                 f"order, batches of {result['batch']}; {result['elapsed_s']:.0f} s")
    return "\n".join(parts)


def budget_section(result: dict[str, Any], budget: str, s: dict[str, Any],
                   rows: list[dict[str, Any]]) -> list[str]:
    k = result["k"]
    name = (f"the profile's ({result['profile_budget'].get('max_bytes', 'none')} bytes)"
            if budget == "profile" else "none" if budget == "none" else f"{int(budget):,} bytes")
    recall = s["recall"]
    system_rows = []
    for system in result["systems"]:
        cells = [_ci(recall[kind][system]) for kind in ("preference", "no_preference", "all")]
        diff = recall["preference"][system].get("vs_epic")
        system_rows.append([LABELS.get(system, system), *cells,
                            _ci(diff, signed=True) if diff else "-"])
    head = [f"system ({s['personas']} personas)", f"top-{k} recall, preference Qs",
            "no-preference Qs", "all Qs", "EPIC minus it (preference Qs)"]
    keep, gate, size = s["keep"], s["no_memory"], s["bytes_median"]
    memory_rows = [
        ["keep recall (items bearing on a preference that were kept)", _ci(keep["keep_recall"])],
        ["keep precision (kept items bearing on a preference)", _ci(keep["keep_precision"])],
        ["the same over all personas' items (kept relevant / relevant, / kept)",
         f"{keep['keep_recall_over_items']:.3f} ({keep['kept_relevant']} / {keep['relevant']}),"
         f" {keep['keep_precision_over_items']:.3f} (/ {keep['kept']})"],
        ["kept of the relevant items, by how they bear on a preference",
         _shares(keep["kept_by"].get("how", {}))],
        ["kept of the relevant items, by kind", _shares(keep["kept_by"].get("kind", {}))],
        ["kept of the near misses (nothing a preference bears on)",
         _shares(keep["kept_by"].get("near_miss", {}))],
        ["entries the budget evicted, all personas", f"{keep['evicted']}"],
        ["filing accuracy (kept relevant items under a preference they bear on)",
         _ci(keep["filing_accuracy"])],
        ["preferences with no entry (of those with >= 1 item bearing on them)",
         f"{keep['no_entry']} of {keep['preferences_with_items']}"],
        ["answer items the memory holds, preference Qs (EPIC's top-5 ceiling)",
         _ci(s["answers_held"]["preference"])],
        ["no memory for no-preference questions (target >= 90%)",
         _ci(gate["no_preference"], pct=True)],
        ["no memory for preference questions (target <= 5%)", _ci(gate["preference"], pct=True)],
        ["no-preference Qs withheld by the question gate; given memory (by closest "
         "preference >= gate, by best entry alone)",
         "{by_question_gate} of {questions}; {given}: {by_preference}, {by_entry_only}".format(
             **{"by_question_gate": 0, **s["memory_given_by"]})],
        ["EPIC memory file, median bytes (payload: items, instructions, vectors)",
         f"{size.get('epic_file', 0):,.0f} ({size.get('epic_payload', 0):,.0f})"],
        ["store-everything file, median bytes (payload in EPIC's format)",
         f"{size.get('store_everything_file', 0):,.0f} "
         f"({size.get('store_everything_payload', 0):,.0f})"],
    ]
    persona_rows = [[str(r["persona"]), f"{r['keep']['kept']}", f"{r['keep']['relevant']}",
                     _f(r["keep"]["keep_recall"]), _f(r["keep"]["keep_precision"]),
                     ",".join(r["keep"]["no_entry"]) or "-",
                     _f(r["questions"]["recall"]["epic"]["preference"]),
                     _f(r["questions"]["recall"]["store-everything"]["preference"]),
                     _f(r["questions"]["no_memory"]["no_preference"]),
                     _f(r["questions"]["no_memory"]["preference"]), f"{r['bytes']['epic_file']:,}"]
                    for r in rows]
    persona_head = ["persona", "kept", "relevant", "keep recall", "keep precision", "no entry",
                    f"EPIC top-{k} (pref Qs)", f"SE top-{k} (pref Qs)", "no mem (no-pref Qs)",
                    "no mem (pref Qs)",
                    "EPIC bytes"]
    return [f"Budget {name}: per persona, then the mean over personas with a 95% bootstrap "
            "interval (paired for differences):", "",
            common.table(system_rows, head), "",
            common.table(memory_rows, ["memory", "figure"]), "",
            common.table(persona_rows, persona_head), ""]


def _ci(cell: dict[str, Any], signed: bool = False, pct: bool = False) -> str:
    if not cell or cell.get("n", 0) == 0:
        return "-"
    fmt = "{:+.3f}" if signed else "{:.1%}" if pct else "{:.3f}"
    lo, hi = cell["ci"]
    return f"{fmt.format(cell['mean'])} ({fmt.format(lo)} to {fmt.format(hi)})"


def _shares(cells: dict[str, list[int]]) -> str:
    return ", ".join(f"{label} {kept}/{total}" for label, (kept, total) in sorted(cells.items()))


def _f(value: float) -> str:
    return "-" if value != value else f"{value:.2f}"


def _numbers(numbers: list[int]) -> str:
    return ", ".join(map(str, numbers)) if len(numbers) <= 12 else (
        f"{len(numbers)} ({numbers[0]}..{numbers[-1]})")
