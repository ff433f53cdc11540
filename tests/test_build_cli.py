"""`epic-edge build` in one process: a memory file per persona, owner-only, no text in its JSON."""

from __future__ import annotations

import json
import os

from test_cli import PROFILE

from epic_edge.cli import main
from epic_edge.memory import Memory


def test_build_writes_one_private_memory_per_persona(tmp_path, monkeypatch, reference_models):
    monkeypatch.setenv("EPIC_EDGE_DATA", str(tmp_path / "data"))
    profile = tmp_path / "test-cpu.toml"
    profile.write_text(PROFILE)
    out = tmp_path / "memories"
    assert main(["build", "--out", str(out), "--corpus", "sample", "--limit", "80",
                 "--personas", "0,1", "--tau", "0.2", "--json", str(tmp_path / "build.json"),
                 "--profile", str(profile), "--models", str(reference_models)]) == 0
    result = json.loads((tmp_path / "build.json").read_text())
    assert [r["persona"] for r in result["per_persona"]] == [0, 1]
    assert all("entry_rows" not in r for r in result["per_persona"])  # no corpus text
    assert result["per_persona"][0]["kept_items"] > 0
    assert os.stat(out).st_mode & 0o077 == 0
    for row in result["per_persona"]:
        assert os.stat(row["path"]).st_mode & 0o077 == 0
        memory = Memory.open(row["path"], str(profile), model_dir=reference_models)
        try:
            assert len(memory.index) == row["entries"]
        finally:
            memory.close()
