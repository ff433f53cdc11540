"""Verifier LLM -> MLX 4-bit: GGUF -> HF safetensors (transformers GGUF loader) -> mlx_lm."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from epic_edge.backends.gguf_file import check_gguf, gguf_quantisation
from epic_edge.errors import ModelNotFoundError
from epic_edge.optional import optional_import

MLX_DIR = "smollm2-135m-instruct-mlx-q4"


def _import_mlx_convert() -> Any:
    optional_import("mlx.core", "export", "the MLX export")  # plain `mlx` fails on Linux
    return optional_import("mlx_lm.convert", "export", "the MLX export").convert


def gguf_to_hf(gguf_path: Path, out_dir: Path) -> Path:
    """Dequantise a GGUF into an HF folder (config, safetensors, tokenizer); no hub access."""
    gguf_path = check_gguf(Path(gguf_path))
    optional_import("accelerate", "export", "GGUF -> HF")  # transformers needs both to load
    optional_import("gguf", "export", "GGUF -> HF")  # a GGUF
    transformers = optional_import("transformers", "export", "GGUF -> HF")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    folder, name = str(gguf_path.parent), gguf_path.name
    model = transformers.AutoModelForCausalLM.from_pretrained(
        folder, gguf_file=name, local_files_only=True)
    tokenizer = transformers.AutoTokenizer.from_pretrained(
        folder, gguf_file=name, local_files_only=True)
    out_dir = Path(out_dir)
    # transformers marks a GGUF-loaded model as quantised and refuses to save it; its weights
    # are already dequantised, so copy them into a plain model built from the same config.
    config = model.config
    if hasattr(config, "quantization_config"):
        delattr(config, "quantization_config")
    plain = transformers.AutoModelForCausalLM.from_config(config)
    plain.load_state_dict(model.state_dict())
    plain.save_pretrained(str(out_dir))
    tokenizer.save_pretrained(str(out_dir))
    return out_dir


def export_mlx(gguf_path: Path, out_dir: Path, *, bits: int = 4, group_size: int = 64,
               force: bool = False) -> Path:
    """Write an MLX model folder (bits-bit affine quantisation) converted from `gguf_path`.

    The GGUF is dequantised first, so the MLX weights are a re-quantisation of a 4-bit model,
    not of the original fp16 weights; the manifest says so.
    """
    out_dir = Path(out_dir)
    if (out_dir / "config.json").is_file() and not force:
        return out_dir
    convert = _import_mlx_convert()
    source_quant = gguf_quantisation(gguf_path)
    with tempfile.TemporaryDirectory(prefix="epic-edge-hf-") as tmp:
        hf = gguf_to_hf(gguf_path, Path(tmp) / "hf")
        shutil.rmtree(out_dir, ignore_errors=True)
        out_dir.parent.mkdir(parents=True, exist_ok=True)
        convert(str(hf), mlx_path=str(out_dir), quantize=True, q_bits=int(bits),
                q_group_size=int(group_size))
    if not (out_dir / "config.json").is_file():
        raise ModelNotFoundError(f"mlx_lm.convert wrote no config.json into {out_dir}")
    note = {"source": Path(gguf_path).name, "source_quantisation": source_quant,
            "bits": int(bits), "group_size": int(group_size), "method": "mlx_lm.convert"}
    (out_dir / "epic-edge.json").write_text(json.dumps(note, indent=2) + "\n", encoding="utf-8")
    return out_dir
