"""The personal-stream set's own checks and steps: a persona against the writing brief, a blind
batch for readers, a reader's labels against their batch, the agreement of blind relabels
(Cohen's kappa), and the adjudication of labels by majority (bench/personal/PROVENANCE.md).

    python -m epic_edge_lab.personal_set check FILE...
    python -m epic_edge_lab.personal_set blind BATCH FILE...
    python -m epic_edge_lab.personal_set check-labels BATCH ANSWERS
    python -m epic_edge_lab.personal_set agreement [--data DIR] RELABELS...
    python -m epic_edge_lab.personal_set adjudicate --out DIR --readers A B FILE...
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections import Counter
from itertools import combinations
from pathlib import Path
from typing import Any

from epic_edge.errors import InvalidInputError
from epic_edge_lab import personal_data
from epic_edge_lab.judged_metrics import cohen_kappa

KINDS = {"note", "email", "chat", "calendar", "web", "receipt", "reminder", "post", "review"}
HOW = {"explicit", "implicit", "bad_experience", "alternative", "fact"}


def brief_problems(persona: personal_data.Persona) -> list[str]:
    """What a persona breaks of WRITING.md's rules (the reader has checked the format)."""
    out = []
    if not 4 <= len(persona.preferences) <= 5:
        out.append(f"{len(persona.preferences)} preferences (want 4-5)")
    if not 60 <= len(persona.items) <= 70:
        out.append(f"{len(persona.items)} items (want 60-70)")
    times = [str(item["time"]) for item in persona.items]
    out += [f"{persona.items[n + 1]['id']}: earlier than the item before it (want time order)"
            for n in range(len(times) - 1) if times[n + 1] < times[n]]
    for item in persona.items:
        words = len(str(item["text"]).split())
        if item["kind"] not in KINDS:
            out.append(f"{item['id']}: kind {item['kind']!r}")
        if not 8 <= words <= 125:
            out.append(f"{item['id']}: {words} words (want 10-120)")
        if any(b.get("how") not in HOW for b in item.get("bears_on") or []):
            out.append(f"{item['id']}: a bearing whose how is not one of {sorted(HOW)}")
        if item.get("near_miss_of") and persona.bears_on[str(item["id"])]:
            out.append(f"{item['id']}: a near miss that bears on a preference")
    hows: dict[str, list[str]] = {p: [] for p in persona.preferences}
    for item in persona.items:
        for bearing in item.get("bears_on") or []:
            hows.get(str(bearing.get("pref")), []).append(str(bearing.get("how")))
    out += [f"preference {p} has {len(h)} items bearing on it, of {len(set(h))} kinds of how "
            "(want 3+ items, 2+ kinds)" for p, h in hows.items() if len(h) < 3 or len(set(h)) < 2]
    questions = persona.questions
    if not 8 <= len(questions) <= 10:
        out.append(f"{len(questions)} questions (want 8-10)")
    if sum(bool(q.prefs) for q in questions) < 5:
        out.append("fewer than 5 questions a preference bears on")
    if sum(not q.prefs for q in questions) < 2:
        out.append("fewer than 2 questions no preference bears on")
    if not any(len(q.prefs) >= 2 for q in questions):
        out.append("no question touching two preferences")
    out += [f"{q.id}: no answer items" for q in questions if not q.answers]
    return out


def read_labels(path: Path) -> dict[str, set[str]]:
    """A reader's answers file: item id -> the preferences it bears on (one line per item)."""
    labels: dict[str, set[str]] = {}
    for n, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
        if line.strip():
            row = json.loads(line)
            if row["item"] in labels:
                raise InvalidInputError(f"{path}, line {n}: {row['item']} labelled twice")
            labels[row["item"]] = set(row["bears_on"])
    return labels


def label_problems(batch: Path, answers: Path) -> list[str]:
    """What an answers file lacks or gets wrong against its blind batch."""
    prefs_of, current = {}, set()
    for line in Path(batch).read_text(encoding="utf-8").splitlines():
        row = json.loads(line) if line.strip() else None
        if row and "persona" in row:
            current = {p["id"] for p in row["preferences"]}
        elif row:
            prefs_of[row["item"]] = current
    labels = read_labels(answers)
    out = [f"unknown item {i}" for i in labels if i not in prefs_of]
    out += [f"{i} names preferences of another persona" for i, p in labels.items()
            if i in prefs_of and not p <= prefs_of[i]]
    missing = sorted(set(prefs_of) - set(labels))
    return out + ([f"{len(missing)} items unlabelled, e.g. {missing[:5]}"] if missing else [])


def agreement(personas: list[personal_data.Persona], relabels: list[Path]) -> list[str]:
    """Kappa over item x preference pairs: each reader against the set's labels, and the two
    readers of each batch (files named batchN.reader-X.jsonl) against each other."""
    prefs = {str(i["id"]): list(p.preferences) for p in personas for i in p.items}
    labels = {i: set(s) for p in personas for i, s in p.bears_on.items()}
    readers = {Path(r).name: read_labels(r) for r in relabels}
    lines = []

    def compare(name: str, a: dict[str, set[str]], b: dict[str, set[str]]) -> None:
        common = [i for i in a if i in b and i in prefs]
        pairs = [(int(p in a[i]), int(p in b[i])) for i in common for p in prefs[i]]
        if pairs:
            lines.append(f"{name}: {len(common)} items, {len(pairs)} pairs, kappa "
                         f"{cohen_kappa(*zip(*pairs)):.3f}")

    for name, labelled in readers.items():
        compare(f"{name} vs the set", labelled, labels)
    for (na, a), (nb, b) in combinations(readers.items(), 2):
        if na.split(".")[0] == nb.split(".")[0]:
            compare(f"{na} vs {nb}", a, b)
    return lines


def blind_batch(personas: list[dict[str, Any]], seed: int = 41) -> list[dict[str, Any]]:
    """A readers' batch (RUBRIC.md): per persona a header with its preferences, then its items
    shuffled, with no labels."""
    rng, rows = random.Random(seed), []
    for persona in personas:
        rows.append({"persona": persona["persona"], "preferences": persona["preferences"]})
        items = [{"item": i["id"], "kind": i["kind"], "text": i["text"]}
                 for i in persona["items"]]
        rng.shuffle(items)
        rows += items
    return rows


def adjudicate(persona: dict[str, Any], readers: list[dict[str, set[str]]]) -> Counter:
    """Give every (item, preference) pair of a persona file the majority of its writer and
    blind readers, in place: a bearing both readers add is recorded as implicit, added_by
    readers; an item that gains a bearing is no longer a near miss. Counts labels added and
    removed and items changed."""
    counts: Counter = Counter()
    for item in persona["items"]:
        written = {b["pref"]: b for b in item.get("bears_on") or []}
        kept = []
        for pref in (p["id"] for p in persona["preferences"]):
            votes = (pref in written) + sum(pref in r.get(item["id"], ()) for r in readers)
            if 2 * votes > len(readers) + 1:
                kept.append(written.get(pref)
                            or {"pref": pref, "how": "implicit", "added_by": "readers"})
                counts["added"] += pref not in written
            else:
                counts["removed"] += pref in written
        counts["items changed"] += {b["pref"] for b in kept} != set(written)
        item["bears_on"] = kept
        if kept:
            item["near_miss_of"] = None
    return counts


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m epic_edge_lab.personal_set",
                                description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    sub.add_parser("check", help="persona files against WRITING.md").add_argument(
        "files", nargs="+", type=Path)
    blind = sub.add_parser("blind", help="a readers' batch of persona files, no labels")
    blind.add_argument("batch", type=Path)
    blind.add_argument("files", nargs="+", type=Path)
    labels = sub.add_parser("check-labels", help="a reader's answers against its batch")
    labels.add_argument("batch", type=Path)
    labels.add_argument("answers", type=Path)
    agree = sub.add_parser("agreement", help="kappa of the blind relabels")
    agree.add_argument("--data", type=Path, default=None, help="the set's persona folder")
    agree.add_argument("relabels", nargs="+", type=Path)
    judge = sub.add_parser("adjudicate", help="the majority of writer and readers per label")
    judge.add_argument("--out", type=Path, required=True, help="folder for the adjudicated files")
    judge.add_argument("--readers", nargs=2, type=Path, required=True,
                       help="two readers' answers files, each labelling every item")
    judge.add_argument("files", nargs="+", type=Path)
    args = p.parse_args(argv)
    try:
        if args.command == "check":
            bad = 0
            for path in args.files:
                problems = brief_problems(personal_data.read(path, 0))
                bad += bool(problems)
                print(f"{path}: " + ("ok" if not problems else "; ".join(problems)))
            return 1 if bad else 0
        if args.command == "blind":
            personas = [json.loads(path.read_text(encoding="utf-8")) for path in args.files]
            args.batch.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n"
                                          for row in blind_batch(personas)), encoding="utf-8")
            print(f"{args.batch}: {len(personas)} personas")
            return 0
        if args.command == "adjudicate":
            return _adjudicate(args.out, args.readers, args.files)
        if args.command == "check-labels":
            problems = label_problems(args.batch, args.answers)
            print("ok" if not problems else "\n".join(problems))
            return 1 if problems else 0
        print("\n".join(agreement(personal_data.load(args.data, "all"), args.relabels)))
        return 0
    except (InvalidInputError, OSError, ValueError, KeyError) as exc:
        print(f"error: {' '.join(str(exc).split())}", file=sys.stderr)
        return 2


def _adjudicate(out: Path, reader_files: list[Path], files: list[Path]) -> int:
    readers = [read_labels(path) for path in reader_files]
    personas = [json.loads(path.read_text(encoding="utf-8")) for path in files]
    unlabelled = [i["id"] for p in personas for i in p["items"]
                  if sum(i["id"] in r for r in readers) != 2]
    if unlabelled:
        raise InvalidInputError("adjudicate takes two readers' labels of every item (RUBRIC.md)"
                                f"; not labelled twice: {unlabelled[:5]}")
    total: Counter = Counter()
    out.mkdir(parents=True, exist_ok=True)
    for path, persona in zip(files, personas):
        total += adjudicate(persona, readers)
        (out / path.name).write_text(json.dumps(persona, ensure_ascii=False, indent=1) + "\n",
                                     encoding="utf-8")
    print(f"{sum(len(p['items']) for p in personas)} items: {total['added']} labels added, "
          f"{total['removed']} removed, {total['items changed']} items changed; written to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
