"""The epic-edge CLI end to end on the real ONNX embedder (template verifier, FAISS index)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest
from fault_harness import closed_port

from epic_edge.cli import main

PROFILE = """
name = "test-cpu"
[embedder]
backend = "onnx"
model = "epic-minilm/model.onnx"
tokenizer = "epic-minilm/tokenizer.json"
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
        try:
            code = main([*args, *common])
        except SystemExit as exc:  # argparse's usage errors: status 2 and a usage line
            code = exc.code
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
    assert code == 0 and "1 entry" in out
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


@pytest.fixture
def filled_cli(cli, tmp_path):
    """The CLI over a memory holding a vegan and a hiking note (a tax note is dropped)."""
    cli("prefs", "add", "I follow a strict vegan diet", "I love hiking in mountains")
    items = tmp_path / "items.json"  # JSON Lines under a .json name
    items.write_text("\n".join(json.dumps({"text": t, "id": f"n{i}"}) for i, t in enumerate([
        "Tofu and tempeh are plant proteins used in vegan cooking.",
        "The Alps offer long hiking trails between mountain huts.",
        "Quarterly corporate tax filings are due in April.",
    ])))
    code, out, _ = cli("ingest", str(items), "--json")
    assert code == 0 and json.loads(out)["seen"] == 3
    return cli


def test_a_json_file_is_read_as_items_not_as_text(filled_cli, tmp_path):
    listed = json.loads(filled_cli("ls", "--json")[1])
    assert {e["external_id"] for e in listed["entries"]} == {"n0", "n1"}
    assert listed["total"] == 2 and "Tofu" in listed["entries"][0]["item_text"]
    array = tmp_path / "more.json"
    array.write_text(json.dumps([{"text": "Vegan lentil stew with smoked paprika.", "id": "a"}]))
    code, out, _ = filled_cli("ingest", str(array), "--json")
    assert code == 0 and json.loads(out)["seen"] == 1


def test_context_json_empty_context_and_no_gate(filled_cli):
    code, out, _ = filled_cli("query", "What should I cook for dinner?", "--context", "--json")
    block = json.loads(out)
    assert code == 0 and block["used_memory"] and "Tofu" in block["context"]
    code, _, err = filled_cli("query", "dinner?", "--context", "--no-gate")
    assert code == 2 and "--regime" in err and "Traceback" not in err


def test_an_empty_context_prints_nothing_on_stdout(cli):
    cli("prefs", "add", "I follow a strict vegan diet")
    code, out, err = cli("query", "What should I cook for dinner?", "--context")
    assert code == 0 and out == "" and "no memory" in err
    code, out, _ = cli("query", "What should I cook for dinner?", "--context", "--json")
    assert json.loads(out) == {"question": "What should I cook for dinner?",
                               "regime": "conservative", "used_memory": False, "context": ""}


def test_k_is_bounded_with_a_one_line_error(filled_cli):
    code, _, err = filled_cli("query", "dinner?", "-k", "1000000000")
    assert code == 2 and "k must be between 1 and 1000" in err and "Traceback" not in err


def test_budget_shows_without_flags_and_refuses_to_empty_the_memory(filled_cli):
    code, out, _ = filled_cli("budget", "--max-entries", "5", "--json")
    assert code == 0 and json.loads(out)["budget"]["max_entries"] == 5
    code, out, _ = filled_cli("budget", "--json")
    shown = json.loads(out)
    assert code == 0 and shown["budget"]["max_entries"] == 5 and shown["evicted_now"] is None
    code, _, err = filled_cli("budget", "--max-bytes", "10")
    assert code == 2 and "evict all 2 entries" in err and "--yes" in err
    assert json.loads(filled_cli("info", "--json")[1])["entries"] == 2
    code, out, _ = filled_cli("budget", "--clear", "--json")
    assert json.loads(out)["budget"]["max_entries"] is None
    code, out, _ = filled_cli("budget", "--max-bytes", "10", "--yes")
    assert code == 0 and "evicted 2 entries" in out


def test_ls_forget_explain_backup_restore(filled_cli, tmp_path):
    code, out, _ = filled_cli("explain", "Quarterly corporate tax filings are due in April.",
                              "--json")
    assert code == 0 and json.loads(out)["verdict"] is None
    code, out, _ = filled_cli("explain", "Seitan is a vegan source of protein.")
    assert code == 0 and "tau" in out and "why:" in out
    backup = tmp_path / "backup.jsonl"
    code, out, _ = filled_cli("backup", str(backup), "--json")
    assert code == 0 and json.loads(out)["entries"] == 2
    code, _, err = filled_cli("backup", str(backup))
    assert code == 2 and "--force" in err
    code, out, _ = filled_cli("forget", "n0", "--json")
    assert code == 0 and json.loads(out)["removed_entries"] == 1
    code, _, err = filled_cli("forget", "n0")
    assert code == 2 and "no item 'n0'" in err and "Traceback" not in err
    code, _, err = filled_cli("forget", "abc", "--number")
    assert code == 2 and "number" in err
    code, _, err = filled_cli("forget", "2")  # an item number without --number: no guessing
    assert code == 2 and "no item '2'" in err and "epic-edge forget 2 --number" in err
    assert json.loads(filled_cli("ls", "--json")[1])["total"] == 1
    code, out, _ = filled_cli("restore", str(backup))  # the older backup: n0 stays forgotten
    assert code == 0 and "left out 1 item forgotten before" in out
    assert json.loads(filled_cli("ls", "--json")[1])["total"] == 1
    code, out, _ = filled_cli("restore", str(backup), "--allow-forgotten", "--json")
    assert code == 0 and json.loads(out)["entries"] == 2
    assert json.loads(filled_cli("ls", "--json")[1])["total"] == 2
    code, out, _ = filled_cli("prefs", "ls", "--json")
    assert code == 0 and len(json.loads(out)) == 2
    code, out, _ = filled_cli("check", "--json")
    assert code == 0 and json.loads(out)["ok"]


def test_no_progress_bar_before_an_error(cli, tmp_path):
    items = tmp_path / "items.txt"
    items.write_text("one item\n")
    code, out, err = cli("ingest", str(items))
    assert code == 2 and err.strip().splitlines() == [
        "epic-edge ingest: error: add at least one preference before ingesting items"]


def test_a_closed_pipe_ends_quietly(tmp_path, reference_models):
    """`epic-edge prefs ls --json | head -c0`: the reader is gone before the first write."""
    profile = tmp_path / "test-cpu.toml"
    profile.write_text(PROFILE)
    args = ["--memory", str(tmp_path / "m.epic"), "--profile", str(profile),
            "--models", str(reference_models)]
    run = [sys.executable, "-c", "import sys; from epic_edge.cli import main; sys.exit(main())"]
    subprocess.run([*run, "prefs", "add", "I follow a strict vegan diet", *args], check=True,
                   capture_output=True)
    proc = subprocess.Popen([*run, "prefs", "ls", "--json", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    proc.stdout.close()  # like `head` exiting before the command writes
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 141
    assert "Traceback" not in err and "BrokenPipe" not in err


def test_setup_and_export_silence_other_libraries():
    """torch, torchao and ONNX Runtime's quantiser printed ~20 lines; epic-edge's stay."""
    code = ("import logging, warnings\n"
            "from epic_edge.cli.common import quiet_libraries\n"
            "quiet_libraries()\n"
            "logging.basicConfig()\n"
            "logging.getLogger('torchao').warning('torchao noise')\n"
            "logging.warning('quantiser noise')\n"
            "warnings.warn('library warning')\n"
            "logging.getLogger('epic_edge.export').warning('our own warning')\n")
    err = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stderr
    assert err.strip().splitlines() == ["WARNING:epic_edge.export:our own warning"]



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
    assert code == 0 and "already judged 0" in out and f"verified {failed}," in out


def test_non_utf8_arguments_and_lone_surrogates_are_not_tracebacks(
        cli, tmp_path, reference_models, capsys):
    code, out, _ = cli("prefs", "add", os.fsdecode(b"I cook vegan \xff tofu"))
    assert code == 0 and "vegan \ufffd tofu" in out
    items = tmp_path / "items.jsonl"
    items.write_text('{"text": "Vegan tofu \\ud800 curry with rice.", "id": "n\\udfff"}\n')
    code, _, err = cli("ingest", str(items), "--quiet")  # an id is no text to repair
    assert code == 2 and "line 1: the id 'n\\udfff' holds lone surrogates" in err
    items.write_text('{"text": "Vegan tofu \\ud800 curry with rice.", "id": "n-1"}\n')
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
