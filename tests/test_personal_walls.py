"""The wall measurements of the personal-stream targets (epic_edge_lab.personal_walls)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from epic_edge_lab import keep_training, personal_walls
from epic_edge_lab.personal_data import Persona, Question


def _unit(angle: float) -> np.ndarray:
    return np.array([np.cos(angle), np.sin(angle)])


# the question sits at angle 0; the items' angles set their cosines: i2 > i3 > i4 > i1
ANGLES = {"q": 0.0, "one": 1.4, "two": 0.1, "three": 0.3, "four": 0.6,
          "pref a": 1.2, "pref b": 0.2}


def _embed(texts: list[str]) -> np.ndarray:
    return np.array([_unit(ANGLES[t]) for t in texts])


def _persona() -> Persona:
    items = [{"id": f"i{n}", "text": text} for n, text in
             enumerate(("one", "two", "three", "four"), 1)]
    bears = {"i1": frozenset({"a"}), "i2": frozenset({"b"}), "i3": frozenset(),
             "i4": frozenset({"a"})}
    return Persona(1, "test", {"a": "pref a", "b": "pref b"}, items, bears,
                   [Question("q1", "q", ("a",), ("i4",)),
                    Question("q2", "q", (), ("i3",))])  # no preference: not scored


def test_oracle_rankings_know_the_question_s_preferences_and_no_more():
    # the memory holds i1 (under a), i2 (b) and i4, misfiled under b; i3 is not kept
    kept = {1: {"i1": ["a"], "i2": ["b"], "i4": ["b"]}}
    out = personal_walls.oracle_top5([_persona()], kept, _embed, k=1)
    assert out["questions"] == 1
    assert out["recall"] == {
        "store-everything": 0.0,  # i2, the closest
        "memory, cosine": 0.0,  # i2
        "perfect keep, cosine": 0.0,  # i2 bears on b
        "oracle, memory's filing": 0.0,  # only i1 is filed under a
        "oracle, labels' filing of the memory's items": 1.0,  # i1 and i4 bear on a: i4
        "oracle, labels' filing, every item": 1.0}
    # the entry that best matches the question (i2) is filed under b, which it does not touch
    assert out["best_matching_preference_touched"] == 0.0
    assert out["closest_preference_touched"] == 0.0  # b's text is the closer
    assert out["answers_bearing_on_a_touched_preference"] == 1.0  # i4 bears on a
    two = personal_walls.oracle_top5([_persona()], kept, _embed, k=2)["recall"]
    assert two["store-everything"] == 0.0  # i2, i3
    assert two["perfect keep, cosine"] == 1.0  # i3 bears on nothing: i2, i4


def test_an_empty_memory_is_a_clear_error():
    with pytest.raises(personal_walls.InvalidInputError, match="non-empty memory"):
        personal_walls.oracle_top5([_persona()], {1: {}}, _embed)


def _pairs(flip_writer: int, numbers: tuple[int, ...] = (1, 3, 5, 7, 9, 11, 13, 15, 17, 19)
           ) -> tuple[keep_training.Pairs, list[int]]:
    """Ten personas of two writers (or as `numbers` says), one item per pair: the label follows
    the first feature, except for `flip_writer`'s personas, where it follows its negation."""
    rng = np.random.default_rng(0)
    numbers = list(numbers)
    rows, labels, persona = [], [], []
    for position, number in enumerate(numbers):
        signal = rng.normal(size=40)
        sign = -1.0 if personal_walls.writer_of(number) == flip_writer else 1.0
        x = np.zeros((40, 5))
        x[:, 0] = signal
        x[:, 1] = 0.5  # the coarse cosine: every pair passes tau
        x[:, 4] = rng.normal(size=40)
        rows.append(x)
        labels.append((sign * signal > 0.3).astype(int))
        persona += [position] * 40
    y = np.concatenate(labels)
    n = len(y)
    return keep_training.Pairs(np.vstack(rows), y, np.arange(n), np.array(persona), y), numbers


def test_keep_by_writer_scores_each_writer_with_a_model_that_never_saw_it():
    data, numbers = _pairs(flip_writer=0)
    out = personal_walls.keep_by_writer(data, numbers, tau=0.15, recall=0.85)
    assert set(out["per_writer"]) == {"p01-p10", "p11-p20"}
    # each writer is scored by the other's model, which has the label's sign backwards
    assert out["by_writer"]["pair_auc"] < 0.2
    # persona folds keep the other personas of both writers in training
    assert out["persona_folds"]["pair_auc"] > out["by_writer"]["pair_auc"]
    json.dumps(out)  # what the command prints


def test_the_writer_curve_never_fits_on_the_writer_it_scores():
    """Three writers the embedder was not tuned on (p11-p20, p31-p40, p61-p70); p61-p70's
    labels run backwards, so its precision stays at the base rate unless a fit saw it."""
    data, numbers = _pairs(flip_writer=6, numbers=(11, 13, 15, 31, 33, 35, 61, 63, 65))
    curve = personal_walls.keep_by_writer(data, numbers, tau=0.15)["by_training_writers"]
    assert curve["writers"] == ["p11-p20", "p31-p40", "p61-p70"]
    assert set(curve["curve"]) == {"1", "2"}
    for k in ("1", "2"):
        assert curve["curve"][k]["per_writer"]["p61-p70"] < 0.5
    # scored by a fit on p31-p40 (right) and one on p61-p70 (backwards): in between
    assert 0.5 < curve["curve"]["1"]["per_writer"]["p11-p20"] < 0.95


def test_bad_run_file_is_a_usage_error(tmp_path, capsys):
    bad = tmp_path / "run.json"
    bad.write_text("{}", encoding="utf-8")
    with pytest.raises(SystemExit) as stop:
        personal_walls.main(["top5", str(bad)])
    assert stop.value.code == 2
    assert "not a saved `bench personal` run" in capsys.readouterr().err


def test_gate_by_writer_scores_each_writer_with_a_gate_that_never_saw_it(monkeypatch):
    from epic_edge_lab import gate_training

    trained_on: list[set[str]] = []

    class Gate:
        threshold = 0.5

        def __init__(self, texts):
            self.seen = set(texts)

        def probability(self, vectors, texts):  # withholds every question it never saw
            return np.array([0.0 if t in self.seen else 1.0 for t in texts])

    def train(data, vectors, served, trained_on_text):
        trained_on.append(set(data.text))
        return Gate(data.text), {}

    monkeypatch.setattr(gate_training, "train", train)
    data = gate_training.Questions(["w0 none", "w0 pref", "w1 none", "written"],
                                   np.array([1.0, 0.0, 1.0, 0.0]), ["p01", "p01", "p11", "g1"],
                                   ["personal", "personal", "personal", "written"])
    writer, closest = np.array([0, 0, 1]), np.array([0.2, 0.6, 0.5])
    out = gate_training.by_writer(data, np.zeros((4, 2)), closest, writer, [0.3, 0.55])
    assert trained_on == [{"w1 none", "written"}, {"w0 none", "w0 pref", "written"}]
    # every personal question is unseen by its gate; the bound keeps those at or above it
    assert out["0.30"]["pooled"] == {"no_memory_no_preference": 0.5, "no_memory_preference": 0.0}
    assert out["0.55"]["per_writer"][1] == {"no_memory_no_preference": 1.0,
                                            "no_memory_preference": None}
    assert out["0.55"]["pooled"]["no_memory_no_preference"] == 1.0


def test_bad_bounds_are_a_usage_error_before_any_work(capsys, monkeypatch):
    from epic_edge_lab import personal_data

    monkeypatch.setattr(personal_data, "load", lambda *a, **k: pytest.fail("loaded the set"))
    with pytest.raises(SystemExit) as stop:
        personal_walls.main(["gate-writers", "--bounds", "0.4,high"])
    assert stop.value.code == 2
    assert "--bounds wants numbers like 0.38,0.45, got '0.4,high'" in capsys.readouterr().err
    with pytest.raises(SystemExit) as stop:
        personal_walls.main(["gate-writers", "--served", "1.5"])
    assert stop.value.code == 2 and "--served must be in (0, 1), got 1.5" in (
        capsys.readouterr().err)
