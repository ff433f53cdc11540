"""Each bundle tells an app what runs on its device and how to call it; its example app runs
here where its runtime runs (the linux-cpu bundle, the Jetson bundle on its CPU fallback, and
the phone bundle's programs under ExecuTorch's Python runtime)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("faiss")


def run_example(bundle: Path, tmp_path: Path) -> subprocess.CompletedProcess:
    done = subprocess.run([sys.executable, str(bundle / "example_app.py"),
                           str(tmp_path / "app.epic")], capture_output=True, text=True,
                          cwd=tmp_path, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def check_app_files(bundle: Path, out: str) -> str:
    # the tax note bears on no preference; the steakhouse names what the vegan rules out, which
    # bears on it (the personal set's labels), so the memory may keep it, below the bistro
    assert "remember: item 1: Green Leaf" in out
    assert re.search(r"remember: dropped \((verifier|coarse filter)\): Quarterly estimated", out)
    recalled = [line for line in out.splitlines() if line.startswith("recall:")]
    assert recalled and "item 1: Green Leaf" in recalled[0]
    assert "forget: item 1, entries removed: 1" in out
    files = json.loads((bundle / "manifest.json").read_text())["files"]
    assert {"README.md", "example_app.py", "MEMORY-FORMAT.md"} <= set(files)
    assert len((bundle / "example_app.py").read_text().splitlines()) <= 35
    return (bundle / "README.md").read_text()


def test_the_linux_cpu_bundles_example_app_runs(cpu_bundle, tmp_path):
    readme = check_app_files(cpu_bundle, run_example(cpu_bundle, tmp_path).stdout)
    assert "ONNX Runtime (CPU) embeds with `epic-minilm/model.int8.onnx`" in readme
    assert "`epic-verifier-minilm/model.onnx` (90." in readme
    assert "pip install -r python/requirements.txt python/epic_edge-*.whl" in readme


def test_the_jetson_bundles_example_app_runs_on_its_cpu_fallback(jetson_bundle, tmp_path):
    done = run_example(jetson_bundle.root, tmp_path)
    readme = check_app_files(jetson_bundle.root, done.stdout)
    assert "TensorrtExecutionProvider" in done.stderr  # named as it falls back
    assert "off a Jetson (or without onnxruntime-gpu) the same app runs on the CPU" in readme


def test_the_phone_bundles_example_app_runs_its_int8_programs_here(phone_bundle, tmp_path):
    """Not on a phone: the ExecuTorch Python runtime runs the bundle's programs on x86 Linux."""
    check_app_files(phone_bundle, run_example(phone_bundle, tmp_path).stdout)


def test_the_phone_bundle_says_what_runs_on_the_phone(phone_bundle):
    manifest = json.loads((phone_bundle / "manifest.json").read_text())
    total = sum(f["bytes"] for f in manifest["files"].values())
    assert total <= 100_000_000, total
    readme = (phone_bundle / "README.md").read_text()
    assert "org.pytorch.executorch.Module" in readme and "MEMORY-FORMAT.md" in readme
    assert "Not on the phone: the Python package" in readme
    requirements = (phone_bundle / "python" / "requirements.txt").read_text()
    assert "+cpu" not in requirements and "Not for the phone" in requirements
