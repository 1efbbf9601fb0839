//===- ConvertRecurrent.cpp - LSTM, GRU and RNN, unrolled -----------------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//
//
// Converters of ONNX nodes (ConvertOps.cpp has the table that lists them).
//
// ONNX's recurrent ops over a static sequence become the cell's equations
// unrolled over its steps, in dtfm's ops (matmul with a transposed weight,
// add, sigmoid, tanh, relu, mul, slice, concat, reshape): exact, each with
// its gradient and its cost, as torch-mlir decomposes them. The input's
// product with W is one matmul over all steps; each step adds H R^T. The
// weights are whatever the graph computes them from (PyTorch reorders its
// gates into ONNX's with slices and concats of its own parameters), so
// their gradients flow back to those parameters.
//
// Gate order as ONNX defines it: LSTM i, o, f, c; GRU z, r, h. Directions
// forward, reverse and bidirectional; layout 0 ([seq, batch, input]) or 1
// ([batch, seq, input]). Refused, naming the node: sequence lengths,
// clipping, peepholes, input_forget and activations other than the
// defaults (RNN: Tanh or Relu).
//
//===----------------------------------------------------------------------===//

#include "Importer.h"

#include <functional>

using namespace mlir;
using namespace mlir::dtfm;
using namespace mlir::dtfm::onnximport;

namespace {

/// The longest sequence unrolled: each step is some fifteen ops, so a
/// hostile length gets one line rather than the memory.
constexpr int64_t kMaxUnrolledSteps = 8192;

/// Builds the unrolled ops of one node, all tagged with its layer.
struct Unroller {
  OpBuilder &b;
  Location loc;
  std::function<Value(Operation *)> tag;

  RankedTensorType typeOf(ArrayRef<int64_t> shape) {
    return RankedTensorType::get(shape, b.getF32Type());
  }
  ArrayRef<int64_t> shapeOf(Value v) {
    return cast<RankedTensorType>(v.getType()).getShape();
  }
  /// x[..., begin:end, ...] on `axis`.
  Value slice(Value x, int64_t axis, int64_t begin, int64_t end) {
    SmallVector<int64_t> starts(shapeOf(x).size(), 0),
        ends(shapeOf(x).begin(), shapeOf(x).end()),
        steps(shapeOf(x).size(), 1), shape(shapeOf(x));
    starts[axis] = begin;
    ends[axis] = end;
    shape[axis] = end - begin;
    return tag(b.create<SliceOp>(loc, typeOf(shape), x,
                                 b.getDenseI64ArrayAttr(starts),
                                 b.getDenseI64ArrayAttr(ends),
                                 b.getDenseI64ArrayAttr(steps)));
  }
  Value reshape(Value x, ArrayRef<int64_t> shape) {
    if (shapeOf(x) == shape)
      return x;
    return tag(b.create<ReshapeOp>(loc, typeOf(shape), x));
  }
  Value concat(ArrayRef<Value> parts, int64_t axis) {
    if (parts.size() == 1)
      return parts[0];
    SmallVector<int64_t> shape(shapeOf(parts[0]));
    shape[axis] = 0;
    for (Value p : parts)
      shape[axis] += shapeOf(p)[axis];
    return tag(b.create<ConcatOp>(loc, typeOf(shape), parts,
                                  b.getI64IntegerAttr(axis)));
  }
  Value transpose(Value x, ArrayRef<int64_t> perm) {
    SmallVector<int64_t> shape;
    for (int64_t p : perm)
      shape.push_back(shapeOf(x)[p]);
    return tag(b.create<TransposeOp>(loc, typeOf(shape), x,
                                     b.getDenseI64ArrayAttr(perm)));
  }
  /// x [M, K] times w [N, K] transposed: [M, N].
  Value timesTransposed(Value x, Value w) {
    return tag(b.create<MatmulOp>(
        loc, typeOf({shapeOf(x)[0], shapeOf(w)[0]}), x, w, b.getUnitAttr()));
  }
  Value add(Value x, Value y) {
    return tag(b.create<AddOp>(loc, x.getType(), x, y));
  }
  /// x - y, of y's type (x may be a scalar).
  Value sub(Value x, Value y) {
    return tag(b.create<SubOp>(loc, y.getType(), x, y));
  }
  Value mul(Value x, Value y) {
    return tag(b.create<MulOp>(loc, x.getType(), x, y));
  }
  Value sigmoid(Value x) {
    return tag(b.create<SigmoidOp>(loc, x.getType(), x));
  }
  Value tanh(Value x) { return tag(b.create<TanhOp>(loc, x.getType(), x)); }
  Value relu(Value x) { return tag(b.create<ReluOp>(loc, x.getType(), x)); }
};

} // namespace

bool OnnxImporter::convertRecurrent(const onnx::NodeProto &node, NodeCall &c) {
  const std::string &type = node.op_type();
  int gates = type == "LSTM" ? 4 : type == "GRU" ? 3 : 1;
  // What the unrolled cell does not do.
  auto present = [&](int i) {
    return i < node.input_size() && !node.input(i).empty();
  };
  if (present(4))
    return failAt(node, "sequence lengths are not supported (every sequence "
                        "runs its full length)");
  if (type == "LSTM" && present(7))
    return failAt(node, "peephole weights are not supported");
  if (c.attrs.count("clip"))
    return failAt(node, "clipping the cell's input is not supported");
  if (c.integer("input_forget", 0) != 0)
    return failAt(node, "input_forget is not supported");
  std::string direction = c.attrs.count("direction")
                              ? c.attrs["direction"]->s()
                              : std::string("forward");
  if (direction != "forward" && direction != "reverse" &&
      direction != "bidirectional")
    return failAt(node, "unknown direction '" + direction + "'");
  int64_t directions = direction == "bidirectional" ? 2 : 1;
  bool reluCell = false;
  if (auto it = c.attrs.find("activations"); it != c.attrs.end()) {
    std::vector<std::string> given(it->second->strings().begin(),
                                   it->second->strings().end());
    std::vector<std::string> defaults =
        type == "LSTM" ? std::vector<std::string>{"Sigmoid", "Tanh", "Tanh"}
        : type == "GRU" ? std::vector<std::string>{"Sigmoid", "Tanh"}
                        : std::vector<std::string>{"Tanh"};
    for (size_t i = 0; i < given.size(); ++i) {
      const std::string &expected = defaults[i % defaults.size()];
      if (type == "RNN" && given[i] == "Relu") {
        reluCell = true;
        continue;
      }
      if (given[i] != expected)
        return failAt(node, "activation '" + given[i] +
                                "' is not supported (expected " + expected +
                                ")");
    }
    if (type == "RNN" && reluCell &&
        llvm::any_of(given, [](const std::string &a) { return a != "Relu"; }))
      return failAt(node, "mixed activations across directions are not "
                          "supported");
  }
  int64_t layout = c.integer("layout", 0);
  if (layout != 0 && layout != 1)
    return failAt(node, "layout must be 0 or 1");

  Value x = c.input(0), w = c.input(1), r = c.input(2);
  Value bias = present(3) ? c.input(3) : Value();
  Value h0 = present(5) ? c.input(5) : Value();
  Value c0 = type == "LSTM" && present(6) ? c.input(6) : Value();
  if (!x || !w || !r || (present(3) && !bias) || (present(5) && !h0) ||
      (type == "LSTM" && present(6) && !c0))
    return false;
  Unroller u{b, c.loc, [&](Operation *op) { return tag(op, node); }};
  if (u.shapeOf(x).size() != 3)
    return failAt(node, "expected an input of rank 3");
  if (layout == 1) { // [batch, seq, input] -> [seq, batch, input]
    x = u.transpose(x, {1, 0, 2});
    // The initial states too: [batch, directions, hidden] -> ONNX's
    // layout-0 [directions, batch, hidden].
    for (Value *state : {&h0, &c0})
      if (*state) {
        if (u.shapeOf(*state).size() != 3)
          return failAt(node, "expected initial states of rank 3");
        *state = u.transpose(*state, {1, 0, 2});
      }
  }
  auto xShape = u.shapeOf(x);
  int64_t steps = xShape[0], batch = xShape[1], inputSize = xShape[2];
  if (steps < 1 || steps > kMaxUnrolledSteps || batch < 1)
    return failAt(node, "a sequence of " + std::to_string(steps) +
                            " steps of batch " + std::to_string(batch) +
                            " (unrolled: 1 to " +
                            std::to_string(kMaxUnrolledSteps) +
                            " steps, a batch of at least 1)");
  int64_t hidden = u.shapeOf(r).size() == 3 ? u.shapeOf(r)[2] : 0;
  if (c.attrs.count("hidden_size") && c.integer("hidden_size", 0) != hidden)
    return failAt(node, "hidden_size " +
                            std::to_string(c.integer("hidden_size", 0)) +
                            " does not match R's last dimension " +
                            std::to_string(hidden));
  auto expect = [&](Value v, ArrayRef<int64_t> shape, const char *what) {
    if (!v || u.shapeOf(v) == shape)
      return true;
    std::string dims;
    for (int64_t d : shape)
      dims += (dims.empty() ? "" : ", ") + std::to_string(d);
    return failAt(node, std::string("expected ") + what + " of shape [" +
                            dims + "]");
  };
  if (hidden <= 0)
    return failAt(node, "expected R of rank 3 with a positive hidden size");
  if (!expect(w, {directions, gates * hidden, inputSize}, "W") ||
      !expect(r, {directions, gates * hidden, hidden}, "R") ||
      !expect(bias, {directions, 2 * gates * hidden}, "B") ||
      !expect(h0, {directions, batch, hidden}, "initial_h") ||
      !expect(c0, {directions, batch, hidden}, "initial_c"))
    return false;
  bool linearBeforeReset = c.integer("linear_before_reset", 0) != 0;

  std::vector<Value> outputs, lastH, lastC;
  for (int64_t d = 0; d < directions; ++d) {
    bool reverse = direction == "reverse" || d == 1;
    Value wd = u.reshape(u.slice(w, 0, d, d + 1), {gates * hidden, inputSize});
    Value rd = u.reshape(u.slice(r, 0, d, d + 1), {gates * hidden, hidden});
    Value wb, rb;
    if (bias) {
      Value bd = u.reshape(u.slice(bias, 0, d, d + 1), {2 * gates * hidden});
      wb = u.slice(bd, 0, 0, gates * hidden);
      rb = u.slice(bd, 0, gates * hidden, 2 * gates * hidden);
    }
    // The input's part of every gate at every step: one product.
    Value xw = u.timesTransposed(u.reshape(x, {steps * batch, inputSize}), wd);
    if (wb && (type != "GRU" || !linearBeforeReset))
      xw = u.add(xw, type == "GRU" ? wb : u.add(wb, rb));
    else if (wb) // GRU, linear_before_reset: Rb_h stays inside r * (.)
      xw = u.add(xw, wb);
    xw = u.reshape(xw, {steps, batch, gates * hidden});
    std::string name = node.output(0) + ".d" + std::to_string(d);
    Value h = h0 ? u.reshape(u.slice(h0, 0, d, d + 1), {batch, hidden})
                 : filledConstant(name + ".h0", {batch, hidden}, 0.0);
    Value cell = type != "LSTM" ? Value()
                 : c0 ? u.reshape(u.slice(c0, 0, d, d + 1), {batch, hidden})
                      : filledConstant(name + ".c0", {batch, hidden}, 0.0);
    Value one = type == "GRU" ? scalarConstant(name + ".one", 1.0) : Value();
    std::vector<Value> hs(steps);
    for (int64_t i = 0; i < steps; ++i) {
      int64_t t = reverse ? steps - 1 - i : i;
      Value xt = u.reshape(u.slice(xw, 0, t, t + 1), {batch, gates * hidden});
      auto gate = [&](Value all, int k) {
        return u.slice(all, 1, k * hidden, (k + 1) * hidden);
      };
      if (type == "LSTM") {
        Value g = u.add(xt, u.timesTransposed(h, rd));
        Value in = u.sigmoid(gate(g, 0)), out = u.sigmoid(gate(g, 1)),
              forget = u.sigmoid(gate(g, 2)), candidate = u.tanh(gate(g, 3));
        cell = u.add(u.mul(forget, cell), u.mul(in, candidate));
        h = u.mul(out, u.tanh(cell));
      } else if (type == "GRU") {
        // z and r from x W + h R (+ both biases); the candidate's recurrent
        // part is reset before (default) or after its product.
        Value rzr = u.timesTransposed(h, u.slice(rd, 0, 0, 2 * hidden));
        if (rb)
          rzr = u.add(rzr, u.slice(rb, 0, 0, 2 * hidden));
        Value zr = u.add(u.slice(xt, 1, 0, 2 * hidden), rzr);
        Value z = u.sigmoid(gate(zr, 0)), reset = u.sigmoid(gate(zr, 1));
        Value rh = u.slice(rd, 0, 2 * hidden, 3 * hidden);
        Value recurrent;
        if (linearBeforeReset) {
          recurrent = u.timesTransposed(h, rh);
          if (rb)
            recurrent = u.add(recurrent, u.slice(rb, 0, 2 * hidden, 3 * hidden));
          recurrent = u.mul(reset, recurrent);
        } else {
          recurrent = u.timesTransposed(u.mul(reset, h), rh);
          if (rb)
            recurrent = u.add(recurrent, u.slice(rb, 0, 2 * hidden, 3 * hidden));
        }
        Value candidate = u.tanh(u.add(gate(xt, 2), recurrent));
        // (1 - z) * candidate + z * h
        h = u.add(u.mul(u.sub(one, z), candidate), u.mul(z, h));
      } else {
        Value g = u.add(xt, u.timesTransposed(h, rd));
        h = reluCell ? u.relu(g) : u.tanh(g);
      }
      hs[t] = u.reshape(h, {1, 1, batch, hidden});
    }
    outputs.push_back(u.concat(hs, 0)); // [steps, 1, batch, hidden]
    lastH.push_back(u.reshape(h, {1, batch, hidden}));
    if (cell)
      lastC.push_back(u.reshape(cell, {1, batch, hidden}));
  }
  Value y = u.concat(outputs, 1); // [steps, directions, batch, hidden]
  Value yh = u.concat(lastH, 0), yc = lastC.empty() ? Value()
                                                    : u.concat(lastC, 0);
  if (layout == 1) {
    y = u.transpose(y, {2, 0, 1, 3});
    yh = u.transpose(yh, {1, 0, 2});
    if (yc)
      yc = u.transpose(yc, {1, 0, 2});
  }
  Value results[] = {y, yh, yc};
  for (int i = 0; i < node.output_size() && i < 3; ++i)
    if (!node.output(i).empty() && results[i])
      values[node.output(i)] = results[i];
  c.done = true;
  return true;
}
