"""The personal-stream set's checks: the writing brief, a reader's labels, and kappa."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from epic_edge_lab import personal_data, personal_set
from epic_edge_lab.judged_metrics import cohen_kappa

FIXTURE = Path(__file__).parent / "personal_fixture"
SET = Path(__file__).parents[1] / "bench" / "personal" / "personas"


def test_kappa_of_known_tables():
    assert cohen_kappa(*zip(*[(1, 1), (0, 0)] * 5)) == 1.0
    # 80% observed, 50% by chance -> 0.6
    pairs = [(1, 1)] * 4 + [(0, 0)] * 4 + [(1, 0), (0, 1)]
    assert cohen_kappa(*zip(*pairs)) == pytest.approx(0.6)


def test_the_shipped_set_meets_its_brief_and_a_short_stream_does_not():
    if not SET.is_dir():
        pytest.skip("the personal-stream set is not in this checkout")
    assert all(not personal_set.brief_problems(p) for p in personal_data.load(SET, "all"))
    small = personal_data.load(FIXTURE, "all")[0]
    problems = personal_set.brief_problems(small)
    assert "12 items (want 60-70)" in problems and "5 questions (want 8-10)" in problems


def test_the_brief_wants_time_order_and_three_bearings_of_two_kinds_per_preference():
    small = personal_data.load(FIXTURE, "all")[0]
    items = [dict(item) for item in small.items]
    items[0], items[1] = items[1], items[0]
    problems = personal_set.brief_problems(replace(small, items=items))
    assert f"{items[1]['id']}: earlier than the item before it (want time order)" in problems
    one_kind = [dict(item, bears_on=[{"pref": "a", "how": "fact"}]) for item in small.items[:4]]
    problems = personal_set.brief_problems(replace(small, items=one_kind))
    assert ("preference a has 4 items bearing on it, of 1 kinds of how (want 3+ items, 2+ kinds)"
            in problems)


def test_a_readers_file_is_checked_against_its_batch(tmp_path):
    batch = tmp_path / "batch.jsonl"
    batch.write_text("\n".join(json.dumps(r) for r in [
        {"persona": "p01", "preferences": [{"id": "p01.a", "text": "x"}]},
        {"item": "p01.i01", "kind": "note", "text": "a"},
        {"item": "p01.i02", "kind": "note", "text": "b"}]))
    answers = tmp_path / "answers.jsonl"
    answers.write_text(json.dumps({"item": "p01.i01", "bears_on": ["p02.a"]}) + "\n")
    problems = personal_set.label_problems(batch, answers)
    assert problems == ["p01.i01 names preferences of another persona",
                        "1 items unlabelled, e.g. ['p01.i02']"]
    assert personal_set.main(["check-labels", str(batch), str(answers)]) == 1


def test_agreement_pairs_the_readers_of_one_batch(tmp_path):
    personas = personal_data.load(FIXTURE, "all")
    first = personas[0]
    truth = {i: sorted(s) for i, s in first.bears_on.items()}
    for reader in ("a", "b"):
        (tmp_path / f"batch1.reader-{reader}.jsonl").write_text("\n".join(
            json.dumps({"item": i, "bears_on": s}) for i, s in truth.items()))
    lines = personal_set.agreement(personas, sorted(tmp_path.glob("*.jsonl")))
    assert lines[-1].startswith("batch1.reader-a.jsonl vs batch1.reader-b.jsonl")
    assert lines[-1].endswith("kappa 1.000") and len(lines) == 3


def test_a_missing_file_is_one_line(capsys):
    assert personal_set.main(["check", "/nonexistent/p01.json"]) == 2
    assert capsys.readouterr().err.count("\n") == 1


def test_the_held_out_streams_meet_the_same_brief():
    heldout = SET.parent / "heldout" / "personas"
    if not heldout.is_dir():
        pytest.skip("the held-out streams are not in this checkout")
    personas = personal_data.load(heldout, "all")
    assert [p.number for p in personas] == list(range(41, 51))
    assert all(not personal_set.brief_problems(p) for p in personas)


def _raw_persona() -> dict:
    return {"persona": "p01", "preferences": [{"id": "p01.a", "text": "x"},
                                              {"id": "p01.b", "text": "y"}],
            "items": [{"id": "p01.i1", "kind": "note", "text": "one",
                       "bears_on": [{"pref": "p01.a", "how": "explicit"}], "near_miss_of": None},
                      {"id": "p01.i2", "kind": "chat", "text": "two",
                       "bears_on": [{"pref": "p01.a", "how": "fact"}], "near_miss_of": None},
                      {"id": "p01.i3", "kind": "email", "text": "three", "bears_on": [],
                       "near_miss_of": "p01.a"}]}


def test_a_blind_batch_holds_every_item_and_no_label():
    rows = personal_set.blind_batch([_raw_persona()])
    assert rows[0] == {"persona": "p01", "preferences": _raw_persona()["preferences"]}
    assert sorted(r["item"] for r in rows[1:]) == ["p01.i1", "p01.i2", "p01.i3"]
    assert all(set(r) == {"item", "kind", "text"} for r in rows[1:])


def test_adjudication_takes_the_majority_of_writer_and_two_readers():
    persona = _raw_persona()
    first = {"p01.i1": {"p01.a", "p01.b"}, "p01.i2": set(), "p01.i3": {"p01.a"}}
    second = {"p01.i1": {"p01.b"}, "p01.i2": set(), "p01.i3": {"p01.a"}}
    counts = personal_set.adjudicate(persona, [first, second])
    i1, i2, i3 = persona["items"]
    assert i1["bears_on"] == [{"pref": "p01.a", "how": "explicit"},  # writer and one reader
                              {"pref": "p01.b", "how": "implicit", "added_by": "readers"}]
    assert i2["bears_on"] == []  # the writer alone
    assert i3["bears_on"] == [{"pref": "p01.a", "how": "implicit", "added_by": "readers"}]
    assert i3["near_miss_of"] is None  # it bears on a now
    assert counts == {"added": 2, "removed": 1, "items changed": 2 + 1}


def test_adjudication_refuses_an_item_not_labelled_twice(tmp_path, capsys):
    source = tmp_path / "p01.json"
    source.write_text(json.dumps(_raw_persona()))
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    a.write_text("".join(json.dumps({"item": f"p01.i{n}", "bears_on": []}) + "\n"
                         for n in (1, 2, 3)))
    b.write_text(json.dumps({"item": "p01.i1", "bears_on": []}) + "\n")
    out = tmp_path / "out"
    assert personal_set.main(["adjudicate", "--out", str(out), "--readers", str(a), str(b),
                              str(source)]) == 2
    assert "not labelled twice: ['p01.i2', 'p01.i3']" in capsys.readouterr().err
    assert not out.exists()  # nothing written
