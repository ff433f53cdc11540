"""`epic-edge build` gives a siamese verifier the corpus's passage vectors once for every
persona, and decides exactly as a build whose verifier encodes each passage itself."""

from __future__ import annotations

import pytest

from epic_edge_lab import build, ray_engine


def _quiet(*_args) -> None:
    pass


def _verifier() -> object:
    """The verifier this process loaded for the build (ray_engine keeps one per process)."""
    found = [model for key, model in ray_engine._MODELS.items() if key[0] == "verifier"]
    assert len(found) == 1
    return found[0]


def test_shared_passage_vectors_change_no_decision(tmp_path, monkeypatch, reference_models):
    if not (reference_models / "epic-verifier-minilm" / "model.onnx").exists():
        pytest.skip("the learned verifier is not installed")
    monkeypatch.setenv("EPIC_EDGE_DATA", str(tmp_path / "data"))
    options = dict(corpus="sample", personas="0-1", verifier="learned",
                   models=reference_models, progress=False, log=_quiet)
    monkeypatch.setattr(ray_engine, "_MODELS", {})
    shared = build.run(tmp_path / "shared", **options)
    assert "passages_s" in shared["stages"]
    assert len(_verifier()._passages) == shared["chunks"]  # every passage vector given ahead

    monkeypatch.setattr(ray_engine, "_MODELS", {})  # a fresh verifier: nothing remembered
    monkeypatch.setattr(build, "siamese_verifier", lambda vspec: None)  # and nothing shared
    alone = build.run(tmp_path / "alone", **options)
    assert "passages_s" not in alone["stages"] and not _verifier()._passages

    assert sum(r["kept_items"] for r in alone["per_persona"]) > 0
    for one, other in zip(alone["per_persona"], shared["per_persona"], strict=True):
        assert (other["persona"], other["verified"], other["kept_items"], other["entries"]) \
            == (one["persona"], one["verified"], one["kept_items"], one["entries"])
        assert [r[:3] for r in other["entry_rows"]] == [r[:3] for r in one["entry_rows"]]
        for a, b in zip(one["entry_rows"], other["entry_rows"]):
            assert b[3] == pytest.approx(a[3], abs=1e-6)  # the verifier's confidence
