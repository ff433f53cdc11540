"""The int8 embedder's integer sums are exact on every CPU (export/onnx_int8.py, WEIGHT_STORAGE)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
pytest.importorskip("onnxruntime.quantization")

from epic_edge.export.onnx_int8 import quantize_int8, unsigned_weights  # noqa: E402

K, N = 64, 4


def _matmul_model(path: Path, weights: np.ndarray) -> Path:
    """X[1, K] @ W[K, N] in fp32."""
    from onnx import TensorProto, helper, numpy_helper

    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"])], "matmul",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, K])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, N])],
        [numpy_helper.from_array(weights.astype(np.float32), "w")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.save(model, str(path))
    return path


def _run(path: Path, x: np.ndarray) -> np.ndarray:
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return session.run(None, {"x": x.astype(np.float32)})[0]


@pytest.mark.parametrize("per_channel", [True, False])
def test_largest_products_do_not_saturate(tmp_path: Path, per_channel: bool) -> None:
    """Every activation and weight at the top of its range: each pair of u8 x s8 products
    (255 x 127 twice) overflows 16 bits, which ONNX Runtime's AVX2 kernels without VNNI
    saturate (the output came out near half on such a CPU). Stored as uint8, the sums are exact."""
    weights = np.tile(np.linspace(0.5, 2.0, N), (K, 1))
    fp32 = _matmul_model(tmp_path / "m.onnx", weights)
    int8 = quantize_int8(fp32, tmp_path / "m.int8.onnx", per_channel=per_channel)
    x = np.ones((1, K))
    want = _run(fp32, x)
    got = _run(int8, x)
    np.testing.assert_allclose(got, want, rtol=0.02)
    weight_types = {t.data_type for t in onnx.load(str(int8)).graph.initializer
                    if t.data_type in (onnx.TensorProto.INT8, onnx.TensorProto.UINT8)}
    assert weight_types == {onnx.TensorProto.UINT8}


def test_shifted_weights_give_the_same_integers(tmp_path: Path) -> None:
    """Shifting int8 weights to uint8 changes no output where neither can saturate: the
    activations are non-negative (zero point 0) and every other one is 0, so no two products
    are summed in 16 bits."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    rng = np.random.default_rng(0)
    fp32 = _matmul_model(tmp_path / "m.onnx", rng.normal(size=(K, N)))
    signed = tmp_path / "signed.onnx"
    quantize_dynamic(str(fp32), str(signed), per_channel=True, weight_type=QuantType.QInt8)
    shifted = tmp_path / "shifted.onnx"
    shifted.write_bytes(signed.read_bytes())
    assert unsigned_weights(shifted) == 2  # the weight and its zero points
    x = rng.uniform(0.0, 1.0, size=(1, K))
    x[:, 1::2] = 0.0
    np.testing.assert_array_equal(_run(shifted, x), _run(signed, x))
    assert unsigned_weights(shifted) == 0  # already stored as uint8
