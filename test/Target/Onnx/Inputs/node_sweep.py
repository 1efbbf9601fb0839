"""Imports every single-op model of Debian's libonnx-testdata whose op type
dtfm-translate supports and prints how many import and verify.

  node_sweep.py DTFM_TRANSLATE DIR

A model of a supported op type may use a variant the dialect lacks (a 1-D
or 3-D convolution, integer tensors, a softmax over another axis, ...): the
importer must then refuse it with one diagnostic line naming the model's
file, never crash. Every model gets one line in DIR/sweep.txt.
"""
import glob
import os
import subprocess
import sys

import onnx

SUPPORTED = {"Add", "AveragePool", "BatchNormalization", "Constant", "Conv",
             "Div", "Mul", "Sub", "Squeeze", "Unsqueeze", "Cast",
             "Transpose", "Sqrt", "Tanh", "Erf", "Exp", "Sigmoid", "Clip", "Pow",
             "Expand", "HardSigmoid", "HardSwish",
             "Abs", "Log", "Max", "Min", "PRelu", "ReduceMax", "ReduceMin",
             "ConvTranspose", "CumSum", "Trilu", "Tile",
             "ReduceMean", "ReduceSum", "ReduceL2", "Pad", "Einsum",
             "ScatterND",
             "Neg", "Concat", "Slice", "Split", "Gather", "Where",
             "Dropout", "Flatten", "Gemm", "GlobalAveragePool", "Identity",
             "MatMul", "MaxPool", "Relu", "Reshape", "Softmax"}

tool, out = sys.argv[1], sys.argv[2]
models = sorted(glob.glob("/usr/share/libonnx-testdata/data/node/*/model.onnx"))
total = len(models)
candidates = imported = refused = 0
lines = []
for path in models:
    ops = {n.op_type for n in onnx.load(path).graph.node}
    if not ops <= SUPPORTED:
        continue
    candidates += 1
    name = os.path.basename(os.path.dirname(path))
    run = subprocess.run([tool, "--import-onnx", path, "-o",
                          f"{out}/{name}.mlir"], capture_output=True,
                         text=True, timeout=60)
    err = run.stderr.strip()
    if run.returncode == 0:
        imported += 1
        lines.append(f"{name}: imported")
    elif run.returncode == 1 and err.count("\n") == 0 and path in err:
        refused += 1
        lines.append(f"{name}: refused: {err}")
    else:
        sys.exit(f"{name}: exit {run.returncode}, stderr:\n{err}")
open(f"{out}/sweep.txt", "w").write("\n".join(lines) + "\n")
print(f"{total} single-op models; {candidates} of supported op types: "
      f"{imported} import and verify, {refused} refused with one line")
