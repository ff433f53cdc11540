"""Bad input that used to escape as a traceback: surrogates, odd memory paths, a full disk."""

from __future__ import annotations

import json
import logging
import subprocess
import sys

import pytest
from crash_harness import PREFERENCES, TESTS, batch_items, open_fake_memory

from epic_edge.cli import main
from epic_edge.datasets import read_items
from epic_edge.errors import InvalidInputError


def test_lone_surrogates_in_jsonl_text_are_replaced_and_in_ids_refused(fake_memory, tmp_path,
                                                                       caplog):
    path = tmp_path / "items.jsonl"
    rows = [{"text": "vegan tofu \ud800 curry Quokka", "id": "note-1"},
            {"text": "vegan tofu \udcff scramble", "source": "\ud83d"}]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="ascii")
    caplog.set_level(logging.DEBUG)
    fake_memory.add_preference("I cook vegan tofu \udcff")
    stats = fake_memory.ingest(read_items(path))[0]
    assert stats.kept == 2 and fake_memory.ingest(read_items(path))[0].duplicates == 2
    texts = [h.item_text for h in fake_memory.retrieve("vegan tofu \ud800 dinner", gate=-1.0)]
    assert sorted(texts) == ["vegan tofu \ufffd curry Quokka", "vegan tofu \ufffd scramble"]
    assert fake_memory.preferences()[0].text == "I cook vegan tofu \ufffd"
    assert "lone surrogates" in caplog.text and "Quokka" not in caplog.text
    # ids are identities: "\ud800" and "\udfff" as U+FFFD would be one item; they are refused
    path.write_text(json.dumps({"text": "vegan tofu bake", "id": "note-\udfff"}) + "\n")
    with pytest.raises(InvalidInputError, match="line 1: the id 'note-\\\\udfff' holds lone"):
        fake_memory.ingest(read_items(path))


@pytest.mark.parametrize("where", ["folder", "/proc/no-such-folder/m.epic", "/proc/version",
                                   "/proc/self/m.epic"])
def test_a_memory_path_that_cannot_hold_a_memory_is_a_one_line_error(tmp_path, capsys, where):
    path = str(tmp_path) if where == "folder" else where
    assert main(["info", "--memory", path]) == 2
    err = capsys.readouterr().err
    assert err.startswith("epic-edge info: error: ") and err.count("\n") == 1
    assert "Traceback" not in err and "backup" not in err


FULL_DISK = f"""
import logging, os, resource, signal, sys
sys.path.insert(0, {str(TESTS)!r})
from crash_harness import open_fake_memory, PREFERENCES
logging.basicConfig()
memory = open_fake_memory(sys.argv[1])
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # over the limit, write() fails with EFBIG
size = os.path.getsize(sys.argv[1])
resource.setrlimit(resource.RLIMIT_FSIZE, (size, size))  # no file may grow: a full disk
print("removed", memory.remove_preference(PREFERENCES[0]))
"""


@pytest.mark.skipif(sys.platform != "linux", reason="RLIMIT_FSIZE stands in for a full disk")
def test_removing_a_preference_on_a_full_disk_is_saved_and_not_an_error(tmp_path):
    path = tmp_path / "m.epic"
    with open_fake_memory(str(path)) as memory:
        memory.add_preferences(PREFERENCES)
        for n in range(6):
            memory.ingest(batch_items(n))
    run = subprocess.run([sys.executable, "-c", FULL_DISK, str(path)], capture_output=True,
                         text=True, timeout=120, cwd=tmp_path)
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.startswith("removed ") and "compacting the file failed" in run.stderr
    with open_fake_memory(str(path)) as memory:
        assert [p.text for p in memory.preferences()] == PREFERENCES[1:]
        assert memory.check().ok
