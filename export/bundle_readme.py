"""What a bundle tells an app developer: README.md (what runs on the device, how an app calls
it), example_app.py (a small app over the bundle) and MEMORY-FORMAT.md (the file format)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from epic_edge.profiles import Profile

README = "README.md"
EXAMPLE_APP = "example_app.py"
MEMORY_FORMAT = "MEMORY-FORMAT.md"
_FORMAT_DOC = Path(__file__).resolve().parent.parent / "docs" / "memory-format.md"

# The example app every bundle carries: tests/test_bundle_apps.py runs it on the linux-cpu
# bundle and on the Jetson bundle's CPU fallback.
EXAMPLE_SOURCE = '''\
"""A small app over this bundle: remember notes, recall for a question, forget by id.

    pip install -r python/requirements.txt python/epic_edge-*.whl
    python example_app.py [MEMORY_FILE]
"""
import sys
from pathlib import Path

from epic_edge import Memory

BUNDLE = Path(__file__).resolve().parent
NOTES = ["Green Leaf is a fully vegan bistro with plant-based dinners and no animal products.",
         "Smith's Steakhouse grills dry-aged beef ribeye and serves lamb chops.",
         "Quarterly estimated tax payments are due on the 15th of April, June and September."]

path = Path(sys.argv[1] if len(sys.argv) > 1 else "example.epic")
with Memory.open(path, BUNDLE / "profile.toml", model_dir=BUNDLE) as memory:
    memory.add_preferences(["I strictly follow a vegan diet and never eat animal products."])
    for note in NOTES:
        filed = memory.remember(note).items[0]  # once forgotten, a note stays out
        where = f"item {filed.item_id}" if filed.kept else f"dropped ({filed.stage})"
        print(f"remember: {where}: {note[:40]}")
        print(f"    why: {filed.reason}")
    question = "What should I eat tonight?"
    hits = memory.retrieve(question)
    for hit in hits:
        print(f"recall: [{hit.score:.2f}] item {hit.item_id}: {hit.item_text[:50]}")
    print(memory.context(question) or "(no memory bears on this question)")
    if hits:
        print(f"forget: item {hits[0].item_id}, entries removed: {memory.forget(hits[0].item_id)}")
'''

_PYTHON_SETUP = """\
Install the bundle's own epic-edge (no package index holds it) into Python 3.11 or newer:

    pip install -r python/requirements.txt python/epic_edge-*.whl
    epic-edge export --check .          # every file's sha256, against manifest.json
    python example_app.py               # remember, recall, forget (below)

An app opens a memory with this folder as its model folder:

    from epic_edge import Memory
    memory = Memory.open("me.epic", "BUNDLE/profile.toml", model_dir="BUNDLE", key=app_key)
    memory.add_preferences(["I strictly follow a vegan diet"])
    filed = memory.remember({"text": note, "id": "note-17"})  # kept where, or dropped why
    hits = memory.retrieve(question)          # each hit: item_id, external_id, score, instruction
    prompt_block = memory.context(question)   # "" when memory should stay out of the prompt
    memory.forget(hits[0].item_id)            # and it stays forgotten when the feed comes again

Agents can use the same memory over MCP: `epic-edge serve --mcp --memory me.epic --profile
BUNDLE/profile.toml --models BUNDLE` (needs the `mcp` package)."""


def _runs(profile: Profile, sizes: dict[str, int]) -> list[str]:
    """Bullets: what runs on the device, by platform."""
    emb, ver = profile.embedder, profile.verifier
    decision = ver.get("model")

    def named(rel: Any) -> str:
        size = sizes.get(str(rel))
        return f"`{rel}`" + (f" ({size / 1e6:.1f} MB)" if size else "")

    common = [f"The learned decision {named(decision)} scores P(Keep) for each item against "
              f"its preferences (kept at >= {ver.get('threshold')}, down to the floor "
              f"{ver.get('floor')} while the memory has room); instructions come from a "
              "template, so no LLM runs.",
              f"Vectors are searched with {profile.index.get('backend')} and everything is "
              "stored in one SQLite file (MEMORY-FORMAT.md). Nothing leaves the device: no "
              "server, no network, no telemetry."]
    platform = profile.platform
    if platform == "android-arm64":
        return [f"On the phone, today: the two ExecuTorch programs, the embedder "
                f"{named(emb.get('model'))} and the decision {named(decision)} (XNNPACK, CPU), "
                "called from the app's own code through ExecuTorch's Android runtime (Kotlin/"
                "Java `org.pytorch.executorch.Module`, or C++ `executorch::extension::Module`). "
                "The app tokenizes with `tokenizer.json` (BERT WordPiece), keeps the memory in "
                "SQLite as MEMORY-FORMAT.md describes, and does the steps below itself.",
                "Not on the phone: the Python package. PyPI has no Android build of numpy, "
                "tokenizers, faiss-cpu or executorch, and ExecuTorch has no Python runtime for "
                "Android, so `python/` and `example_app.py` run this bundle's programs on a "
                "Linux or macOS machine (x86_64 or arm64, `pip install executorch`), e.g. to "
                "build or check a memory the phone then reads. The tests run it so on x86 Linux.",
                "Nothing leaves the phone: no server, no network, no telemetry."]
    if platform == "linux-aarch64-cuda":
        runs = (f"ONNX Runtime embeds with {named(emb.get('model'))} on the providers "
                f"{', '.join(emb.get('providers', []))} and runs the decision on "
                f"{', '.join(ver.get('providers', []))}: each provider this onnxruntime build "
                "lacks is skipped with a warning, so off a Jetson (or without onnxruntime-gpu) "
                "the same app runs on the CPU. The tests run the example app so, on x86 Linux.")
    elif platform == "darwin-arm64":
        runs = (f"Core ML embeds with {named(emb.get('model'))} (compute units "
                f"{emb.get('compute_units', 'CPU_AND_NE')}); the app is the Python package "
                "on macOS 14 or newer on Apple silicon.")
    else:
        runs = (f"ONNX Runtime (CPU) embeds with {named(emb.get('model'))}, in the app's own "
                "Python process, on any machine Python and ONNX Runtime run on.")
    return [runs, *common]


_ANDROID_CALLS = """\
Each program takes `input_ids`, `attention_mask`, `token_type_ids` (int64, shape [1, n], n from
2 to the `max_length` in the program's `model.json`; no padding) and returns one unit-length
vector of `dim` floats. A Kotlin sketch (not compiled or run by the project):

    val embedder = Module.load("$bundle/{embedder}")
    fun embed(ids: LongArray): FloatArray {            // ids from tokenizer.json, [CLS] .. [SEP]
        val shape = longArrayOf(1, ids.size.toLong())
        val out = embedder.forward(EValue.from(Tensor.fromBlob(ids, shape)),
            EValue.from(Tensor.fromBlob(LongArray(ids.size) { 1 }, shape)),
            EValue.from(Tensor.fromBlob(LongArray(ids.size), shape)))
        return out[0].toTensor().dataAsFloatArray
    }

The steps the Python package takes, for an app to take natively (epic_edge/ingest.py and
epic_edge/retrieval.py are the reference):

1. **Ingest an item**: embed it; its preferences with cosine >= `tau` (profile.toml) are its
   candidates (none: drop it). Embed the item and each candidate with the *decision* program:
   P(Keep) = 1 / (1 + exp(-(scale x cosine + bias))), `scale` and `bias` from
   `epic-verifier-minilm/model.json`. Keep it under its best candidate when P(Keep) >=
   `threshold` (or >= `floor` while the memory is under its budget), storing the item, and an
   entry with the *embedder's* item vector and P(Keep) as confidence.
2. **Answer a question**: embed it; steer it toward the preferences (q + sum_p softmax(q.p / T)
   p, T = `hedge`, normalised), score every entry by its dot product with that vector, and take
   the top `k`. The profile's `[retrieval]` lexical, confidence and brevity weights refine the
   order, and its gate withholds memory from a question far from every preference."""


def readme_text(profile: Profile, sizes: dict[str, int]) -> str:
    """The bundle's README.md, given the size of each of its other files."""
    from epic_edge import __version__

    lines = [f"# epic-edge bundle: {profile.name}", "",
             f"{profile.description}. Exported by epic-edge {__version__}; with this README "
             f"{len(sizes) + 2} files, {sum(sizes.values()) / 1e6:.1f} MB (manifest.json lists "
             "each with its sha256).", "", "## What runs on the device", ""]
    lines += [f"- {text}" for text in _runs(profile, sizes)]
    lines += ["", "## How an app calls it", ""]
    lines += [_ANDROID_CALLS.replace("{embedder}", str(profile.embedder.get("model")))
              if profile.platform == "android-arm64" else _PYTHON_SETUP]
    lines += ["", "## The example app", "",
              f"`{EXAMPLE_APP}` opens a memory with this bundle, remembers three notes (one "
              "kept for the vegan preference, two dropped, each saying why), recalls for a "
              "question about dinner and forgets the first hit by its item id; run again, it "
              "shows that a forgotten note stays out."]
    if profile.platform == "android-arm64":
        lines += ["It runs where the Python package runs (see above), not on the phone."]
    return "\n".join(lines) + "\n"


def write_app_files(out_dir: Path, profile: Profile) -> None:
    """README.md, example_app.py and MEMORY-FORMAT.md (from the source tree's docs/) into the
    bundle folder, before its manifest is written."""
    (out_dir / EXAMPLE_APP).write_text(EXAMPLE_SOURCE, encoding="utf-8")
    if _FORMAT_DOC.is_file():
        shutil.copyfile(_FORMAT_DOC, out_dir / MEMORY_FORMAT)
    sizes = {p.relative_to(out_dir).as_posix(): p.stat().st_size for p in out_dir.rglob("*")
             if p.is_file() and p.name not in (README, "manifest.json")}
    (out_dir / README).write_text(readme_text(profile, sizes), encoding="utf-8")
