//===- PlanLoader.h - Read plan.pb for the runtime ---------------*- C++ -*-===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//

#ifndef DTFM_RUNTIME_PLANLOADER_H
#define DTFM_RUNTIME_PLANLOADER_H

#include "dtfm/Runtime/Simulator.h"

#include <string>

namespace dtfm::proto {
class Plan;
class DeviceProgram;
} // namespace dtfm::proto

namespace dtfm::runtime {

/// The cluster a plan carries (lib/Planner).
using planner::clusterFromPlan;

/// The simulator's view of a plan: per device its streams, work per phase,
/// bytes sent per phase and peer, and gradient-sync time.
bool simulationInput(const proto::Plan &plan, SimInput &input,
                     std::string &error);

/// A program's work per micro-batch as the roofline sees it (plan.proto's
/// OpWork lists): its forward, and its backward with the recomputation.
planner::RooflineWork forwardWorkOf(const proto::DeviceProgram &program);
planner::RooflineWork backwardWorkOf(const proto::DeviceProgram &program);

} // namespace dtfm::runtime

#endif // DTFM_RUNTIME_PLANLOADER_H
