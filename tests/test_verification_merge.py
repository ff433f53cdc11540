"""The labelled set's merge script: splits, held-out style, kappa, refusal of unlabelled pairs."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from fakes import BagOfWordsEmbedder

SCRIPT = Path(__file__).resolve().parents[1] / "bench" / "labels"


def _module(name: str):
    spec = importlib.util.spec_from_file_location(name, SCRIPT / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


merge_labels = _module("merge_labels")
OLD = [
    {"id": 0, "split": "train", "preference": "I dislike spicy food.", "title": "Chili pepper",
     "topic": "Food", "passage": "Chili peppers are hot.", "label": "Keep", "reason": "r",
     "minilm_cosine": 0.5},
    {"id": 1, "split": "test", "preference": "I love jazz music.", "title": "Miles Davis",
     "topic": "Music", "passage": "A jazz trumpeter.", "label": "Keep", "reason": "r",
     "minilm_cosine": 0.6},
]
NEW_PREFS = [
    ("I dislike spicy food.", "consumer"),                  # an old train preference
    ("I love jazz music.", "consumer"),                     # an old test preference
    ("I oppose the death penalty.", "values"),              # held out
    ("I oppose the death penalty strongly.", "negation"),   # near-duplicate of a held-out one
    ("Explain things with bullet points.", "explanation"),
    ("I have gout and avoid purines.", "logistics"),
    ("I dislike spicy food, a moral stance.", "values"),  # held out, near an old train one
]


def _pairs(first_id: int = 10_000) -> list[dict]:
    return [{"id": first_id + n, "preference": text, "style": style, "source": "recipes",
             "title": f"T{n}", "passage": f"passage {n}", "minilm_cosine": 0.3, "band": "top3"}
            for n, (text, style) in enumerate(NEW_PREFS)]


def _labels(pairs, flip: set[int] = frozenset()) -> dict[int, list[dict]]:
    labels = {p["id"]: [{"label": "Keep" if p["id"] % 2 else "Discard", "reason": "x"}]
              for p in pairs}
    for pid in [p["id"] for p in pairs[:4]]:  # labelled twice
        first = labels[pid][0]["label"]
        other = ("Discard" if first == "Keep" else "Keep") if pid in flip else first
        labels[pid].append({"label": other, "reason": "y"})
    return labels


def _merge(pairs, labels):
    return merge_labels.merge(pairs, labels, OLD, BagOfWordsEmbedder().embed, "values")


def test_splits_keep_old_pairs_hold_out_a_style_and_follow_clusters():
    pairs = _pairs()
    out, report = _merge(pairs, _labels(pairs))
    where = {r["preference"] + "|" + str(r["id"]): s for s, rows in out.items() for r in rows}
    assert where["I dislike spicy food.|0"] == "train" and where["I love jazz music.|1"] == "test"
    assert where["I dislike spicy food.|10000"] == "train"      # follows its cluster's old split
    assert where["I love jazz music.|10001"] == "test"
    assert where["I oppose the death penalty.|10002"] == "test_style"
    assert where["I oppose the death penalty strongly.|10003"] == "test"  # never in train
    assert not any(r["style"] == "values" for s in ("train", "test") for r in out[s])
    assert all(r["style"] == "values" for r in out["test_style"])
    assert report["pairs"] == {s: len(rows) for s, rows in out.items()}
    assert sum(report["pairs"].values()) == len(OLD) + len(pairs)
    assert out["train"][0]["style"] == "consumer" and out["train"][0]["source"] == "wiki"
    assert report["held_out_clusters_with_train"] == 1  # the spicy-food values preference
    assert report["clusters_mixing_old_splits"] == 0


def test_a_later_round_keeps_every_earlier_split_and_never_trains_near_held_out():
    """A third round: no held-out pair of its own; a near-duplicate of an earlier held-out
    preference goes to test, a new cluster by its hash, earlier rows unchanged."""
    earlier = [*OLD, {**OLD[0], "id": 10_500, "split": "test_style",
                      "preference": "I oppose the death penalty.", "style": "values",
                      "source": "wiki"}]
    pairs = [{"id": 30_000 + n, "preference": text, "style": style, "source": "wiki",
              "title": f"T{n}", "passage": f"passage {n}", "minilm_cosine": 0.3, "band": "top3"}
             for n, (text, style) in enumerate([
                 ("I oppose the death penalty strongly.", "negation"),
                 ("I dislike spicy food.", "consumer"),
                 ("I collect vintage fountain pens.", "consumer")])]
    labels = {p["id"]: [{"label": "Keep", "reason": "x"}] for p in pairs}
    out, report = merge_labels.merge(pairs, labels, earlier, BagOfWordsEmbedder().embed, "values")
    split = {r["id"]: s for s, rows in out.items() for r in rows}
    assert split[30_000] == "test" and split[30_001] == "train"
    assert split[30_002] == merge_labels.hash_split(["I collect vintage fountain pens."])
    assert split[10_500] == "test_style" and report["held_out_clusters_with_train"] == 0
    kept = next(r for r in out["test_style"] if r["id"] == 10_500)
    assert list(kept.items()) == list(earlier[-1].items())   # written back byte for byte


def test_kappa_on_double_labelled_pairs_and_disagreement_resolves_to_discard():
    pairs = _pairs()
    _, agree = _merge(pairs, _labels(pairs))
    assert agree["double_labelled"] == 4 and agree["cohen_kappa"] == 1.0
    out, split = _merge(pairs, _labels(pairs, flip={10_001, 10_002}))
    assert split["disagreements"] == 2 and split["cohen_kappa"] == 0.0
    rows = {r["id"]: r for rows in out.values() for r in rows}
    assert rows[10_001]["label"] == "Discard" and rows[10_001]["reason"] == "x / y"
    assert merge_labels.cohen_kappa(["Keep", "Discard", "Keep"], ["Keep", "Keep", "Keep"]) == 0.0


def test_refuses_a_pair_with_no_label_and_labels_for_unknown_ids():
    pairs = _pairs()
    labels = _labels(pairs)
    del labels[10_004]
    with pytest.raises(merge_labels.MergeError, match="1 pairs have no label"):
        _merge(pairs, labels)
    labels = {**_labels(pairs), 99: [{"label": "Keep", "reason": ""}]}
    with pytest.raises(merge_labels.MergeError, match="not in the pairs"):
        _merge(pairs, labels)


def test_read_labels_rejects_a_bad_label_with_its_line(tmp_path):
    good = tmp_path / "batch-01.jsonl"
    good.write_text(json.dumps({"id": 5, "label": "Keep", "reason": "r"}) + "\n")
    bad = tmp_path / "batch-02.jsonl"
    bad.write_text(json.dumps({"id": 6, "label": "keep?"}) + "\n")
    assert merge_labels.read_labels([good])[5] == [{"label": "Keep", "reason": "r"}]
    with pytest.raises(merge_labels.MergeError, match="batch-02.jsonl:1"):
        merge_labels.read_labels([good, bad])


def test_main_writes_three_split_files_and_refuses_unlabelled(tmp_path, monkeypatch):
    pairs = _pairs(first_id=90_000)  # ids no shipped pair has
    (tmp_path / "pairs.jsonl").write_text("".join(json.dumps(p) + "\n" for p in pairs))
    labels_dir = tmp_path / "labels"
    labels_dir.mkdir()
    rows = [{"id": pid, **given[0]} for pid, given in _labels(pairs).items()]
    (labels_dir / "batch-01.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows[:-1]))
    monkeypatch.setattr(merge_labels, "minilm_fp32", lambda: BagOfWordsEmbedder().embed)
    args = [str(tmp_path / "pairs.jsonl"), str(labels_dir), "--out", str(tmp_path / "set")]
    assert merge_labels.main(args) == 2 and not (tmp_path / "set").exists()
    (labels_dir / "batch-02.jsonl").write_text(json.dumps(rows[-1]) + "\n")
    assert merge_labels.main(args) == 0
    written = {s: merge_labels.read_jsonl(tmp_path / "set" / f"{s}.jsonl")
               for s in ("train", "test", "test_style")}
    total = sum(len(v) for v in written.values())
    shipped = len(merge_labels.earlier(SCRIPT, set()))
    assert total == shipped + len(pairs)  # every shipped pair plus the new ones
    assert merge_labels.main(args) == 0  # a rerun (this round's ids never read back as earlier)
    assert sum(len(merge_labels.read_jsonl(tmp_path / "set" / f"{s}.jsonl"))
               for s in ("train", "test", "test_style")) == total


def test_split_rule_reproduces_the_shipped_first_round_split(reference_models):
    """clusters + hash_split with the fp32 MiniLM give every shipped preference its split."""
    from epic_edge.backends.onnx_embedder import OnnxEmbedder
    from epic_edge.export.minilm_onnx import export_base_onnx

    old = [r for r in merge_labels.earlier(SCRIPT, set()) if r["id"] < 10_000]
    shipped = {r["preference"]: r["split"] for r in old}
    texts = list(shipped)
    m = export_base_onnx(reference_models).parent
    vectors = OnnxEmbedder(m / "model.onnx", m / "tokenizer.json", max_length=256).embed(texts)
    for group in merge_labels.clusters(texts, vectors):
        members = [texts[i] for i in group]
        assert {shipped[t] for t in members} == {merge_labels.hash_split(members)}
