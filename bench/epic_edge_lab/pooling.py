"""Re-pooling: send the unjudged hits of every system to blind readers; take their judgments."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from epic_edge.errors import InvalidInputError
from epic_edge_lab import relevance


def pool(result: Mapping[str, Any], out: Path, rows_per_batch: int = 250,
         root: Path | None = None) -> dict[str, Any]:
    """Write reader batches for every (question, passage) some system retrieved and nobody has
    judged; record the passages' provenance (ids and sources, never their text)."""
    root = root or relevance.data_dir()
    questions = {q.qid: q for q in relevance.load_questions("all", root)}
    judged = {(j.qid, j.pid) for j in relevance.load_judgments(root)}
    todo = relevance.unjudged_pool(result["retrieved"], judged)
    passages = result["passages"]
    new = relevance.add_passages({pid: {"pid": pid, "item_id": p["item_id"],
                                        "source": p["source"]}
                                  for pid, p in passages.items()}, root)
    paths = relevance.write_batches(todo, questions, passages, out, rows_per_batch)
    return {"questions": len(todo), "rows": sum(len(v) for v in todo.values()),
            "batches": [str(p) for p in paths], "new_passages": new}


def saved_run(path: Path, variants: bool = True) -> dict[str, Any]:
    """A saved `bench quality --json` run with its hits' passages read back from the cached
    corpus it ran on (results never hold corpus text), ready for `pool`; without `variants`,
    only the five systems' hits (the retrieval variants' are left out)."""
    from epic_edge_lab import corpora
    from epic_edge_lab.systems import SYSTEMS

    try:
        result = json.loads(Path(path).read_text(encoding="utf-8"))
        retrieved, corpus = result["retrieved"], result["corpus"]
        if not variants:
            retrieved = result["retrieved"] = {
                qid: {name: pids for name, pids in lists.items() if name in SYSTEMS}
                for qid, lists in retrieved.items()}
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise InvalidInputError(f"{path} is not a saved `bench quality --json` run ({exc})"
                                ) from exc
    items = corpora.load(corpus)
    index = relevance.passage_index(item.text for item in items)
    wanted = {pid for lists in retrieved.values() for pids in lists.values() for pid in pids}
    missing = wanted - index.keys()
    if missing:
        raise InvalidInputError(f"{len(missing)} passages of {path} are not in the {corpus!r} "
                                "corpus fetched here; run `bench pool` without --from")
    result["passages"] = {pid: relevance.passage_record(items[index[pid]].text, items[index[pid]])
                          for pid in sorted(wanted)}
    return result


def add_judgments(path: Path, judge: str, root: Path | None = None) -> int:
    """Validate a reader's JSONL ({qid, pid, answers, aligned} per line) and append it to
    judgments.jsonl under `judge`; a second judgment by the same reader is refused."""
    root = root or relevance.data_dir()
    if not judge.strip():
        raise InvalidInputError("name the reader (--judge)")
    questions = {q.qid for q in relevance.load_questions("all", root)}
    known = relevance.load_passages(root)
    done = {(j.qid, j.pid) for j in relevance.load_judgments(root) if j.judge == judge}
    rows = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            r = json.loads(line)
            qid, pid = str(r["qid"]), str(r["pid"])
            labels = {axis: int(r[axis]) for axis in relevance.AXES}
        except (ValueError, KeyError, TypeError) as exc:
            raise InvalidInputError(f"{path}, line {n}: not a judgment ({exc})") from None
        if qid not in questions or pid not in known:
            raise InvalidInputError(f"{path}, line {n}: unknown question or passage")
        if any(v not in (0, 1) for v in labels.values()):
            raise InvalidInputError(f"{path}, line {n}: answers and aligned must be 0 or 1")
        if (qid, pid) in done:
            continue
        done.add((qid, pid))
        rows.append({"qid": qid, "pid": pid, **labels, "judge": judge})
    with open(root / "judgments.jsonl", "a", encoding="utf-8") as fh:
        fh.writelines(json.dumps(r) + "\n" for r in rows)
    return len(rows)
