//===- ConvertShape.cpp - Shapes, padding and indexing --------------------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//
//
// Converters of ONNX nodes (ConvertOps.cpp has the table that lists them).
//
//===----------------------------------------------------------------------===//

#include "Importer.h"

#include "FoldConstants.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

using namespace mlir;
using namespace mlir::dtfm;
using namespace mlir::dtfm::onnximport;

bool OnnxImporter::convertFlatten(const onnx::NodeProto &node, NodeCall &c) {
  Value x = c.input(0);
  if (!x)
    return false;
  int64_t axis = c.integer("axis", 1);
  if (axis < 0)
    axis += cast<RankedTensorType>(x.getType()).getRank();
  c.out = tag(
      b.create<FlattenOp>(c.loc, c.result, x, b.getI64IntegerAttr(axis)), node);
  return true;
}

bool OnnxImporter::convertReshape(const onnx::NodeProto &node, NodeCall &c) {
  std::vector<int64_t> shape;
  if (!constantInts(node.input(1), shape))
    return false;
  Value x = c.input(0);
  if (!x)
    return false;
  // The result from the constant shape: 0 copies the input's dimension
  // (unless allowzero), -1 takes what is left.
  auto xType = cast<RankedTensorType>(x.getType());
  int64_t known = 1, unknown = -1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == 0 && c.integer("allowzero", 0) == 0) {
      if (i >= static_cast<size_t>(xType.getRank()))
        return failAt(node, "shape copies a dimension the input lacks");
      shape[i] = xType.getDimSize(i);
    }
    if (shape[i] == -1) {
      if (unknown >= 0)
        return failAt(node, "shape has two -1 dimensions");
      unknown = static_cast<int64_t>(i);
    } else if (shape[i] <= 0) {
      return failAt(node, "shape has a dimension " + std::to_string(shape[i]));
    } else {
      known *= shape[i];
    }
  }
  if (unknown >= 0) {
    if (xType.getNumElements() % known != 0)
      return failAt(node, "shape does not divide the input's elements");
    shape[unknown] = xType.getNumElements() / known;
  }
  c.result = RankedTensorType::get(shape, xType.getElementType());
  c.out = tag(b.create<ReshapeOp>(c.loc, c.result, x), node);
  return true;
}

bool OnnxImporter::convertSqueeze(const onnx::NodeProto &node, NodeCall &c) {
  // Only the shape changes: a reshape. The axes: an attribute (opset
  // < 13) or a constant second input.
  Value x = c.input(0);
  if (!x)
    return false;
  std::vector<int64_t> axes = c.ints("axes", {});
  if (node.input_size() > 1 && !node.input(1).empty()) {
    if (!initializer(node.input(1)) && !constants.count(node.input(1)))
      return failAt(node, "the axes must be a constant");
    if (!constantInts(node.input(1), axes))
      return false;
  }
  auto xType = cast<RankedTensorType>(x.getType());
  std::vector<int64_t> shape(xType.getShape().begin(), xType.getShape().end());
  int64_t rank = c.type == "Squeeze"
                     ? xType.getRank()
                     : xType.getRank() + static_cast<int64_t>(axes.size());
  std::set<int64_t> chosen;
  for (int64_t a : axes) {
    if (a < -rank || a >= rank)
      return failAt(node, "axis " + std::to_string(a) + " out of range");
    chosen.insert(a < 0 ? a + rank : a);
  }
  std::vector<int64_t> dims;
  if (c.type == "Squeeze") {
    for (int64_t i = 0; i < xType.getRank(); ++i) {
      bool drop = axes.empty() ? shape[i] == 1 : chosen.count(i) > 0;
      if (drop && shape[i] != 1)
        return failAt(node, "squeezes dimension " + std::to_string(i) +
                                " of size " + std::to_string(shape[i]));
      if (!drop)
        dims.push_back(shape[i]);
    }
  } else {
    size_t next = 0;
    for (int64_t i = 0; i < rank; ++i)
      dims.push_back(chosen.count(i) ? 1 : shape[next++]);
  }
  c.result = RankedTensorType::get(dims, xType.getElementType());
  c.out = tag(b.create<ReshapeOp>(c.loc, c.result, x), node);
  return true;
}

bool OnnxImporter::convertExpand(const onnx::NodeProto &node, NodeCall &c) {
  // The shape is a constant (or was folded into one at import); the
  // result's type, inferred, is the broadcast of the two shapes.
  std::vector<int64_t> shape;
  if (!constantInts(node.input(1), shape))
    return false;
  Value x = c.input(0);
  if (!x)
    return false;
  auto xType = cast<RankedTensorType>(x.getType());
  if (xType == c.result) // nothing to broadcast
    return convertIdentity(node, c);
  if (!xType.getElementType().isF32())
    return failAt(node, "expands a tensor that is not float32");
  // A broadcast copy is an add of zeros of the result's shape (frozen):
  // exact, and its gradient sums back over the broadcast dimensions.
  Value zeros = filledConstant(node.output(0) + ".zeros",
                               std::vector<int64_t>(c.result.getShape()), 0);
  c.out = tag(b.create<AddOp>(c.loc, c.result, x, zeros), node);
  return true;
}

bool OnnxImporter::convertPad(const onnx::NodeProto &node, NodeCall &c) {
  // Constant padding (Swin-V2's windows where the map is no multiple of
  // them) is a concat with frozen blocks of the value along each padded
  // axis: exact, the same copy a pad kernel makes, and its gradient is the
  // concat's slices. Pads of zeros (the sizes divide) are the value itself.
  std::vector<int64_t> pads = c.ints("pads", {});
  if (node.input_size() > 1 && !node.input(1).empty() &&
      !constantInts(node.input(1), pads))
    return false;
  std::string mode = c.attrs.count("mode") ? c.attrs["mode"]->s() : "constant";
  double value = c.real("value", 0); // opset <= 10
  if (node.input_size() > 2 && !node.input(2).empty()) {
    const onnx::TensorProto *t = constantTensor(node.input(2));
    std::vector<float> v;
    std::string error;
    if (!t || !mlir::dtfm::readTensorFloats(*t, v, error) || v.size() != 1)
      return failAt(node, "the pad value must be a constant float scalar");
    value = v[0];
  }
  if (node.input_size() > 3 && !node.input(3).empty())
    return failAt(node, "pads on chosen axes are not supported");
  if (std::all_of(pads.begin(), pads.end(), [](int64_t p) { return p == 0; }))
    return convertIdentity(node, c);
  if (mode != "constant")
    return failAt(node, "'" + mode +
                            "' padding is not supported (only "
                            "constant padding maps)");
  Value x = c.input(0);
  if (!x)
    return false;
  auto type = cast<RankedTensorType>(x.getType());
  int64_t rank = type.getRank();
  if (static_cast<int64_t>(pads.size()) != 2 * rank)
    return failAt(node, "expected " + std::to_string(2 * rank) + " pads, got " +
                            std::to_string(pads.size()));
  if (std::any_of(pads.begin(), pads.end(), [](int64_t p) { return p < 0; }))
    return failAt(node, "negative pads (cropping) are not supported");
  std::vector<int64_t> shape(type.getShape().begin(), type.getShape().end());
  for (int64_t axis = 0; axis < rank; ++axis) {
    int64_t before = pads[axis], after = pads[axis + rank];
    if (before == 0 && after == 0)
      continue;
    SmallVector<Value> parts;
    auto block = [&](int64_t size, const char *side) {
      std::vector<int64_t> blockShape = shape;
      blockShape[axis] = size;
      parts.push_back(
          filledConstant(node.output(0) + ".pad" + std::to_string(axis) + side,
                         blockShape, value));
    };
    if (before)
      block(before, "before");
    parts.push_back(x);
    if (after)
      block(after, "after");
    shape[axis] += before + after;
    x = tag(b.create<ConcatOp>(
                c.loc, RankedTensorType::get(shape, type.getElementType()),
                parts, b.getI64IntegerAttr(axis)),
            node);
  }
  c.out = x;
  return true;
}

bool OnnxImporter::convertGather(const onnx::NodeProto &node, NodeCall &c) {
  Value x = c.input(0);
  Value indices = x ? integerValueOf(node.input(1)) : Value();
  if (!indices)
    return false;
  if (!cast<RankedTensorType>(indices.getType()).getElementType().isInteger(64))
    return failAt(node, "indices must be int64 or int32");
  int64_t axis = c.integer("axis", 0);
  if (axis < 0)
    axis += cast<RankedTensorType>(x.getType()).getRank();
  c.out = tag(b.create<GatherOp>(c.loc, c.result, x, indices,
                                 b.getI64IntegerAttr(axis)),
              node);
  return true;
}

bool OnnxImporter::convertScatterND(const onnx::NodeProto &node, NodeCall &c) {
  // Float data with constant indices (integer ones were folded at import):
  // Swin-V2 zeroes the key third of its qkv bias so. The data's leading k
  // axes flatten to rows; the result is data * keep + rows of the updates
  // gathered into place * (1 - keep), keep a frozen 0/1 mask per row --
  // exact, and differentiable in the data and the updates.
  if (c.attrs.count("reduction") && c.attrs["reduction"]->s() != "none")
    return failAt(node, "only reduction 'none' is supported");
  Value data = c.input(0), updates = c.input(2);
  std::vector<int64_t> indices;
  if (!data || !updates || !constantInts(node.input(1), indices))
    return false;
  const onnx::TensorProto *indexTensor = constantTensor(node.input(1));
  std::vector<int64_t> indexShape(indexTensor->dims().begin(),
                                  indexTensor->dims().end());
  auto dataType = cast<RankedTensorType>(data.getType());
  ArrayRef<int64_t> dims = dataType.getShape();
  int64_t k = indexShape.empty() ? 0 : indexShape.back();
  if (k < 1 || k > dataType.getRank())
    return failAt(node, "the indices' last dimension must be in [1, " +
                            std::to_string(dataType.getRank()) + "]");
  int64_t rows = 1, count = static_cast<int64_t>(indices.size()) / k;
  for (int64_t i = 0; i < k; ++i)
    rows *= dims[i];
  std::vector<int64_t> rest(dims.begin() + k, dims.end());
  std::vector<int64_t> rowOf(rows, 0);
  std::vector<bool> written(rows, false);
  for (int64_t u = 0; u < count; ++u) {
    int64_t row = 0;
    for (int64_t i = 0; i < k; ++i) {
      int64_t at = indices[u * k + i];
      if (at < -dims[i] || at >= dims[i])
        return failAt(node, "index " + std::to_string(at) +
                                " out of range for size " +
                                std::to_string(dims[i]));
      row = row * dims[i] + (at < 0 ? at + dims[i] : at);
    }
    if (written[row])
      return failAt(node, "an element is written twice");
    written[row] = true;
    rowOf[row] = u;
  }
  std::vector<int64_t> rowShape = {rows};
  rowShape.insert(rowShape.end(), rest.begin(), rest.end());
  std::vector<int64_t> updateShape = {count};
  updateShape.insert(updateShape.end(), rest.begin(), rest.end());
  Type element = dataType.getElementType();
  auto rowsType = RankedTensorType::get(rowShape, element);
  auto reshaped = [&](Value v, RankedTensorType type) -> Value {
    return v.getType() == type ? v
                               : tag(b.create<ReshapeOp>(c.loc, type, v), node);
  };
  Value dataRows = reshaped(data, rowsType);
  Value updateRows =
      reshaped(updates, RankedTensorType::get(updateShape, element));
  if (cast<RankedTensorType>(updates.getType()).getNumElements() !=
      count * (rows ? dataType.getNumElements() / rows : 0))
    return failAt(node, "the updates do not match the indices and the data");
  std::vector<int64_t> maskShape(rowShape.size(), 1);
  maskShape[0] = rows;
  ::dtfm::format::Tensor keep(maskShape, 1.0f), put(maskShape, 0.0f);
  for (int64_t r = 0; r < rows; ++r)
    if (written[r]) {
      keep.data[r] = 0;
      put.data[r] = 1;
    }
  auto rowIndex =
      b.create<ConstantOp>(c.loc, RankedTensorType::get({rows}, b.getI64Type()),
                           b.getDenseI64ArrayAttr(rowOf));
  tag(rowIndex, node);
  Value placed = tag(b.create<GatherOp>(c.loc, rowsType, updateRows, rowIndex,
                                        b.getI64IntegerAttr(0)),
                     node);
  Value kept =
      tag(b.create<MulOp>(c.loc, rowsType, dataRows,
                          tensorConstant(node.output(0) + ".keep", keep)),
          node);
  Value put2 =
      tag(b.create<MulOp>(c.loc, rowsType, placed,
                          tensorConstant(node.output(0) + ".put", put)),
          node);
  Value sum = tag(b.create<AddOp>(c.loc, rowsType, kept, put2), node);
  c.out = reshaped(sum, c.result);
  return true;
}

bool OnnxImporter::convertWhere(const onnx::NodeProto &node, NodeCall &c) {
  Value condition = integerValueOf(node.input(0));
  if (!condition)
    return false;
  if (!cast<RankedTensorType>(condition.getType())
           .getElementType()
           .isInteger(1))
    return failAt(node, "the condition must be bool");
  Value lhs = c.input(1), rhs = c.input(2);
  if (!lhs || !rhs)
    return false;
  c.out = tag(b.create<WhereOp>(c.loc, c.result, condition, lhs, rhs), node);
  return true;
}

bool OnnxImporter::convertTrilu(const onnx::NodeProto &node, NodeCall &c) {
  int64_t k = 0;
  if (node.input_size() > 1 && !node.input(1).empty()) {
    std::vector<int64_t> values;
    if (!constantInts(node.input(1), values) || values.size() != 1)
      return failAt(node, "the diagonal k must be one integer constant");
    k = values[0];
  }
  Value x = c.input(0);
  if (!x)
    return false;
  auto type = cast<RankedTensorType>(x.getType());
  if (type.getRank() < 2 || !type.getElementType().isF32())
    return failAt(node, "expected a float32 input of rank 2 or more");
  int64_t rows = type.getDimSize(type.getRank() - 2),
          cols = type.getDimSize(type.getRank() - 1);
  if (rows * cols > (int64_t(1) << 24))
    return failAt(node, "a " + std::to_string(rows) + " x " +
                            std::to_string(cols) +
                            " triangle (at most 2^24 elements)");
  // Kept: column - row >= k (upper) or <= k (lower); the rest is 0 --
  // chosen by a where, so an infinity there is dropped as Trilu drops it.
  bool upper = c.integer("upper", 1) != 0;
  std::vector<int64_t> keep(rows * cols);
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j)
      keep[i * cols + j] = upper ? j - i >= k : j - i <= k;
  auto mask = b.create<ConstantOp>(
      c.loc, RankedTensorType::get({rows, cols}, b.getI1Type()),
      b.getDenseI64ArrayAttr(keep));
  tag(mask, node);
  c.out = tag(b.create<WhereOp>(c.loc, c.result, mask, x,
                                scalarConstant(node.output(0) + ".zero", 0)),
              node);
  return true;
}

bool OnnxImporter::convertTile(const onnx::NodeProto &node, NodeCall &c) {
  std::vector<int64_t> repeats;
  if (node.input_size() < 2 || !constantInts(node.input(1), repeats))
    return failAt(node, "the repeats must be integer constants");
  Value x = c.input(0);
  if (!x)
    return false;
  auto type = cast<RankedTensorType>(x.getType());
  if (static_cast<int64_t>(repeats.size()) != type.getRank())
    return failAt(node, std::to_string(repeats.size()) +
                            " repeats for a rank-" +
                            std::to_string(type.getRank()) + " input");
  SmallVector<int64_t> shape(type.getShape());
  for (int64_t axis = 0; axis < type.getRank(); ++axis) {
    if (repeats[axis] < 1 || repeats[axis] > 4096)
      return failAt(node, "repeat " + std::to_string(repeats[axis]) +
                              " (expected 1 to 4096)");
    if (repeats[axis] == 1)
      continue;
    SmallVector<Value> copies(repeats[axis], x);
    shape[axis] *= repeats[axis];
    x = tag(b.create<ConcatOp>(c.loc,
                               RankedTensorType::get(shape,
                                                     type.getElementType()),
                               copies, b.getI64IntegerAttr(axis)),
            node);
  }
  c.out = x;
  return true;
}

bool OnnxImporter::convertConcat(const onnx::NodeProto &node, NodeCall &c) {
  SmallVector<Value> parts;
  for (int i = 0; i < node.input_size(); ++i) {
    Value v = c.input(i);
    if (!v)
      return false;
    parts.push_back(v);
  }
  int64_t axis = c.integer("axis", 0);
  if (axis < 0)
    axis += c.result.getRank();
  c.out =
      tag(b.create<ConcatOp>(c.loc, c.result, parts, b.getI64IntegerAttr(axis)),
          node);
  return true;
}

bool OnnxImporter::convertSlice(const onnx::NodeProto &node, NodeCall &c) {
  Value x = c.input(0);
  if (!x)
    return false;
  auto xType = cast<RankedTensorType>(x.getType());
  int64_t rank = xType.getRank();
  auto makeSlice = [&](std::vector<int64_t> starts, std::vector<int64_t> ends,
                       std::vector<int64_t> steps) {
    std::vector<int64_t> shape;
    for (int64_t i = 0; i < rank; ++i)
      shape.push_back((ends[i] - starts[i] + steps[i] - 1) / steps[i]);
    return tag(b.create<SliceOp>(
                   c.loc, RankedTensorType::get(shape, xType.getElementType()),
                   x, b.getDenseI64ArrayAttr(starts),
                   b.getDenseI64ArrayAttr(ends), b.getDenseI64ArrayAttr(steps)),
               node);
  };
  std::vector<int64_t> full(xType.getShape().begin(), xType.getShape().end());
  if (c.type == "Split") {
    int64_t axis = c.integer("axis", 0);
    if (axis < 0)
      axis += rank;
    std::vector<int64_t> sizes = c.ints("split", {});
    if (node.input_size() > 1 && !node.input(1).empty() &&
        !constantInts(node.input(1), sizes))
      return false;
    int parts = node.output_size();
    if (sizes.empty()) {
      if (full[axis] % parts != 0)
        return failAt(node, "an even split of " + std::to_string(full[axis]) +
                                " into " + std::to_string(parts));
      sizes.assign(parts, full[axis] / parts);
    }
    if (static_cast<int>(sizes.size()) != parts)
      return failAt(node, "split sizes and outputs differ in number");
    int64_t begin = 0;
    for (int i = 0; i < parts; ++i) {
      std::vector<int64_t> starts(rank, 0), ends = full, steps(rank, 1);
      starts[axis] = begin;
      ends[axis] = begin + sizes[i];
      begin += sizes[i];
      if (sizes[i] <= 0 || ends[axis] > full[axis])
        return failAt(node, "split sizes do not fit the axis");
      values[node.output(i)] = makeSlice(starts, ends, steps);
    }
    c.done = true;
    return true;
  }
  std::vector<int64_t> starts, ends, axes, steps;
  if (!constantInts(node.input(1), starts) ||
      !constantInts(node.input(2), ends))
    return false;
  if (node.input_size() > 3 && !node.input(3).empty() &&
      !constantInts(node.input(3), axes))
    return false;
  if (node.input_size() > 4 && !node.input(4).empty() &&
      !constantInts(node.input(4), steps))
    return false;
  if (axes.empty())
    for (size_t i = 0; i < starts.size(); ++i)
      axes.push_back(static_cast<int64_t>(i));
  if (steps.empty())
    steps.assign(starts.size(), 1);
  if (axes.size() != starts.size() || ends.size() != starts.size() ||
      steps.size() != starts.size())
    return failAt(node, "starts, ends, axes and steps differ in length");
  std::vector<int64_t> s0(rank, 0), e0 = full, st0(rank, 1);
  // Axes walked backwards (torch.flip, x[::-1]): the elements start,
  // start + step, ... above end, picked by a gather of constant indices.
  std::vector<std::pair<int64_t, std::vector<int64_t>>> reversed;
  std::vector<bool> seen(rank, false);
  for (size_t i = 0; i < axes.size(); ++i) {
    int64_t a = axes[i] < 0 ? axes[i] + rank : axes[i];
    if (a < 0 || a >= rank || steps[i] == 0 || seen[a])
      return failAt(node, "a slice needs distinct valid axes and nonzero "
                          "steps");
    seen[a] = true;
    if (steps[i] < 0) {
      // ONNX's clamping for a negative step: start in [0, dim - 1], end in
      // [-1, dim - 1].
      auto clampBackward = [&](int64_t v, int64_t low) {
        if (v < 0)
          v = v < -full[a] ? low : v + full[a];
        return std::max<int64_t>(low, std::min(v, full[a] - 1));
      };
      int64_t begin = clampBackward(starts[i], 0),
              end = clampBackward(ends[i], -1);
      std::vector<int64_t> picked;
      // |step| >= 1: at most full[a] elements.
      for (int64_t k = begin; k > end; k += steps[i])
        picked.push_back(k);
      if (picked.empty())
        return failAt(node, "an empty slice");
      reversed.push_back({a, std::move(picked)});
      continue;
    }
    auto clampIndex = [&](int64_t v) {
      if (v < 0)
        v += full[a];
      return std::max<int64_t>(0, std::min(v, full[a]));
    };
    s0[a] = clampIndex(starts[i]);
    e0[a] = clampIndex(ends[i]);
    st0[a] = steps[i];
    if (s0[a] >= e0[a])
      return failAt(node, "an empty slice");
  }
  bool sliced = false;
  for (int64_t a = 0; a < rank; ++a)
    sliced = sliced || s0[a] != 0 || e0[a] != full[a] || st0[a] != 1;
  Value out = sliced || reversed.empty() ? makeSlice(s0, e0, st0) : x;
  for (auto &[axis, picked] : reversed) {
    auto type = cast<RankedTensorType>(out.getType());
    SmallVector<int64_t> shape(type.getShape());
    shape[axis] = static_cast<int64_t>(picked.size());
    auto indices = b.create<ConstantOp>(
        c.loc,
        RankedTensorType::get({static_cast<int64_t>(picked.size())},
                              b.getI64Type()),
        b.getDenseI64ArrayAttr(picked));
    tag(indices, node);
    out = tag(b.create<GatherOp>(
                  c.loc, RankedTensorType::get(shape, type.getElementType()),
                  out, indices, b.getI64IntegerAttr(axis)),
              node);
  }
  c.out = out;
  return true;
}

bool OnnxImporter::convertTranspose(const onnx::NodeProto &node, NodeCall &c) {
  Value x = c.input(0);
  if (!x)
    return false;
  int64_t rank = cast<RankedTensorType>(x.getType()).getRank();
  std::vector<int64_t> perm = c.ints("perm", {});
  if (perm.empty()) // default: reverse the dimensions
    for (int64_t i = rank; i-- > 0;)
      perm.push_back(i);
  c.out = tag(
      b.create<TransposeOp>(c.loc, c.result, x, b.getDenseI64ArrayAttr(perm)),
      node);
  return true;
}

bool OnnxImporter::convertCast(const onnx::NodeProto &node, NodeCall &c) {
  Value x = c.input(0);
  if (!x)
    return false;
  if (cast<RankedTensorType>(x.getType()).getElementType() !=
      c.result.getElementType())
    return failAt(node, "casts between float and integer tensors are not "
                        "supported");
  c.out = x; // float to float, or integer to integer: the same tensor here
  layerOfValue[node.output(0)] = layerOfValue[node.input(0)];
  return true;
}
