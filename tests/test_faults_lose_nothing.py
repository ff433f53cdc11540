"""Faults lose nothing: a failing verifier, an edited item, id-less items, concurrent edits."""

from __future__ import annotations

import logging
import threading

import pytest
from fault_harness import FAULTS, closed_port, lying_verifier, run_verification_faults

from epic_edge import registry
from epic_edge.backends.http_verifier import LlamaServerVerifier
from epic_edge.backends.numpy_index import NumpyIndex
from epic_edge.datasets import read_items
from epic_edge.errors import MissingExtraError, ModelNotFoundError
from epic_edge.items import to_item
from epic_edge.memory import Memory
from epic_edge.profiles import Profile
from epic_edge.types import Item, Preference, Verdict
from fakes import BagOfWordsEmbedder, KeywordVerifier

PREF = "I follow a vegan diet and cook tofu"
ITEMS = ["Secret vegan tofu curry Quokka0 recipe", "Quokka1 vegan tofu scramble breakfast",
         "Smoked tofu Quokka2 vegan sandwich", "Vegan tofu Quokka3 noodle soup",
         "Crispy baked tofu Quokka4 vegan bowl"]
CAR = "I drive an electric car"


def _open(path, verifier=None, embedder=None, profile=None):  # type: ignore[no-untyped-def]
    emb = embedder or BagOfWordsEmbedder()
    return Memory.open(path, profile or "linux-cpu", embedder=emb,
                       verifier=verifier or KeywordVerifier(), index=NumpyIndex(emb.dim),
                       tau=0.2, model_dir=path.parent)


def _texts(memory: Memory) -> list[str]:
    return sorted(memory.store.sealer.open(r[0])
                  for r in memory.store.query("SELECT text FROM items"))


class Raising:
    """A verifier with a bug: every call raises, naming the item."""

    def verify(self, item: str, candidates: list[Preference]) -> Verdict:
        raise RuntimeError(f"model choked on {item}")


# -- 1. a verifier failure is reported and retried, never recorded as judged ---------------------

@pytest.mark.parametrize("fault", ["raises", "closed-port", "nan", "empty", "no-decision-word"])
def test_items_the_verifier_failed_on_are_judged_by_the_next_ingest(tmp_path, caplog, fault):
    broken = Raising() if fault == "raises" else LlamaServerVerifier(
        f"http://127.0.0.1:{closed_port()}", retries=0, chat_template="{{ messages }}"
    ) if fault == "closed-port" else lying_verifier(fault)
    caplog.set_level(logging.DEBUG)
    with _open(tmp_path / "m.epic", broken) as memory:
        memory.add_preference(PREF)
        stats = memory.ingest(ITEMS)[0]
        assert (stats.failed, stats.verified, stats.kept) == (5, 0, 0)
        assert memory.store.count("judged") == 0
    assert "Quokka" not in caplog.text and "not recorded as judged" in caplog.text
    with _open(tmp_path / "m.epic") as memory, _open(tmp_path / "control.epic") as control:
        again = memory.ingest(ITEMS)[0]  # the fault is fixed
        assert (again.duplicates, again.failed, again.kept) == (0, 0, 5)
        control.add_preference(PREF)
        control.ingest(ITEMS)
        assert _texts(memory) == _texts(control) != []


def test_one_failing_item_leaves_the_rest_of_the_batch_and_its_old_version(tmp_path):
    class FailsOnTwo(KeywordVerifier):
        def verify(self, item: str, candidates: list[Preference]) -> Verdict:
            if "Quokka2" in item:
                raise TimeoutError("server hung")
            return super().verify(item, candidates)

    with _open(tmp_path / "m.epic") as memory:
        memory.add_preference(PREF)
        memory.ingest([Item("Old vegan tofu note", id="note-2")])
        memory._verifier = FailsOnTwo()
        stats = memory.ingest([Item(t, id=f"note-{n}") for n, t in enumerate(ITEMS)])[0]
        assert (stats.failed, stats.kept, stats.replaced) == (1, 4, 0)
        assert "Old vegan tofu note" in _texts(memory)  # its new version was not judged


@pytest.mark.parametrize("backend", ["missing-model", "missing-extra"])
def test_a_verifier_that_cannot_be_built_is_a_clear_error_and_judges_nothing(
        tmp_path, monkeypatch, backend):
    monkeypatch.setitem(registry._BACKENDS["verifier"], "absent", registry.Backend(
        "verifier", "absent", "epic_edge_absent_backend:Verifier.from_config", "absent"))
    config = ({"backend": "learned", "model": "no-such-folder/model.onnx"}
              if backend == "missing-model" else {"backend": "absent"})
    profile = Profile(name="broken", embedder={"tau": 0.2}, verifier=config)
    path = tmp_path / "m.epic"
    with Memory.open(path, profile, embedder=BagOfWordsEmbedder(),
                     index=NumpyIndex(256), tau=0.2, model_dir=tmp_path) as memory:
        memory.add_preference(PREF)
        error = ModelNotFoundError if backend == "missing-model" else MissingExtraError
        with pytest.raises(error):
            memory.ingest(ITEMS)
        assert memory.store.count("judged") == 0
    with _open(path) as memory:
        assert memory.ingest(ITEMS)[0].kept == 5


def test_every_kind_of_verification_fault_loses_nothing(tmp_path):
    stats = run_verification_faults(tmp_path)
    assert stats.runs == len(FAULTS) == 8 and all(stats.per_fault.values())
    assert stats.recorded_as_judged == stats.lost == stats.kept_without_verdict == 0


# -- 2. an edited item replaces its old version, it is not deleted --------------------------------

def test_editing_an_item_keeps_the_new_version(tmp_path):
    with _open(tmp_path / "m.epic") as memory:
        memory.add_preference("I cook vegan stir fry with tofu")
        memory.ingest([Item("Tofu stir fry with a vegan sauce", id="note-1")])
        stats = memory.ingest([Item("Tofu stir-fry with a vegan sauce!", id="note-1")])[0]
        assert stats.replaced == 1 and stats.entries_added == 1
        assert _texts(memory) == ["Tofu stir-fry with a vegan sauce!"]
        reverted = memory.ingest([Item("Tofu stir fry with a vegan sauce", id="note-1")])[0]
        assert reverted.replaced == 1 and reverted.duplicates == 0
        assert _texts(memory) == ["Tofu stir fry with a vegan sauce"]
        assert memory.check().ok


# -- 3. items without an id never replace each other ---------------------------------------------

def _long(topic: str) -> str:
    return " ".join(f"Sentence {n} on vegan tofu and {topic}." for n in range(80))


def test_long_items_without_an_id_do_not_overwrite_each_other(tmp_path):
    text_file = tmp_path / "notes.txt"
    text_file.write_text(_long("lentil soup") + "\n", encoding="utf-8")
    with _open(tmp_path / "m.epic") as memory:
        memory.add_preference(PREF)
        first = memory.ingest(read_items(text_file))[0]
        second = memory.ingest([_long("miso glaze"), {"text": _long("seitan"), "id": None}])[0]
        assert second.replaced == 0
        texts = _texts(memory)
        assert len(texts) == first.entries_added + second.entries_added
        assert {w for w in ("lentil", "miso", "seitan") if any(w in t for t in texts)} == {
            "lentil", "miso", "seitan"}


def test_dict_items_with_a_null_id_do_not_overwrite_each_other(tmp_path):
    assert to_item({"text": "x", "id": None, "source": None}) == Item("x")
    with _open(tmp_path / "m.epic") as memory:
        memory.add_preference(PREF)
        memory.ingest([{"text": "vegan tofu curry", "id": None}])
        memory.ingest([{"text": "vegan tofu scramble", "id": None}])
        assert _texts(memory) == ["vegan tofu curry", "vegan tofu scramble"]


# -- 4. concurrent edits are never reported as a corrupt file ------------------------------------

class RemovesPreferenceMidBatch(KeywordVerifier):
    """While the batch is being verified, another connection removes the preference."""

    def __init__(self, remove) -> None:  # type: ignore[no-untyped-def]
        super().__init__()
        self.remove = remove

    def verify(self, item: str, candidates: list[Preference]) -> Verdict:
        if self.remove:
            self.remove(candidates[0].text)
            self.remove = None
        return super().verify(item, candidates)


@pytest.mark.parametrize("where", ["other connection", "same memory"])
def test_removing_a_preference_during_an_ingest(tmp_path, where):
    path = tmp_path / "m.epic"
    with _open(path) as memory, _open(path) as other:
        memory.add_preferences([PREF, CAR])
        target = other if where == "other connection" else memory
        memory._verifier = RemovesPreferenceMidBatch(target.remove_preference)
        stats = memory.ingest([*ITEMS, "electric car battery range"])[0]
        assert stats.kept == 6 and stats.entries_added == 1  # the vegan entries went with it
        assert memory.check().ok and other.check().ok
        assert _texts(memory) == ["electric car battery range"]
        assert memory.preferences() == other.preferences() == [Preference(2, CAR)]


def test_two_writers_adding_the_same_preference(tmp_path):
    path = tmp_path / "m.epic"

    class AddsFirst(BagOfWordsEmbedder):
        def embed(self, texts):  # type: ignore[no-untyped-def]
            if texts == [PREF]:  # the other writer commits it between our check and our write
                first.add_preference(PREF)
            return super().embed(texts)

    with _open(path) as first, _open(path, embedder=AddsFirst()) as second:
        assert second.add_preference(PREF) == first.preferences()[0]
        assert len(second.preferences()) == 1 and second.check().ok


def test_a_thread_editing_preferences_while_another_ingests(tmp_path):
    errors: list[str] = []
    with _open(tmp_path / "m.epic") as memory:
        memory.add_preference(PREF)

        def ingest() -> None:
            for n in range(30):
                try:
                    memory.ingest([f"{t} batch {n}" for t in ITEMS])
                except Exception as exc:  # noqa: BLE001 - counted, then asserted empty
                    errors.append(repr(exc))

        worker = threading.Thread(target=ingest)
        worker.start()
        for n in range(30):
            memory.add_preference(f"I like vegan tofu dish {n}")
            memory.remove_preference(f"I like vegan tofu dish {n}")
        worker.join()
        assert errors == [] and memory.check().ok
