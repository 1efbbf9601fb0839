//===- FoldConstants.h - Shape computations evaluated at import -*- C++ -*-===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//

#ifndef DTFM_LIB_TARGET_ONNX_FOLDCONSTANTS_H
#define DTFM_LIB_TARGET_ONNX_FOLDCONSTANTS_H

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace onnx {
class GraphProto;
class TensorProto;
} // namespace onnx

namespace mlir::dtfm {

/// The elements of an int64, int32 or bool tensor (booleans as 0/1), or of
/// a float32 one; false with `error` saying what is wrong ("is not
/// float32", "has 12 bytes of data for 4 floats": the caller names the
/// tensor) when the type is another, its size does not match the dims, or
/// its external data (ExternalData.h, resolved at load) cannot be read.
/// The one reader of ONNX tensor data for the importer.
bool readTensorInts(const onnx::TensorProto &t, std::vector<int64_t> &out,
                    std::string &error);
bool readTensorFloats(const onnx::TensorProto &t, std::vector<float> &out,
                      std::string &error);

/// Evaluates at import what PyTorch's exports compute from static shapes
/// (torch-mlir and onnx-simplifier do the same before mapping): every node
/// of a foldable type (FoldOps.cpp's table: Shape, Size, ConstantOfShape,
/// Range, Gather, Slice, Concat, Unsqueeze, Squeeze, Reshape, Expand,
/// Identity, Cast, comparisons and boolean ops, Where, elementwise
/// arithmetic and math, Trilu, Tile, ScatterND, Transpose) whose inputs are
/// all constants -- Constant nodes, integer or bool
/// initializers, values folded before, and for Shape and Size any value
/// whose shape `shapes` gives -- becomes a Constant node with its value.
/// Float initializers are parameters and are never folded into, except
/// those in `constantFloats` (frozen: masks, buffers). Returns
/// how many nodes were folded; false with a one-line `error` naming the
/// node when one cannot be evaluated (an index out of range, a size
/// mismatch, a result over `maxElements`).
bool foldShapeComputations(
    onnx::GraphProto &graph,
    const std::map<std::string, std::vector<int64_t>> &shapes,
    const std::set<std::string> &constantFloats, int64_t maxElements,
    int &folded, std::string &error);

} // namespace mlir::dtfm

#endif // DTFM_LIB_TARGET_ONNX_FOLDCONSTANTS_H
