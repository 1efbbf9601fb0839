//===- PlanRunner.h - Plan a GPT through --dtfm-plan and simulate it -*- C++ -*-===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//
//
// What bench-paper and bench-memory do with every configuration: build the
// GPT, run the whole dtfm pipeline on it (`dtfm-plan{...}` with the given
// options), export the plan, and score it as dtfm-run would read it -- the
// simulator's iteration and the runtime's memory model per device.
//
//===----------------------------------------------------------------------===//

#ifndef DTFM_BENCH_PLANRUNNER_H
#define DTFM_BENCH_PLANRUNNER_H

#include "dtfm/InitAll.h"
#include "dtfm/Plan/MemoryModel.h"
#include "dtfm/Plan/SimInput.h"
#include "dtfm/Plan/Simulator.h"
#include "dtfm/Planner/Cluster.h"
#include "dtfm/Target/Gpt/ImportGpt.h"
#include "dtfm/Target/Plan/Plan.h"
#include "plan.pb.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"

#include <chrono>
#include <string>
#include <vector>

namespace dtfm::bench {

struct PlannedGpt {
  proto::Plan plan;
  plan::SimResult simulated;
  std::vector<plan::DeviceMemory> memory;
  /// hetero: whose plan --dtfm-plan kept after simulating the candidates
  /// (dtfm.candidates); empty otherwise.
  std::string kept;
  double planSeconds = 0, simulateSeconds = 0;
};

/// Plans `config` with `dtfm-plan{cluster=<clusterFile> <options>}` and
/// scores the plan; false with a one-line `error` (the planner's
/// diagnostics) when it cannot. The caller has registered the passes
/// (mlir::dtfm::registerAllPasses).
inline bool planGpt(const mlir::dtfm::GptConfig &config,
                    const std::string &clusterFile, const std::string &options,
                    PlannedGpt &out, std::string &error) {
  mlir::DialectRegistry registry;
  mlir::dtfm::registerAllDialects(registry);
  mlir::MLIRContext context(registry);
  context.loadAllAvailableDialects();
  std::string diagnostics;
  mlir::ScopedDiagnosticHandler handler(&context, [&](mlir::Diagnostic &d) {
    diagnostics += (diagnostics.empty() ? "" : "; ") + d.str();
    return mlir::success();
  });
  auto clock = std::chrono::steady_clock::now;
  auto since = [&](auto start) {
    return std::chrono::duration<double>(clock() - start).count();
  };
  auto start = clock();
  mlir::OwningOpRef<mlir::ModuleOp> module =
      mlir::dtfm::buildGptModule(&context, config);
  std::string pipeline =
      "dtfm-plan{cluster=" + clusterFile + " " + options + "}";
  mlir::PassManager pm(&context, mlir::ModuleOp::getOperationName());
  if (mlir::failed(mlir::parsePassPipeline(pipeline, pm))) {
    error = "bad pipeline " + pipeline;
    return false;
  }
  if (mlir::failed(pm.run(*module))) {
    error = "planning failed: " + diagnostics;
    return false;
  }
  out = PlannedGpt();
  if (auto candidates = (*module)->getAttrOfType<mlir::dtfm::CandidatesAttr>(
          mlir::dtfm::kCandidatesAttrName))
    out.kept = candidates.getChosen().str();
  planner::Cluster cluster;
  if (!planner::loadClusterFile(clusterFile, cluster, error))
    return false;
  if (mlir::failed(mlir::dtfm::exportPlan(*module, cluster, out.plan))) {
    error = "export failed: " + diagnostics;
    return false;
  }
  out.planSeconds = since(start);
  start = clock();
  // Through the wire format, as dtfm-run reads it.
  std::string bytes;
  out.plan.SerializeToString(&bytes);
  proto::Plan loaded;
  loaded.ParseFromString(bytes);
  plan::SimInput input;
  if (!plan::simulationInput(loaded, input, error) ||
      !plan::simulate(input, out.simulated, error) ||
      !plan::planMemory(loaded, out.memory, error))
    return false;
  out.simulateSeconds = since(start);
  return true;
}

} // namespace dtfm::bench

#endif // DTFM_BENCH_PLANRUNNER_H
