//===- TrainingShapes.cpp - The training ops' type rules ------------------===//
//
// Part of dtfm. The rules of OpShapes.h for the training ops (the dialect's
// TrainingOps.cpp): gradients and their sums, the optimizer updates,
// transfers, top-k compression, gradient syncs; and for custom ops
// (CustomOp.cpp).
//
//===----------------------------------------------------------------------===//

#include "ShapeMessages.h"
#include "dtfm/Support/OpShapes.h"

#include "dtfm/Support/CustomOps.h"

#include <cmath>

using namespace dtfm::shapes;
using namespace dtfm::shapes::detail;

std::string dtfm::shapes::backward(const std::vector<TensorType> &inputs,
                                   const std::vector<TensorType> &grads,
                                   const std::vector<int64_t> &wrt,
                                   int64_t flops) {
  if (wrt.size() != grads.size())
    return "expected one gradient per 'wrt' index (" +
           std::to_string(wrt.size()) + "), found " +
           std::to_string(grads.size());
  for (size_t i = 0; i < wrt.size(); ++i) {
    int64_t index = wrt[i];
    if (index < 0 || index >= static_cast<int64_t>(inputs.size()))
      return "'wrt' index " + std::to_string(index) + " is out of range [0, " +
             std::to_string(inputs.size()) + ")";
    if (std::find(wrt.begin(), wrt.begin() + i, index) != wrt.begin() + i)
      return "'wrt' index " + std::to_string(index) + " given twice";
    if (grads[i] != inputs[index])
      return "expected the gradient of input #" + std::to_string(index) +
             " to have type " + typeText(inputs[index]) + ", found " +
             typeText(grads[i]);
  }
  if (flops < 0)
    return "expected non-negative flops, found " + std::to_string(flops);
  return "";
}

std::string dtfm::shapes::accumulate(const std::vector<TensorType> &grads,
                                     const TensorType &result) {
  if (grads.size() < 2)
    return "expected at least 2 gradients, found " +
           std::to_string(grads.size());
  for (const TensorType &grad : grads)
    if (grad != result)
      return "expected every gradient of type " + typeText(result) +
             ", found " + typeText(grad);
  return "";
}

namespace {
std::string updateTypes(const TensorType &param, const TensorType &grad,
                        const TensorType &result,
                        const dtfm::optim::LrSchedule &schedule,
                        double clipGradNorm) {
  for (const TensorType *t : {&grad, &result})
    if (*t != param)
      return "expected gradient and result of type " + typeText(param) +
             ", found " + typeText(*t);
  if (std::string e = schedule.check(); !e.empty())
    return "learning rate: " + e;
  if (!(clipGradNorm >= 0 && std::isfinite(clipGradNorm)))
    return "expected a clip_grad_norm >= 0 (0: no clipping), found " +
           num(clipGradNorm);
  return "";
}
} // namespace

std::string dtfm::shapes::sgdUpdate(const TensorType &param,
                                    const TensorType &grad,
                                    const TensorType &result,
                                    const dtfm::optim::LrSchedule &schedule,
                                    double clipGradNorm, double momentum,
                                    double weightDecay) {
  if (std::string e = updateTypes(param, grad, result, schedule, clipGradNorm);
      !e.empty())
    return e;
  if (!(momentum >= 0 && momentum < 1))
    return "expected momentum in [0, 1), found " + num(momentum);
  if (!(weightDecay >= 0 && std::isfinite(weightDecay)))
    return "expected a non-negative weight_decay";
  return "";
}

std::string dtfm::shapes::adamwUpdate(const TensorType &param,
                                      const TensorType &grad,
                                      const TensorType &result,
                                      const dtfm::optim::LrSchedule &schedule,
                                      double clipGradNorm, double beta1,
                                      double beta2, double epsilon,
                                      double weightDecay) {
  if (std::string e = updateTypes(param, grad, result, schedule, clipGradNorm);
      !e.empty())
    return e;
  for (double beta : {beta1, beta2})
    if (!(beta >= 0 && beta < 1))
      return "expected betas in [0, 1), found " + num(beta);
  if (!(epsilon > 0 && std::isfinite(epsilon)))
    return "expected a positive epsilon";
  if (!(weightDecay >= 0 && std::isfinite(weightDecay)))
    return "expected a non-negative weight_decay";
  return "";
}

std::string dtfm::shapes::transfer(const TensorType &type, int64_t peer,
                                   int64_t bytes, format::WireCodec wire,
                                   bool oncePerIteration, double latency,
                                   double bandwidth) {
  if (peer < 0)
    return "expected a non-negative peer, found " + std::to_string(peer);
  int64_t expected = type.numElements() * elementBytes(type.element);
  std::string inCodec;
  if (wire != format::WireCodec::Dense) {
    if (oncePerIteration)
      return "sends a weight once per iteration: dtfm.wire does not apply";
    const format::WireCodecInfo &codec = format::wireCodecInfo(wire);
    size_t values = static_cast<size_t>(type.numElements());
    expected = static_cast<int64_t>(codec.messageBytes(values, values));
    inCodec = std::string(" in ") + codec.name;
  }
  if (bytes != expected)
    return "expected bytes = " + std::to_string(expected) + " (the size of " +
           typeText(type) + inCodec + "), found " + std::to_string(bytes);
  if (!(latency >= 0 && std::isfinite(latency)) ||
      !(bandwidth > 0 && std::isfinite(bandwidth)))
    return "expected latency_s >= 0 and bandwidth_gbps > 0, both finite, "
           "found " +
           num(latency) + " and " + num(bandwidth);
  return "";
}

std::string dtfm::shapes::topkCompress(const TensorType &input, int64_t k,
                                       const TensorType &values,
                                       const TensorType &indices) {
  int64_t n = input.numElements();
  if (k < 1 || k > n)
    return "expected 1 <= k <= " + std::to_string(n) +
           " (the input's elements), found " + std::to_string(k);
  if (std::string e = resultIs(values, {k}, input.element); !e.empty())
    return e;
  if (indices != TensorType{{k}, "i64"})
    return "expected indices of type 'tensor<" + std::to_string(k) +
           "xi64>', found " + typeText(indices);
  return "";
}

std::string dtfm::shapes::topkDecompress(const TensorType &values,
                                         const TensorType &indices,
                                         const TensorType &result) {
  if (values.rank() != 1 || indices.shape != values.shape)
    return "expected 1-D values and indices of one length, found " +
           shapeText(values.shape) + " and " + shapeText(indices.shape);
  if (result.element != values.element)
    return "expected result element type '" + values.element + "', found '" +
           result.element + "'";
  if (values.shape[0] > result.numElements())
    return "expected at most " + std::to_string(result.numElements()) +
           " values, found " + std::to_string(values.shape[0]);
  return "";
}

std::string dtfm::shapes::gradSync(const TensorType &grad,
                                   const TensorType &result, int64_t bytes,
                                   size_t groupSize, double seconds) {
  if (groupSize < 2)
    return "expected a group of at least 2 devices, found " +
           std::to_string(groupSize);
  if (result != grad)
    return "expected result type " + typeText(grad) + ", found " +
           typeText(result);
  int64_t expected = grad.numElements() * elementBytes(grad.element);
  if (bytes != expected)
    return "expected bytes = " + std::to_string(expected) + ", found " +
           std::to_string(bytes);
  if (!(seconds >= 0 && std::isfinite(seconds)))
    return "expected non-negative seconds";
  return "";
}

std::string dtfm::shapes::custom(const CustomOpCall &call,
                                 const std::vector<TensorType> &results) {
  const CustomOpDef *def = CustomOpRegistry::global().lookup(call.kind);
  if (!def)
    return "custom kind '" + call.kind +
           "' is not registered (load the plugin that defines it with "
           "--load-dtfm-plugin)";
  std::vector<TensorDesc> inferred;
  std::string error;
  if (!def->inferResults(call, inferred, error))
    return "'" + call.kind + "': " + error;
  if (inferred.size() != results.size())
    return "'" + call.kind + "' expected " + std::to_string(inferred.size()) +
           " results, found " + std::to_string(results.size());
  for (size_t i = 0; i < results.size(); ++i) {
    TensorType expected{inferred[i].shape, dtypeName(inferred[i].dtype)};
    if (expected != results[i])
      return "'" + call.kind + "' expected result #" + std::to_string(i) +
             " of type " + typeText(expected) + ", found " +
             typeText(results[i]);
  }
  return "";
}
