"""Writes a model whose integer subgraphs the importer must evaluate
(fold_models.py DIR): each computes an index tensor from constants with the
ops FoldConstants.cpp folds, and indexes the input with it (Gather, axis 1),
so the imported module holds it as a dtfm.constant. DIR/expected.txt holds
FileCheck lines with the values NumPy computes for each (the oracle).
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

d = sys.argv[1]
nodes, inits, checks = [], [], []


def const(name, value):
    inits.append(numpy_helper.from_array(np.array(value, np.int64), name))
    return name


def node(op, inputs, output, **attrs):
    nodes.append(helper.make_node(op, inputs, [output], name=output, **attrs))
    return output


cases = []
# Mod with fmod=0 takes the divisor's sign (NumPy's mod), fmod=1 the
# dividend's (C's); shifted into [0, 64).
a, b = np.array([-7, 7, -7, 7, 9]), np.array([3, 3, -3, -3, 4])
m = node("Mod", [const("a", a), const("b", b)], "mod")
cases.append((node("Add", [m, const("ten", [10])], "mod_index"),
              np.mod(a, b) + 10))
f = node("Mod", ["a", "b"], "fmod", fmod=1)
cases.append((node("Add", [f, "ten"], "fmod_index"), np.fmod(a, b) + 10))
# Range, then a Slice with a negative step.
r = node("Range", [const("r0", 0), const("r1", 20), const("r2", 1)], "range")
cases.append((node("Slice", [r, const("s0", [15]), const("s1", [2]),
                             const("s2", [0]), const("s3", [-3])], "sliced"),
              np.arange(20)[15:2:-3]))
# ScatterND into zeros made by ConstantOfShape (int64 value).
zeros = helper.make_node(
    "ConstantOfShape", [const("eight", [8])], ["zeros"], name="zeros",
    value=numpy_helper.from_array(np.array([2], np.int64), "v"))
nodes.append(zeros)
scattered = np.full(8, 2)
scattered[[1, 5]] = [30, 31]
cases.append((node("ScatterND", ["zeros", const("where", [[1], [5]]),
                                 const("what", [30, 31])], "scattered"),
              scattered))
# Where over a comparison, Not and And; an Expand and a Reshape.
p, q = np.array([4, 9, 1, 6]), np.array([5, 2, 8, 6])
less = node("Less", [const("p", p), const("q", q)], "less")
keep = node("And", [less, node("Not", [node("Equal", ["p", "q"], "eq")],
                               "ne")], "keep")
cases.append((node("Where", [keep, "p", "q"], "chosen"),
              np.where((p < q) & (p != q), p, q)))
row = np.array([[3, 1, 4]])
expanded = node("Expand", [const("row", row), const("to", [2, 3])], "grown")
cases.append((node("Reshape", [expanded, const("flat", [-1])], "flat6"),
              np.broadcast_to(row, (2, 3)).reshape(-1)))
# Concat of Shape pieces: the input's shape (1, 64) gathered and combined.
shape = node("Shape", ["x"], "shape")
width = node("Gather", [shape, const("one", [1])], "width")
cases.append((node("Concat", [node("Div", [width, const("two", [2])], "half"),
                              node("Sub", [width, const("three", [3])],
                                   "less3")], "dims", axis=0),
              np.array([32, 61])))

# Trilu (a causal mask's triangle, upper from diagonal 1 and lower), Tile.
square = np.arange(1, 17).reshape(4, 4)
upper = node("Trilu", [const("square", square), const("k1", 1)], "upper")
cases.append((node("Reshape", [upper, "flat"], "upper_flat"),
              np.triu(square, 1).reshape(-1)))
lower = node("Trilu", ["square"], "lower", upper=0)
cases.append((node("Reshape", [lower, "flat"], "lower_flat"),
              np.tril(square).reshape(-1)))
cases.append((node("Tile", [const("tiled", [3, 1, 4]), const("reps", [2])],
                   "tile"), np.tile([3, 1, 4], 2)))
# GreaterOrEqual, LessOrEqual, Xor; Abs, Neg, Min, Max of integers.
ge = node("GreaterOrEqual", ["p", "q"], "ge")
le = node("LessOrEqual", ["p", "q"], "le")
cases.append((node("Where", [node("Xor", [ge, le], "xor"), "p", "q"],
                   "xored"), np.where((p >= q) ^ (p <= q), p, q)))
n = np.array([-3, 5, -7, 2])
low = node("Min", [node("Abs", [const("n", n)], "abs"),
                   node("Neg", ["n"], "neg")], "min")
cases.append((node("Add", [node("Max", [low, const("floor0", [-5])], "max"),
                           "ten"], "min_index"),
              np.maximum(np.minimum(np.abs(n), -n), -5) + 10))
# Float arithmetic that ends in indices (T5's relative-position buckets):
# a float initializer no gradient reaches is a constant the folder reads;
# Log, Div, Floor, Sqrt, Pow, then Cast to int64.
inits.append(numpy_helper.from_array(
    np.array([1, 2, 4, 8, 16, 40], np.float32), "distances"))
inits.append(numpy_helper.from_array(np.array(np.log(2), np.float32), "ln2"))
bucket = node("Floor", [node("Div", [node("Log", ["distances"], "log"),
                                     "ln2"], "log2")], "bucket")
root = node("Sqrt", [node("Pow", ["distances", node(
    "Cast", [const("two_i", 2)], "two_f", to=TensorProto.FLOAT)], "sq")],
    "root")
cases.append((node("Cast", [node("Add", [bucket, root], "sum")],
                   "bucket_index", to=TensorProto.INT64),
              np.floor(np.log(np.array([1, 2, 4, 8, 16, 40], np.float32)) /
                       np.float32(np.log(2))) + np.array([1, 2, 4, 8, 16, 40])))

x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64])
outputs = []
for i, (index, want) in enumerate(cases):
    out = node("Gather", ["x", index], f"picked{i}", axis=1)
    outputs.append(helper.make_tensor_value_info(out, TensorProto.FLOAT,
                                                 [1, len(want)]))
    values = ", ".join(str(int(v)) for v in want)
    checks.append(f"CHECK-DAG: dtfm.constant [{values}]")
graph = helper.make_graph(nodes, "folds", [x], outputs, inits)
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
onnx.checker.check_model(model)
onnx.save(model, os.path.join(d, "folds.onnx"))
with open(os.path.join(d, "expected.txt"), "w") as f:
    f.write("\n".join(checks) + "\n")
