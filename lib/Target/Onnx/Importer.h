//===- Importer.h - The ONNX importer's state and converters ----*- C++ -*-===//
//
// Part of dtfm. Private to lib/Target/Onnx: the importer, shared by
// ImportOnnx.cpp (loading, values, parameters, the graph walk), the
// converters of ONNX op types (Convert*.cpp, one file per family) and
// ConvertOps.cpp (the table that lists them).
//
//===----------------------------------------------------------------------===//

#ifndef DTFM_LIB_TARGET_ONNX_IMPORTER_H
#define DTFM_LIB_TARGET_ONNX_IMPORTER_H

#include "dtfm/Target/Onnx/ImportOnnx.h"

#include "dtfm/Dialect/Dtfm/IR/DtfmOps.h"
#include "dtfm/Format/TensorFile.h"

#include <onnx/onnx_pb.h>

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"

#include <array>
#include <map>
#include <tuple>
#include <set>
#include <string>
#include <vector>

namespace mlir::dtfm::onnximport {

struct NodeCall;

class OnnxImporter {
  friend struct NodeCall;

public:
  OnnxImporter(MLIRContext *context, const std::string &path,
               const OnnxImportOptions &options)
      : b(context), path(path), options(options) {}

  OwningOpRef<ModuleOp> run(std::string &error);

private:
  bool fail(const std::string &message) {
    if (problem.empty())
      problem = path + ": " + message;
    return false;
  }
  bool failAt(const onnx::NodeProto &node, const std::string &message) {
    return fail("node '" + node.name() + "' (" + node.op_type() +
                "): " + message);
  }

  bool load();
  bool mapGraph();
  /// Maps one node through converters() (failing with a diagnostic).
  bool convert(const onnx::NodeProto &node);

  /// A node's converter: creates the dtfm op(s) of the node (its first
  /// result in `c.out`, or its outputs itself and `c.done`), or fails with
  /// a diagnostic. Defined in the Convert*.cpp files.
  using Converter = bool (OnnxImporter::*)(const onnx::NodeProto &node,
                                           NodeCall &c);
  bool convertConstant(const onnx::NodeProto &node, NodeCall &c);
  bool convertIdentity(const onnx::NodeProto &node, NodeCall &c);
  /// Conv and ConvTranspose, 1-D (over a map of height 1) and 2-D.
  bool convertConv(const onnx::NodeProto &node, NodeCall &c);
  bool convertBatchNormalization(const onnx::NodeProto &node, NodeCall &c);
  bool convertInstanceNormalization(const onnx::NodeProto &node, NodeCall &c);
  /// LSTM, GRU and RNN, unrolled over the sequence (ConvertRecurrent.cpp).
  bool convertRecurrent(const onnx::NodeProto &node, NodeCall &c);
  /// `v` [N, C, L] viewed as [N, C, 1, L]: 1-D convolution and pooling run
  /// as 2-D.
  Value withHeightOne(const onnx::NodeProto &node, NodeCall &c, Value v);
  bool convertRelu(const onnx::NodeProto &node, NodeCall &c);
  bool convertPool(const onnx::NodeProto &node, NodeCall &c);
  bool convertGlobalAveragePool(const onnx::NodeProto &node, NodeCall &c);
  bool convertBinary(const onnx::NodeProto &node, NodeCall &c);
  bool convertFlatten(const onnx::NodeProto &node, NodeCall &c);
  bool convertReshape(const onnx::NodeProto &node, NodeCall &c);
  bool convertSqueeze(const onnx::NodeProto &node, NodeCall &c);
  bool convertMath(const onnx::NodeProto &node, NodeCall &c);
  bool convertNeg(const onnx::NodeProto &node, NodeCall &c);
  bool convertPow(const onnx::NodeProto &node, NodeCall &c);
  bool convertClip(const onnx::NodeProto &node, NodeCall &c);
  bool convertExpand(const onnx::NodeProto &node, NodeCall &c);
  bool convertPad(const onnx::NodeProto &node, NodeCall &c);
  bool convertHardSigmoid(const onnx::NodeProto &node, NodeCall &c);
  /// clip(alpha x + beta, 0, 1) of `x` (HardSigmoid's, and HardSwish's
  /// with alpha 1/6 and beta 1/2), its constants frozen parameters named
  /// after `name`.
  Value hardSigmoid(const onnx::NodeProto &node, NodeCall &c, Value x,
                    const std::string &name, double alpha, double beta);
  /// The one float of constant input `i` (an initializer or a Constant),
  /// or `fallback` when the input is absent; false with a diagnostic naming
  /// `what` when it is not one float constant.
  bool scalarInput(const onnx::NodeProto &node, int i, const char *what,
                   double fallback, double &value);
  /// ReduceMean, ReduceSum, ReduceL2 (means times counts), ReduceMax and
  /// ReduceMin; the axes an attribute or (opset 18) an input.
  bool convertReduceMean(const onnx::NodeProto &node, NodeCall &c);
  /// CumSum of floats: a product with a frozen 0/1 triangle along the axis.
  bool convertCumSum(const onnx::NodeProto &node, NodeCall &c);
  bool convertGather(const onnx::NodeProto &node, NodeCall &c);
  /// Trilu of a computed float: a where with a constant triangle of the
  /// last two dimensions, zeros elsewhere (constants fold instead).
  bool convertTrilu(const onnx::NodeProto &node, NodeCall &c);
  /// Tile of a computed float: copies concatenated along each repeated
  /// axis.
  bool convertTile(const onnx::NodeProto &node, NodeCall &c);
  bool convertScatterND(const onnx::NodeProto &node, NodeCall &c);
  bool convertWhere(const onnx::NodeProto &node, NodeCall &c);
  bool convertConcat(const onnx::NodeProto &node, NodeCall &c);
  bool convertSlice(const onnx::NodeProto &node, NodeCall &c);
  bool convertTranspose(const onnx::NodeProto &node, NodeCall &c);
  bool convertCast(const onnx::NodeProto &node, NodeCall &c);
  bool convertSoftmax(const onnx::NodeProto &node, NodeCall &c);
  bool convertMatMul(const onnx::NodeProto &node, NodeCall &c);
  bool convertGemm(const onnx::NodeProto &node, NodeCall &c);
  bool convertFusedLayerNorm(const onnx::NodeProto &node, NodeCall &c);
  bool convertFusedRmsNorm(const onnx::NodeProto &node, NodeCall &c);
  bool convertLayerNormalization(const onnx::NodeProto &node, NodeCall &c);
  bool convertFusedSilu(const onnx::NodeProto &node, NodeCall &c);
  bool convertFusedGelu(const onnx::NodeProto &node, NodeCall &c);
  bool convertFusedLinear(const onnx::NodeProto &node, NodeCall &c);
  bool convertFusedEmbedding(const onnx::NodeProto &node, NodeCall &c);
  bool convertFusedAttention(const onnx::NodeProto &node, NodeCall &c);

  /// The commonest converter: the node's first N inputs, all present, into
  /// one op OpT of the node's result type with `extra` (its attributes)
  /// after them. Every input is looked up before any is checked, as the
  /// other converters do.
  template <typename OpT, size_t N, typename... Extra>
  bool convertToOne(const onnx::NodeProto &node, NodeCall &c, Extra... extra);

public:
  /// The converters, by ONNX op type (and the dtfm.* types of the chains
  /// FusePatterns.cpp recognises): the one list of what the importer maps.
  static const std::map<std::string, Converter> &converters();

private:
  /// Shape and element type of a named value, from the inferred graph.
  bool typeOf(const std::string &name, RankedTensorType &type);
  RankedTensorType floatType(ArrayRef<int64_t> shape) {
    return RankedTensorType::get(shape, b.getF32Type());
  }
  /// The value of `name`: a computed one, a graph input, or an initializer
  /// as a parameter (made on first use).
  Value valueOf(const std::string &name, bool frozen = false);
  /// A `dtfm.param init(external)` whose values go to the weights file.
  ParamOp externalParam(const std::string &name, ::dtfm::format::Tensor tensor,
                        bool frozen);
  /// A frozen scalar parameter holding `value` (Neg's -1, Gemm's alpha),
  /// placed in the layer of the op that reads it.
  Value scalarConstant(const std::string &name, double value);
  /// The same of shape `shape`, every element `value`.
  Value filledConstant(const std::string &name, std::vector<int64_t> shape,
                       double value);
  /// The same holding `tensor`.
  Value tensorConstant(const std::string &name, ::dtfm::format::Tensor tensor);
  /// An initializer or a Constant's tensor, if `name` is one.
  const onnx::TensorProto *constantTensor(const std::string &name);
  /// An initializer or Constant's integers (int64, int32 or bool as 0/1).
  bool constantInts(const std::string &name, std::vector<int64_t> &values);
  /// An integer or boolean operand: a computed value or graph input, or a
  /// constant as a dtfm.constant (made on first use).
  Value integerValueOf(const std::string &name);
  const onnx::TensorProto *initializer(const std::string &name) {
    auto it = initializers.find(name);
    return it == initializers.end() ? nullptr : it->second;
  }
  bool floats(const onnx::TensorProto &t, std::vector<float> &out);
  /// Whether every node that reads initializer `name` (through Identity
  /// and Dropout) is a Gemm with transB reading it as B.
  bool onlyTransposedByGemms(const std::string &name);
  /// Whether the import keeps float initializer `name` constant (a frozen
  /// parameter): it is not trained in PyTorch by --params-from or
  /// --freeze, or no gradient reaches it (TrainableInitializers.cpp).
  bool frozenByImport(const std::string &name) const {
    return frozenInitializers.count(name) != 0;
  }
  /// Decides frozenInitializers on the loaded graph, before folding (a
  /// constant mask folds like any other constant); false with a diagnostic
  /// when --params-from or --freeze names nothing in the model.
  bool decideTrainable();
  /// One-line warnings, after mapping, about an export that will not train
  /// as PyTorch does (TrainableInitializers.cpp).
  void warnExport();

  Value tag(Operation *op, const onnx::NodeProto &node);
  Location at(const onnx::NodeProto &node) {
    return NameLoc::get(
        b.getStringAttr(node.name().empty() ? node.op_type() : node.name()));
  }

  OpBuilder b;
  const std::string &path;
  const OnnxImportOptions &options;
  onnx::ModelProto model;
  std::string problem;

  std::map<std::string, const onnx::TensorProto *> initializers;
  std::map<std::string, const onnx::TensorProto *> constants; // Constant ops
  std::map<std::string, RankedTensorType> types;
  std::map<std::string, std::string> badTypes; // value -> ONNX type name
  std::map<std::string, Value> values;
  std::map<std::string, std::string> layerOfValue;
  std::map<std::string, ::dtfm::format::Tensor> weights;
  std::map<std::string, std::string> renamed; // Identity / Dropout outputs
  std::set<std::string> consumed; // values some node or the graph reads
  std::map<std::string, Operation *> unplaced; // params awaiting a layer
  /// The nodes reading each value, by name, with the input's index
  /// (Identity and Dropout outputs resolved to what they copy).
  std::map<std::string, std::vector<std::pair<const onnx::NodeProto *, int>>>
      readers;
  /// Float initializers imported as frozen parameters (decideTrainable).
  std::set<std::string> frozenInitializers;
  /// Those of them that are constants, not parameters the user froze
  /// (--freeze): they may fold with what is computed from them; a frozen
  /// parameter keeps its name and layout (--save-params writes it).
  std::set<std::string> constantInitializers;
  /// Frozen because they hold an infinity or a NaN (an additive mask):
  /// found when their values are read; named in one warning.
  std::vector<std::string> nonFinite;
};

/// What a converter sees of its node: its attributes (with typed
/// accessors and the ONNX defaults the caller gives), its inputs as values,
/// the inferred type and location of its first output, and what it made.
struct NodeCall {
  OnnxImporter &importer;
  const onnx::NodeProto &node;
  std::map<std::string, const onnx::AttributeProto *> attrs;
  std::string type;
  RankedTensorType result;
  Location loc;
  Value out;
  bool done = false; ///< the converter recorded its outputs itself

  std::vector<int64_t> ints(const char *name,
                            std::vector<int64_t> fallback) const {
    auto it = attrs.find(name);
    return it == attrs.end() ? fallback
                             : std::vector<int64_t>(it->second->ints().begin(),
                                                    it->second->ints().end());
  }
  int64_t integer(const char *name, int64_t fallback) const {
    auto it = attrs.find(name);
    return it == attrs.end() ? fallback : it->second->i();
  }
  double real(const char *name, double fallback) const {
    auto it = attrs.find(name);
    return it == attrs.end() ? fallback : static_cast<double>(it->second->f());
  }
  /// Input `i` as a value (null when absent or when it failed).
  Value input(int i, bool frozen = false) const;
};

template <typename OpT, size_t N, typename... Extra>
bool OnnxImporter::convertToOne(const onnx::NodeProto &node, NodeCall &c,
                                Extra... extra) {
  std::array<Value, N> inputs;
  for (size_t i = 0; i < N; ++i)
    inputs[i] = c.input(static_cast<int>(i));
  for (Value input : inputs)
    if (!input)
      return false;
  c.out = tag(std::apply(
                  [&](auto... operands) {
                    return b.create<OpT>(c.loc, c.result, operands..., extra...)
                        .getOperation();
                  },
                  inputs),
              node);
  return true;
}

/// The layer a parameter's name places it in (ImportOnnx.cpp says how).
std::string layerOfParameter(const std::string &name);

/// The module path of a node PyTorch named by its scopes
/// ("/layer3/layer3.0/downsample/downsample.0/Conv" -> "layer3.0.downsample.0").
std::string modulePathOfScope(const std::string &nodeName);

/// A node's attributes by name.
std::map<std::string, const onnx::AttributeProto *>
attributesOf(const onnx::NodeProto &node);

/// Explicit [top, left, bottom, right] pads for auto_pad SAME_UPPER or
/// SAME_LOWER (VALID and NOTSET: the given pads).
bool explicitPads(const std::string &autoPad, ArrayRef<int64_t> inputShape,
                  ArrayRef<int64_t> kernel, ArrayRef<int64_t> strides,
                  ArrayRef<int64_t> dilations, std::vector<int64_t> &pads);

} // namespace mlir::dtfm::onnximport

#endif // DTFM_LIB_TARGET_ONNX_IMPORTER_H
