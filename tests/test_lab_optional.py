"""The product without the lab: imports, runs its CLI, and names the one way to get the lab."""

from __future__ import annotations

import subprocess
import sys

import pytest

from epic_edge import cli

# Every product module imported, then the default CLI run, with the lab blanked (as if absent).
_WITHOUT_LAB = """
import importlib, pkgutil, sys
sys.modules["epic_edge_lab"] = None
import epic_edge
for info in pkgutil.walk_packages(epic_edge.__path__, "epic_edge."):
    if info.name not in ("epic_edge.langchain_retriever", "epic_edge.mcp_server"):  # extras
        importlib.import_module(info.name)
from epic_edge.cli import main
sys.exit(main(sys.argv[1:]))
"""


def _blank_lab(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [n for n in sys.modules if n == "epic_edge_lab" or n.startswith("epic_edge_lab.")]:
        monkeypatch.setitem(sys.modules, name, None)
    monkeypatch.setitem(sys.modules, "epic_edge_lab", None)


def test_every_product_module_imports_and_the_cli_runs_without_the_lab():
    run = subprocess.run([sys.executable, "-c", _WITHOUT_LAB, "--help"], capture_output=True,
                         text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    names = [line.split()[0] for line in run.stdout.splitlines() if line.startswith("  ")]
    assert "demo" in names and "bench" in names and not {"build", "eval", "data"} & set(names)
    assert run.stdout.rstrip().endswith(cli.LAB_HINT)


@pytest.mark.parametrize("argv", [["build", "--out", "x"], ["bench", "quality"], ["calibrate"],
                                  ["eval"], ["data"]])
def test_a_lab_command_without_the_lab_says_how_to_install_it(monkeypatch, capsys, argv):
    _blank_lab(monkeypatch)
    assert cli.main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"epic-edge {argv[0] if argv[0] != 'bench' else 'bench quality'}: "
                   f"{cli.LAB_HINT}"]
    assert "bash scripts/setup.sh --all" in cli.LAB_HINT and "pip install -e bench" in cli.LAB_HINT


def test_without_the_labs_entry_point_the_product_offers_no_lab_command(monkeypatch, capsys):
    monkeypatch.setattr("importlib.metadata.entry_points", lambda group: [])
    assert cli.lab_commands() == {}
    assert cli.main(["eval"]) == 2
    assert cli.LAB_HINT in capsys.readouterr().err
    assert cli.main(["--help"]) == 0
    assert "lab commands (bench, build" in capsys.readouterr().out


def test_the_latency_bench_stays_in_the_product_without_the_lab(monkeypatch, capsys):
    _blank_lab(monkeypatch)
    with pytest.raises(SystemExit) as caught:
        cli.main(["bench", "latency", "--help"])
    assert caught.value.code == 0 and "--runs" in capsys.readouterr().out


def test_the_product_names_each_of_the_labs_commands():
    lab = pytest.importorskip("epic_edge_lab.cli")
    assert set(cli.LAB_COMMANDS) == set(lab.COMMANDS)
    assert cli.lab_commands() == lab.COMMANDS  # the installed lab's entry point
