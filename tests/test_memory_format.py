"""docs/memory-format.md is enough to read a memory: a reader built from that page alone (sqlite3,
zlib, hashlib, AES-GCM) gets back what the package stored."""

from __future__ import annotations

import hashlib
import hmac
import sqlite3
import zlib
from pathlib import Path

import numpy as np
import pytest

from epic_edge.backends.numpy_index import NumpyIndex
from epic_edge.memory import Memory
from fakes import BagOfWordsEmbedder, KeywordVerifier

ROOT = Path(__file__).resolve().parent.parent
DICTIONARY = ROOT / "epic_edge" / "data" / "text_dictionary.txt"
VEGAN = "I follow a vegan diet."
ITEMS = [{"text": "A vegan bistro serves lentil stew, roasted squash and oat milk desserts "
                  "every evening in the old town.", "id": "n1"},
         {"text": "Vegan   cheese\nis made of cashews.", "id": "n2"}]


def read_text(value, opener=None):
    """A stored text value as the page describes it: TEXT, or FF 01 + raw deflate."""
    if opener is not None:
        value = opener(value)
    if isinstance(value, str):
        return value
    if value[:2] == b"\xff\x01":
        inflate = zlib.decompressobj(-15, zdict=DICTIONARY.read_bytes())
        return (inflate.decompress(value[2:]) + inflate.flush()).decode()
    return value.decode()


def read_vector(blob, fmt, dim):
    if fmt == "float32":
        return np.frombuffer(blob, "<f4")
    if fmt == "float16":
        v = np.frombuffer(blob, "<f2").astype(np.float32)
    else:
        v = np.frombuffer(blob[4:], np.int8).astype(np.float32) * np.frombuffer(blob[:4], "<f4")
    return v / np.linalg.norm(v)


def template(item, preference):
    words = item.split()
    lead = " ".join(words[:16]) + (" ..." if len(words) > 16 else "")
    return (f'When a question touches the preference "{preference.strip().rstrip(".")}", read '
            f"this passage on {lead}: use what agrees with the preference and flag what "
            "conflicts with it.")


@pytest.mark.parametrize("key", [None, bytes(range(32))], ids=["plain", "encrypted"])
def test_a_reader_built_from_the_page_gets_back_what_was_stored(tmp_path, key):
    embedder = BagOfWordsEmbedder()
    path = tmp_path / "m.epic"
    with Memory.open(path, embedder=embedder, verifier=KeywordVerifier({VEGAN: ["vegan"]}),
                     index=NumpyIndex(embedder.dim), tau=0.1, key=key,
                     vector_format="int8") as memory:
        memory.add_preference(VEGAN)
        memory.ingest(ITEMS)
        expected = {e.entry_id: e for e in memory.entries()}
        memory.forget("n2")
        vectors = dict(zip(*memory.store.entry_vectors(embedder.dim)))
    opener = None
    if key is not None:
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM

        def opener(blob):
            return AESGCM(key).decrypt(blob[:12], blob[12:], None)

    con = sqlite3.connect(path)
    meta = dict(con.execute("SELECT key, value FROM meta"))
    assert meta["schema_version"] == "6" and meta["vector_format"] == "int8"
    token = hmac.new(key, b"epic-edge key check v1", hashlib.sha256).hexdigest() if key else ""
    assert meta["key_check"] == token
    rows = con.execute("SELECT e.id, i.text, i.external_id, i.content_hash, p.text, "
                       "e.instruction, e.embedding FROM entries e JOIN items i ON i.id = "
                       "e.item_id JOIN preferences p ON p.id = e.preference_id").fetchall()
    assert len(rows) == 1
    entry_id, text, external, content_hash, preference, instruction, blob = rows[0]
    want = expected[entry_id]
    assert read_text(text, opener) == want.item_text and read_text(preference, opener) == VEGAN
    assert (read_text(instruction, opener) or template(want.item_text, VEGAN)) == (
        want.instruction)
    raw = (opener(blob) if opener else blob)
    assert np.allclose(read_vector(raw, "int8", int(meta["dim"])), vectors[entry_id])
    def hashed(text, item_id):  # the page: id-prefixed when the item has an id
        data = b"item-id\0" + item_id.encode() + b"\0" + " ".join(text.split()).encode()
        return (hmac.new(key, data, hashlib.sha256) if key
                else hashlib.sha256(data)).digest()[:16]

    assert bytes(content_hash) == hashed(want.item_text, "n1")
    ids = hmac.new(key, b"item-id\0n1", hashlib.sha256).hexdigest()[:32] if key else "n1"
    assert external == ids
    tomb = hashed(ITEMS[1]["text"], "n2")
    assert [bytes(r[0]) for r in con.execute("SELECT hash FROM forgotten")] == [tomb]
    con.close()
