"""Per-device export: embedder to ONNX / Core ML / ExecuTorch, LLM to GGUF / MLX, bundles."""
