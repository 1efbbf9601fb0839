"""Writes ONNX models that are hostile in one way each (for
import-onnx-hostile.test): hostile_models.py DIR.

  zero-strides.onnx    Conv with strides [0, 0] (ONNX's own shape inference
                       divides by them)
  negative-dims.onnx   an initializer with dims [-1, 8]
  huge-dims.onnx       a MatMul weight with dims [8, 2^40] and 16 bytes of
                       data (2^43 floats the importer must not allocate)
  dynamic.onnx         a valid model whose input's batch is dynamic
  huge-fill.onnx       a ConstantOfShape of 10^10 elements added to the input
                       (the importer folds shape computations: it must refuse
                       to make that constant)
  bad-gather.onnx      the input's shape gathered at index 7 (from a Range)
                       of 2 for a Reshape's target
  overflow.onnx        a Reshape's target 2^62 (from a Range) times 4
  reflect-pad.onnx     a Pad in reflect mode (only constant padding maps)
  crop-pad.onnx        a Pad with a negative pad (cropping)
  scatter-twice.onnx   a ScatterND of float data writing one row twice
  lstm-lengths.onnx    an LSTM given sequence lengths
  rnn-sigmoid.onnx     an RNN whose activation is Sigmoid
  lstm-long.onnx       an LSTM over 10^5 steps (each unrolled step is ops)
  ln-axis.onnx         a LayerNormalization over the last two axes
  gru-shapes.onnx      a GRU whose R does not match hidden_size
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def conv_model(strides, weight):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 4, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1, 2, 2])
    node = helper.make_node("Conv", ["x", "w"], ["y"], name="conv1",
                            kernel_shape=[3, 3], strides=strides)
    graph = helper.make_graph([node], "hostile", [x], [y], [weight])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])


def raw_tensor(name, dims):
    t = TensorProto()
    t.name = name
    t.data_type = TensorProto.FLOAT
    t.dims.extend(dims)
    return t


def save(graph, path, opset=14):
    onnx.save(helper.make_model(graph,
                                opset_imports=[helper.make_opsetid("", opset)]),
              path)


def int64s(**values):
    """int64 initializers, by name."""
    return [numpy_helper.from_array(np.array(v, np.int64), n)
            for n, v in values.items()]


def main():
    d = sys.argv[1]
    good = numpy_helper.from_array(np.ones((1, 1, 3, 3), np.float32), "w")
    onnx.save(conv_model([0, 0], good), os.path.join(d, "zero-strides.onnx"))
    onnx.save(conv_model([1, 1], raw_tensor("w", [-1, 8])),
              os.path.join(d, "negative-dims.onnx"))
    huge = raw_tensor("w", [8, 2 ** 40])
    huge.raw_data = bytes(16)
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2 ** 40])
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])],
                              "huge", [x], [y], [huge])
    save(graph, os.path.join(d, "huge-dims.onnx"))
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 8])
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])],
                              "dynamic", [x], [y])
    save(graph, os.path.join(d, "dynamic.onnx"))
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [100000, 100000])
    graph = helper.make_graph(
        [helper.make_node("ConstantOfShape", ["size"], ["fill"], name="fill"),
         helper.make_node("Add", ["x", "fill"], ["y"])],
        "huge-fill", [x], [y], int64s(size=[100000, 100000]))
    save(graph, os.path.join(d, "huge-fill.onnx"))
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [None])
    # (The index comes from a Range: ONNX's own shape inference does not
    # evaluate it, so the importer's folding is what meets it.)
    bounds = int64s(start=7, limit=8, delta=1)
    graph = helper.make_graph(
        [helper.make_node("Shape", ["x"], ["shape"]),
         helper.make_node("Range", ["start", "limit", "delta"], ["index"]),
         helper.make_node("Gather", ["shape", "index"], ["dims"],
                          name="pick"),
         helper.make_node("Reshape", ["x", "dims"], ["y"])],
        "bad-gather", [x], [y], bounds)
    save(graph, os.path.join(d, "bad-gather.onnx"))
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [None])
    bounds = int64s(start=2 ** 62, limit=2 ** 62 + 1, delta=1, four=[4])
    graph = helper.make_graph(
        [helper.make_node("Range", ["start", "limit", "delta"], ["big"]),
         helper.make_node("Mul", ["big", "four"], ["dims"], name="times"),
         helper.make_node("Reshape", ["x", "dims"], ["y"])],
        "overflow", [x], [y], bounds)
    save(graph, os.path.join(d, "overflow.onnx"))
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, None])
    for name, mode, pads in (("reflect-pad", "reflect", [0, 1, 0, 1]),
                             ("crop-pad", "constant", [0, -1, 0, 2])):
        graph = helper.make_graph(
            [helper.make_node("Pad", ["x", "pads"], ["y"], name="pad",
                              mode=mode)],
            name, [x], [y], int64s(pads=pads))
        save(graph, os.path.join(d, name + ".onnx"))
    rows = numpy_helper.from_array(np.ones((2, 4), np.float32), "rows")
    graph = helper.make_graph(
        [helper.make_node("ScatterND", ["x", "at", "rows"], ["y"],
                          name="scatter")],
        "scatter-twice", [x], [y], int64s(at=[[1], [1]]) + [rows])
    save(graph, os.path.join(d, "scatter-twice.onnx"))
    # The ONNX fuzzer's find: a ConvTranspose whose input has rank 2 and
    # weight rank 4 crashes ONNX's own shape inference (onnx/onnx#6180).
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2, 3, 3])
    w = numpy_helper.from_array(np.ones((1, 2, 3, 3), np.float32), "w")
    graph = helper.make_graph(
        [helper.make_node("ConvTranspose", ["x", "w"], ["y"])],
        "rank-mismatch", [x], [y], [w])
    save(graph, os.path.join(d, "convtranspose-ranks.onnx"), opset=11)

    recurrent(d)


def recurrent(d):
    """Recurrent and normalisation nodes the importer refuses, by name."""
    def rnn(name, op, x_shape, inputs, gates=4, hidden=2, lengths=None,
            **attrs):
        x = helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)
        y = helper.make_tensor_value_info("y", TensorProto.FLOAT,
                                          [None] * 4)
        size = x_shape[2]
        inits = [numpy_helper.from_array(
            np.ones((1, gates * hidden, size), np.float32), "w"),
            numpy_helper.from_array(
                np.ones((1, gates * inputs, inputs), np.float32), "r")]
        names = ["x", "w", "r"]
        if lengths is not None:
            inits.append(numpy_helper.from_array(
                np.array(lengths, np.int32), "lengths"))
            names += ["", "lengths"]
        graph = helper.make_graph(
            [helper.make_node(op, names, ["y"], name="cell",
                              hidden_size=hidden, **attrs)],
            name, [x], [y], inits)
        save(graph, os.path.join(d, name + ".onnx"))
    rnn("lstm-lengths", "LSTM", [3, 2, 4], 2, lengths=[3, 2])
    rnn("rnn-sigmoid", "RNN", [3, 2, 4], 2, gates=1,
        activations=["Sigmoid"])
    rnn("lstm-long", "LSTM", [100000, 1, 1], 2)
    rnn("gru-shapes", "GRU", [3, 2, 4], 3, gates=3)
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3, 4])
    graph = helper.make_graph(
        [helper.make_node("LayerNormalization", ["x", "g"], ["y"], name="ln",
                          axis=1)],
        "ln-axis", [x], [y],
        [numpy_helper.from_array(np.ones((3, 4), np.float32), "g")])
    save(graph, os.path.join(d, "ln-axis.onnx"), opset=17)

    # A cumulative sum too long for its triangle; a transposed convolution
    # sized by output_shape.
    def single(name, node, x_shape, inits, opset=14):
        x = helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)
        y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [])
        save(helper.make_graph([node], name, [x], [y], inits),
             os.path.join(d, name + ".onnx"), opset)
    single("cumsum-long", helper.make_node("CumSum", ["x", "axis"], ["y"],
                                           name="sum"), [2, 4096],
           [numpy_helper.from_array(np.array(1, np.int64), "axis")])
    single("opset-18", helper.make_node("Relu", ["x"], ["y"], name="relu"),
           [2, 3], [], opset=18)
    single("convtranspose-shape",
           helper.make_node("ConvTranspose", ["x", "w"], ["y"], name="up",
                            strides=[2, 2], output_shape=[7, 7]),
           [1, 2, 3, 3],
           [numpy_helper.from_array(np.ones((2, 2, 3, 3), np.float32), "w")])


if __name__ == "__main__":
    main()
