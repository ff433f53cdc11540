"""The personal-stream set: one JSON file per persona (pNN.json), read and checked for the bench."""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from epic_edge.errors import InvalidInputError
from epic_edge_lab import PERSONAL

SPLITS = ("dev", "test", "all")
FILE_NAME = re.compile(r"p(\d+)\.json")  # p01.json .. p40.json; odd numbers dev, even test


@dataclass(frozen=True)
class Question:
    """One everyday request; `prefs` the preferences bearing on it (empty: none does)."""

    id: str
    text: str
    prefs: tuple[str, ...]
    answers: tuple[str, ...]


@dataclass(frozen=True)
class Persona:
    """One person's stated preferences, stream (time order) and questions, with labels."""

    number: int
    name: str
    preferences: dict[str, str]  # preference id -> text, in the file's order
    items: list[dict[str, Any]]  # {"id", "kind", "time", "text", ...}, in time order
    bears_on: dict[str, frozenset[str]]  # item id -> preference ids it bears on
    questions: list[Question]

    @property
    def split(self) -> str:
        return "dev" if self.number % 2 else "test"

    @property
    def relevant(self) -> set[str]:
        """Items that bear on some preference."""
        return {item for item, prefs in self.bears_on.items() if prefs}


def default_dir() -> Path:
    """bench/personal/personas/, the set's persona files (bench/personal/PROVENANCE.md)."""
    return PERSONAL


def load(root: Path | None = None, split: str = "dev",
         numbers: Collection[int] | None = None) -> list[Persona]:
    """The personas of `split` in `root` (default bench/personal/personas/), by number, only
    those in `numbers` when given; a missing folder, a folder without pNN.json files, a
    malformed file or no persona chosen raises InvalidInputError (one line)."""
    if split not in SPLITS:
        raise InvalidInputError(f"--split must be one of {', '.join(SPLITS)}, got {split!r}")
    root = Path(root) if root is not None else default_dir()
    if not root.is_dir():
        raise InvalidInputError(f"no personal-stream set at {root}: not a folder (pass --data "
                                "DIR, a folder of p01.json .. pNN.json)")
    files = sorted((int(m.group(1)), path) for path in root.iterdir()
                   if (m := FILE_NAME.fullmatch(path.name)))
    if not files:
        raise InvalidInputError(f"no persona files (p01.json ...) in {root}")
    personas = [read(path, number) for number, path in files]
    chosen = [p for p in personas if (split == "all" or p.split == split)
              and (numbers is None or p.number in numbers)]
    if not chosen:
        among = f" numbered {min(numbers)}-{max(numbers)}" if numbers else ""
        raise InvalidInputError(f"no {split} personas{among} in {root} (odd numbers are dev, "
                                "even test)")
    return chosen


def number_range(text: str) -> frozenset[int]:
    """"FIRST-LAST[,FIRST-LAST...]" (persona numbers, both ends included) as a set; a one-line
    error if not."""
    numbers: set[int] = set()
    for part in text.split(","):
        first, _, last = part.strip().partition("-")
        if not (first.isdigit() and last.isdigit() and int(first) <= int(last)):
            raise InvalidInputError("want persona numbers as FIRST-LAST[,FIRST-LAST...] (e.g. "
                                    f"1-40 or 11-20,31-40), got {text!r}")
        numbers.update(range(int(first), int(last) + 1))
    return frozenset(numbers)


def add_personas_option(parser: argparse.ArgumentParser, shipped: str | None = None) -> None:
    """A trainer's --personas FIRST-LAST[,...] (ranges of persona numbers; `shipped`: those the
    shipped file was trained on, when not every dev persona)."""
    def personas(text: str) -> frozenset[int]:
        try:
            return number_range(text)
        except InvalidInputError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    note = f"the shipped file: {shipped}; " if shipped else ""
    parser.add_argument("--personas", type=personas, default=None, metavar="FIRST-LAST[,...]",
                        help=f"only the dev personas numbered FIRST..LAST, one range or "
                             f"several ({note}default every dev persona)")


def read(path: Path, number: int) -> Persona:
    """One persona file, checked for what the bench relies on."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return _persona(data, number)
    except (OSError, ValueError) as exc:
        raise InvalidInputError(f"{path}: {' '.join(str(exc).split())}") from None
    except (KeyError, TypeError, AttributeError) as exc:
        raise InvalidInputError(f"{path}: malformed persona ({type(exc).__name__}: {exc})"
                                ) from None


def _persona(data: dict[str, Any], number: int) -> Persona:
    prefs = {str(p["id"]): str(p["text"]) for p in data["preferences"]}
    items = [dict(item) for item in data["items"]]
    ids = [str(item["id"]) for item in items]
    if len(set(ids)) != len(ids):
        raise ValueError("duplicate item ids")
    if [item["time"] for item in items] != sorted(item["time"] for item in items):
        raise ValueError("items are not in time order")
    bears_on = {}
    for item in items:
        if not str(item["text"]).strip():
            raise ValueError(f"item {item['id']} has no text")
        bears_on[str(item["id"])] = frozenset(str(b["pref"]) for b in item.get("bears_on") or [])
        unknown = bears_on[str(item["id"])] - set(prefs)
        if unknown:
            raise ValueError(f"item {item['id']} bears on unknown preference {min(unknown)}")
    questions = []
    for q in data["questions"]:
        question = Question(str(q["id"]), str(q["text"]), tuple(map(str, q["prefs"])),
                            tuple(map(str, q["answers"])))
        missing = set(question.answers) - set(ids)
        if missing or set(question.prefs) - set(prefs):
            raise ValueError(f"question {question.id} names an unknown item or preference")
        questions.append(question)
    return Persona(number, str(data.get("name", "")), prefs, items, bears_on, questions)
