//===- ImportCluster.cpp - Read a cluster file into the module ------------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//
//
// --dtfm-import-cluster: the one place a pass pipeline reads a cluster file.
// The planning passes then read the module's `dtfm.cluster`.
//
//===----------------------------------------------------------------------===//

#include "dtfm/Analysis/ClusterAnalysis.h"
#include "dtfm/Passes/Passes.h"

namespace mlir::dtfm {
#define GEN_PASS_DEF_IMPORTCLUSTER
#include "dtfm/Passes/Passes.h.inc"
} // namespace mlir::dtfm

using namespace mlir;
using namespace mlir::dtfm;
namespace {
struct ImportCluster
    : public mlir::dtfm::impl::ImportClusterBase<ImportCluster> {
  using ImportClusterBase::ImportClusterBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto fail = [&](const Twine &message) {
      mlir::emitError(toolLoc(module, file))
          << "dtfm-import-cluster: " << message;
      signalPassFailure();
    };
    if (file.empty())
      return fail("no cluster file given (file=<file.textproto>)");
    std::string error;
    if (failed(importCluster(module, file, error)))
      return fail(error);
    markAllAnalysesPreserved();
  }
};
} // namespace
