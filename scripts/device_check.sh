#!/usr/bin/env bash
# jetson-orin-nano's CUDA path on a machine with an NVIDIA GPU, in a few minutes: ONNX Runtime's
# CUDA provider for the embedder and the learned decision, with parity against the same files on
# the CPU and median latencies, written to bench/results/device_check.json (or $1).
# The project never needs a GPU; CI does not run this. Needs: this checkout's .venv (or python3)
# with epic-edge and its lab (pip install -e bench), onnxruntime-gpu and tokenizers, and the
# models (scripts/setup.sh) in $EPIC_EDGE_MODELS (default ~/.cache/epic-edge/models) or a
# jetson bundle in $MODELS.
#
#   bash scripts/device_check.sh [OUT.json]
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
[ -x "$PY" ] || PY=python3
OUT=${1:-bench/results/device_check.json}
ARGS=(--out "$OUT" --pairs "${PAIRS:-370}" --repeats "${REPEATS:-50}")
[ -n "${MODELS:-}" ] && ARGS+=(--models "$MODELS")
command -v nvidia-smi > /dev/null && nvidia-smi --query-gpu=name,memory.total,driver_version \
    --format=csv,noheader || echo "[device_check] nvidia-smi not found"
"$PY" - <<'PYEOF'
import onnxruntime as ort
print("[device_check] onnxruntime", ort.__version__, ort.get_available_providers())
PYEOF
exec timeout "${LIMIT_S:-540}" "$PY" -m epic_edge_lab.device_check "${ARGS[@]}"
