"""The shipped pipeline on one fold of study.py's writer split, with MiniLM or a fine-tuned copy.

The held-out fold's dev personas are run through `epic-edge bench personal` with the keep score
and the question gate refit (`epic-edge-lab train-keep-score`, `train-question-gate`) on
training-fold personas only: all four training writers (`--fit all`), or the two writers a
nested fine-tune did not see (`--fit second`; study.py --nested saves such models). A
model (the wheel's MiniLM, or a fine-tuned copy) is exported to ONNX (fp32, then per-channel
int8) into a copy of the model folder in place of the shipped embedder, named as the shipped
one on purpose, so the profile's calibrated_for lets the refit keep score and gate apply to
it. Since the fine-tuned embedder shipped, the profile's cosine cuts are its own (tau 0.24,
gate 0.28, bound 0.6): a rerun measures every model under them, not under MiniLM's of
results.md.

    .venv/bin/python bench/results/personal_embedder_study/pipeline.py --fold 0 \
        --model /tmp/ft/fold0 --work /tmp/ft/pipe-f0     # or --model minilm
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
from pathlib import Path

from epic_edge.export import minilm_onnx
from epic_edge.export.onnx_int8 import INT8_NAME, quantize_int8
from epic_edge.models import model_dir
from epic_edge.profiles import load_profile
from epic_edge_lab import personal_data
from epic_edge_lab.personal_walls import writer_of

ROOT = Path(__file__).resolve().parents[3]


def folds(fold: int, work: Path, fit: str) -> tuple[Path, Path]:
    """(fit folder, eval folder) of persona files for `fold` (study.py's split)."""
    personas = personal_data.load(None, "dev")
    writers = sorted({writer_of(p.number) for p in personas})
    training = [w for i, w in enumerate(writers) if i % 2 != fold]
    fitting = training if fit == "all" else training[1::2]
    fit_dir, eval_dir = work / "fit", work / "eval"
    for folder in (fit_dir, eval_dir):
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
    for p in personas:
        w = writer_of(p.number)
        target = eval_dir if w not in training else fit_dir if w in fitting else None
        if target:
            shutil.copy(personal_data.default_dir() / f"p{p.number:02d}.json", target)
    return fit_dir, eval_dir


def models_with(model: Path, work: Path) -> Path:
    """A model folder holding `model` exported where the profile expects its embedder."""
    models, weights = work / "models", work / "weights"
    (models / minilm_onnx.FOLDER).mkdir(parents=True, exist_ok=True)
    for entry in model_dir().iterdir():
        if entry.name != minilm_onnx.FOLDER and not (models / entry.name).exists():
            (models / entry.name).symlink_to(entry)
    shutil.rmtree(weights, ignore_errors=True)
    shutil.copytree(model, weights)
    shutil.copy(minilm_onnx.find_minilm_weights() / "tokenizer.json", weights)
    (weights / "model.json").write_text(json.dumps({"name": minilm_onnx.MODEL_NAME}),
                                        encoding="utf-8")  # the profile's calibrated name
    fp32 = minilm_onnx.export_minilm_onnx(models / minilm_onnx.FOLDER, force=True,
                                          weights=weights)
    quantize_int8(fp32, fp32.with_name(INT8_NAME))
    return models


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--fold", type=int, choices=(0, 1), required=True)
    ap.add_argument("--model", required=True, help="'minilm' or a fine-tuned model folder")
    ap.add_argument("--fit", choices=("all", "second"), default="all")
    ap.add_argument("--work", type=Path, required=True)
    args = ap.parse_args()
    fit_dir, eval_dir = folds(args.fold, args.work, args.fit)
    model = minilm_onnx.find_minilm_weights() if args.model == "minilm" else Path(args.model)
    models = models_with(model, args.work)
    bin_dir = ROOT / ".venv" / "bin"
    common = ["--data", str(fit_dir), "--models", str(models)]
    subprocess.run([bin_dir / "epic-edge-lab", "train-keep-score", *common,
                    "--out", args.work / "keep.json"], check=True, stdout=subprocess.DEVNULL)
    subprocess.run([bin_dir / "epic-edge-lab", "train-question-gate", *common,
                    "--out", args.work / "gate.json"], check=True, stdout=subprocess.DEVNULL)
    shipped = load_profile("linux-cpu").path.read_text(encoding="utf-8")
    profile = args.work / "profile.toml"
    profile.write_text("\n".join(
        f'keep_score = "{args.work / "keep.json"}"' if line.startswith("keep_score =") else
        f'question_gate = "{args.work / "gate.json"}"' if line.startswith("question_gate =")
        else line for line in shipped.splitlines()) + "\n", encoding="utf-8")
    subprocess.run([bin_dir / "epic-edge", "bench", "personal", "--data", str(eval_dir),
                    "--profile", str(profile), "--models", str(models),
                    "--json", str(args.work / "personal.json")], check=True,
                   env={**os.environ, "PYTHONWARNINGS": "ignore"})


if __name__ == "__main__":
    main()
