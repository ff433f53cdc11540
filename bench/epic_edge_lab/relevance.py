"""The judged relevance set: questions, pooled passages and blind judgments (files in judged/)."""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from epic_edge.datasets import load_prefeval, load_prefwiki
from epic_edge.errors import InvalidInputError
from epic_edge_lab import JUDGED

SPLITS = ("dev", "test", "all")
AXES = ("answers", "aligned")


def data_dir() -> Path:
    """bench/judged/ (the lab runs from its checkout)."""
    return JUDGED


def persona_sets(root: Path | None = None) -> list[list[dict[str, Any]]]:
    """The personas a judged set's questions come from, in PrefWiki's layout, with every
    question set over them: a set written here has its own personas.json; the default is
    PrefWiki, whose personas also ask PrefEval's questions."""
    path = (root or data_dir()) / "personas.json"
    if path.exists():
        return [json.loads(path.read_text(encoding="utf-8"))]
    return [load_prefwiki(), load_prefeval()]


def passage_id(text: str) -> str:
    """A passage's stable id: the first 12 hex digits of the SHA-256 of its text."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]


def passage_index(texts: Iterable[str]) -> dict[str, int]:
    """passage id -> the position of the first text with that id (equal texts share one)."""
    out: dict[str, int] = {}
    for i, text in enumerate(texts):
        out.setdefault(passage_id(text), i)
    return out


def passage_record(text: str, item: Any = None) -> dict[str, str]:
    """A pooled passage as passages.jsonl holds it: id, text, and the corpus item it came
    from (empty when unknown)."""
    return {"pid": passage_id(text), "text": text, "item_id": item.id if item else "",
            "source": item.source if item else ""}


@dataclass(frozen=True)
class Question:
    """One question of the judged set, with its gold preference and split."""

    qid: str
    dataset: str
    persona: int
    block: int
    split: str
    question: str
    preference: str


def split_of(persona: int) -> str:
    """Dev/test by persona: even personas tune, odd personas test."""
    return "dev" if persona % 2 == 0 else "test"


def select_questions(personas: Iterable[int] = range(52), wiki_per_persona: int = 3,
                     eval_per_persona: int = 2, seed: int = 0) -> list[Question]:
    """Per persona: PrefWiki and PrefEval questions from distinct preference blocks (seeded)."""
    wiki, prefeval = load_prefwiki(), load_prefeval()
    rng = random.Random(seed)
    out: list[Question] = []
    for p in personas:
        blocks = list(range(len(wiki[p]["preference_blocks"])))
        rng.shuffle(blocks)
        for b in blocks[:wiki_per_persona]:
            block = wiki[p]["preference_blocks"][b]
            qi = rng.randrange(len(block["queries"]))
            out.append(Question(f"wiki-{p}-{b}-{qi}", "prefwiki", p, b, split_of(p),
                                block["queries"][qi]["question"], block["preference"]))
        for b in blocks[wiki_per_persona:wiki_per_persona + eval_per_persona]:
            block = prefeval[p]["preference_blocks"][b]
            out.append(Question(f"eval-{p}-{b}", "prefeval", p, b, split_of(p),
                                block["queries"][0]["question"], block["preference"]))
    return out


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()
            if line.strip()]


def _write_jsonl(path: Path, rows: Iterable[Mapping[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows),
                    encoding="utf-8")


def load_questions(split: str = "all", root: Path | None = None) -> list[Question]:
    """The judged set's questions (questions.jsonl), optionally one split."""
    if split not in SPLITS:
        raise InvalidInputError(f"unknown split {split!r}; choose from {', '.join(SPLITS)}")
    path = (root or data_dir()) / "questions.jsonl"
    if not path.exists():
        raise InvalidInputError(f"{path} not found: a judged set folder holds questions.jsonl")
    rows = [Question(**r) for r in read_jsonl(path)]
    return [q for q in rows if split == "all" or q.split == split]


def write_questions(questions: Sequence[Question], root: Path | None = None) -> Path:
    path = (root or data_dir()) / "questions.jsonl"
    _write_jsonl(path, (q.__dict__ for q in questions))
    return path


@dataclass(frozen=True)
class Judgment:
    """One reader's verdict on one (question, passage): answers and aligned, 0 or 1."""

    qid: str
    pid: str
    answers: int
    aligned: int
    judge: str


def load_judgments(root: Path | None = None) -> list[Judgment]:
    """Every judgment on file (judgments.jsonl), double judgments included."""
    return [Judgment(r["qid"], r["pid"], int(r["answers"]), int(r["aligned"]), r["judge"])
            for r in read_jsonl((root or data_dir()) / "judgments.jsonl")]


def primary_labels(judgments: Sequence[Judgment]) -> dict[tuple[str, str], tuple[int, int]]:
    """(qid, pid) -> (answers, aligned) from the first judgment on file for each pair."""
    labels: dict[tuple[str, str], tuple[int, int]] = {}
    for j in judgments:
        labels.setdefault((j.qid, j.pid), (j.answers, j.aligned))
    return labels


def load_passages(root: Path | None = None) -> dict[str, dict[str, Any]]:
    """pid -> {"pid", "text", "item_id", "source"} for every pooled passage."""
    return {r["pid"]: r for r in read_jsonl((root or data_dir()) / "passages.jsonl")}


def add_passages(found: Mapping[str, Mapping[str, Any]], root: Path | None = None) -> int:
    """Append passages not yet on file; returns how many were new."""
    root = root or data_dir()
    known = load_passages(root)
    new = {pid: dict(row) for pid, row in found.items() if pid not in known}
    if new:
        _write_jsonl(root / "passages.jsonl", [*known.values(), *new.values()])
    return len(new)


def unjudged_pool(retrieved: Mapping[str, Mapping[str, Sequence[str]]],
                  judged: Iterable[tuple[str, str]], seed: int = 0) -> dict[str, list[str]]:
    """qid -> shuffled pids that some system retrieved and nobody has judged yet.

    `retrieved[qid][system]` is the system's top-k pids; the pool forgets which system
    found what, so a reader never learns it.
    """
    done = set(judged)
    rng = random.Random(seed)
    pool: dict[str, list[str]] = {}
    for qid in sorted(retrieved):
        pids = sorted({pid for hits in retrieved[qid].values() for pid in hits
                       if (qid, pid) not in done})
        rng.shuffle(pids)
        if pids:
            pool[qid] = pids
    return pool


def write_batches(pool: Mapping[str, Sequence[str]], questions: Mapping[str, Question],
                  passages: Mapping[str, Mapping[str, Any]], out: Path,
                  rows_per_batch: int = 250) -> list[Path]:
    """Reader batches: JSONL rows {qid, question, preference, pid, passage}, whole questions
    per batch, questions in a shuffled order; nothing in a row names a system."""
    out.mkdir(parents=True, exist_ok=True)
    qids = list(pool)
    random.Random(1).shuffle(qids)
    batches: list[list[dict[str, str]]] = [[]]
    for qid in qids:
        if len(batches[-1]) >= rows_per_batch:
            batches.append([])
        q = questions[qid]
        batches[-1] += [{"qid": qid, "question": q.question, "preference": q.preference,
                         "pid": pid, "passage": passages[pid]["text"]} for pid in pool[qid]]
    paths = []
    for n, rows in enumerate(b for b in batches if b):
        path = out / f"batch-{n:02d}.jsonl"
        _write_jsonl(path, rows)
        paths.append(path)
    return paths
