"""Recurrent nodes in the variants PyTorch does not export, with a NumPy
oracle of ONNX's equations (onnx/docs/Operators.md: LSTM, GRU, RNN):

  recurrent_variants.py export DIR   DIR/NAME.onnx, DIR/NAME.bin (inputs and
                                     labels for one step), and
                                     DIR/NAME.txt (the loss NumPy computes)
  recurrent_variants.py check DIR NAME LOG
                                     the loss dtfm-run printed equals it

  gru-reset-after   GRU with linear_before_reset=0 (ONNX's default) and an
                    initial state, forward
  lstm-reverse      LSTM in reverse with initial h and c, layout 1
  rnn-bidi          RNN, bidirectional, Tanh, no bias

Each graph: the node, ReduceMean of Y over its time and direction axes, a
Gemm head of 5 classes, cross-entropy against the labels.
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "..", "..", "python"))
from dtfm_oracle import logged_losses, write_tensors  # noqa: E402

S, B, I, H, CLASSES = 5, 3, 4, 6, 5


def sigmoid(x):
    return 1 / (1 + np.exp(-x))


def run_cell(kind, x, w, r, b, h, c, reverse, lbr):
    """ONNX's equations for one direction over x [S, B, I]: Y [S, B, H]."""
    gates = {"LSTM": 4, "GRU": 3, "RNN": 1}[kind]
    wb = b[:gates * H] if b is not None else np.zeros(gates * H)
    rb = b[gates * H:] if b is not None else np.zeros(gates * H)
    ys = [None] * S
    steps = range(S - 1, -1, -1) if reverse else range(S)
    for t in steps:
        xt = x[t]
        if kind == "LSTM":
            g = xt @ w.T + h @ r.T + wb + rb
            i, o, f, cc = (g[:, k * H:(k + 1) * H] for k in range(4))
            c = sigmoid(f) * c + sigmoid(i) * np.tanh(cc)
            h = sigmoid(o) * np.tanh(c)
        elif kind == "GRU":
            xz = xt @ w.T + wb
            hz = h @ r[:2 * H].T + rb[:2 * H]
            z = sigmoid(xz[:, :H] + hz[:, :H])
            rr = sigmoid(xz[:, H:2 * H] + hz[:, H:2 * H])
            if lbr:
                hh = np.tanh(xz[:, 2 * H:] +
                             rr * (h @ r[2 * H:].T + rb[2 * H:]))
            else:
                hh = np.tanh(xz[:, 2 * H:] + (rr * h) @ r[2 * H:].T +
                             rb[2 * H:])
            h = (1 - z) * hh + z * h
        else:
            h = np.tanh(xt @ w.T + h @ r.T + wb + rb)
        ys[t] = h
    return np.stack(ys)


def variants():
    return {
        "gru-reset-after": dict(kind="GRU", direction="forward", layout=0,
                                bias=True, initial=True, lbr=0),
        "lstm-reverse": dict(kind="LSTM", direction="reverse", layout=1,
                             bias=True, initial=True, lbr=0),
        "rnn-bidi": dict(kind="RNN", direction="bidirectional", layout=0,
                         bias=False, initial=False, lbr=0),
    }


def build(name, v, rng):
    kind, dirs = v["kind"], 2 if v["direction"] == "bidirectional" else 1
    gates = {"LSTM": 4, "GRU": 3, "RNN": 1}[kind]
    x = rng.standard_normal((S, B, I)).astype(np.float32)
    w = (0.4 * rng.standard_normal((dirs, gates * H, I))).astype(np.float32)
    r = (0.4 * rng.standard_normal((dirs, gates * H, H))).astype(np.float32)
    b = (0.2 * rng.standard_normal((dirs, 2 * gates * H))).astype(np.float32)
    h0 = (0.3 * rng.standard_normal((dirs, B, H))).astype(np.float32)
    c0 = (0.3 * rng.standard_normal((dirs, B, H))).astype(np.float32)
    head = (0.5 * rng.standard_normal((CLASSES, H))).astype(np.float32)
    labels = rng.integers(0, CLASSES, B)
    # The oracle, in float64.
    ys = []
    for d in range(dirs):
        reverse = v["direction"] == "reverse" or d == 1
        ys.append(run_cell(
            kind, x.astype(np.float64), w[d].astype(np.float64),
            r[d].astype(np.float64),
            b[d].astype(np.float64) if v["bias"] else None,
            h0[d].astype(np.float64) if v["initial"] else np.zeros((B, H)),
            c0[d].astype(np.float64) if v["initial"] else np.zeros((B, H)),
            reverse, v["lbr"]))
    pooled = np.mean(np.stack(ys), axis=(0, 1))  # [B, H]
    logits = pooled @ head.T.astype(np.float64)
    shifted = logits - logits.max(axis=1, keepdims=True)
    logp = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
    loss = -logp[np.arange(B), labels].mean()
    # The graph.
    inputs = ["x", "w", "r", "b" if v["bias"] else ""]
    inits = [numpy_helper.from_array(w, "w"), numpy_helper.from_array(r, "r"),
             numpy_helper.from_array(head, "head.weight")]
    if v["bias"]:
        inits.append(numpy_helper.from_array(b, "b"))
    if v["initial"]:
        inputs += ["", "h0"] + (["c0"] if kind == "LSTM" else [])
        transpose = (1, 0, 2) if v["layout"] == 1 else (0, 1, 2)
        inits.append(numpy_helper.from_array(h0.transpose(transpose), "h0"))
        if kind == "LSTM":
            inits.append(numpy_helper.from_array(c0.transpose(transpose),
                                                 "c0"))
    while inputs and inputs[-1] == "":
        inputs.pop()
    x_in = x.transpose(1, 0, 2) if v["layout"] == 1 else x
    attrs = dict(hidden_size=H, direction=v["direction"], layout=v["layout"])
    if kind == "GRU":
        attrs["linear_before_reset"] = v["lbr"]
    # Y: [S, dirs, B, H] (layout 0) or [B, S, dirs, H] (layout 1).
    mean_axes = [1, 2] if v["layout"] == 1 else [0, 1]
    nodes = [helper.make_node(kind, inputs, ["y"], name="cell", **attrs),
             helper.make_node("ReduceMean", ["y"], ["pooled"], name="pool",
                              axes=mean_axes, keepdims=0),
             helper.make_node("Gemm", ["pooled", "head.weight"], ["logits"],
                              name="head", transB=1)]
    graph = helper.make_graph(
        nodes, name.replace("-", "_"),
        [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                       list(x_in.shape))],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT,
                                       [B, CLASSES])], inits)
    model = helper.make_model(graph,
                              opset_imports=[helper.make_opsetid("", 14)])
    onnx.checker.check_model(model)
    return model, x_in, labels, loss


def main():
    mode, d = sys.argv[1], sys.argv[2]
    if mode == "export":
        rng = np.random.default_rng(7)
        for name, v in variants().items():
            model, x, labels, loss = build(name, v, rng)
            onnx.save(model, os.path.join(d, name + ".onnx"))
            write_tensors(os.path.join(d, name + ".bin"),
                          {"x@0": x, "labels@0": labels})
            with open(os.path.join(d, name + ".txt"), "w") as f:
                f.write(f"{loss:.10f}\n")
        return
    name, log = sys.argv[3], sys.argv[4]
    want = float(open(os.path.join(d, name + ".txt")).read())
    got = logged_losses(log)[1]
    assert abs(got - want) < 1e-5 * max(1, abs(want)), (name, got, want)
    print(f"{name}: loss dtfm {got:.6f} numpy {want:.6f}")


if __name__ == "__main__":
    main()
