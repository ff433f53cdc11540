"""Per-device export: embedder to ONNX (and later Core ML / ExecuTorch), LLM files to GGUF."""
