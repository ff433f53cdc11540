"""`bench quality`'s figures: per-system aggregates, the target checks, the markdown table."""

from __future__ import annotations

from typing import Any

import numpy as np

from epic_edge.bench import common
from epic_edge.bench.systems import LABELS, SYSTEMS

LLM_SECONDS_PER_ITEM = 1.6  # SmolLM2 135M, 1 thread, shared 2-core CPU (`bench latency`)


def verifier_note(verifier: str, prof: Any, instructions: str | None = "template") -> str:
    if verifier == "template":
        return ("fine verification = template verifier (no LLM; keeps the top-2 coarse-filter "
                "candidates of every item): the LLM verifier would exceed the 2-hour budget "
                f"at ~{LLM_SECONDS_PER_ITEM} s per surviving item")
    if verifier == "learned":
        return ("fine verification = learned MiniLM decision (no LLM call), instructions by "
                f"{instructions or 'the profile'}")
    return f"fine verification = {verifier} verifier"


def _heldout_mean(cells: list[dict]) -> float | None:
    """PAP over questions whose gold preference is outside the learned verifier's train split."""
    n = sum(c.get("heldout_questions", 0) for c in cells)
    total = sum(c["pap_heldout"] * c["heldout_questions"] for c in cells
                if c.get("heldout_questions"))
    return total / n if n else None


def aggregate(rows: list[dict], k: int) -> dict[str, dict[str, Any]]:
    agg = {}
    for name in SYSTEMS:
        cells = [r["systems"][name] for r in rows]
        weights = [r["questions"] for r in rows]

        def mean(key: str, cells: list = cells, weights: list = weights) -> float:
            return float(np.average([c[key] for c in cells], weights=weights))

        agg[name] = {
            "label": LABELS[name], f"pap@{k}": mean("pap"), f"hit@{k}": mean("hit"),
            "routing_accuracy": mean("routing") if cells[0]["routing"] is not None else None,
            f"pap@{k}_heldout": _heldout_mean(cells),
            "coverage": float(np.mean([c["coverage"] for c in cells])),
            "bytes_median": float(np.median([c["bytes"] for c in cells])),
            "bytes_max": float(np.max([c["bytes"] for c in cells])),
            "retrieval_ms_median": float(np.median([c["retrieval_ms"] for c in cells])),
            "indexing_s_mean": float(np.mean([c["indexing_s"] for c in cells])),
        }
    return agg


def summary(result: dict[str, Any]) -> dict[str, Any]:
    k, systems = result["k"], result["systems"]
    epic_pap = systems["epic"][f"pap@{k}"]
    best_other = max((s for s in SYSTEMS if s != "epic"), key=lambda s: systems[s][f"pap@{k}"])
    ratio = result["store_everything_bytes"] / max(systems["epic"]["bytes_median"], 1)
    empty = [r["epic_empty_bytes"] for r in result["per_persona"] if "epic_empty_bytes" in r]
    per_persona_s = ((result["elapsed_s"] - result.get("setup_s", 0.0))
                     / max(len(result["personas"]), 1))
    return {
        "epic_pap_margin": epic_pap - systems[best_other][f"pap@{k}"],
        "heldout_pap": {name: systems[name].get(f"pap@{k}_heldout") for name in SYSTEMS},
        "best_other_system": best_other,
        "epic_above_all": epic_pap > systems[best_other][f"pap@{k}"],
        "epic_bytes_median": systems["epic"]["bytes_median"],
        "epic_bytes_max": systems["epic"]["bytes_max"],
        "epic_under_1mb": systems["epic"]["bytes_max"] <= 1_000_000,
        "store_everything_over_epic": ratio,
        "epic_empty_bytes_median": float(np.median(empty)) if empty else None,
        "same_format_over_epic": (result["store_everything_same_format"]["bytes"]
                                  / max(systems["epic"]["bytes_median"], 1)
                                  if result.get("store_everything_same_format") else None),
        "seconds_per_persona": per_persona_s,
        "projected_all_57_s": result.get("setup_s", 0.0) + per_persona_s * 57,
        "llm_verifier_projected_all_57_s": float(np.mean(
            [r["coarse_items"] for r in result["per_persona"]])) * 57 * LLM_SECONDS_PER_ITEM,
    }


def _same_format_text(result: dict[str, Any], s: dict[str, Any]) -> str:
    same, text = result.get("store_everything_same_format"), ""
    if same and same["vector_format"] != "float32":
        text += (f"; with {same['vector_format']} vectors like EPIC's, store-everything is "
                 f"{same['bytes'] / 1e6:.1f} MB = {s['same_format_over_epic']:.1f}x")
    if s.get("epic_empty_bytes_median"):
        text += (f". An empty EPIC file with a persona's preferences (no entry yet) is "
                 f"{s['epic_empty_bytes_median'] / 1e3:.0f} KB = store-everything / "
                 f"{result['store_everything_bytes'] / s['epic_empty_bytes_median']:.0f}")
    return text


def _heldout_line(heldout: dict[str, float | None], k: int) -> str:
    if heldout.get("epic") is None:
        return "- every gold preference is in the learned verifier's train split"
    others = {n: v for n, v in heldout.items() if n != "epic" and v is not None}
    best = max(others, key=lambda n: others[n])
    return (f"- questions whose preference the learned verifier never saw in training: EPIC "
            f"PAP@{k} {heldout['epic']:.3f} vs {others[best]:.3f} ({best}), margin "
            f"{heldout['epic'] - others[best]:+.3f}")


def render(result: dict[str, Any]) -> str:
    """The table and the target checks as text (markdown)."""
    k, s = result["k"], summary(result)
    fmt = lambda v, f: "n/a" if v is None else format(v, f)  # noqa: E731
    rows = [[c["label"], fmt(c[f"pap@{k}"], ".3f"), fmt(c[f"hit@{k}"], ".3f"),
             fmt(c["routing_accuracy"], ".3f"), fmt(c["coverage"], ".2f"),
             f"{c['bytes_median'] / 1e6:.3f}", f"{c['retrieval_ms_median']:.2f}",
             f"{c['indexing_s_mean']:.1f}"] for c in result["systems"].values()]
    head = ["system", f"PAP@{k}", f"Hit@{k}", "routing", "coverage", "MB (median)",
            "retrieval ms", "indexing s"]
    lines = [common.table(rows, head), "",
             f"- {result['dataset']} on {result['corpus']} ({result['chunks']} chunks), "
             f"{len(result['personas'])} personas, tau {result['tau']}; "
             f"{verifier_note(result['verifier'], None, result.get('instructions'))}",
             f"- EPIC PAP@{k} margin over the best other system ({s['best_other_system']}): "
             f"{s['epic_pap_margin']:+.3f} "
             f"({'above all' if s['epic_above_all'] else 'NOT above all'})",
             _heldout_line(s["heldout_pap"], k),
             f"- EPIC memory: median {s['epic_bytes_median'] / 1e6:.3f} MB, max "
             f"{s['epic_bytes_max'] / 1e6:.3f} MB per persona (target <= 1 MB: "
             f"{'met' if s['epic_under_1mb'] else 'not met'}); store-everything "
             f"{result['store_everything_bytes'] / 1e6:.1f} MB = "
             f"{s['store_everything_over_epic']:.1f}x EPIC (target >= 500x)"
             + _same_format_text(result, s),
             f"- elapsed {result['elapsed_s']:.0f} s ({s['seconds_per_persona']:.1f} s per "
             f"persona; all 57 projected {s['projected_all_57_s'] / 60:.0f} min; corpus embedded "
             f"once in {result['corpus_embed_seconds']:.0f} s, then cached"
             + ("" if "setup_s" in result else "; elapsed includes it when this run embedded it")
             + ")",
             f"- an LLM verifier at ~{LLM_SECONDS_PER_ITEM} s per coarse-filter survivor would "
             f"need ~{s['llm_verifier_projected_all_57_s'] / 3600:.1f} h for all 57 personas"]
    return "\n".join(lines)
