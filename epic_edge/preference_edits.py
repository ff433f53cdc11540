"""Adding and removing a memory's preferences: one transaction each, the index kept in step."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING, Protocol

from epic_edge import limits
from epic_edge.errors import InvalidInputError, MemoryFileError
from epic_edge.types import Preference

if TYPE_CHECKING:
    from epic_edge.entry_index import EntryIndex
    from epic_edge.protocols import Embedder
    from epic_edge.stages import Steering
    from epic_edge.store import MemoryStore

log = logging.getLogger(__name__)


class Edited(Protocol):
    """What editing a memory's preferences reads and calls (epic_edge.memory.Memory is one)."""

    store: MemoryStore
    embedder: Embedder
    entry_index: EntryIndex
    steering: Steering

    def sync(self) -> None: ...

    def reload_preferences(self) -> None: ...


def add_preferences(memory: Edited, texts: Iterable[str]) -> list[Preference]:
    """Add preferences in one transaction: all of them or, on error, none."""
    texts = limits.one_or_many(texts, str)
    cleaned = [limits.clean_text(t, "preference", limits.MAX_PREFERENCE_CHARS) for t in texts]
    memory.sync()
    known = {p.text: p for p in memory.steering.preferences}
    new = [t for t in dict.fromkeys(cleaned) if t not in known]
    if len(known) + len(new) > limits.MAX_PREFERENCES:
        raise InvalidInputError(f"a memory holds at most {limits.MAX_PREFERENCES} preferences")
    if new:
        store = memory.store
        vectors = memory.embedder.embed(new)
        with memory.entry_index.lock:
            with store.transaction() as conn:
                stored = store.preference_ids_by_text(conn)  # another writer's too
                for text, vector in zip(new, vectors):
                    pid = stored.get(text) or store.insert_preference(conn, text, vector)
                    known[text] = Preference(pid, text)
            memory.reload_preferences()
    return [known[t] for t in cleaned]


def remove_preference(memory: Edited, preference: int | str | Preference) -> int:
    """Remove a preference and the entries linked to it; returns entries removed."""
    memory.sync()
    target = find_preference(memory, preference)
    with memory.entry_index.lock:
        with memory.store.transaction() as conn:
            entry_ids = memory.store.delete_preference(conn, target.id)
        memory.entry_index.remove(entry_ids)
        memory.reload_preferences()
        try:
            memory.store.vacuum()  # no copy of the removed text stays in the file or its WAL
        except MemoryFileError as exc:  # the removal is committed: report, do not fail
            log.warning("preference removed; compacting the file failed (%s). Its freed "
                        "pages were overwritten with zeros and will be reused; the next "
                        "removal or budget run compacts it", exc.__cause__ or exc)
    return len(entry_ids)


def find_preference(memory: Edited, preference: int | str | Preference) -> Preference:
    """The memory's preference with this id, text or Preference; InvalidInputError if none."""
    key = preference.id if isinstance(preference, Preference) else preference
    for pref in memory.steering.preferences:
        if pref.id == key or pref.text == key:
            return pref
    raise InvalidInputError(f"no preference {key!r} in this memory")
