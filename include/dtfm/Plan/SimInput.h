//===- SimInput.h - The simulator's input, read from a plan ----*- C++ -*-===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//

#ifndef DTFM_PLAN_SIMINPUT_H
#define DTFM_PLAN_SIMINPUT_H

#include "dtfm/Plan/Simulator.h"

#include <string>

namespace dtfm::proto {
class Plan;
class DeviceProgram;
} // namespace dtfm::proto

namespace dtfm::plan {

/// The simulator's view of a plan: per device its streams, work per phase,
/// bytes sent per phase and peer, and gradient-sync time.
bool simulationInput(const proto::Plan &plan, SimInput &input,
                     std::string &error);

/// A program's work per micro-batch as the roofline sees it (plan.proto's
/// OpWork lists, its template's when it names one): its forward, and its
/// backward with the recomputation.
planner::RooflineWork forwardWorkOf(const proto::Plan &plan,
                                    const proto::DeviceProgram &program);
planner::RooflineWork backwardWorkOf(const proto::Plan &plan,
                                     const proto::DeviceProgram &program);

} // namespace dtfm::plan

#endif // DTFM_PLAN_SIMINPUT_H
