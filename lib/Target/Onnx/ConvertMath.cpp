//===- ConvertMath.cpp - Elementwise math and reductions ------------------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//
//
// Converters of ONNX nodes (ConvertOps.cpp has the table that lists them).
//
//===----------------------------------------------------------------------===//

#include "Importer.h"
#include "dtfm/Support/OpShapes.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

using namespace mlir;
using namespace mlir::dtfm;
using namespace mlir::dtfm::onnximport;

bool OnnxImporter::convertBinary(const onnx::NodeProto &node, NodeCall &c) {
  // Max and Min take one or more inputs: a chain of binary ops, each of
  // its operands' broadcast shape.
  int count = c.type == "Max" || c.type == "Min" ? node.input_size() : 2;
  if (count < 1)
    return failAt(node, "expected at least one input");
  Value acc = c.input(0);
  if (!acc)
    return false;
  for (int i = 1; i < count; ++i) {
    Value rhs = c.input(i);
    if (!rhs)
      return false;
    auto lhsType = cast<RankedTensorType>(acc.getType());
    auto rhsShape = cast<RankedTensorType>(rhs.getType()).getShape();
    std::vector<int64_t> shape;
    if (i + 1 < count &&
        !::dtfm::shapes::broadcastShape(lhsType.getShape().vec(),
                                        rhsShape.vec(), shape))
      return failAt(node, "its inputs do not broadcast");
    RankedTensorType type =
        i + 1 == count ? c.result
                       : RankedTensorType::get(shape, lhsType.getElementType());
    Operation *op =
        c.type == "Add" ? b.create<AddOp>(c.loc, type, acc, rhs).getOperation()
        : c.type == "Sub"
            ? b.create<SubOp>(c.loc, type, acc, rhs).getOperation()
        : c.type == "Mul"
            ? b.create<MulOp>(c.loc, type, acc, rhs).getOperation()
        : c.type == "Div"
            ? b.create<DivOp>(c.loc, type, acc, rhs).getOperation()
        : c.type == "Max"
            ? b.create<MaximumOp>(c.loc, type, acc, rhs).getOperation()
        : c.type == "Min"
            ? b.create<MinimumOp>(c.loc, type, acc, rhs).getOperation()
            : b.create<PreluOp>(c.loc, type, acc, rhs).getOperation();
    acc = tag(op, node);
  }
  c.out = acc;
  return true;
}

bool OnnxImporter::convertMath(const onnx::NodeProto &node, NodeCall &c) {
  Value x = c.input(0);
  if (!x)
    return false;
  Operation *op =
      c.type == "Sqrt"   ? b.create<SqrtOp>(c.loc, c.result, x).getOperation()
      : c.type == "Tanh" ? b.create<TanhOp>(c.loc, c.result, x).getOperation()
      : c.type == "Erf"  ? b.create<ErfOp>(c.loc, c.result, x).getOperation()
      : c.type == "Abs"  ? b.create<AbsOp>(c.loc, c.result, x).getOperation()
      : c.type == "Log"  ? b.create<LogOp>(c.loc, c.result, x).getOperation()
      : c.type == "Sigmoid"
          ? b.create<SigmoidOp>(c.loc, c.result, x).getOperation()
          : b.create<ExpOp>(c.loc, c.result, x).getOperation();
  c.out = tag(op, node);
  return true;
}

bool OnnxImporter::convertNeg(const onnx::NodeProto &node, NodeCall &c) {
  // x * -1, the constant a frozen parameter of its own.
  Value x = c.input(0);
  if (!x)
    return false;
  Value minusOne = scalarConstant(node.output(0) + ".minus_one", -1);
  c.out = tag(b.create<MulOp>(c.loc, c.result, x, minusOne), node);
  return true;
}

bool OnnxImporter::scalarInput(const onnx::NodeProto &node, int i,
                               const char *what, double fallback,
                               double &value) {
  if (i >= node.input_size() || node.input(i).empty()) {
    value = fallback;
    return true;
  }
  const onnx::TensorProto *t = initializer(node.input(i));
  if (!t) {
    auto it = constants.find(node.input(i));
    t = it == constants.end() ? nullptr : it->second;
  }
  std::vector<float> values;
  if (!t || !floats(*t, values) || values.size() != 1)
    return failAt(node,
                  std::string("the ") + what + " must be one float constant");
  value = values[0];
  return true;
}

bool OnnxImporter::convertPow(const onnx::NodeProto &node, NodeCall &c) {
  double exponent = 0;
  if (!scalarInput(node, 1, "exponent", std::nan(""), exponent))
    return false;
  if (std::isnan(exponent)) // absent
    return failAt(node, "the exponent must be one float constant");
  Value x = c.input(0);
  if (!x)
    return false;
  c.out = tag(b.create<PowOp>(c.loc, c.result, x, b.getF64FloatAttr(exponent)),
              node);
  return true;
}

bool OnnxImporter::convertClip(const onnx::NodeProto &node, NodeCall &c) {
  // Opset 11 on: the bounds are optional inputs; before, attributes.
  double inf = std::numeric_limits<double>::infinity(), low = 0, high = 0;
  if (!scalarInput(node, 1, "minimum", c.real("min", -inf), low) ||
      !scalarInput(node, 2, "maximum", c.real("max", inf), high))
    return false;
  if (std::isnan(low) || std::isnan(high) || !(low <= high))
    return failAt(node, "expected bounds min <= max, found " +
                            std::to_string(low) + " and " +
                            std::to_string(high));
  Value x = c.input(0);
  if (!x)
    return false;
  c.out = tag(b.create<ClipOp>(c.loc, c.result, x, b.getF64FloatAttr(low),
                               b.getF64FloatAttr(high)),
              node);
  return true;
}

Value OnnxImporter::hardSigmoid(const onnx::NodeProto &node, NodeCall &c,
                                Value x, const std::string &name, double alpha,
                                double beta) {
  Value scaled = tag(b.create<MulOp>(c.loc, c.result, x,
                                     scalarConstant(name + ".alpha", alpha)),
                     node);
  Value shifted = tag(b.create<AddOp>(c.loc, c.result, scaled,
                                      scalarConstant(name + ".beta", beta)),
                      node);
  return tag(b.create<ClipOp>(c.loc, c.result, shifted, b.getF64FloatAttr(0),
                              b.getF64FloatAttr(1)),
             node);
}

bool OnnxImporter::convertHardSigmoid(const onnx::NodeProto &node,
                                      NodeCall &c) {
  // Compositions of exact ops (a fused op would save their memory
  // traffic): HardSigmoid = clip(alpha x + beta, 0, 1); HardSwish =
  // x HardSigmoid(x) with alpha 1/6, beta 1/2 (x relu6(x + 3) / 6).
  Value x = c.input(0);
  if (!x)
    return false;
  if (!cast<RankedTensorType>(x.getType()).getElementType().isF32())
    return failAt(node, "expected a float32 input");
  bool swish = c.type == "HardSwish";
  double alpha = swish ? 1.0 / 6 : c.real("alpha", 0.2);
  double beta = swish ? 0.5 : c.real("beta", 0.5);
  if (!std::isfinite(alpha) || !std::isfinite(beta))
    return failAt(node, "alpha and beta must be finite");
  Value gate = hardSigmoid(node, c, x, node.output(0), alpha, beta);
  c.out = swish ? tag(b.create<MulOp>(c.loc, c.result, x, gate), node) : gate;
  return true;
}

/// The longest axis a CumSum may run along: its triangle is n x n floats
/// (16 MiB at the bound), its product n times the work of a running sum.
static constexpr int64_t kMaxCumSumLength = 2048;

bool OnnxImporter::convertCumSum(const onnx::NodeProto &node, NodeCall &c) {
  // y[..., j] = sum over i of x[..., i] T[i][j] with T[i][j] = 1 where i
  // <= j (i < j: exclusive; reversed: i >= j, or i > j): an exact
  // composition of matmul and transposes, differentiable as they are. The
  // sums run in the matmul's order, not left to right (within float
  // rounding of a running sum).
  std::vector<int64_t> axisValues;
  if (node.input_size() < 2 || !constantInts(node.input(1), axisValues) ||
      axisValues.size() != 1)
    return failAt(node, "the axis must be one integer constant");
  Value x = c.input(0);
  if (!x)
    return false;
  auto type = cast<RankedTensorType>(x.getType());
  if (!type.getElementType().isF32())
    return failAt(node, "expected a float32 input (an integer cumulative sum "
                        "is folded only when its input is constant)");
  int64_t rank = type.getRank(), axis = axisValues[0];
  if (axis < -rank || axis >= rank)
    return failAt(node, "axis " + std::to_string(axis) +
                            " out of range for rank " + std::to_string(rank));
  if (axis < 0)
    axis += rank;
  int64_t n = type.getDimSize(axis);
  if (n > kMaxCumSumLength)
    return failAt(node, "a cumulative sum over " + std::to_string(n) +
                            " elements (at most " +
                            std::to_string(kMaxCumSumLength) +
                            ": it runs as a product with an n x n triangle)");
  bool exclusive = c.integer("exclusive", 0) != 0,
       reverse = c.integer("reverse", 0) != 0;
  ::dtfm::format::Tensor triangle({n, n}, 0.0f);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j) {
      bool counted = reverse ? (exclusive ? i > j : i >= j)
                             : (exclusive ? i < j : i <= j);
      triangle.data[i * n + j] = counted ? 1.0f : 0.0f;
    }
  Value weights = tensorConstant(node.output(0) + ".triangle", triangle);
  if (rank == 1) { // a row of one vector
    Value row = tag(b.create<ReshapeOp>(c.loc, floatType({1, n}), x), node);
    row = tag(b.create<MatmulOp>(c.loc, floatType({1, n}), row, weights,
                                 UnitAttr()),
              node);
    c.out = tag(b.create<ReshapeOp>(c.loc, c.result, row), node);
    return true;
  }
  SmallVector<int64_t> perm;
  for (int64_t i = 0; i < rank; ++i)
    perm.push_back(i);
  std::swap(perm[axis], perm[rank - 1]);
  SmallVector<int64_t> swapped(type.getShape());
  std::swap(swapped[axis], swapped[rank - 1]);
  auto swappedType = floatType(swapped);
  bool last = axis == rank - 1;
  Value v = last ? x
                 : tag(b.create<TransposeOp>(c.loc, swappedType, x,
                                             b.getDenseI64ArrayAttr(perm)),
                       node);
  v = tag(b.create<MatmulOp>(c.loc, last ? c.result : swappedType, v, weights,
                             UnitAttr()),
          node);
  c.out = last ? v
               : tag(b.create<TransposeOp>(c.loc, c.result, v,
                                           b.getDenseI64ArrayAttr(perm)),
                     node);
  return true;
}

bool OnnxImporter::convertReduceMean(const onnx::NodeProto &node, NodeCall &c) {
  std::vector<int64_t> axes = c.ints("axes", {});
  if (node.input_size() > 1 && !node.input(1).empty() &&
      !constantInts(node.input(1), axes))
    return false;
  Value x = c.input(0);
  if (!x)
    return false;
  auto xType = cast<RankedTensorType>(x.getType());
  if (axes.empty() && c.integer("noop_with_empty_axes", 0) &&
      c.type != "ReduceL2")
    return convertIdentity(node, c);
  // An L2 norm (F.normalize: Swin-V2's cosine attention) is the square root
  // of the sum of squares.
  bool norm = c.type == "ReduceL2";
  if (norm)
    x = tag(b.create<MulOp>(c.loc, xType, x, x), node);
  if (axes.empty()) // all of them
    for (int64_t i = 0; i < xType.getRank(); ++i)
      axes.push_back(i);
  DenseI64ArrayAttr axesAttr = b.getDenseI64ArrayAttr(axes);
  UnitAttr keepdims = c.integer("keepdims", 1) ? b.getUnitAttr() : UnitAttr();
  if (c.type == "ReduceMax" || c.type == "ReduceMin") {
    c.out = tag(c.type == "ReduceMax"
                    ? b.create<ReduceMaxOp>(c.loc, c.result, x, axesAttr,
                                            keepdims)
                          .getOperation()
                    : b.create<ReduceMinOp>(c.loc, c.result, x, axesAttr,
                                            keepdims)
                          .getOperation(),
                node);
    return true;
  }
  c.out = tag(
      b.create<ReduceMeanOp>(c.loc, c.result, x, axesAttr, keepdims), node);
  if ((c.type == "ReduceSum" || norm) && c.out) {
    // A sum is the mean times the count (exact up to rounding); the
    // verifier has checked the axes.
    double count = 1;
    for (int64_t axis : axes)
      count *= static_cast<double>(
          xType.getDimSize(axis < 0 ? axis + xType.getRank() : axis));
    c.out =
        tag(b.create<MulOp>(c.loc, c.result, c.out,
                            scalarConstant(node.output(0) + ".count", count)),
            node);
  }
  if (norm && c.out)
    c.out = tag(b.create<SqrtOp>(c.loc, c.result, c.out), node);
  return true;
}
