//===- PlanOps.h - Reading the ops of a device program ------------*- C++
//-*-===//
//
// Part of dtfm. Private to lib/Runtime: what every executor reads of a
// plan op (attributes with the dialect's defaults, result shapes, phase).
//
//===----------------------------------------------------------------------===//

#ifndef DTFM_LIB_RUNTIME_PLANOPS_H
#define DTFM_LIB_RUNTIME_PLANOPS_H

#include "dtfm/Runtime/Cpu/Kernels.h"

#include "plan.pb.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace dtfm::runtime::planops {

/// The attribute `key` of `op`, or of the forward op a dtfm.backward names
/// ("dtfm.forward_attrs/<key>"); null when neither has it.
inline const dtfm::proto::PlanAttr *findAttr(const dtfm::proto::PlanOp &op,
                                             const std::string &key) {
  auto it = op.attrs().find(key);
  if (it != op.attrs().end())
    return &it->second;
  it = op.nested_attrs().find("dtfm.forward_attrs/" + key);
  return it == op.nested_attrs().end() ? nullptr : &it->second;
}

inline int64_t intAttr(const dtfm::proto::PlanOp &op, const std::string &key,
                       int64_t fallback) {
  const dtfm::proto::PlanAttr *a = findAttr(op, key);
  return a && a->value_case() == dtfm::proto::PlanAttr::kI ? a->i() : fallback;
}

inline double floatAttr(const dtfm::proto::PlanOp &op, const std::string &key,
                        double fallback) {
  const dtfm::proto::PlanAttr *a = findAttr(op, key);
  return a && a->value_case() == dtfm::proto::PlanAttr::kF ? a->f() : fallback;
}

inline bool unitAttr(const dtfm::proto::PlanOp &op, const std::string &key) {
  const dtfm::proto::PlanAttr *a = findAttr(op, key);
  return a && a->value_case() == dtfm::proto::PlanAttr::kUnit;
}

inline std::string stringAttr(const dtfm::proto::PlanOp &op,
                              const std::string &key) {
  const dtfm::proto::PlanAttr *a = findAttr(op, key);
  return a && a->value_case() == dtfm::proto::PlanAttr::kS ? a->s() : "";
}

inline std::vector<int64_t> intsAttr(const dtfm::proto::PlanOp &op,
                                     const std::string &key,
                                     std::vector<int64_t> fallback) {
  const dtfm::proto::PlanAttr *a = findAttr(op, key);
  if (!a || a->value_case() != dtfm::proto::PlanAttr::kInts)
    return fallback;
  return std::vector<int64_t>(a->ints().values().begin(),
                              a->ints().values().end());
}

inline std::vector<int64_t> shapeOf(const dtfm::proto::PlanValue &v) {
  return std::vector<int64_t>(v.shape().begin(), v.shape().end());
}

/// Strides, padding and dilations of a window op (dialect defaults).
inline runtime::cpu::Window windowOf(const dtfm::proto::PlanOp &op) {
  std::vector<int64_t> strides = intsAttr(op, "strides", {1, 1});
  std::vector<int64_t> padding = intsAttr(op, "padding", {0, 0, 0, 0});
  std::vector<int64_t> dilations = intsAttr(op, "dilations", {1, 1});
  runtime::cpu::Window w;
  w.strideH = strides[0];
  w.strideW = strides[1];
  w.padTop = padding[0];
  w.padLeft = padding[1];
  w.padBottom = padding[2];
  w.padRight = padding[3];
  w.dilationH = dilations[0];
  w.dilationW = dilations[1];
  return w;
}

/// "fwd", "bwd" or "opt".
inline std::string phaseOf(const dtfm::proto::PlanOp &op) {
  std::string phase = stringAttr(op, "dtfm.phase");
  if (!phase.empty())
    return phase;
  return op.name() == "dtfm.sgd_update" || op.name() == "dtfm.adamw_update" ||
                 op.name() == "dtfm.grad_sync"
             ? "opt"
             : "fwd";
}

/// A dtfm.sgd_update or dtfm.adamw_update with the dialect's defaults, and
/// the parameter it updates.
struct OptimizerUpdate {
  bool adamw = false;
  std::string parameter;
  double lr = 0, momentum = 0, beta1 = 0.9, beta2 = 0.999, epsilon = 1e-8;
  double weightDecay = 0;
};

/// Reads an optimizer-phase op other than dtfm.grad_sync; false with
/// `error` when it is not an update of a parameter (`paramOfValue`: the
/// parameter of each dtfm.param value).
inline bool readUpdate(const dtfm::proto::PlanOp &op,
                       const std::map<int64_t, std::string> &paramOfValue,
                       OptimizerUpdate &update, std::string &error) {
  const std::string &name = op.name();
  if (name != "dtfm.sgd_update" && name != "dtfm.adamw_update") {
    error = "unexpected op in the optimizer phase";
    return false;
  }
  auto p = paramOfValue.find(op.operands(0));
  if (p == paramOfValue.end()) {
    error = "updates a value that is not a parameter";
    return false;
  }
  update = OptimizerUpdate();
  update.adamw = name == "dtfm.adamw_update";
  update.parameter = p->second;
  update.lr = floatAttr(op, "lr", 0);
  update.momentum = floatAttr(op, "momentum", 0);
  update.beta1 = floatAttr(op, "beta1", 0.9);
  update.beta2 = floatAttr(op, "beta2", 0.999);
  update.epsilon = floatAttr(op, "epsilon", 1e-8);
  update.weightDecay = floatAttr(op, "weight_decay", update.adamw ? 0.01 : 0);
  return true;
}

} // namespace dtfm::runtime::planops

#endif // DTFM_LIB_RUNTIME_PLANOPS_H
