"""Single items and standard input from the CLI (`add`, `ingest -`), forgetting that lasts,
and the small print (`info`'s budget, one-line warnings)."""

from __future__ import annotations

import io
import json
import sys

from test_cli import cli  # noqa: F401  (the fixture)

VEGAN = "I follow a strict vegan diet"
TOFU = "Tofu and tempeh are plant proteins used in vegan cooking."


def stdin(monkeypatch, data: bytes) -> None:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data)))


def test_add_says_where_an_item_was_filed_or_why_it_was_dropped(cli):  # noqa: F811
    cli("prefs", "add", VEGAN)
    code, out, _ = cli("add", TOFU, "--id", "t1")
    assert code == 0 and out.startswith("kept as item 1 (id t1) under preference 1: I follow")
    code, out, _ = cli("add", "Quarterly corporate tax filings are due in April.", "--json")
    result = json.loads(out)
    assert code == 0 and not result["kept"] and result["items"][0]["stage"] == "coarse filter"
    assert "tau" in result["items"][0]["reason"] and result["stats"]["seen"] == 1
    code, _, err = cli("add", "  ")
    assert code == 2 and "text is empty" in err


def test_ingest_reads_standard_input_and_a_forgotten_item_stays_gone(cli, monkeypatch):  # noqa: F811
    cli("prefs", "add", VEGAN)
    feed = (json.dumps({"text": TOFU, "id": "t1"}) + "\n"
            + json.dumps({"text": "Vegan cooks replace eggs with aquafaba.", "id": "t2"}) + "\n")
    stdin(monkeypatch, feed.encode())
    code, out, _ = cli("ingest", "-", "--json")
    assert code == 0 and json.loads(out)["kept"] == 2
    assert cli("forget", "t1")[0] == 0
    stdin(monkeypatch, feed.encode())
    code, out, _ = cli("ingest", "-")
    assert code == 0 and "forgotten 1" in out and "kept 0" in out
    stdin(monkeypatch, feed.encode())
    code, out, _ = cli("ingest", "-", "--allow-forgotten", "--json")
    assert code == 0 and json.loads(out)["kept"] == 1
    stdin(monkeypatch, b"Seitan is a vegan wheat protein.\n\n")  # plain text lines
    code, out, _ = cli("ingest", "-", "--json")
    assert code == 0 and json.loads(out)["seen"] == 1
    assert {e["external_id"] for e in json.loads(cli("ls", "--json")[1])["entries"]} == {
        "t1", "t2", ""}


def test_hits_show_their_item_and_info_its_budget_in_words(cli):  # noqa: F811
    cli("prefs", "add", VEGAN)
    cli("add", TOFU, "--id", "t1")
    hits = json.loads(cli("query", "What should I cook tonight?", "--json", "--no-gate")[1])
    assert hits[0]["item_id"] == 1 and hits[0]["external_id"] == "t1"
    assert hits[0]["score"] >= hits[-1]["score"] and "similarity" in hits[0]
    assert "item 1, id t1;" in cli("query", "What should I cook tonight?", "--no-gate")[1]
    cli("budget", "--max-bytes", "400000")
    out = cli("info")[1]
    assert "budget: at most 390.6 KB on disk, any number of entries;" in out
    assert "{" not in out


def test_non_utf8_lines_warn_in_one_line(cli, tmp_path):  # noqa: F811
    cli("prefs", "add", VEGAN)
    items = tmp_path / "items.txt"
    items.write_bytes(b"Vegan tofu \xff curry with rice.\n")
    code, _, err = cli("ingest", str(items), "--quiet")
    assert code == 0 and err.strip().splitlines() == [
        f"epic-edge ingest: warning: {items}: 1 line(s) were not valid UTF-8 (lines 1); "
        "undecodable bytes were replaced with U+FFFD"]
