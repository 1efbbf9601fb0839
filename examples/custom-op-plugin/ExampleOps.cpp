//===- ExampleOps.cpp - Example dtfm custom-operator plugin ---------------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//
//
// Registers two operator kinds for `dtfm.custom`:
//
//   swiglu(gate [.., N], up [.., N]) -> [.., N]
//     silu(gate) * up. Forward 6 FLOPs per element (sigmoid 4, two
//     multiplies); backward twice that; keeps both inputs.
//
//   rmsnorm(x [.., D], weight [D]) {epsilon: float} -> [.., D]
//     x / sqrt(mean(x^2) + epsilon) * weight. Forward 4 FLOPs per element;
//     backward twice that; keeps x and one f32 per row.
//
// Each kind also brings its CPU kernels (forward and backward) for
// dtfm-run --execute, and, built with CUDA (DTFM_EXAMPLE_CUDA), its GPU
// kernels (ExampleOpsCuda.cu) for --backend=cuda. Only
// dtfm/Support/CustomOps.h is needed: no MLIR, no LLVM.
//
//===----------------------------------------------------------------------===//

#include "dtfm/Support/CustomOps.h"
#if DTFM_EXAMPLE_CUDA
#include "ExampleOpsCuda.h"
#endif

#include <cmath>
#include <string>
#include <variant>

using namespace dtfm;

namespace {

std::string shapeText(const TensorDesc &t) {
  std::string text = "[";
  for (size_t i = 0; i < t.shape.size(); ++i)
    text += (i ? ", " : "") + std::to_string(t.shape[i]);
  return text + "]";
}

bool inferSwiglu(const CustomOpCall &call, std::vector<TensorDesc> &results,
                 std::string &error) {
  if (call.operands.size() != 2) {
    error = "expected 2 operands (gate, up), found " +
            std::to_string(call.operands.size());
    return false;
  }
  if (!(call.operands[0] == call.operands[1])) {
    error = "expected gate and up of one type, found " +
            shapeText(call.operands[0]) + " and " +
            shapeText(call.operands[1]);
    return false;
  }
  results = {call.operands[0]};
  return true;
}

CustomOpCost costSwiglu(const CustomOpCall &call,
                        const std::vector<TensorDesc> &) {
  CustomOpCost cost;
  cost.forwardFlops = 6 * call.operands[0].numElements();
  cost.backwardFlops = 2 * cost.forwardFlops;
  cost.savedActivationBytes =
      call.operands[0].bytes() + call.operands[1].bytes();
  return cost;
}

bool inferRmsnorm(const CustomOpCall &call, std::vector<TensorDesc> &results,
                  std::string &error) {
  if (call.operands.size() != 2 || call.operands[0].shape.empty()) {
    error = "expected operands x [.., D] and weight [D]";
    return false;
  }
  int64_t d = call.operands[0].shape.back();
  if (call.operands[1].shape != std::vector<int64_t>{d}) {
    error = "expected weight of shape [" + std::to_string(d) + "], found " +
            shapeText(call.operands[1]);
    return false;
  }
  auto eps = call.params.find("epsilon");
  if (eps == call.params.end() || !std::holds_alternative<double>(eps->second) ||
      std::get<double>(eps->second) <= 0) {
    error = "expected a positive float param 'epsilon'";
    return false;
  }
  results = {call.operands[0]};
  return true;
}

CustomOpCost costRmsnorm(const CustomOpCall &call,
                         const std::vector<TensorDesc> &) {
  const TensorDesc &x = call.operands[0];
  CustomOpCost cost;
  cost.forwardFlops = 4 * x.numElements();
  cost.backwardFlops = 2 * cost.forwardFlops;
  cost.savedActivationBytes = x.bytes() + 4 * (x.numElements() / x.shape.back());
  return cost;
}

float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

bool swigluForward(const CustomOpCall &,
                   const std::vector<const KernelTensor *> &in,
                   std::vector<KernelTensor> &out, std::string &) {
  const std::vector<float> &gate = in[0]->data, &up = in[1]->data;
  for (size_t i = 0; i < gate.size(); ++i)
    out[0].data[i] = gate[i] * sigmoid(gate[i]) * up[i];
  return true;
}

bool swigluBackward(const CustomOpCall &,
                    const std::vector<const KernelTensor *> &in,
                    const KernelTensor &dOut, const std::vector<bool> &wanted,
                    std::vector<KernelTensor> &grads, std::string &) {
  const std::vector<float> &gate = in[0]->data, &up = in[1]->data;
  for (size_t i = 0; i < gate.size(); ++i) {
    float s = sigmoid(gate[i]);
    if (wanted[0])
      grads[0].data[i] = dOut.data[i] * up[i] * (s + gate[i] * s * (1 - s));
    if (wanted[1])
      grads[1].data[i] = dOut.data[i] * gate[i] * s;
  }
  return true;
}

double epsilonOf(const CustomOpCall &call) {
  return std::get<double>(call.params.at("epsilon"));
}

bool rmsnormForward(const CustomOpCall &call,
                    const std::vector<const KernelTensor *> &in,
                    std::vector<KernelTensor> &out, std::string &) {
  const std::vector<float> &x = in[0]->data, &w = in[1]->data;
  size_t d = w.size(), rows = x.size() / d;
  for (size_t r = 0; r < rows; ++r) {
    double sum = 0;
    for (size_t j = 0; j < d; ++j)
      sum += double(x[r * d + j]) * x[r * d + j];
    float scale = static_cast<float>(1 / std::sqrt(sum / d + epsilonOf(call)));
    for (size_t j = 0; j < d; ++j)
      out[0].data[r * d + j] = x[r * d + j] * scale * w[j];
  }
  return true;
}

bool rmsnormBackward(const CustomOpCall &call,
                     const std::vector<const KernelTensor *> &in,
                     const KernelTensor &dOut, const std::vector<bool> &wanted,
                     std::vector<KernelTensor> &grads, std::string &) {
  const std::vector<float> &x = in[0]->data, &w = in[1]->data;
  size_t d = w.size(), rows = x.size() / d;
  for (size_t r = 0; r < rows; ++r) {
    const float *xr = &x[r * d], *dy = &dOut.data[r * d];
    double sum = 0, dot = 0;
    for (size_t j = 0; j < d; ++j) {
      sum += double(xr[j]) * xr[j];
      dot += double(dy[j]) * w[j] * xr[j];
    }
    double scale = 1 / std::sqrt(sum / d + epsilonOf(call));
    for (size_t j = 0; j < d; ++j) {
      if (wanted[0])
        grads[0].data[r * d + j] = static_cast<float>(
            scale * w[j] * dy[j] - scale * scale * scale / d * xr[j] * dot);
      if (wanted[1])
        grads[1].data[j] += static_cast<float>(dy[j] * xr[j] * scale);
    }
  }
  return true;
}

} // namespace

extern "C" void dtfmRegisterCustomOps(CustomOpRegistry &registry) {
  CustomOpDef swiglu{"swiglu", "silu(gate) * up", inferSwiglu, costSwiglu,
                     swigluForward, swigluBackward};
  CustomOpDef rmsnorm{"rmsnorm", "root-mean-square normalisation",
                      inferRmsnorm, costRmsnorm, rmsnormForward,
                      rmsnormBackward};
#if DTFM_EXAMPLE_CUDA
  swiglu.cudaForward = example::swigluCudaForward;
  swiglu.cudaBackward = example::swigluCudaBackward;
  rmsnorm.cudaForward = example::rmsnormCudaForward;
  rmsnorm.cudaBackward = example::rmsnormCudaBackward;
#endif
  registry.add(std::move(swiglu));
  registry.add(std::move(rmsnorm));
}
