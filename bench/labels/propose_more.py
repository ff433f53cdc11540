"""Propose a further round of (preference, passage) pairs for blind labelling (issue 13).

Run: python bench/labels/propose_more.py OUT_DIR [--round 2|3]
(needs the linux-cpu models and the wiki, recipes and health corpora cached by
`epic-edge data fetch`; corpus vectors come from the bench's vector cache.)

Writes OUT_DIR/pairs.jsonl (every new pair with style, source, cosine and band), blind
batches OUT_DIR/batches/batch-NN.jsonl ({id, preference, title, passage} only) and
OUT_DIR/double.json (the pairs that appear in two batches, for agreement). Round 2 paired
PrefWiki's preferences and preferences_extra.jsonl's first 183 with passages; round 3 pairs
the preferences of preferences_extra.jsonl marked "round": 3, none with a pair yet.
"""

from __future__ import annotations

import argparse
import json
import random
import re
from pathlib import Path

import numpy as np

from epic_edge_lab.calibrate import FIRST_ROUND_IDS  # second-round pair ids start here

SOURCES = ("wiki", "recipes", "health")  # the only corpora whose licences allow shipping text
HERE = Path(__file__).resolve().parent
DOUBLE = 300
# per round: (first pair id, blind batches)
ROUNDS = {2: (FIRST_ROUND_IDS, 5), 3: (30_000, 16)}
STOP = set("""about above after again against also although always anything because before
being below between both cannot could does doing down during each either else even ever every
from further have having here however into itself just least less like likes love make many
more most much must myself never only other over please prefer rather really same should since
some such than that their them then there these they thing things this those though through
under unless until very want well were what when where whether which while will with without
would your""".split())


def content_words(text: str) -> set[str]:
    """Lower-case words of 4+ letters that are not stop words, crudely singularised."""
    words = re.findall(r"[a-z]{4,}", text.lower())
    return {w[:-1] if w.endswith("s") and not w.endswith("ss") else w
            for w in words if w not in STOP}


def title_of(item_id: str, text: str, titles: dict[str, str]) -> str:
    """Article title, recipe name, or "Drug (condition)" of a health review's first chunk."""
    key, _, _ = item_id.partition("#")
    if item_id.startswith("wiki:"):
        return key[len("wiki:"):]
    if item_id.startswith("recipe:"):
        return key[len("recipe:"):].removeprefix("Cookbook:")
    return titles.get(key) or text.split(":", 1)[0]


def load_passages() -> dict[str, list[dict]]:
    """Passages per source: wiki lead chunks (#0), every recipe and health chunk of 15+ words."""
    from epic_edge_lab.corpora import load

    out: dict[str, list[dict]] = {}
    for source in SOURCES:
        items = load(source)
        heads = {it.id.partition("#")[0]: it.text.split(":", 1)[0]
                 for it in items if it.id.endswith("#0")} if source == "health" else {}
        out[source] = [{"item": it.id, "text": it.text, "title": title_of(it.id, it.text, heads)}
                       for it in items if len(it.text.split()) >= 15
                       and (source != "wiki" or it.id.endswith("#0"))]
    return out


def passage_vectors(passages: dict[str, list[dict]], embedder) -> dict[str, np.ndarray]:
    """Unit vectors per source, served from the device corpus cache when it holds them."""
    from epic_edge_lab.corpora import data_dir, mixed
    from epic_edge_lab.vectors import corpus_vectors

    device = mixed()
    vectors, _ = corpus_vectors("device", device, embedder, data_dir() / "vectors")
    row = {it.id: i for i, it in enumerate(device)}
    return {s: vectors[[row[p["item"]] for p in rows]] for s, rows in passages.items()}


def preferences(round_: int = 2) -> list[dict]:
    """Round 2: PrefWiki's distinct preferences (style "consumer") then the written ones of
    preferences_extra.jsonl with no round; round 3: those marked "round": 3."""
    from epic_edge.datasets import load_prefwiki

    extra = [r for r in map(json.loads, (HERE / "preferences_extra.jsonl").read_text(
        encoding="utf-8").splitlines()) if r.get("round", 2) == round_]
    prefs = [{"style": "consumer", "text": t} for t in dict.fromkeys(
        b["preference"] for p in load_prefwiki() for b in p["preference_blocks"])
             ] if round_ == 2 else []
    return prefs + [{"style": r["style"], "text": r["text"], "plan": "new"} for r in extra]


def existing_pairs() -> set[tuple[str, str]]:
    """(preference, passage) and (preference, title) of every labelled pair on file."""
    seen: set[tuple[str, str]] = set()
    for split in ("train", "test", "test_style"):
        for line in (HERE / f"{split}.jsonl").read_text(encoding="utf-8").splitlines():
            row = json.loads(line)
            seen |= {(row["preference"], row["passage"]), (row["preference"], "T:" + row["title"])}
    return seen


# Draws per preference from the ranking over all three sources pooled: (band, first rank,
# last rank, draws). PrefWiki's preferences already have two first-round wiki draws, so take
# fewer; every written preference (whatever its style) is new.
PLAN = {"consumer": (("top3", 1, 3, 1), ("rank7-40", 7, 40, 2), ("hard", 1, 100, 1)),
        "new": (("top3", 1, 3, 2), ("rank7-40", 7, 40, 4), ("hard", 1, 100, 2))}
SOURCE_FLOOR = 0.30  # a source whose best passage reaches this adds one of its own ranks 1-3


class Proposer:
    """Draws pairs for one preference at a time from the three sources' passages."""

    def __init__(self, passages: dict[str, list[dict]], vecs: dict[str, np.ndarray],
                 seen: set[tuple[str, str]], seed: int, first_id: int = FIRST_ROUND_IDS
                 ) -> None:
        self.rng, self.pairs, self.taken = random.Random(seed), [], set(seen)
        self.first_id = first_id
        self.flat = [(s, p) for s in SOURCES for p in passages[s]]
        self.matrix = np.concatenate([vecs[s] for s in SOURCES])
        sizes = np.cumsum([0, *(len(passages[s]) for s in SOURCES)])
        self.bounds = {s: (int(sizes[i]), int(sizes[i + 1])) for i, s in enumerate(SOURCES)}
        self.words = [content_words(p["title"] + " " + p["text"]) for _, p in self.flat]

    def keys(self, text: str, j: int) -> set[tuple[str, str]]:
        p = self.flat[j][1]
        return {(text, p["text"]), (text, "T:" + p["title"])}

    def draw(self, pref: dict, scores: np.ndarray, candidates: list[tuple[int, int]],
             band: str) -> None:
        """One (rank, passage index) of `candidates` not yet paired with `pref`, at random."""
        choices = [(r, j) for r, j in candidates if not self.taken & self.keys(pref["text"], j)]
        if not choices:
            return
        r, j = self.rng.choice(choices)
        source, p = self.flat[j]
        self.taken |= self.keys(pref["text"], j)
        self.pairs.append({
            "id": self.first_id + len(self.pairs), "preference": pref["text"],
            "style": pref["style"],
            "source": source, "title": p["title"], "passage": p["text"],
            "minilm_cosine": round(float(scores[j]), 4), "band": band, "rank": r})

    def add(self, pref: dict, vector: np.ndarray) -> None:
        start, scores = len(self.pairs), self.matrix @ vector
        words = content_words(pref["text"])
        order = [int(j) for j in np.argsort(-scores)[:100]]
        plan = pref.get("plan") or ("consumer" if pref["style"] == "consumer" else "new")
        for band, lo, hi, count in PLAN[plan]:
            ranked = [(r, j) for r, j in enumerate(order[lo - 1:hi], lo)
                      if band != "hard" or words & self.words[j]]
            for _ in range(count):
                self.draw(pref, scores, ranked, band)
        drawn = {p["source"] for p in self.pairs[start:]}
        for source, (lo, hi) in self.bounds.items():
            own = [(r, lo + int(j)) for r, j in enumerate(np.argsort(-scores[lo:hi])[:3], 1)]
            if source not in drawn and scores[own[0][1]] >= SOURCE_FLOOR:
                self.draw(pref, scores, own, f"{source}-top3")


def propose(prefs: list[dict], passages: dict[str, list[dict]], vecs: dict[str, np.ndarray],
            pref_vecs: np.ndarray, seen: set[tuple[str, str]], seed: int = 13,
            first_id: int = FIRST_ROUND_IDS) -> list[dict]:
    """Per preference, draws from the pooled cosine ranking by PLAN (a hard draw is a passage
    of the pooled top 100 that shares a content word with the preference), then one of ranks
    1-3 of each source not yet drawn whose best passage has cosine >= SOURCE_FLOOR, so recipes
    and health reviews pair with the preferences they bear on. No (preference, passage) or
    (preference, title) is proposed twice or taken from `seen`."""
    proposer = Proposer(passages, vecs, seen, seed, first_id)
    for pref, vector in zip(prefs, pref_vecs):
        proposer.add(pref, vector)
    return proposer.pairs


def write_batches(pairs: list[dict], out: Path, seed: int = 13, double_count: int = DOUBLE,
                  batch_count: int = 5) -> dict[str, list[int]]:
    """Shuffle into equal blind batches; `double_count` pairs also go into a second batch."""
    rng = random.Random(seed)
    ids = [p["id"] for p in pairs]
    rng.shuffle(ids)
    batches = [ids[b::batch_count] for b in range(batch_count)]
    double: dict[str, list[int]] = {}
    for n, pid in enumerate(rng.sample(ids, double_count)):
        first = next(b for b in range(batch_count) if pid in batches[b])
        second = (first + 1 + n % (batch_count - 1)) % batch_count
        batches[second].append(pid)
        double[str(pid)] = [first + 1, second + 1]
    by_id = {p["id"]: p for p in pairs}
    (out / "batches").mkdir(parents=True, exist_ok=True)
    for b, members in enumerate(batches, 1):
        rng.shuffle(members)
        with open(out / "batches" / f"batch-{b:02d}.jsonl", "w", encoding="utf-8") as fh:
            for pid in members:
                p = by_id[pid]
                fh.write(json.dumps({k: p[k] for k in ("id", "preference", "title", "passage")},
                                    ensure_ascii=False) + "\n")
    return double


def main(out_dir: str, round_: int = 2) -> None:
    from epic_edge import registry
    from epic_edge.models import model_dir
    from epic_edge.profiles import load_profile

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    embedder = registry.create("embedder", load_profile("linux-cpu").embedder, model_dir())
    first_id, batch_count = ROUNDS[round_]
    prefs, passages = preferences(round_), load_passages()
    vecs = passage_vectors(passages, embedder)
    pref_vecs = np.asarray(embedder.embed([p["text"] for p in prefs]), np.float32)
    pairs = propose(prefs, passages, vecs, pref_vecs, existing_pairs(), first_id=first_id)
    with open(out / "pairs.jsonl", "w", encoding="utf-8") as fh:
        for p in pairs:
            fh.write(json.dumps(p, ensure_ascii=False) + "\n")
    double = write_batches(pairs, out, batch_count=batch_count)
    (out / "double.json").write_text(json.dumps(
        {"batches_of": double, "count": len(double)}, indent=1), encoding="utf-8")
    print(f"{len(pairs)} pairs, {len(double)} double-labelled, embedder {embedder.fingerprint}")


if __name__ == "__main__":
    cli = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    cli.add_argument("out_dir")
    cli.add_argument("--round", type=int, choices=sorted(ROUNDS), default=2)
    args = cli.parse_args()
    main(args.out_dir, args.round)
