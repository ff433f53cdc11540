"""Moving a whole memory between devices: export to JSONL, import (re-embedding if needed)."""

from __future__ import annotations

import base64
import json
import os
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any, Protocol, TextIO

import numpy as np

from epic_edge.backup_file import FORMAT, TOMBSTONE_PROBE, VERSION, Export, read_export
from epic_edge.errors import InvalidInputError
from epic_edge.ingest import BatchIngester, Judged
from epic_edge.instructions import stored_form
from epic_edge.limits import MAX_PREFERENCES
from epic_edge.maintenance import Budget, evict_to_budget
from epic_edge.stages import normalize_rows
from epic_edge.store_reads import Entry
from epic_edge.store_writes import NewEntry
from epic_edge.types import Preference


class Moved(Judged, Protocol):
    """What export and import read of a memory: ingest's parts (an import embeds as ingest
    does) and its preferences; epic_edge.memory.Memory is one."""

    def preferences(self) -> list[Preference]: ...


def _vector_text(vector: np.ndarray) -> str:
    return base64.b64encode(np.asarray(vector, "<f4").tobytes()).decode("ascii")


def export_memory(memory: Moved, path: str | Path) -> dict[str, int]:
    """Write preferences, items and entries (with confidences, times and vectors) as JSONL.

    The file holds the memory's text in clear (an encrypted memory exports only when opened
    with its key): it is created readable by the owner only. Returns counts written.
    """
    memory.sync()
    store, dim = memory.store, memory.embedder.dim
    path = Path(path)
    header = {"format": FORMAT, "version": VERSION, "embedder": memory.embedder.fingerprint,
              "dim": dim, "entry_vector": store.entry_vector, "tau": memory.tau,
              "ids_hashed": store.sealer.enabled, "exported_at": time.time(),
              "tombstone_probe": _probe(store.sealer)}
    prefs = store.preferences(dim)[0]  # a damaged row is left out (and logged)
    created = dict(store.query("SELECT id, created_at FROM preferences"))
    item_created = dict(store.query("SELECT id, created_at FROM items"))
    by_item: dict[int, list[tuple[Entry, np.ndarray]]] = {}
    for e in store.checked_entries("ORDER BY e.item_id, e.id"):
        vector = store.checked("entries", e.entry_id, (), None, store.entry_vector_of,
                               e.vector_blob, dim, store.vector_format)
        if vector is not None:
            by_item.setdefault(e.item_id, []).append((e, vector))
    with _private_replacement(path) as out:
        def line(record: dict[str, Any]) -> None:
            out.write(json.dumps(record, ensure_ascii=False) + "\n")

        line(header)
        for pref in prefs:
            line({"kind": "preference", "id": pref.id, "text": pref.text,
                  "created_at": created[pref.id]})
        for item_id, entries in by_item.items():
            first = entries[0][0]
            line({"kind": "item", "id": item_id, "text": first.item_text, "source": first.source,
                  "external_id": first.external_id, "created_at": item_created[item_id]})
            for e, vector in entries:
                line({"kind": "entry", "item": item_id, "preference": e.preference.id,
                      "instruction": e.instruction, "confidence": e.confidence,
                      "created_at": e.created_at, "updated_at": e.updated_at,
                      "vector": _vector_text(vector)})
        tombstones = store.tombstones()  # forgotten stays forgotten wherever it is restored
        for key in tombstones:
            line({"kind": "forgotten", "hash": base64.b64encode(key).decode("ascii")})
    return {"preferences": len(prefs), "items": len(by_item),
            "entries": sum(len(entries) for entries in by_item.values()),
            "forgotten": len(tombstones)}


def _probe(sealer: Any) -> str:
    """A fixed text's content hash: equal in two memories whose tombstones mean the same
    (both without a key, or with the same key)."""
    return base64.b64encode(sealer.content_hash(TOMBSTONE_PROBE)).decode("ascii")


@contextmanager
def _private_replacement(path: Path) -> Iterator[TextIO]:
    """A text file written beside `path` (or the file its symlink names), mode 0600, that
    replaces it once complete: an existing file of any mode ends owner-only, and a failed
    write leaves it as it was."""
    target = Path(os.path.realpath(path))
    try:
        fd, temp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".part", dir=target.parent)
    except OSError as exc:  # a missing folder, no permission, ...
        raise InvalidInputError(f"cannot write {path}: {exc.strerror or exc}") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            yield out
            out.flush()
            os.fsync(out.fileno())
        try:
            os.replace(temp, target)
        except OSError as exc:  # a folder in the way, ...
            raise InvalidInputError(f"cannot write {path}: {exc.strerror or exc}") from None
    except BaseException:
        with suppress(OSError):
            os.unlink(temp)
        raise


def import_memory(memory: Moved, source: str | Path | Export,
                  allow_forgotten: bool = False) -> dict[str, int]:
    """Merge an export (a path, or one read_export checked) into this memory. The whole file
    is checked before anything is written; then its new preferences, items and entries are
    written in one transaction: all of them, or on any error none.

    Entry vectors are reused when the export's embedder and entry_vector are this memory's;
    otherwise each entry is embedded again as ingest would (by its item, its instruction or
    both). The export's tombstones come along where they mean the same (no key on either
    side, or the same key), and an item forgotten here or there stays out unless
    `allow_forgotten` (which lifts its tombstone). Returns counts added or updated.
    """
    data = source if isinstance(source, Export) else read_export(source)
    memory.sync()
    known = {p.text for p in memory.preferences()}
    new = [t for t in dict.fromkeys(data.preferences.values()) if t not in known]
    if len(known) + len(new) > MAX_PREFERENCES:
        raise InvalidInputError(f"a memory holds at most {MAX_PREFERENCES} preferences")
    new_vectors = memory.embedder.embed(new) if new else []
    dim = memory.embedder.dim
    reuse = (data.header.get("embedder") == memory.embedder.fingerprint
             and data.header.get("dim") == dim
             and data.header.get("entry_vector") == memory.store.entry_vector
             and all("vector_values" in e for e in data.entries))
    sealer = memory.store.sealer
    # an encrypted memory keeps item ids only as keyed hashes: those do not travel, but two
    # items under distinct ids stay two
    hashed = bool(data.header.get("ids_hashed"))
    keys = {old: sealer.content_hash(item["text"], item["external_id"])
            for old, item in data.items.items()}
    carried = data.forgotten if data.header.get("tombstone_probe") == _probe(sealer) else []
    blocked = set() if allow_forgotten else set(carried) | memory.store.forgotten(keys.values())
    skipped = {old for old, key in keys.items() if key in blocked}
    entries_in = [e for e in data.entries if e["item"] not in skipped]
    linked = {e["item"] for e in entries_in}
    items = {keys[old]: (" ".join(item["text"].split()), item["source"],
                         "" if hashed else item["external_id"])
             for old, item in data.items.items() if old in linked}
    if reuse:
        vectors = normalize_rows(np.array([e["vector_values"] for e in entries_in],
                                          np.float32).reshape(-1, dim))
    else:  # embed again by the rule ingest follows for this memory's entry_vector
        item_keys = list(items)
        item_vectors = dict(zip(item_keys, memory.embedder.embed([items[k][0] for k in item_keys])
                                if item_keys else []))
        pending = [(keys[e["item"]], 0, e["instruction"], 0.0) for e in entries_in]
        vectors = BatchIngester(memory)._entry_vectors(pending, item_vectors)
    now = time.time()
    with memory.entry_index.lock:
        store = memory.store
        with store.transaction() as conn:
            stored = store.preference_ids_by_text(conn)  # another writer's too
            for text, vector in zip(new, new_vectors):
                stored[text] = stored.get(text) or store.insert_preference(conn, text, vector)
            by_old = {old: Preference(stored[text], text)
                      for old, text in data.preferences.items()}
            pairs = {(keys[e["item"]], by_old[e["preference"]].id): (e, v)  # the last one wins
                     for e, v in zip(entries_in, vectors)}
            records = [e for e, _ in pairs.values()]
            entries = [NewEntry(key, by_old[e["preference"]].id, stored_form(
                e["instruction"], items[key][0], by_old[e["preference"]]), v, e["confidence"])
                for (key, _), (e, v) in pairs.items()]
            store.add_tombstones(conn, carried)
            ids = store.write_batch(conn, items, entries, [], store.epoch,
                                    unforget=items if allow_forgotten else ())
            conn.executemany(
                "UPDATE entries SET created_at = ?, updated_at = ? WHERE id = ?",
                [(e["created_at"] or now, e["updated_at"] or now, i)
                 for e, i in zip(records, ids)])
        memory.reload_preferences()
        memory.entry_index.remove(ids)  # an entry the memory held already was updated in place
        vectors = np.array([e.embedding for e in entries], np.float32).reshape(-1, dim)
        memory.entry_index.add(np.array(ids, dtype=np.int64), vectors)
        evicted = evict_to_budget(store, memory.entry_index, Budget.load(store))
    return {"preferences": len(memory.preferences()) - len(known), "items": len(items),
            "entries": len(ids), "evicted": len(evicted),
            "reembedded": 0 if reuse else len(entries_in),
            "forgotten": len(carried), "forgotten_not_carried": len(data.forgotten) - len(carried),
            "skipped_forgotten": len(skipped)}
