//===- CustomOps.h - Registry of user-defined operators ---------*- C++ -*-===//
//
// Part of dtfm. Plain C++ with no MLIR or LLVM dependency, so that a plugin
// shared library can be built against the installed headers alone.
//
//===----------------------------------------------------------------------===//
//
// A `dtfm.custom` op names a *kind* ("swiglu", "rmsnorm", ...). What the kind
// means to the compiler -- the shapes of its results and its cost -- comes from
// a CustomOpDef registered here, either by code linked into a tool or by a
// plugin loaded at run time. A plugin is a shared library that exports
//
//   extern "C" void dtfmRegisterCustomOps(dtfm::CustomOpRegistry &registry);
//
// and calls `registry.add(...)` for each kind it defines. `add` is virtual so
// that the plugin needs no symbol from the host: everything it calls is either
// inline in this header or reached through the vtable.
//
//===----------------------------------------------------------------------===//

#ifndef DTFM_SUPPORT_CUSTOMOPS_H
#define DTFM_SUPPORT_CUSTOMOPS_H

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <variant>
#include <vector>

namespace dtfm {

/// Element types a dtfm tensor may have.
enum class DType { F32, F16, BF16, I32, I64 };

/// Bytes of one element of `dtype`.
inline int64_t dtypeBytes(DType dtype) {
  switch (dtype) {
  case DType::F32:
  case DType::I32:
    return 4;
  case DType::F16:
  case DType::BF16:
    return 2;
  case DType::I64:
    return 8;
  }
  return 0;
}

/// Spelling of `dtype` as in MLIR types (f32, f16, bf16, i32, i64).
inline const char *dtypeName(DType dtype) {
  switch (dtype) {
  case DType::F32:
    return "f32";
  case DType::F16:
    return "f16";
  case DType::BF16:
    return "bf16";
  case DType::I32:
    return "i32";
  case DType::I64:
    return "i64";
  }
  return "?";
}

/// A statically shaped tensor: shape and element type.
struct TensorDesc {
  std::vector<int64_t> shape;
  DType dtype = DType::F32;

  int64_t numElements() const {
    int64_t n = 1;
    for (int64_t d : shape)
      n *= d;
    return n;
  }
  int64_t bytes() const { return numElements() * dtypeBytes(dtype); }
  bool operator==(const TensorDesc &o) const {
    return shape == o.shape && dtype == o.dtype;
  }
};

/// An attribute value of a custom op: integer, float, string or integer list.
using CustomAttr =
    std::variant<int64_t, double, std::string, std::vector<int64_t>>;

/// Everything a custom op's definition may look at: its operands and the
/// attributes in its `params` dictionary.
struct CustomOpCall {
  std::string kind;
  std::vector<TensorDesc> operands;
  std::map<std::string, CustomAttr> params;

  /// The integer parameter `name`, or `fallback` when absent or not an integer.
  int64_t getInt(const std::string &name, int64_t fallback) const {
    auto it = params.find(name);
    if (it == params.end() || !std::holds_alternative<int64_t>(it->second))
      return fallback;
    return std::get<int64_t>(it->second);
  }
};

/// Cost of one custom op for one micro-batch, in the conventions of the
/// dialect's CostOpInterface (FLOPs counted as 2 per multiply-add).
struct CustomOpCost {
  int64_t forwardFlops = 0;
  int64_t backwardFlops = 0;
  /// Bytes of activations that the backward pass needs and so are kept.
  int64_t savedActivationBytes = 0;
};

/// A tensor as the CPU runtime hands it to a kernel: row-major fp32
/// (integer tensors hold their values as floats).
struct KernelTensor {
  std::vector<int64_t> shape;
  std::vector<float> data;
};

/// Forward kernel: `results` arrive shaped as inferResults said and filled
/// with zeros. Returns false with a one-line `error` on failure.
using CustomForwardKernel = std::function<bool(
    const CustomOpCall &call, const std::vector<const KernelTensor *> &operands,
    std::vector<KernelTensor> &results, std::string &error)>;

/// Backward kernel of a single-result op: given the operands and the
/// gradient of the result, writes the gradient of every operand whose
/// `wanted` flag is set into `operandGrads` (one per operand, shaped like it
/// and filled with zeros).
using CustomBackwardKernel = std::function<bool(
    const CustomOpCall &call, const std::vector<const KernelTensor *> &operands,
    const KernelTensor &resultGrad, const std::vector<bool> &wanted,
    std::vector<KernelTensor> &operandGrads, std::string &error)>;

/// A tensor as the CUDA runtime hands it to a GPU kernel: row-major fp32 in
/// the memory of the GPU the worker runs on (the current device when the
/// kernel is called).
struct DeviceTensor {
  std::vector<int64_t> shape;
  float *data = nullptr;
};

/// GPU forward kernel: enqueues its work on `stream` (a cudaStream_t: the
/// worker's compute stream) and returns without waiting; `results` arrive
/// shaped as inferResults said and zero-filled (their buffers are the
/// runtime's: write into them). False with a one-line `error` on failure.
using CustomCudaForwardKernel = std::function<bool(
    const CustomOpCall &call, const std::vector<const DeviceTensor *> &operands,
    const std::vector<DeviceTensor> &results, void *stream,
    std::string &error)>;

/// GPU backward kernel of a single-result op, as the CPU's: the gradient of
/// every operand whose `wanted` flag is set into `operandGrads` (zero-filled;
/// a null `data` where not wanted), enqueued on `stream`.
using CustomCudaBackwardKernel = std::function<bool(
    const CustomOpCall &call, const std::vector<const DeviceTensor *> &operands,
    const DeviceTensor &resultGrad, const std::vector<bool> &wanted,
    const std::vector<DeviceTensor> &operandGrads, void *stream,
    std::string &error)>;

/// The definition of one custom kind.
struct CustomOpDef {
  std::string kind;
  std::string summary;
  /// Computes the result types from the call, or returns false and sets
  /// `error` to a one-line reason (it becomes the op's verifier message).
  std::function<bool(const CustomOpCall &call, std::vector<TensorDesc> &results,
                     std::string &error)>
      inferResults;
  /// Cost of the call, given its results.
  std::function<CustomOpCost(const CustomOpCall &call,
                             const std::vector<TensorDesc> &results)>
      cost;
  /// CPU kernels for dtfm-run --execute (optional: a kind without them can
  /// be planned and simulated but not trained).
  CustomForwardKernel forward;
  CustomBackwardKernel backward;
  /// GPU kernels for dtfm-run --backend=cuda (optional: a kind with CPU
  /// kernels only runs on the CPU, and --backend=auto then picks the CPU).
  CustomCudaForwardKernel cudaForward;
  CustomCudaBackwardKernel cudaBackward;
};

/// Kind -> definition. The tools use one process-wide instance (`global()`).
class CustomOpRegistry {
public:
  virtual ~CustomOpRegistry() = default;

  /// Registers `def`. Returns false (and registers nothing) when the kind is
  /// empty, already registered, or the definition lacks a callback.
  virtual bool add(CustomOpDef def) = 0;

  /// The definition of `kind`, or null.
  virtual const CustomOpDef *lookup(const std::string &kind) const = 0;

  /// Registered kinds in sorted order.
  virtual std::vector<std::string> kinds() const = 0;

  /// The registry used by dtfm-opt, dtfm-translate and the dialect.
  static CustomOpRegistry &global();

  /// A fresh, empty registry (for tests).
  static std::unique_ptr<CustomOpRegistry> create();
};

/// Name of the function a plugin exports.
inline constexpr const char *kPluginEntryPoint = "dtfmRegisterCustomOps";

/// Signature of the plugin entry point.
using PluginEntryFn = void (*)(CustomOpRegistry &);

/// Loads the shared library at `path` and calls its entry point on
/// `registry`. On failure returns false and sets `error` to a one-line reason
/// naming the file.
bool loadCustomOpPlugin(const std::string &path, CustomOpRegistry &registry,
                        std::string &error);

} // namespace dtfm

#endif // DTFM_SUPPORT_CUSTOMOPS_H
