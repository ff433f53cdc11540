"""Moving a whole memory between devices: export to JSONL, import (re-embedding if needed)."""

from __future__ import annotations

import base64
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from epic_edge.errors import InvalidInputError
from epic_edge.ingest import BatchIngester
from epic_edge.instructions import read_form, stored_form
from epic_edge.maintenance import Budget, evict_to_budget
from epic_edge.stages import normalize_rows
from epic_edge.store_writes import NewEntry
from epic_edge.types import Preference
from epic_edge.vectors import decode

if TYPE_CHECKING:
    from epic_edge.memory import Memory

FORMAT = "epic-edge-memory"
VERSION = 1


def _vector_text(vector: np.ndarray) -> str:
    return base64.b64encode(np.asarray(vector, "<f4").tobytes()).decode("ascii")


def _vector_from(text: str, dim: int, where: str) -> np.ndarray:
    try:
        raw = base64.b64decode(text, validate=True)
    except (ValueError, TypeError):
        raise InvalidInputError(f"{where}: \"vector\" is not base64") from None
    if len(raw) != 4 * dim:
        raise InvalidInputError(f"{where}: \"vector\" has {len(raw) // 4} values, not {dim}")
    return np.frombuffer(raw, "<f4").astype(np.float32)


def export_memory(memory: Memory, path: str | Path) -> dict[str, int]:
    """Write preferences, items and entries (with confidences, times and vectors) as JSONL.

    The file holds the memory's text in clear (an encrypted memory exports only when opened
    with its key): it is created readable by the owner only. Returns counts written.
    """
    memory.sync()
    store, dim = memory.store, memory.embedder.dim
    o = store.sealer.open
    path = Path(path)
    header = {"format": FORMAT, "version": VERSION, "embedder": memory.embedder.fingerprint,
              "dim": dim, "entry_vector": store.entry_vector, "tau": memory.tau,
              "ids_hashed": store.sealer.enabled, "exported_at": time.time()}
    prefs = store.query("SELECT id, text, created_at FROM preferences WHERE active=1 ORDER BY id")
    items = store.query("SELECT id, text, source, external_id, created_at FROM items ORDER BY id")
    entries = store.query("SELECT item_id, preference_id, instruction, confidence, created_at, "
                          "updated_at, embedding FROM entries ORDER BY item_id, id")
    by_item: dict[int, list[tuple]] = {}
    for row in entries:
        by_item.setdefault(int(row[0]), []).append(row)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        def line(record: dict[str, Any]) -> None:
            out.write(json.dumps(record, ensure_ascii=False) + "\n")

        line(header)
        by_pref = {}
        for pid, text, created in prefs:
            by_pref[pid] = Preference(pid, o(text))
            line({"kind": "preference", "id": pid, "text": o(text), "created_at": created})
        for item_id, text, source, external_id, created in items:
            item_text = o(text)
            line({"kind": "item", "id": item_id, "text": item_text, "source": o(source),
                  "external_id": external_id, "created_at": created})
            for _, pid, instruction, confidence, e_created, updated, blob in by_item.get(
                    int(item_id), []):
                line({"kind": "entry", "item": item_id, "preference": pid,
                      "instruction": read_form(o(instruction), item_text, by_pref[pid]),
                      "confidence": confidence,
                      "created_at": e_created, "updated_at": updated,
                      "vector": _vector_text(decode(store.open_vector(blob), dim,
                                                    store.vector_format))})
    return {"preferences": len(prefs), "items": len(items), "entries": len(entries)}


@dataclass
class _Export:
    """A parsed, validated export file."""

    header: dict[str, Any]
    preferences: dict[int, str]
    items: dict[int, dict[str, Any]]
    entries: list[dict[str, Any]]


def _field(record: dict[str, Any], name: str, kinds: type | tuple[type, ...], where: str) -> Any:
    value = record.get(name)
    if isinstance(value, bool) or not isinstance(value, kinds):
        raise InvalidInputError(f"{where}: field {name!r} is missing or of the wrong type")
    return value


def read_export(path: str | Path) -> _Export:
    """Parse and check a whole export file before anything is written."""
    path = Path(path)
    if not path.is_file():
        raise InvalidInputError(f"{path} does not exist or is not a file")
    parsed = _Export({}, {}, {}, [])
    with open(path, encoding="utf-8", errors="strict") as fh:
        for lineno, text in enumerate(fh, start=1):
            where = f"{path}, line {lineno}"
            if not text.strip():
                continue
            try:
                record = json.loads(text)
            except json.JSONDecodeError as exc:
                raise InvalidInputError(f"{where}: not valid JSON ({exc.msg})") from None
            if not isinstance(record, dict):
                raise InvalidInputError(f"{where}: expected a JSON object")
            if lineno == 1:
                if record.get("format") != FORMAT or record.get("version") != VERSION:
                    raise InvalidInputError(f"{path} is not an epic-edge memory export "
                                            f"(format {FORMAT!r}, version {VERSION})")
                parsed.header = record
                continue
            kind = record.get("kind")
            if kind == "preference":
                parsed.preferences[_field(record, "id", int, where)] = _field(
                    record, "text", str, where)
            elif kind == "item":
                if not _field(record, "text", str, where).strip():
                    raise InvalidInputError(f"{where}: \"text\" is empty")
                parsed.items[_field(record, "id", int, where)] = record
            elif kind == "entry":
                for name, kinds in (("item", int), ("preference", int), ("instruction", str),
                                    ("confidence", (int, float))):
                    _field(record, name, kinds, where)
                for name in ("created_at", "updated_at"):
                    if record.get(name) is not None:
                        _field(record, name, (int, float), where)
                if record["item"] not in parsed.items:
                    raise InvalidInputError(f"{where}: entry of an item not listed before it")
                if record["preference"] not in parsed.preferences:
                    raise InvalidInputError(f"{where}: entry of an unknown preference")
                record["where"] = where
                parsed.entries.append(record)
            else:
                raise InvalidInputError(f"{where}: unknown kind {kind!r}")
    if not parsed.header:
        raise InvalidInputError(f"{path} is empty")
    return parsed


def import_memory(memory: Memory, path: str | Path) -> dict[str, int]:
    """Merge an export into this memory. The whole file is checked before anything is
    written; then the new preferences are added (one transaction) and the items and entries
    (a second one).

    Entry vectors are reused when the export's embedder and entry_vector are this memory's;
    otherwise each entry is embedded again as ingest would (by its item, its instruction or
    both). Returns counts added or updated.
    """
    data = read_export(path)
    memory.sync()
    before = len(memory.preferences())
    cleaned = {old: " ".join(t.split()) for old, t in data.preferences.items()}
    memory.add_preferences(list(dict.fromkeys(cleaned.values())))  # existing ones are kept
    known = {p.text: p.id for p in memory.preferences()}
    pref_ids = {old: known[text] for old, text in cleaned.items()}
    dim = memory.embedder.dim
    reuse = (data.header.get("embedder") == memory.embedder.fingerprint
             and data.header.get("dim") == dim
             and data.header.get("entry_vector") == memory.store.entry_vector
             and all(isinstance(e.get("vector"), str) for e in data.entries))
    sealer = memory.store.sealer
    keys = {old: sealer.content_hash(item["text"]) for old, item in data.items.items()}
    linked = {e["item"] for e in data.entries}
    # an encrypted memory keeps item ids only as keyed hashes: those do not travel
    hashed = bool(data.header.get("ids_hashed"))
    items = {keys[old]: (" ".join(item["text"].split()), str(item.get("source") or ""),
                         "" if hashed else str(item.get("external_id") or ""))
             for old, item in data.items.items() if old in linked}
    if reuse:
        vectors = normalize_rows(np.array(
            [_vector_from(e["vector"], dim, e["where"]) for e in data.entries], np.float32
        ).reshape(-1, dim))
    else:  # embed again by the rule ingest follows for this memory's entry_vector
        item_keys = list(items)
        item_vectors = dict(zip(item_keys, memory.embedder.embed([items[k][0] for k in item_keys])
                                if item_keys else []))
        pending = [(keys[e["item"]], 0, e["instruction"], 0.0) for e in data.entries]
        vectors = BatchIngester(memory)._entry_vectors(pending, item_vectors)
    pairs = {(keys[e["item"]], pref_ids[e["preference"]]): (e, v)  # the last of a pair wins
             for e, v in zip(data.entries, vectors)}
    records = [e for e, _ in pairs.values()]
    by_pref = {p.id: p for p in memory.preferences()}
    entries = [NewEntry(key, pid, stored_form(e["instruction"], items[key][0], by_pref[pid]), v,
                        float(min(max(e["confidence"], 0.0), 1.0)))
               for (key, pid), (e, v) in pairs.items()]
    with memory.entry_index.lock:
        store = memory.store
        with store.transaction() as conn:
            ids = store.write_batch(conn, items, entries, [], store.epoch)
            conn.executemany(
                "UPDATE entries SET created_at = ?, updated_at = ? WHERE id = ?",
                [(float(e.get("created_at") or time.time()),
                  float(e.get("updated_at") or time.time()), i)
                 for e, i in zip(records, ids)])
        memory.entry_index.remove(ids)  # an entry the memory held already was updated in place
        vectors = np.array([e.embedding for e in entries], np.float32).reshape(-1, dim)
        memory.entry_index.add(np.array(ids, dtype=np.int64), vectors)
        evicted = evict_to_budget(store, memory.entry_index, Budget.load(store))
    return {"preferences": len(known) - before, "items": len(items), "entries": len(ids),
            "evicted": len(evicted), "reembedded": 0 if reuse else len(data.entries)}
