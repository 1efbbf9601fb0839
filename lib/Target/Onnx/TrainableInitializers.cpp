//===- TrainableInitializers.cpp - Which initializers are trained ---------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//
//
// An ONNX file holds PyTorch's parameters and buffers alike as initializers.
// Training a buffer is a wrong model (a -inf mask decayed into NaN, rotary
// tables drifting), so before anything is folded the importer decides which
// float initializers are parameters:
//
//  - no gradient reaches one from the first output (it only feeds
//    comparisons, Where's condition, shapes or integer casts): frozen, as
//    PyTorch's optimizers skip a parameter whose gradient is None -- and a
//    constant, so a mask built from it folds;
//  - with --params-from, every float initializer the list does not name is
//    frozen; with --freeze, those the patterns match;
//  - one holding an infinity or a NaN is frozen when its values are read
//    (ImportOnnx.cpp's valueOf).
//
// After mapping, warnExport() names the signs of an export that will not
// train as PyTorch does: initializers read alike by several layers (an
// eval-mode export merges equal parameters) and trained tensors whose names
// look like buffers.
//
//===----------------------------------------------------------------------===//

#include "Importer.h"

#include "FoldConstants.h"

#include "llvm/Support/GlobPattern.h"

#include <algorithm>
#include <cstdio>
#include <fstream>

using namespace mlir;
using namespace mlir::dtfm;

namespace mlir::dtfm::onnximport {

/// The most names --params-from may list, and the longest line: a list
/// for another file type (a checkpoint given by mistake) stops at once.
static constexpr size_t kMaxListedNames = size_t(1) << 22;
static constexpr size_t kMaxNameBytes = 4096;

/// The names a --params-from file lists, in order; false with a one-line
/// `error` naming the file and line when it is not such a list.
static bool readNameList(const std::string &path,
                         std::vector<std::string> &names, std::string &error) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    error = "--params-from " + path + ": cannot open the file";
    return false;
  }
  std::string line;
  for (size_t number = 1; std::getline(in, line); ++number) {
    std::string where = "--params-from " + path + ":" + std::to_string(number);
    if (line.size() > kMaxNameBytes) {
      error = where + ": a line over " + std::to_string(kMaxNameBytes) +
              " bytes (expected one parameter name per line)";
      return false;
    }
    if (!line.empty() && line.back() == '\r')
      line.pop_back();
    size_t begin = line.find_first_not_of(" \t");
    if (begin == std::string::npos || line[begin] == '#')
      continue;
    line = line.substr(begin, line.find_last_not_of(" \t") + 1 - begin);
    for (unsigned char ch : line)
      if (ch < 0x20 || ch == 0x7f) {
        error = where + ": a control character in a parameter name";
        return false;
      }
    if (names.size() == kMaxListedNames) {
      error = "--params-from " + path + ": more than " +
              std::to_string(kMaxListedNames) + " names";
      return false;
    }
    names.push_back(line);
  }
  if (in.bad()) {
    error = "--params-from " + path + ": reading the file failed";
    return false;
  }
  if (names.empty()) {
    error = "--params-from " + path +
            ": no parameter names (one per line, as model.named_parameters() "
            "gives them)";
    return false;
  }
  return true;
}

/// Whether the last component of `name` is a word of the buffers models
/// register (causal masks, rotary tables).
static bool namedLikeBuffer(const std::string &name) {
  static const char *const kBufferWords[] = {
      "mask", "cos", "sin", "inv_freq", "freqs", "position_ids", "rotary",
      "rope"};
  std::string last = name.substr(name.rfind('.') + 1);
  return llvm::any_of(kBufferWords, [&](const char *word) {
    return last.find(word) != std::string::npos;
  });
}

/// "'a', 'b', 'c' and 2 more".
static std::string firstNames(const std::vector<std::string> &names,
                              size_t shown = 3) {
  std::string text;
  for (size_t i = 0; i < names.size() && i < shown; ++i)
    text += (i ? ", '" : "'") + names[i] + "'";
  if (names.size() > shown)
    text += " and " + std::to_string(names.size() - shown) + " more";
  return text;
}

bool OnnxImporter::decideTrainable() {
  // The options' errors name the option, not the model.
  auto optionError = [&](const std::string &message) {
    if (problem.empty())
      problem = message;
    return false;
  };
  const onnx::GraphProto &graph = model.graph();
  std::set<std::string> floatInitializers;
  for (const onnx::TensorProto &t : graph.initializer())
    if (t.data_type() == onnx::TensorProto::FLOAT)
      floatInitializers.insert(t.name());

  // Gradients flow backwards from the first output through float values
  // only: a comparison's, a Shape's or an integer Cast's inputs get none.
  std::map<std::string, int> elementTypes;
  auto record = [&](const onnx::ValueInfoProto &v) {
    if (v.type().has_tensor_type())
      elementTypes[v.name()] = v.type().tensor_type().elem_type();
  };
  for (const auto &v : graph.input())
    record(v);
  for (const auto &v : graph.value_info())
    record(v);
  for (const auto &v : graph.output())
    record(v);
  for (const onnx::TensorProto &t : graph.initializer())
    elementTypes[t.name()] = t.data_type();
  auto isFloat = [&](const std::string &name) {
    auto it = elementTypes.find(name);
    // Unknown: counted as float, so nothing is frozen by guesswork.
    return it == elementTypes.end() ||
           it->second == onnx::TensorProto::FLOAT ||
           it->second == onnx::TensorProto::DOUBLE ||
           it->second == onnx::TensorProto::FLOAT16 ||
           it->second == onnx::TensorProto::BFLOAT16;
  };
  std::set<std::string> live;
  if (graph.output_size() > 0)
    live.insert(graph.output(0).name());
  for (int i = graph.node_size() - 1; i >= 0; --i) {
    const onnx::NodeProto &node = graph.node(i);
    bool reached = false;
    for (const std::string &output : node.output())
      reached = reached || (live.count(output) && isFloat(output));
    if (!reached)
      continue;
    for (const std::string &input : node.input())
      if (!input.empty() && isFloat(input))
        live.insert(input);
  }
  for (const std::string &name : floatInitializers)
    if (!live.count(name))
      frozenInitializers.insert(name);

  if (!options.paramsFrom.empty()) {
    std::vector<std::string> listed;
    if (!readNameList(options.paramsFrom, listed, problem))
      return false;
    std::set<std::string> named(listed.begin(), listed.end());
    std::vector<std::string> absent;
    for (const std::string &name : listed)
      if (!floatInitializers.count(name))
        absent.push_back(name);
    if (absent.size() == listed.size())
      return optionError("--params-from " + options.paramsFrom +
                         ": none of its " + std::to_string(listed.size()) +
                         " names (" + firstNames(listed) +
                         ") is a float initializer of the model; was it "
                         "written for this model?");
    if (!absent.empty() && options.warn)
      options.warn("--params-from " + options.paramsFrom + ": " +
                   std::to_string(absent.size()) +
                   " names are no float initializer of the model (" +
                   firstNames(absent) +
                   "): unused by the forward, or renamed by the export");
    for (const std::string &name : floatInitializers)
      if (!named.count(name))
        frozenInitializers.insert(name);
  }

  // What --freeze matches is a parameter the user froze, even when
  // --params-from leaves it out: it keeps its name and layout.
  std::set<std::string> frozenByUser;
  for (const std::string &pattern : options.freeze) {
    llvm::Expected<llvm::GlobPattern> glob = llvm::GlobPattern::create(pattern);
    if (!glob) {
      std::string why = llvm::toString(glob.takeError());
      return optionError("--freeze '" + pattern + "': not a glob pattern (" +
                         why + ")");
    }
    bool matched = false;
    for (const std::string &name : floatInitializers)
      if (glob->match(name)) {
        frozenInitializers.insert(name);
        frozenByUser.insert(name);
        matched = true;
      }
    if (!matched)
      return optionError("--freeze '" + pattern +
                         "': matches no float initializer of the model");
  }
  for (const std::string &name : frozenInitializers)
    if (!frozenByUser.count(name))
      constantInitializers.insert(name);
  return true;
}

void OnnxImporter::warnExport() {
  if (!options.warn)
    return;
  // An eval-mode export merges equal-valued parameters (fresh layers of
  // one init, LayerNorm's ones and zeros) into one initializer, read alike
  // by layers that PyTorch trains apart.
  std::vector<std::string> merged;
  std::string example;
  for (const auto &[name, list] : readers) {
    // Buffers shared by layers (a rotary table) are for the next warning.
    if (list.size() < 2 || !initializer(name) || frozenByImport(name) ||
        namedLikeBuffer(name))
      continue;
    std::set<std::string> modules;
    bool alike = true;
    for (const auto &[node, index] : list) {
      alike = alike && node->op_type() == list[0].first->op_type() &&
              index == list[0].second;
      modules.insert(modulePathOfScope(node->name()));
    }
    if (!alike || modules.size() < 2)
      continue;
    if (merged.empty())
      example = " ('" + name + "' by '" + list[0].first->name() + "' and '" +
                list[1].first->name() + "')";
    merged.push_back(name);
  }
  if (!merged.empty())
    options.warn(
        path + ": " + std::to_string(merged.size()) +
        " initializers are read alike by several layers" + example +
        ": each is one tensor, trained as tied; an eval-mode export merges "
        "equal parameters, so export with training=TrainingMode.TRAINING, "
        "do_constant_folding=False to train as PyTorch does (docs/Onnx.md)");
  // An exporter-made name ("onnx::Conv_14") on a trained float initializer:
  // a value constant-folded at export (a weight_norm's g v / |v|, a
  // BatchNorm fused into its convolution) whose PyTorch parameters are
  // gone; trained as one tensor it is another function's parameter.
  std::vector<std::string> folded;
  for (const onnx::TensorProto &t : model.graph().initializer())
    if (t.data_type() == onnx::TensorProto::FLOAT &&
        llvm::StringRef(t.name()).starts_with("onnx::") &&
        !frozenByImport(t.name()) && readers.count(t.name()))
      folded.push_back(t.name());
  if (!folded.empty())
    options.warn(path + ": " + std::to_string(folded.size()) +
                 " trained initializers were made by the export's constant "
                 "folding (" + firstNames(folded) +
                 "; a weight_norm's g v / |v|, a BatchNorm fused into its "
                 "convolution): their PyTorch parameters are gone, so "
                 "export with training=TrainingMode.TRAINING, "
                 "do_constant_folding=False to train as PyTorch does "
                 "(docs/Onnx.md)");
  // Dropout is imported as the identity: a training export's nodes that
  // would drop are said once (PyTorch's losses then differ by its noise).
  int dropping = 0;
  double ratio = 0;
  for (const onnx::NodeProto &node : model.graph().node()) {
    if (node.op_type() != "Dropout")
      continue;
    double p = 0.5; // ONNX's default ratio
    for (const onnx::AttributeProto &a : node.attribute())
      if (a.name() == "ratio") // before opset 12
        p = a.f();
    std::vector<float> given;
    std::vector<int64_t> training;
    std::string error;
    if (node.input_size() > 1 && !node.input(1).empty())
      if (const onnx::TensorProto *t = constantTensor(node.input(1));
          t && readTensorFloats(*t, given, error) && given.size() == 1)
        p = given[0];
    bool trains = true; // before opset 12: by the export's mode
    if (node.input_size() > 2 && !node.input(2).empty()) {
      const onnx::TensorProto *t = constantTensor(node.input(2));
      trains = t && readTensorInts(*t, training, error) &&
               training.size() == 1 && training[0] != 0;
    } else if (node.input_size() > 1) {
      trains = false; // opset 12 on: training_mode defaults to false
    }
    if (trains && p > 0) {
      ++dropping;
      ratio = std::max(ratio, p);
    }
  }
  char ratioText[32];
  std::snprintf(ratioText, sizeof ratioText, "%g", ratio);
  if (dropping > 0)
    options.warn(path + ": " + std::to_string(dropping) +
                 " Dropout nodes (ratio up to " + ratioText +
                 ") are imported as identities: dtfm does not drop "
                 "activations (export with dropout 0 to compare with "
                 "PyTorch)");
  if (!nonFinite.empty())
    options.warn(path + ": " + std::to_string(nonFinite.size()) +
                 " initializers hold infinities or NaNs and are constants, "
                 "not parameters (" +
                 firstNames(nonFinite) + ")");
  // Names of the buffers models register (causal masks, rotary tables):
  // trained here unless listed as frozen.
  if (!options.paramsFrom.empty())
    return;
  std::vector<std::string> suspicious;
  for (const onnx::TensorProto &t : model.graph().initializer()) {
    auto it = values.find(t.name());
    if (it == values.end() || frozenByImport(t.name()))
      continue;
    auto param = it->second.getDefiningOp<ParamOp>();
    if (!param || param.getFrozen())
      continue;
    if (namedLikeBuffer(t.name()))
      suspicious.push_back(t.name());
  }
  if (!suspicious.empty())
    options.warn(path + ": " + firstNames(suspicious) +
                 (suspicious.size() == 1 ? " is" : " are") +
                 " trained as parameters, but named like buffers: if "
                 "PyTorch does not train them, pass --params-from (the "
                 "names of model.named_parameters(); docs/Onnx.md) or "
                 "--freeze");
}

} // namespace mlir::dtfm::onnximport
