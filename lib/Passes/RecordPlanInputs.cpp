//===- RecordPlanInputs.cpp - Record what re-planning needs ---------------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//
//
// --dtfm-record-plan-inputs: the model as planning receives it and the
// planning options, as module attributes that the plan file carries
// (dtfm/Format/PlanInputs.h). The runtime re-plans from them with
// dtfm-opt, so that the runtime itself stays free of MLIR.
//
//===----------------------------------------------------------------------===//

#include "dtfm/Dialect/Dtfm/IR/DtfmDialect.h"
#include "dtfm/Format/PlanInputs.h"
#include "dtfm/Passes/Passes.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OperationSupport.h"

namespace mlir::dtfm {
#define GEN_PASS_DEF_RECORDPLANINPUTS
#include "dtfm/Passes/Passes.h.inc"
} // namespace mlir::dtfm

using namespace mlir;
using namespace mlir::dtfm;

namespace {
struct RecordPlanInputs
    : public mlir::dtfm::impl::RecordPlanInputsBase<RecordPlanInputs> {
  using RecordPlanInputsBase::RecordPlanInputsBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    std::vector<::dtfm::format::PlanOption> items;
    std::string error;
    if (!::dtfm::format::parsePlanOptions(recordedOptions, items, error)) {
      module.emitError("dtfm-record-plan-inputs: ") << error;
      return signalPassFailure();
    }
    // A copy without the cluster (re-planning gives its own) and without
    // the inputs of an earlier planning.
    OwningOpRef<ModuleOp> copy = module.clone();
    for (StringRef name : {kClusterAttrName.data(),
                           ::dtfm::format::kPlanInputAttrName,
                           ::dtfm::format::kPlanOptionsAttrName})
      (*copy)->removeAttr(name);
    std::string text;
    llvm::raw_string_ostream os(text);
    copy->print(os, OpPrintingFlags().enableDebugInfo(false));
    os.flush();
    MLIRContext *context = module.getContext();
    module->setAttr(::dtfm::format::kPlanInputAttrName,
                    StringAttr::get(context, text));
    module->setAttr(::dtfm::format::kPlanOptionsAttrName,
                    StringAttr::get(context,
                                    ::dtfm::format::joinPlanOptions(items)));
  }
};
} // namespace
