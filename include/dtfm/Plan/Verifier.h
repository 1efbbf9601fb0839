//===- Verifier.h - Everything checked before a plan runs -------*- C++ -*-===//
//
// Part of dtfm. Plain C++ (no MLIR).
//
//===----------------------------------------------------------------------===//
//
// dtfm-run runs only plans this verifier accepts, and runs it before any
// worker starts. A plan file has already had its version, checksum and
// shape checked when it was read (format::parsePlan); this adds what needs
// the ops: every program decodes; every op has its kind's operands,
// results and attributes by the rules the dialect's verifiers use
// (dtfm/Support/OpShapes.h); every operand is a value an earlier op of the
// program made; every tensor is within kMaxTensorBytes; names are unique;
// every transfer names a device of the plan at the stage it says, and pairs
// with its other end by the rule --dtfm-verify-plan applies
// (planner::checkTransfers); each pipeline's streams form a schedule that
// runs to completion (planner::parseSchedule/checkSchedule) and match the
// program's transfers; gradient-sync groups name devices of the plan.
//
//===----------------------------------------------------------------------===//

#ifndef DTFM_PLAN_VERIFIER_H
#define DTFM_PLAN_VERIFIER_H

#include <string>

namespace dtfm::proto {
class Plan;
} // namespace dtfm::proto

namespace dtfm::plan {

struct StageProgram;

/// Checks `plan`; on the first problem returns false with a one-line
/// `error` that starts with `source` and names the device and op
/// ("plan.pb: device 'a': op #3 dtfm.linear: expected ...").
bool verifyPlan(const proto::Plan &plan, const std::string &source,
                std::string &error);

/// The op-level part of verifyPlan for one decoded program (for tests and
/// for callers that decoded it already): returns "" or the problem, naming
/// the op.
std::string verifyProgramOps(const StageProgram &program);

} // namespace dtfm::plan

#endif // DTFM_PLAN_VERIFIER_H
