//===- PlanOps.h - Reading the ops of a device program ------------*- C++
//-*-===//
//
// Part of dtfm. Private to lib/Runtime: what every executor reads of a
// plan op (attributes with the dialect's defaults, result shapes, phase).
//
//===----------------------------------------------------------------------===//

#ifndef DTFM_LIB_RUNTIME_PLANOPS_H
#define DTFM_LIB_RUNTIME_PLANOPS_H

#include "plan.pb.h"

#include <cstdint>
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

} // namespace dtfm::runtime::planops

#endif // DTFM_LIB_RUNTIME_PLANOPS_H
