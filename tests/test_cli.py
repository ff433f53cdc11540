"""The epic-edge CLI end to end on the real ONNX embedder (template verifier, FAISS index)."""

from __future__ import annotations

import json
import os
import re

import pytest
from fault_harness import closed_port

from epic_edge.cli import main

PROFILE = """
name = "test-cpu"
[embedder]
backend = "onnx"
model = "all-minilm-l6-v2/model.onnx"
tokenizer = "all-minilm-l6-v2/tokenizer.json"
tau = 0.2
[verifier]
backend = "template"
[index]
backend = "faiss"
"""


@pytest.fixture
def cli(tmp_path, reference_models, capsys):
    profile = tmp_path / "test-cpu.toml"
    profile.write_text(PROFILE)
    common = ["--memory", str(tmp_path / "m.epic"), "--profile", str(profile),
              "--models", str(reference_models)]

    def run(*args: str) -> tuple[int, str, str]:
        capsys.readouterr()
        code = main([*args, *common])
        out, err = capsys.readouterr()
        return code, out, err

    return run


def test_prefs_ingest_query_info_rm(cli, tmp_path):
    assert cli("prefs", "add", "I follow a strict vegan diet", "I love hiking in mountains")[0] == 0
    code, out, _ = cli("prefs", "ls")
    assert code == 0 and "vegan" in out and "hiking" in out
    items = tmp_path / "items.jsonl"
    items.write_text("\n".join(json.dumps({"text": t, "source": f"s{i}"}) for i, t in enumerate([
        "Tofu and tempeh are plant proteins used in vegan cooking.",
        "The Alps offer long hiking trails between mountain huts.",
        "Quarterly corporate tax filings are due in April.",
    ])))
    code, out, _ = cli("ingest", str(items), "--quiet")
    assert code == 0 and "seen 3" in out
    code, out, _ = cli("query", "What should I cook for dinner?", "--json")
    hits = json.loads(out)
    assert code == 0 and hits and "Tofu" in hits[0]["item_text"]
    assert all("tax" not in h["item_text"] for h in hits)
    code, out, _ = cli("query", "What should I cook for dinner?", "--context")
    assert "vegan" in out and "How to use it" in out
    code, out, _ = cli("info", "--json")
    info = json.loads(out)
    assert info["preferences"] == 2 and info["items"] == 2 and info["footprint"]["total"] > 0
    code, out, _ = cli("prefs", "rm", "I love hiking in mountains")
    assert code == 0 and "1 entries" in out
    assert json.loads(cli("info", "--json")[1])["items"] == 1


def test_errors_are_one_line_messages_not_tracebacks(cli, tmp_path):
    code, _, err = cli("query", "   ")
    assert code == 2 and "question is empty" in err and "Traceback" not in err
    code, _, err = cli("ingest", str(tmp_path / "items.txt"))
    assert code == 2 and "items.txt" in err and "Traceback" not in err


def test_ingest_before_preferences_is_a_clear_error(cli, tmp_path):
    items = tmp_path / "items.txt"
    items.write_text("one item\n")
    code, _, err = cli("ingest", str(items), "--quiet")
    assert code == 2 and "add at least one preference" in err


def test_unknown_profile_and_command(capsys, tmp_path):
    assert main(["info", "--memory", str(tmp_path / "x.epic"), "--profile", "no-such"]) == 2
    assert "unknown device profile" in capsys.readouterr().err
    assert main(["frobnicate"]) == 2
    assert main(["--help"]) == 0 and "demo" in capsys.readouterr().out


def test_demo_runs_on_a_slice_with_the_template_verifier(tmp_path, reference_models, capsys):
    profile = tmp_path / "test-cpu.toml"
    profile.write_text(PROFILE)
    code = main(["demo", "--limit", "40", "--questions", "2", "--profile", str(profile),
                 "--models", str(reference_models)])
    out = capsys.readouterr().out
    assert code == 0
    assert "with steering (EPIC)" in out and "without steering" in out
    assert "store-everything file" in out and "Per-stage time" in out
    assert out.count("\nQ: ") == 2


def test_ingest_exits_1_when_the_verifier_fails_and_a_rerun_judges_the_items(
        cli, tmp_path, reference_models, capsys):
    assert cli("prefs", "add", "I follow a strict vegan diet")[0] == 0
    items = tmp_path / "items.txt"
    items.write_text("Tofu and tempeh are plant proteins used in vegan cooking.\n"
                     "Vegan cooks replace eggs with flax seeds and aquafaba.\n")
    broken = tmp_path / "broken.toml"
    broken.write_text(PROFILE.replace('backend = "template"', 'backend = "llama-server"\n'
                                      f'url = "http://127.0.0.1:{closed_port()}"\nretries = 0\n'
                                      'chat_template = "{{ messages }}"'))
    capsys.readouterr()
    code = main(["ingest", str(items), "--quiet", "--memory", str(tmp_path / "m.epic"),
                 "--profile", str(broken), "--models", str(reference_models)])
    out, err = capsys.readouterr()
    failed = int(re.search(r"failed (\d+)", out)[1])
    assert code == 1 and failed >= 1 and "run the same ingest again" in err
    assert "Tofu" not in err and "flax" not in err
    code, out, _ = cli("ingest", str(items), "--quiet")
    assert code == 0 and "duplicates 0" in out and f"verified {failed}," in out


def test_non_utf8_arguments_and_lone_surrogates_are_not_tracebacks(
        cli, tmp_path, reference_models, capsys):
    code, out, _ = cli("prefs", "add", os.fsdecode(b"I cook vegan \xff tofu"))
    assert code == 0 and "vegan \ufffd tofu" in out
    items = tmp_path / "items.jsonl"
    items.write_text('{"text": "Vegan tofu \\ud800 curry with rice.", "id": "n\\udfff"}\n')
    assert cli("ingest", str(items), "--quiet")[0] == 0
    code, out, err = cli("query", os.fsdecode(b"what \xfe vegan dish?"), "--no-gate")
    assert code == 0 and "Traceback" not in err
    odd = tmp_path / os.fsdecode(b"odd\xff.epic")
    profile = str(tmp_path / "test-cpu.toml")
    options = ["--memory", str(odd), "--profile", profile, "--models", str(reference_models)]
    assert main(["prefs", "add", "I cook vegan", *options]) == 0  # info reads, never creates
    capsys.readouterr()
    assert main(["info", *options]) == 0
    assert "odd\\udcff.epic" in capsys.readouterr().out
