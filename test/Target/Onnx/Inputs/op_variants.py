"""Node variants PyTorch 1.13 does not export, with a NumPy oracle of ONNX's
definitions (onnx/docs/Operators.md):

  op_variants.py export DIR   DIR/NAME.onnx, DIR/NAME.bin (inputs and labels
                              for one step) and DIR/NAME.txt (the loss NumPy
                              computes) for every variant
  op_variants.py check DIR NAME LOG
                              the loss dtfm-run printed equals it

  csER        CumSum along axis 1, exclusive E and reverse R in {0, 1}
  slice-back  Slice with a negative step (x[:, -1::-2]) and a positive one
              on another axis

Each graph: x [3, 5] times a weight [W, 5] transposed (Gemm), the node
(slice-back: then a Gemm to 4 classes), cross-entropy against the labels.
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


def loss_of(logits, labels):
    peak = logits.max(axis=1, keepdims=True)
    lse = np.log(np.exp(logits - peak).sum(axis=1)) + peak[:, 0]
    return np.mean(lse - logits[np.arange(len(labels)), labels])


def variants():
    """name: (nodes after the Gemm to h [3, width], width, extra
    initializers, opset, NumPy of h -> logits [3, 4])."""
    out = {}
    for exclusive in (0, 1):
        for reverse in (0, 1):
            out[f"cs{exclusive}{reverse}"] = (
                [helper.make_node("CumSum", ["h", "axis"], ["logits"],
                                  exclusive=exclusive, reverse=reverse)],
                4, [numpy_helper.from_array(np.array(1, np.int64), "axis")],
                14, lambda h, e=exclusive, r=reverse: cumsum(h, e, r))
    # Columns 5, 3, 1 of 6 (x[:, -1::-2]) of rows 0 and 2 (rows ::2), then 4
    # classes.
    head3 = np.random.default_rng(2).standard_normal((4, 3)).astype(
        np.float32)
    ints = [numpy_helper.from_array(np.array(v, np.int64), n) for n, v in
            (("starts", [-1, 0]), ("ends", [-(2 ** 62), 3]),
             ("axes", [1, 0]), ("steps", [-2, 2]))]
    out["slice-back"] = (
        [helper.make_node("Slice", ["h", "starts", "ends", "axes", "steps"],
                          ["picked"]),
         helper.make_node("Gemm", ["picked", "head"], ["logits"], transB=1)],
        6, ints + [numpy_helper.from_array(head3, "head")], 14,
        lambda h: h[::2, -1::-2] @ head3.T)
    return out


def export(d):
    rng = np.random.default_rng(0)
    for name, (nodes, width, inits, opset, oracle) in variants().items():
        x = rng.standard_normal((3, 5)).astype(np.float32)
        w = rng.standard_normal((width, 5)).astype(np.float32)
        rows = 2 if name == "slice-back" else 3
        labels = rng.integers(0, 4, (rows,)).astype(np.int64)
        graph = helper.make_graph(
            [helper.make_node("Gemm", ["x", "w"], ["h"], transB=1)] + nodes,
            name,
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 5])],
            [helper.make_tensor_value_info("logits", TensorProto.FLOAT,
                                           [rows, 4])],
            [numpy_helper.from_array(w, "w")] + inits)
        onnx.save(helper.make_model(
            graph, opset_imports=[helper.make_opsetid("", opset)]),
            f"{d}/{name}.onnx")
        write_tensors(f"{d}/{name}.bin", {"x@0": x, "labels@0": labels})
        logits = oracle(x.astype(np.float64) @ w.T.astype(np.float64))
        with open(f"{d}/{name}.txt", "w") as f:
            f.write(f"{loss_of(logits, labels):.10f}\n")


def check(d, name, log):
    want = float(open(f"{d}/{name}.txt").read())
    got = logged_losses(log)[1]
    line = f"{name}: loss dtfm {got:.6f} numpy {want:.6f}"
    if abs(got - want) > 1e-5 * max(1.0, abs(want)):
        sys.exit(line)
    print(line)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "export":
        export(sys.argv[2])
    elif len(sys.argv) == 5 and sys.argv[1] == "check":
        check(sys.argv[2], sys.argv[3], sys.argv[4])
    else:
        raise SystemExit(__doc__)
