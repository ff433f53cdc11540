"""Budgets and eviction; encryption at rest; secure deletion; no network; quiet logs."""

from __future__ import annotations

import logging
import socket

import pytest
from crash_harness import PREFERENCES, batch_items

from epic_edge import text_codec
from epic_edge.backends.numpy_index import NumpyIndex
from epic_edge.crypto import Sealer
from epic_edge.errors import MemoryFileError, ProfileError
from epic_edge.memory import Memory
from epic_edge.profiles import Profile, load_profile
from epic_edge.types import Preference, Verdict
from fakes import BagOfWordsEmbedder, KeywordVerifier


class ConfidenceVerifier(KeywordVerifier):
    """Keeps like KeywordVerifier, with confidence read from the item ("conf=0.7")."""

    def verify(self, item, candidates):
        verdict = super().verify(item, candidates)
        if verdict.keep and "conf=" in item:
            verdict.confidence = float(item.split("conf=")[1].split()[0])
        return verdict


def _memory(path, key=None, verifier=None, profile="linux-cpu"):
    emb = BagOfWordsEmbedder()
    return Memory.open(path, profile, embedder=emb, verifier=verifier or ConfidenceVerifier(),
                       index=NumpyIndex(emb.dim), tau=0.1, key=key)


def _budget_profile(tmp_path, budget: str) -> Profile:
    path = tmp_path / "budget.toml"
    path.write_text(f'name = "t"\n[embedder]\nbackend = "onnx"\ntau = 0.1\n[budget]\n{budget}\n',
                    encoding="utf-8")
    return load_profile(path)


def test_a_new_memory_starts_with_the_profile_budget_and_an_old_one_keeps_its_own(tmp_path):
    dishes = [f"vegan tofu dish number {i} conf={c}" for i, c in enumerate([0.9, 0.2, 0.8])]
    two, one = (_budget_profile(tmp_path, f"max_entries = {n}") for n in (2, 1))
    with _memory(tmp_path / "m.epic", profile=two) as memory:
        memory.add_preference("vegan tofu cooking")
        assert memory.ingest(dishes)[0].evicted == 1
        assert {h.item_text for h in memory.retrieve("vegan tofu", k=10)} == {dishes[0], dishes[2]}
        assert memory.info()["budget"]["max_entries"] == 2
    with _memory(tmp_path / "old.epic") as memory:  # built before its profile had a budget
        memory.add_preference("vegan tofu cooking")
        memory.ingest(dishes)
    with _memory(tmp_path / "old.epic", profile=one) as memory:
        assert memory.info()["entries"] == 3 and memory.info()["budget"]["max_entries"] is None


def test_a_bad_profile_budget_is_refused_on_load(tmp_path):
    with pytest.raises(ProfileError, match=r"\[budget\] max_entries is 0; at least 1"):
        _budget_profile(tmp_path, "max_entries = 0")
    with pytest.raises(ProfileError, match=r"\[budget\] max_byte is not a known key"):
        _budget_profile(tmp_path, "max_byte = 100")


def test_entry_budget_evicts_lowest_confidence_first(tmp_path):
    with _memory(tmp_path / "m.epic") as memory:
        memory.add_preference("vegan tofu cooking")
        memory.ingest([f"vegan tofu dish number {i} conf={c}"
                       for i, c in enumerate([0.9, 0.2, 0.8, 0.1, 0.7])])
        assert memory.set_budget(max_entries=3) == 2
        kept = {h.item_text for h in memory.retrieve("vegan tofu", k=10)}
        assert kept == {"vegan tofu dish number 0 conf=0.9", "vegan tofu dish number 2 conf=0.8",
                        "vegan tofu dish number 4 conf=0.7"}
        stats = memory.ingest(["vegan tofu dish number 5 conf=0.95"])
        assert stats[0].evicted == 1 and memory.info()["entries"] == 3
        assert memory.info()["evicted_total"] == 3 and memory.check().ok


def test_a_budget_evicts_from_the_preference_holding_the_most_entries(tmp_path):
    with _memory(tmp_path / "m.epic") as memory:
        memory.add_preferences(["vegan tofu cooking", "vintage cars"])
        memory.ingest([f"vegan tofu dish number {i} conf={c}"
                       for i, c in enumerate([0.9, 0.8, 0.7, 0.6])]
                      + ["vintage cars rally conf=0.3"])
        assert memory.set_budget(max_entries=3) == 2
        kept = {h.item_text for h in memory.retrieve("vegan tofu vintage cars", k=10)}
        assert kept == {"vegan tofu dish number 0 conf=0.9", "vegan tofu dish number 1 conf=0.8",
                        "vintage cars rally conf=0.3"}


class FloorVerifier(ConfidenceVerifier):
    """Verdicts with a scoring verifier's threshold: what it kept below it (by a floor) is
    evicted first."""

    def verify(self, item, candidates):
        verdict = super().verify(item, candidates)
        verdict.threshold = 0.7
        return verdict


def test_entries_kept_below_the_threshold_are_evicted_before_any_other(tmp_path):
    with _memory(tmp_path / "m.epic", verifier=FloorVerifier()) as memory:
        memory.add_preferences(["vegan tofu cooking", "vintage cars"])
        memory.ingest([f"vegan tofu dish number {i} conf={c}"
                       for i, c in enumerate([0.9, 0.8, 0.75])]
                      + ["vintage cars rally conf=0.5", "vintage cars show conf=0.6"])
        assert memory.store.get_meta("keep_threshold") == "0.7"
        # by fair share alone the tofu preference, holding the most, would give up its 0.75
        assert memory.set_budget(max_entries=4) == 1
        kept = {h.item_text for h in memory.retrieve("vegan tofu vintage cars", k=10)}
        assert "vintage cars rally conf=0.5" not in kept and len(kept) == 4
        assert memory.set_budget(max_entries=2) == 2  # then the fair share among the sure ones
        kept = {h.item_text for h in memory.retrieve("vegan tofu vintage cars", k=10)}
        assert kept == {"vegan tofu dish number 0 conf=0.9", "vegan tofu dish number 1 conf=0.8"}


def test_entries_kept_below_the_threshold_keep_a_fair_share_among_themselves(tmp_path):
    with _memory(tmp_path / "m.epic", verifier=FloorVerifier()) as memory:
        memory.add_preferences(["vegan tofu cooking", "vintage cars"])
        memory.ingest([f"vegan tofu dish number {i} conf={c}"
                       for i, c in enumerate([0.5, 0.45, 0.4])] + ["vintage cars rally conf=0.2"])
        # by confidence alone the cars' only entry would go first
        assert memory.set_budget(max_entries=2) == 2
        kept = {h.item_text for h in memory.retrieve("vegan tofu vintage cars", k=10)}
        assert kept == {"vegan tofu dish number 0 conf=0.5", "vintage cars rally conf=0.2"}


def test_older_entries_are_evicted_before_newer_ones_of_equal_confidence(tmp_path):
    with _memory(tmp_path / "m.epic") as memory:
        memory.add_preference("vegan tofu cooking")
        memory.ingest(["vegan tofu old dish conf=0.5", "vegan tofu new dish conf=0.5"])
        with memory.store.transaction() as conn:  # age the first entry by 60 days
            conn.execute("UPDATE entries SET updated_at = updated_at - 60 * 86400 WHERE id = "
                         "(SELECT MIN(id) FROM entries)")
        memory.set_budget(max_entries=1)
        assert [h.item_text for h in memory.retrieve("vegan tofu")] == [
            "vegan tofu new dish conf=0.5"]


def test_byte_budget_shrinks_the_file(tmp_path):
    with _memory(tmp_path / "m.epic") as memory:
        memory.add_preferences(PREFERENCES)
        for n in range(10):
            memory.ingest(batch_items(n))
        before = memory.footprint()["total"]
        memory.set_budget(max_bytes=before // 2)
        assert memory.footprint()["total"] <= before // 2
        assert memory.info()["entries"] > 0 and memory.check().ok


def test_byte_budget_is_met_even_when_single_evictions_free_no_page(tmp_path):
    with _memory(tmp_path / "m.epic") as memory:
        memory.add_preferences(PREFERENCES)
        for n in range(10):
            memory.ingest(batch_items(n))
        memory.set_budget(max_entries=0)  # the floor: fixed pages, preferences, ledger
        floor = memory.footprint()["total"]
    for step in range(1, 6):  # budgets a page or two above the floor: the hard cases
        path = tmp_path / f"m{step}.epic"
        with _memory(path) as memory:
            memory.add_preferences(PREFERENCES)
            for n in range(10):
                memory.ingest(batch_items(n))
            budget = floor + step * 2048
            memory.set_budget(max_bytes=budget)
            assert memory.footprint()["total"] <= budget
            assert memory.check().ok


def test_byte_budget_evicts_about_the_overshoot_not_many_times_it(tmp_path):
    # deleting a few rows frees no whole page; only a VACUUM repacks what they used, so a
    # budget loop that skipped it saw no change and evicted 2x, 4x, 8x ... more each round
    with _memory(tmp_path / "m.epic") as memory:
        memory.add_preferences(PREFERENCES)
        for n in range(10):
            memory.ingest(batch_items(n))
        memory.set_budget(max_entries=None, max_bytes=None)
        memory.store.vacuum()
        before, entries = memory.footprint()["total"], memory.info()["entries"]
        memory.set_budget(max_bytes=before - 4096)  # one page over
        after = memory.info()["entries"]
        assert memory.footprint()["total"] <= before - 4096
        per_entry = before / entries  # fixed pages included: an overestimate of an entry
        assert entries - after <= 2 * (4096 / per_entry) + 4, (entries, after)


def _raw(path) -> bytes:
    return b"".join(p.read_bytes() for p in path.parent.glob(path.name + "*"))


def test_encryption_at_rest_and_keys(tmp_path):
    path, key = tmp_path / "m.epic", Sealer.new_key()
    secret = "vegan tofu recipe from my grandmother Ottilie"
    with _memory(path, key=key) as memory:
        memory.add_preference("vegan tofu cooking")
        memory.ingest([secret])
        assert memory.retrieve("vegan tofu")[0].item_text == secret
    raw = _raw(path)
    for text in (secret, "vegan tofu cooking"):  # neither as written nor packed (text_codec)
        packed = text_codec.pack(text)
        assert text.encode() not in raw and (packed is None or packed not in raw)
    with _memory(path, key=key) as memory:
        assert memory.retrieve("vegan tofu")[0].item_text == secret
    with pytest.raises(MemoryFileError, match="encrypted"):
        _memory(path)
    with pytest.raises(MemoryFileError, match="wrong key"):
        _memory(path, key=Sealer.new_key())


def test_removed_text_leaves_no_bytes_behind(tmp_path):
    path = tmp_path / "m.epic"
    with _memory(path) as memory:
        memory.add_preferences(["vegan tofu cooking", "electric battery cars"])
        secret = "vegan tofu dish from Zanzibarquux kitchen"
        memory.ingest([secret, "electric battery car"])
        stored = text_codec.pack(secret)  # the file's form of the text: packed, as it is shorter
        assert stored is not None and stored in _raw(path)
        memory.remove_preference("vegan tofu cooking")
        assert stored not in _raw(path)
    assert stored not in _raw(path) and b"Zanzibarquux" not in _raw(path)


def test_demo_runs_with_sockets_blocked(monkeypatch, reference_models, capsys):
    def refuse(*args, **kwargs):
        raise AssertionError("network access attempted")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    from epic_edge.cli import main

    assert main(["demo", "--limit", "12", "--questions", "1",
                 "--models", str(reference_models)]) == 0
    assert "store-everything" in capsys.readouterr().out


def test_logs_hold_no_item_text(tmp_path, caplog):
    class Broken:
        def verify(self, item: str, candidates: list[Preference]) -> Verdict:
            raise RuntimeError(f"model choked on {item}")

    caplog.set_level(logging.DEBUG)
    with _memory(tmp_path / "m.epic", verifier=Broken()) as memory:
        memory.add_preference("vegan tofu cooking")
        stats = memory.ingest(["vegan tofu secret-recipe-Quokka", b"vegan \xff tofu Wombatix"])
    assert stats[0].failed == 2 and stats[0].kept == 0
    assert "Quokka" not in caplog.text and "Wombatix" not in caplog.text
    assert "not recorded as judged" in caplog.text
