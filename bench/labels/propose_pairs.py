"""How the candidate pairs of this set were proposed (labels were then written by hand).

Run: python propose_pairs.py SUMMARIES_JSON OUT_JSON  (needs the linux-cpu models installed).
"""

from __future__ import annotations

import json
import random
import re
import sys

import numpy as np
from merge_labels import clusters, hash_split  # this folder (run as a script)

from epic_edge.backends.onnx_embedder import OnnxEmbedder
from epic_edge.datasets import load_prefwiki
from epic_edge.export.minilm_onnx import export_base_onnx


def lead(extract: str, words: int = 100) -> str:
    out: list[str] = []
    for sentence in re.split(r"(?<=[.!?])\s+", extract.strip()):
        if out and len(" ".join([*out, sentence]).split()) > words:
            break
        out.append(sentence)
    return " ".join(out)


def main(summaries: str, out_path: str) -> None:
    wiki = json.load(open(summaries, encoding="utf-8"))
    titles = [t for t in sorted(wiki) if len(lead(wiki[t]["extract"]).split()) >= 15]
    texts = [lead(wiki[t]["extract"]) for t in titles]
    m = export_base_onnx().parent
    emb = OnnxEmbedder(m / "model.onnx", m / "tokenizer.json", max_length=256)
    prefs = list(dict.fromkeys(b["preference"] for p in load_prefwiki()
                               for b in p["preference_blocks"]))
    pv, xv = emb.embed(prefs), emb.embed(texts)
    split = {}  # near-duplicate preferences (cos >= 0.75) share a split
    for members in clusters(prefs, pv):
        for k in members:
            split[prefs[k]] = hash_split([prefs[k] for k in members])
    rng, scores, pairs = random.Random(7), pv @ xv.T, []
    for i, pref in enumerate(prefs):
        order = np.argsort(-scores[i])
        for j in (int(order[rng.randrange(0, 3)]), int(order[rng.randrange(6, 40)])):
            pairs.append({"id": len(pairs), "preference": pref, "title": titles[j],
                          "passage": texts[j], "topic": wiki[titles[j]]["topic"],
                          "cosine": round(float(scores[i, j]), 4), "split": split[pref]})
    json.dump(pairs, open(out_path, "w", encoding="utf-8"), indent=0)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
