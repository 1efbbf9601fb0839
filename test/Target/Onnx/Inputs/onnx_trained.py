"""Checks an ONNX file dtfm-translate --export-onnx wrote against the one the
model was imported from and the trained weights (onnx and numpy, no dtfm
code): the same graph (nodes, inputs, outputs, opsets), every initializer
the weights name holding the trained values -- transposed back for a Gemm
that reads it with transB -- and every other one unchanged.

  check ORIGINAL TRAINED WEIGHTS
"""
import os
import sys

import numpy as np
import onnx
from onnx import numpy_helper

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "..", "..", "python"))
from dtfm_oracle import read_safetensors  # noqa: E402


def main():
    original, trained = onnx.load(sys.argv[2]), onnx.load(sys.argv[3])
    weights, _ = read_safetensors(sys.argv[4])
    a, b = original.graph, trained.graph
    assert [n.SerializeToString() for n in a.node] == \
        [n.SerializeToString() for n in b.node], "the nodes differ"
    assert list(a.input) == list(b.input) and list(a.output) == list(b.output)
    assert list(original.opset_import) == list(trained.opset_import)
    transposed = {n.input[1] for n in a.node if n.op_type == "Gemm" and any(
        at.name == "transB" and at.i == 1 for at in n.attribute)}
    new = {t.name: numpy_helper.to_array(t) for t in b.initializer}
    assert [t.name for t in a.initializer] == [t.name for t in b.initializer]
    changed = flipped = same = 0
    for t in a.initializer:
        if t.name in weights:
            want = weights[t.name]
            if t.name in transposed:
                want, flipped = want.T, flipped + 1
            assert new[t.name].dtype == np.float32, t.name
            assert np.array_equal(new[t.name], want), t.name
            changed += 1
        else:
            assert np.array_equal(new[t.name], numpy_helper.to_array(t)), \
                t.name
            same += 1
    print(f"graph unchanged ({len(a.node)} nodes); {changed} initializers "
          f"trained ({flipped} transposed back), {same} unchanged")


main()
