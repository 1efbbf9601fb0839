"""CumSum in the variants PyTorch does not export (exclusive, reverse), with
a NumPy oracle of ONNX's definition:

  cumsum_variants.py export DIR   DIR/csER.onnx for E (exclusive) and R
                                  (reverse) in {0, 1}, DIR/csER.bin (inputs
                                  and labels for one step), DIR/csER.txt (the
                                  loss NumPy computes)
  cumsum_variants.py check DIR NAME LOG
                                  the loss dtfm-run printed equals it

Each graph: x [3, 5] times a weight [4, 5] transposed (Gemm), CumSum along
axis 1, cross-entropy against the labels.
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "..", "..", "python"))
from dtfm_oracle import logged_losses, write_tensors  # noqa: E402


def cumsum(h, exclusive, reverse):
    """ONNX's CumSum along axis 1, element by element."""
    out = np.zeros_like(h)
    n = h.shape[1]
    for j in range(n):
        for i in range(n):
            before = i > j if reverse else i < j
            if before or (not exclusive and i == j):
                out[:, j] += h[:, i]
    return out


def export(d):
    rng = np.random.default_rng(0)
    for exclusive in (0, 1):
        for reverse in (0, 1):
            name = f"cs{exclusive}{reverse}"
            x = rng.standard_normal((3, 5)).astype(np.float32)
            w = rng.standard_normal((4, 5)).astype(np.float32)
            labels = rng.integers(0, 4, (3,)).astype(np.int64)
            nodes = [helper.make_node("Gemm", ["x", "w"], ["h"], transB=1),
                     helper.make_node("CumSum", ["h", "axis"], ["c"],
                                      exclusive=exclusive, reverse=reverse)]
            graph = helper.make_graph(
                nodes, name,
                [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                               [3, 5])],
                [helper.make_tensor_value_info("c", TensorProto.FLOAT,
                                               [3, 4])],
                [numpy_helper.from_array(w, "w"),
                 numpy_helper.from_array(np.array(1, dtype=np.int64),
                                         "axis")])
            onnx.save(helper.make_model(
                graph, opset_imports=[helper.make_opsetid("", 14)]),
                f"{d}/{name}.onnx")
            write_tensors(f"{d}/{name}.bin", {"x@0": x, "labels@0": labels})
            c = cumsum(x.astype(np.float64) @ w.T.astype(np.float64),
                       exclusive, reverse)
            peak = c.max(axis=1, keepdims=True)
            lse = np.log(np.exp(c - peak).sum(axis=1)) + peak[:, 0]
            loss = np.mean(lse - c[np.arange(3), labels])
            with open(f"{d}/{name}.txt", "w") as f:
                f.write(f"{loss:.10f}\n")


def check(d, name, log):
    want = float(open(f"{d}/{name}.txt").read())
    got = logged_losses(log)[1]
    if abs(got - want) > 1e-5 * max(1.0, abs(want)):
        sys.exit(f"{name}: loss dtfm {got:.6f} numpy {want:.6f}")
    print(f"{name}: loss dtfm {got:.6f} numpy {want:.6f}")


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "export":
        export(sys.argv[2])
    elif len(sys.argv) == 5 and sys.argv[1] == "check":
        check(sys.argv[2], sys.argv[3], sys.argv[4])
    else:
        raise SystemExit(__doc__)
