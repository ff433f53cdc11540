"""The judged verification split: the blind relevance judges' *aligned* labels as (preference,
passage) pairs, a test split of the bench's own corpus for the verifier learners.

Build: python -m epic_edge_lab.judged_split [--quality bench/results/quality.json]

The judged relevance set grades each pooled passage on "aligned: does the passage bear on what the
preference favours, rules out or cares about", a judgment that ignores the question (RUBRIC.md):
the verifier's own task, graded blind by readers who never saw a verifier's score. Two rules keep
the split honest:
- only the judged *test* personas' questions (dev stays free for tuning);
- only passages that a system without a verifier retrieved for the question (store-everything,
  with and without steering, and the coarse filter alone, read from a quality run's lists): the
  pool's passages from EPIC are its shipped verifier's own keeps and would grade that verifier
  on its own mistakes.
A (preference, passage) judged for several questions takes the majority label; a tie is Discard
(the rubric's "when in doubt, 0"). Like passages.jsonl, the file holds passage ids, not texts:
`load` takes the texts from the bench corpus (`epic-edge data fetch device`).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from epic_edge.errors import EpicEdgeError, InvalidInputError
from epic_edge_lab.calibrate import LabelledPair

from . import relevance

FILE = "aligned_pairs.jsonl"
SPLIT = "test_judged"
FIRST_ID = 20_000  # ids below belong to the labelled set's two rounds
NEUTRAL_SYSTEMS = ("store-everything", "store-everything+steer", "coarse")


def build(retrieved: Mapping[str, Mapping[str, list[str]]], split: str = "test"
          ) -> list[dict[str, Any]]:
    """Rows of aligned_pairs.jsonl from the judgments on file and a quality run's lists."""
    questions = {q.qid: q for q in relevance.load_questions(split)}
    neutral = {(qid, pid) for qid, lists in retrieved.items() if qid in questions
               for system in NEUTRAL_SYSTEMS for pid in lists.get(system, [])}
    votes: dict[tuple[str, str], list[int]] = defaultdict(list)
    judges: dict[tuple[str, str], set[str]] = defaultdict(set)
    for j in relevance.load_judgments():
        if (j.qid, j.pid) in neutral:
            key = (questions[j.qid].preference, j.pid)
            votes[key].append(j.aligned)
            judges[key].add(j.judge)
    return [{"id": FIRST_ID + n, "split": SPLIT, "preference": pref, "pid": pid,
             "label": "Keep" if 2 * sum(aligned) > len(aligned) else "Discard",
             "aligned_votes": f"{sum(aligned)}/{len(aligned)}", "judges": sorted(judges[key])}
            for n, (key, aligned) in enumerate(sorted(votes.items())) for pref, pid in [key]]


def check_texts(rows: list[dict[str, Any]], texts: Mapping[str, str]) -> None:
    """Every row's passage is in `texts`, or a clear error (never a pair silently dropped)."""
    missing = [r["pid"] for r in rows if r["pid"] not in texts]
    if missing:
        raise InvalidInputError(
            f"{len(missing)} judged passages (e.g. {missing[0]}) are not in the corpus given; "
            "fetch the bench corpus again (`epic-edge data fetch device`)")


def load(texts: Mapping[str, str], root: Path | None = None) -> list[LabelledPair]:
    """The split as labelled pairs, passages from `texts` (pid -> text); [] when not built.
    A pid missing from `texts` (another corpus version) is an error, never silently dropped."""
    rows = relevance.read_jsonl((root or relevance.data_dir()) / FILE)
    check_texts(rows, texts)
    return [LabelledPair(id=r["id"], split=SPLIT, preference=r["preference"], title=r["pid"],
                         passage=texts[r["pid"]], topic="", keep=r["label"] == "Keep",
                         reason=f"aligned {r['aligned_votes']}") for r in rows]


def corpus_texts() -> dict[str, str]:
    """pid -> text of the bench's mixed device corpus."""
    from . import corpora

    return {relevance.passage_id(it.text): it.text for it in corpora.load(corpora.MIXED)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m epic_edge_lab.judged_split",
                                description=__doc__.splitlines()[0])
    p.add_argument("--quality", type=Path, default=Path("bench/results/quality.json"),
                   help="a quality run's JSON (its systems' retrieved lists)")
    p.add_argument("--out", type=Path, default=relevance.data_dir() / FILE,
                   help=f"where to write the split (default: bench/judged/{FILE})")
    args = p.parse_args(argv)
    try:
        retrieved = json.loads(args.quality.read_text(encoding="utf-8"))["retrieved"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        p.error(f"{args.quality} is not a quality run's JSON with its retrieved lists ({exc!r})")
    try:  # everything checked before the file is replaced
        rows = build(retrieved)
        check_texts(rows, corpus_texts())
    except EpicEdgeError as exc:
        p.error(str(exc))
    out = args.out
    out.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows),
                   encoding="utf-8")
    print(f"{out}: {len(rows)} pairs ({sum(r['label'] == 'Keep' for r in rows)} Keep), "
          f"{len({r['preference'] for r in rows})} preferences")
    return 0


if __name__ == "__main__":
    sys.exit(main())
