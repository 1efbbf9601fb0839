//===- LoadOnnx.cpp - An ONNX model, checked and ready to map -------------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//
//
// The importer's first half (OnnxImporter::load): the model's file, its
// external data, the checks dtfm makes before ONNX's own (dimensions,
// attributes), ONNX's checker and shape inference in a child process (they
// abort on some hostile inputs), Einsum lowering, constant folding and the
// fusion of PyTorch's decompositions. ImportOnnx.cpp maps the result.
//
//===----------------------------------------------------------------------===//

#include "Importer.h"

#include "ExternalData.h"
#include "FoldConstants.h"
#include "FusePatterns.h"

#include "dtfm/Format/TensorFile.h"

#include <google/protobuf/stubs/logging.h>
#include <onnx/checker.h>
#include <onnx/defs/schema.h>
#include <onnx/onnx_pb.h>
#include <onnx/shape_inference/implementation.h>

#include "llvm/Support/Path.h"

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sys/wait.h>
#include <unistd.h>

using namespace mlir;
using namespace mlir::dtfm;

bool mlir::dtfm::parseShapeOverride(
    const std::string &text,
    std::map<std::string, std::vector<int64_t>> &shapes, std::string &error) {
  size_t eq = text.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == text.size()) {
    error = "--shape: expected name=d0,d1,..., got '" + text + "'";
    return false;
  }
  std::vector<int64_t> dims;
  std::string rest = text.substr(eq + 1);
  size_t at = 0;
  while (at <= rest.size()) {
    size_t comma = rest.find(',', at);
    std::string item = rest.substr(
        at, comma == std::string::npos ? std::string::npos : comma - at);
    char *end = nullptr;
    errno = 0;
    long long d = std::strtoll(item.c_str(), &end, 10);
    // strtoll clamps what does not fit to LLONG_MAX (ERANGE); the element
    // count is bounded when the model's shapes are checked.
    if (item.empty() || !end || *end != '\0' || d <= 0 || errno == ERANGE ||
        d > kMaxTensorBytes) {
      error = "--shape " + text + ": '" + item +
              "' is not a dimension in [1, " + std::to_string(kMaxTensorBytes) +
              "]";
      return false;
    }
    dims.push_back(d);
    if (comma == std::string::npos)
      break;
    at = comma + 1;
  }
  shapes[text.substr(0, eq)] = dims;
  return true;
}

namespace mlir::dtfm::onnximport {

/// "[d0, d1, ...]".
static std::string
dimsText(const google::protobuf::RepeatedField<int64_t> &dims) {
  std::string text = "[";
  for (int i = 0; i < dims.size(); ++i)
    text += (i ? ", " : "") + std::to_string(dims[i]);
  return text + "]";
}

/// What is wrong with a constant tensor's dims before anything is sized
/// from them: a negative one, or more than kMaxTensorBytes in all; "" when
/// nothing is.
static std::string dimsProblem(const onnx::TensorProto &t) {
  int64_t elements = 1;
  for (int64_t d : t.dims()) {
    if (d < 0)
      return "dims " + dimsText(t.dims()) + " hold a negative dimension";
    if (llvm::MulOverflow(elements, d, elements) ||
        elements > kMaxTensorBytes / 8)
      return "dims " + dimsText(t.dims()) + " hold more than " +
             std::to_string(kMaxTensorBytes) + " bytes";
  }
  return "";
}

/// Attributes ONNX's own shape inference divides by or sizes from, checked
/// first (it would divide by a zero stride): strides, dilations and
/// kernel_shape positive, pads not negative.
static std::string attributeProblem(const onnx::NodeProto &node) {
  for (const onnx::AttributeProto &a : node.attribute()) {
    bool positive = a.name() == "strides" || a.name() == "dilations" ||
                    a.name() == "kernel_shape";
    bool natural = a.name() == "pads";
    if (!positive && !natural)
      continue;
    for (int64_t v : a.ints())
      if (positive ? v < 1 : v < 0) {
        std::string list;
        for (int64_t w : a.ints())
          list += (list.empty() ? "" : ", ") + std::to_string(w);
        return a.name() + " [" + list + "]: every value must be " +
               (positive ? "positive" : "at least 0");
      }
  }
  return "";
}

/// Writes all of `bytes` to `fd` (a pipe).
static bool writeAll(int fd, const std::string &bytes) {
  for (size_t done = 0; done < bytes.size();) {
    ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

/// Runs `step` -- ONNX's checker or its shape inference, on `model` -- in a
/// child process: "" on success, else one line (`what`: ONNX's message).
/// With `takeModel` the child's model (shapes inferred) replaces `model`.
/// Both are ONNX's code, and Debian's libonnx crashes on some malformed
/// models (a Conv or ConvTranspose whose input and weight ranks differ reads
/// out of bounds, onnx/onnx#6180; found by the ONNX fuzzer); in a child such
/// a crash is an error, not a dead importer.
static std::string
runIsolated(const std::string &what, onnx::ModelProto &model, bool takeModel,
            const std::function<void(onnx::ModelProto &)> &step) {
  int fds[2];
  if (::pipe(fds) != 0)
    return "cannot run " + what + " (pipe: " + std::strerror(errno) + ")";
  std::fflush(nullptr);
  pid_t child = ::fork();
  if (child < 0) {
    ::close(fds[0]);
    ::close(fds[1]);
    return "cannot run " + what + " (fork: " + std::strerror(errno) + ")";
  }
  if (child == 0) {
    // A crash ends the child by its signal, whatever handlers the parent
    // installed (LLVM's, a sanitizer's, libFuzzer's).
    for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT})
      std::signal(sig, SIG_DFL);
    ::close(fds[0]);
    std::string reply = "M";
    try {
      step(model);
      if (takeModel)
        reply += model.SerializeAsString();
    } catch (const std::exception &e) {
      reply = "E" + what + ": " + e.what();
    }
    ::_exit(writeAll(fds[1], reply) ? 0 : 1);
  }
  ::close(fds[1]);
  std::string reply;
  char buffer[1 << 16];
  for (;;) {
    ssize_t n = ::read(fds[0], buffer, sizeof buffer);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      break;
    reply.append(buffer, static_cast<size_t>(n));
  }
  ::close(fds[0]);
  int status = 0;
  while (::waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFSIGNALED(status))
    return what + " crashed on this model (" + strsignal(WTERMSIG(status)) +
           "): it is malformed";
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || reply.empty())
    return what + " failed without a message";
  if (reply[0] == 'E')
    return reply.substr(1);
  google::protobuf::LogSilencer noLog;
  if (takeModel && !model.ParseFromArray(reply.data() + 1,
                                         static_cast<int>(reply.size() - 1)))
    return what + " returned a model that does not parse";
  return "";
}

/// The most elements a folded shape computation may make (a mask of
/// 8192 x 8192): a hostile ConstantOfShape gets one line, not the memory.
static constexpr int64_t kMaxFoldedElements = int64_t(1) << 26;
/// The largest integer tensor read in from a file beside the model at load
/// (ONNX's shape inference reads Reshape targets and the like from them).
static constexpr int64_t kInlineExternalBytes = int64_t(1) << 20;
/// Rounds of folding and shape inference: each round folds what the
/// shapes inferred in the one before make constant (a ViT needs 3).
static constexpr int kMaxFoldRounds = 200;

bool OnnxImporter::load() {
  // A regular file only (a FIFO would block the import).
  std::string why;
  int fd = ::dtfm::format::openRegularFile(path, why);
  if (fd < 0)
    return fail(why.substr(path.size() + 2));
  // Quiet: protobuf would log what it finds wrong (invalid UTF-8 in a
  // string) on stderr before the one line below.
  google::protobuf::LogSilencer noLog;
  bool parsed = model.ParseFromFileDescriptor(fd);
  ::close(fd);
  if (!parsed)
    return fail("not an ONNX model (protobuf does not parse)");
  // What ONNX's shape inference and the importer size or divide by, before
  // either does.
  for (const onnx::TensorProto &t : model.graph().initializer())
    if (std::string problem = dimsProblem(t); !problem.empty())
      return fail("initializer '" + t.name() + "': " + problem);
  for (const onnx::NodeProto &node : model.graph().node()) {
    std::string where = "node '" + node.name() + "' (" + node.op_type() + ")";
    if (std::string problem = attributeProblem(node); !problem.empty())
      return fail(where + ": " + problem);
    for (const onnx::AttributeProto &a : node.attribute())
      if (a.has_t())
        if (std::string problem = dimsProblem(a.t()); !problem.empty())
          return fail(where + ": attribute " + a.name() + ": " + problem);
  }
  // Tensors in files beside the model (over 2 GB): checked and located;
  // the float ones stay in their files until the weights are read, so that
  // what goes to ONNX's checker and shape inference stays small.
  if (std::string why;
      !resolveExternalData(model, llvm::sys::path::parent_path(path).str(),
                           kInlineExternalBytes, why))
    return fail(why);
  // An opset newer than this build's ONNX library knows would fail its
  // checker at the first op that changed, with a message about that op.
  int newest = onnx::OpSchemaRegistry::DomainToVersionRange::Instance()
                   .Map()
                   .at(onnx::ONNX_DOMAIN)
                   .second;
  for (const onnx::OperatorSetIdProto &opset : model.opset_import())
    if ((opset.domain().empty() || opset.domain() == "ai.onnx") &&
        opset.version() > newest)
      return fail("opset " + std::to_string(opset.version()) +
                  " is newer than the ONNX library dtfm was built with "
                  "(its opsets go up to " +
                  std::to_string(newest) + "): export with opset_version=" +
                  std::to_string(newest));
  if (std::string problem = runIsolated(
          "ONNX checker", model, /*takeModel=*/false,
          [](onnx::ModelProto &m) { onnx::checker::check_model(m); });
      !problem.empty())
    return fail(problem);
  // Static shapes: overrides first, then every graph input must be static.
  onnx::GraphProto *graph = model.mutable_graph();
  std::set<std::string> initializerNames;
  for (const onnx::TensorProto &t : graph->initializer())
    initializerNames.insert(t.name());
  std::set<std::string> inputNames;
  for (const onnx::ValueInfoProto &input : graph->input())
    if (!initializerNames.count(input.name()))
      inputNames.insert(input.name());
  for (const auto &[name, dims] : options.shapes)
    if (!inputNames.count(name))
      return fail("--shape " + name + ": the model has no such input");
  for (onnx::ValueInfoProto &input : *graph->mutable_input()) {
    if (initializerNames.count(input.name()))
      continue;
    onnx::TensorShapeProto *shape =
        input.mutable_type()->mutable_tensor_type()->mutable_shape();
    auto given = options.shapes.find(input.name());
    if (given != options.shapes.end()) {
      if (given->second.size() != static_cast<size_t>(shape->dim_size()))
        return fail("--shape " + input.name() + ": the input has rank " +
                    std::to_string(shape->dim_size()) + ", not " +
                    std::to_string(given->second.size()));
      for (int i = 0; i < shape->dim_size(); ++i) {
        const onnx::TensorShapeProto::Dimension &dim = shape->dim(i);
        if (dim.has_dim_value() && dim.dim_value() > 0 &&
            dim.dim_value() != given->second[i])
          return fail("--shape " + input.name() + ": dimension " +
                      std::to_string(i) + " is static (" +
                      std::to_string(dim.dim_value()) +
                      ") in the model; --shape sets dynamic dimensions only");
        shape->mutable_dim(i)->set_dim_value(given->second[i]);
      }
      continue;
    }
    for (int i = 0; i < shape->dim_size(); ++i)
      if (!shape->dim(i).has_dim_value() || shape->dim(i).dim_value() <= 0)
        return fail("input '" + input.name() + "' has a dynamic dimension " +
                    std::to_string(i) +
                    (shape->dim(i).dim_param().empty()
                         ? ""
                         : " ('" + shape->dim(i).dim_param() + "')") +
                    "; give its shape with --shape " + input.name() +
                    "=d0,d1,...");
  }
  if (std::string why; !lowerEinsums(*model.mutable_graph(), why))
    return fail(why);
  // Outputs' dynamic dimensions are re-inferred from the inputs.
  auto inferShapes = [&]() {
    onnx::GraphProto *graph = model.mutable_graph();
    for (onnx::ValueInfoProto &output : *graph->mutable_output())
      output.mutable_type()->mutable_tensor_type()->clear_shape();
    graph->clear_value_info();
    return runIsolated("ONNX shape inference", model, /*takeModel=*/true,
                       [](onnx::ModelProto &m) {
                         onnx::ShapeInferenceOptions inference{true, 1, true};
                         onnx::shape_inference::InferShapes(
                             m, onnx::OpSchemaRegistry::Instance(), inference);
                       });
  };
  if (std::string problem = inferShapes(); !problem.empty())
    return fail(problem);
  if (!decideTrainable())
    return false;
  // Shape computations on static shapes become constants (FoldConstants.h);
  // a Reshape whose target was computed gets its shape inferred only then,
  // and the shapes computed from it fold in the next round.
  for (int round = 0; round < kMaxFoldRounds; ++round) {
    graph = model.mutable_graph();
    std::map<std::string, std::vector<int64_t>> staticShapes;
    auto recordShape = [&](const onnx::ValueInfoProto &v) {
      if (!v.type().has_tensor_type() || !v.type().tensor_type().has_shape())
        return;
      std::vector<int64_t> dims;
      for (const auto &d : v.type().tensor_type().shape().dim()) {
        if (!d.has_dim_value() || d.dim_value() < 0)
          return;
        dims.push_back(d.dim_value());
      }
      staticShapes[v.name()] = dims;
    };
    for (const onnx::ValueInfoProto &v : graph->input())
      recordShape(v);
    for (const onnx::ValueInfoProto &v : graph->value_info())
      recordShape(v);
    for (const onnx::TensorProto &t : graph->initializer())
      staticShapes[t.name()].assign(t.dims().begin(), t.dims().end());
    int folded = 0;
    std::string why;
    if (!foldShapeComputations(*graph, staticShapes, constantInitializers,
                               kMaxFoldedElements, folded, why))
      return fail(why);
    if (folded == 0)
      break;
    if (std::string problem = inferShapes(); !problem.empty())
      return fail(problem);
  }
  std::vector<std::string> remarks;
  fuseOnnxPatterns(*model.mutable_graph(), &remarks);
  if (options.warn)
    for (const std::string &remark : remarks)
      options.warn(path + ": " + remark);
  return true;
}

} // namespace mlir::dtfm::onnximport
