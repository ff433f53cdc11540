"""The second-round proposal: bands, no reused pair, seeded, blind batches with double labels."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np

SCRIPT = Path(__file__).resolve().parents[1] / "bench" / "labels"
spec = importlib.util.spec_from_file_location("propose_more", SCRIPT / "propose_more.py")
propose_more = importlib.util.module_from_spec(spec)
spec.loader.exec_module(propose_more)

PREFS = [{"style": "consumer", "text": "I love spicy curry."},
         {"style": "negation", "text": "I eat fish but no other meat."}]


def _corpus(seed: int = 0):
    rng = np.random.default_rng(seed)
    passages, vecs = {}, {}
    for source, n in (("wiki", 60), ("recipes", 50), ("health", 40)):
        passages[source] = [{"item": f"{source}:{k}#0", "title": f"{source} {k}",
                             "text": f"{source} passage {k} about curry and fish"}
                            for k in range(n)]
        v = rng.normal(size=(n, 8)).astype(np.float32)
        vecs[source] = v / np.linalg.norm(v, axis=1, keepdims=True)
    pv = rng.normal(size=(len(PREFS), 8)).astype(np.float32)
    return passages, vecs, pv / np.linalg.norm(pv, axis=1, keepdims=True)


def test_proposal_follows_the_plan_never_reuses_a_pair_and_is_seeded():
    passages, vecs, pv = _corpus()
    seen = {(PREFS[0]["text"], passages["wiki"][0]["text"])}
    pairs = propose_more.propose(PREFS, passages, vecs, pv, seen)
    keys = [(p["preference"], p["passage"]) for p in pairs]
    assert len(set(keys)) == len(keys) and not set(keys) & seen
    for pref, plan in zip(PREFS, (propose_more.PLAN["consumer"], propose_more.PLAN["new"])):
        mine = [p for p in pairs if p["preference"] == pref["text"]]
        for band, lo, hi, count in plan:
            ranks = [p["rank"] for p in mine if p["band"] == band]
            assert len(ranks) == count and all(lo <= r <= hi for r in ranks)
    assert [p["id"] for p in pairs] == list(range(10_000, 10_000 + len(pairs)))
    assert propose_more.propose(PREFS, passages, vecs, pv, seen) == pairs


def test_batches_are_blind_equal_and_double_pairs_sit_in_two_batches(tmp_path):
    pairs = [{"id": 10_000 + n, "preference": "p", "style": "values", "source": "wiki",
              "title": f"t{n}", "passage": f"x{n}", "minilm_cosine": 0.5, "band": "top3",
              "rank": 1} for n in range(50)]
    double = propose_more.write_batches(pairs, tmp_path, double_count=10)
    batches = [[json.loads(line) for line in (tmp_path / "batches" / f"batch-0{b}.jsonl")
                .read_text().splitlines()] for b in range(1, 6)]
    assert all(set(row) == {"id", "preference", "title", "passage"} for b in batches for row in b)
    sizes = [len(b) for b in batches]
    assert sum(sizes) == 60 and max(sizes) - min(sizes) <= 4
    for pid, (first, second) in double.items():
        assert first != second
        assert all(int(pid) in {r["id"] for r in batches[b - 1]} for b in (first, second))
    singles = {r["id"] for b in batches for r in b}
    assert singles == {p["id"] for p in pairs}


def test_a_third_round_pairs_only_its_own_preferences_from_its_own_ids(tmp_path):
    """Round 3 reads the preferences marked for it (none of PrefWiki's, none of round 2's),
    numbers its pairs from its own first id and writes its own number of batches."""
    third = propose_more.preferences(3)
    assert third and {p["style"] for p in third} <= {"consumer", "explanation", "logistics",
                                                      "negation"}
    assert all(p["plan"] == "new" for p in third)  # written consumer ones too: no old draws
    second = {p["text"] for p in propose_more.preferences(2)}
    assert not second & {p["text"] for p in third}
    first_id, batch_count = propose_more.ROUNDS[3]
    passages, vecs, pv = _corpus()
    pairs = propose_more.propose(PREFS, passages, vecs, pv, set(), first_id=first_id)
    assert pairs[0]["id"] == first_id
    propose_more.write_batches(pairs, tmp_path, double_count=4, batch_count=batch_count)
    assert len(list((tmp_path / "batches").glob("batch-*.jsonl"))) == batch_count
