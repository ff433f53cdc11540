"""Study (issue 40, top-5 target): the shipped lookup over a memory whose keep decision and
filing make no mistake. `bench personal` with a verifier told the set's labels: it keeps an
item that passed the coarse filter under each candidate preference the item bears on (at
confidence 1), and drops the rest. Everything else is the shipped linux-cpu profile: coarse
filter, budget, gate, steering and ranking evidence. It asks whether the lookup's own routing
(steering toward the closest preference, the confidence evidence's leaning) would clear
store-everything + 0.10 if keeping and filing were perfect.

    cd bench && ../.venv/bin/python results/personal_top5_study/oracle_memory.py --split dev
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path

from epic_edge.errors import InvalidInputError
from epic_edge.types import Preference, Verdict
from epic_edge_lab import personal, personal_data


class LabelVerifier:
    """Keeps an item under the candidates its labels say it bears on; drops the rest."""

    def __init__(self, personas: Sequence[personal_data.Persona]) -> None:
        self.bears: dict[str, set[str]] = {}
        for p in personas:
            for item in p.items:
                prefs = {p.preferences[x] for x in p.bears_on.get(str(item["id"]), ())}
                self.bears.setdefault(personal._clean(item["text"]), set()).update(prefs)

    def verify(self, item: str, candidates: Sequence[Preference]) -> Verdict:
        chosen = [c.id for c in candidates if c.text in self.bears.get(item, ())]
        if not chosen:
            return Verdict(False, reason="bears on none of the candidates (labels)",
                           confidence=1.0)
        return Verdict(True, chosen, {c: "bears on it (labels)" for c in chosen},
                       confidence=1.0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--split", default="dev")
    ap.add_argument("--data", type=Path, default=None)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    try:
        verifier = LabelVerifier(personal_data.load(args.data, args.split))
        run = personal.run(args.data, args.split, verifier=verifier)
    except InvalidInputError as exc:
        ap.error(str(exc))
    figures = run["per_budget"]["profile"]["summary"]
    if args.json:
        args.json.write_text(json.dumps(run, indent=1), encoding="utf-8")
    recall = figures["recall"]["preference"]
    print(json.dumps({"keep": {k: figures["keep"][k] for k in ("keep_recall", "keep_precision")},
                      "top5": {name: recall[name]["mean"] for name in recall},
                      "epic_minus_se": recall["store-everything"]["vs_epic"]}, indent=1))


if __name__ == "__main__":
    main()
