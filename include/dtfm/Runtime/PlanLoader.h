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
} // namespace dtfm::proto

namespace dtfm::runtime {

/// The cluster a plan carries (lib/Planner).
using planner::clusterFromPlan;

/// The simulator's view of a plan: per device its streams, work per phase,
/// bytes sent per phase and peer, and gradient-sync time.
bool simulationInput(const proto::Plan &plan, SimInput &input,
                     std::string &error);

} // namespace dtfm::runtime

#endif // DTFM_RUNTIME_PLANLOADER_H
