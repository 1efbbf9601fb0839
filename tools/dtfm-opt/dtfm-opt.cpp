//===- dtfm-opt.cpp - dtfm optimizer driver -------------------------------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//
//
// mlir-opt with the dtfm dialect and passes, plus --load-dtfm-plugin=lib.so to
// register custom operator kinds before any IR is parsed.
//
//===----------------------------------------------------------------------===//

#include "dtfm/InitAll.h"
#include "dtfm/Support/PluginFlags.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "llvm/Support/CommandLine.h"

// Declared so that LLVM's parser accepts the flag; the plugins themselves are
// loaded by the early scan in main().
static llvm::cl::list<std::string>
    pluginPaths(dtfm::kLoadPluginFlag,
                llvm::cl::desc("Load a custom-op plugin (shared library)"),
                llvm::cl::value_desc("path"));

int main(int argc, char **argv) {
  if (!dtfm::loadPluginsFromCommandLine("dtfm-opt", argc, argv))
    return 1;
  mlir::dtfm::registerAllPasses();
  mlir::DialectRegistry registry;
  mlir::dtfm::registerAllDialects(registry);
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "dtfm optimizer driver\n", registry));
}
