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
    auto shape = module->getAttrOfType<DictionaryAttr>(kShapeAttrName);
    if (!shape) {
      mlir::emitError(toolLoc(module, ""))
          << "dtfm-print-plan-summary: the module has no dtfm.shape; plan "
             "with --dtfm-plan=...,global-batch=N or run "
             "--dtfm-choose-shape first";
      return signalPassFailure();
    }
    auto integer = [](DictionaryAttr d, StringRef name) -> int64_t {
      auto a = d.getAs<IntegerAttr>(name);
      return a ? a.getInt() : 0;
    };
    auto real = [](DictionaryAttr d, StringRef name) -> double {
      auto a = d.getAs<FloatAttr>(name);
      return a ? a.getValueAsDouble() : 0;
    };
    raw_ostream &os = llvm::outs();
    auto row = [&](StringRef label, DictionaryAttr d) {
      os << llvm::format("%-10s %6lld %6lld %6lld x %-6lld %8lld %12.4f\n",
                         label.str().c_str(), (long long)integer(d, "dp"),
                         (long long)integer(d, "pp"),
                         (long long)integer(d, "micro_batch_size"),
                         (long long)integer(d, "micro_batches"),
                         (long long)integer(d, "devices_used"),
                         real(d, "iteration_s"));
    };
    os << "=== dtfm plan shape ===\n";
    os << llvm::format(
        "cluster %s, global batch %lld samples; %lld shapes "
        "scored%s\n",
        shape.getAs<StringAttr>("cluster").getValue().str().c_str(),
        (long long)integer(shape, "global_batch"),
        (long long)integer(shape, "shapes_scored"),
        shape.get("budget_exhausted") ? " (search budget reached)" : "");
    os << "           dp     pp     micro-batch  devices  iteration_s\n";
    row("chosen", shape);
    if (auto runners = shape.getAs<ArrayAttr>("runners_up"))
      for (Attribute other : runners)
        row("runner-up", cast<DictionaryAttr>(other));
    os << llvm::format("predicted: pipeline %.4f s + gradient sync "
                       "%.4f s\n",
                       real(shape, "pipeline_s"),
                       real(shape, "data_parallel_s"));
    if (auto stages = shape.getAs<ArrayAttr>("stages"))
      for (auto [s, stage] : llvm::enumerate(stages)) {
        os << llvm::format("stage %2zu:", s);
        for (Attribute d : cast<ArrayAttr>(stage))
          os << " " << cast<StringAttr>(d).getValue();
        os << "\n";
      }
    auto idle = shape.getAs<ArrayAttr>("idle");
    if (!idle || idle.empty())
      os << "idle: none\n";
    else
      for (Attribute entry : idle) {
        auto group = cast<DictionaryAttr>(entry);
        os << "idle:";
        for (Attribute d : group.getAs<ArrayAttr>("devices"))
          os << " " << cast<StringAttr>(d).getValue();
        os << " -- " << group.getAs<StringAttr>("reason").getValue() << "\n";
      }
    os.flush();
  }
};

} // namespace
