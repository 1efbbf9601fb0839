//===- PrintPlanSummary.cpp - The chosen shape as a table -----------------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//
//
// Prints the `dtfm.shape` that --dtfm-choose-shape recorded: the chosen
// shape, its runners-up, the predicted times, the stages and the idle
// devices with the reason each is idle.
//
//===----------------------------------------------------------------------===//

#include "dtfm/Passes/Passes.h"

#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

namespace mlir::dtfm {
#define GEN_PASS_DEF_PRINTPLANSUMMARY
#include "dtfm/Passes/Passes.h.inc"
} // namespace mlir::dtfm

using namespace mlir;
using namespace mlir::dtfm;

namespace {

struct PrintPlanSummary
    : public mlir::dtfm::impl::PrintPlanSummaryBase<PrintPlanSummary> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    markAllAnalysesPreserved();
    auto shape = module->getAttrOfType<ShapeAttr>(kShapeAttrName);
    if (!shape) {
      mlir::emitError(toolLoc(module, ""))
          << "dtfm-print-plan-summary: the module has no dtfm.shape; plan "
             "with --dtfm-plan=...,global-batch=N or run "
             "--dtfm-choose-shape first";
      return signalPassFailure();
    }
    raw_ostream &os = llvm::outs();
    auto row = [&](StringRef label, int64_t dp, int64_t pp,
                   int64_t microBatchSize, int64_t microBatches,
                   int64_t devicesUsed, double iterationSeconds) {
      os << llvm::format("%-10s %6lld %6lld %6lld x %-6lld %8lld %12.4f\n",
                         label.str().c_str(), (long long)dp, (long long)pp,
                         (long long)microBatchSize, (long long)microBatches,
                         (long long)devicesUsed, iterationSeconds);
    };
    os << "=== dtfm plan shape ===\n";
    os << llvm::format(
        "cluster %s, global batch %lld samples; %lld shapes "
        "scored%s\n",
        shape.getCluster().str().c_str(), (long long)shape.getGlobalBatch(),
        (long long)shape.getShapesScored(),
        shape.getBudgetExhausted() ? " (search budget reached)" : "");
    os << "           dp     pp     micro-batch  devices  iteration_s\n";
    row("chosen", shape.getDp(), shape.getPp(), shape.getMicroBatchSize(),
        shape.getMicroBatches(), shape.getDevicesUsed(), shape.getIterationS());
    for (ShapeChoiceAttr other : shape.getRunnersUp())
      row("runner-up", other.getDp(), other.getPp(), other.getMicroBatchSize(),
          other.getMicroBatches(), other.getDevicesUsed(),
          other.getIterationS());
    os << llvm::format("predicted: pipeline %.4f s + gradient sync "
                       "%.4f s\n",
                       double(shape.getPipelineS()),
                       double(shape.getDataParallelS()));
    for (auto [s, stage] : llvm::enumerate(shape.getStages())) {
      os << llvm::format("stage %2zu:", s);
      for (Attribute d : stage)
        os << " " << cast<StringAttr>(d).getValue();
      os << "\n";
    }
    if (shape.getIdle().empty())
      os << "idle: none\n";
    else
      for (IdleDevicesAttr group : shape.getIdle()) {
        os << "idle:";
        for (StringAttr d : group.getDevices())
          os << " " << d.getValue();
        os << " -- " << group.getReason() << "\n";
      }
    os.flush();
  }
};

} // namespace
