//===- dtfm-opt.cpp - dtfm optimizer driver -------------------------------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//
//
// mlir-opt with the dtfm dialect and passes, plus --load-dtfm-plugin=lib.so to
// register custom operator kinds before any IR is parsed. An output file (-o)
// is written as dtfm's other tools write theirs: whole, through a temporary
// file and a rename (a device or FIFO written through), with a one-line
// error when that fails.
//
//===----------------------------------------------------------------------===//

#include "dtfm/Format/TensorFile.h"
#include "dtfm/InitAll.h"
#include "dtfm/Support/PluginFlags.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"

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
  auto [inputFilename, outputFilename] = mlir::registerAndParseCLIOptions(
      argc, argv, "dtfm optimizer driver\n", registry);
  mlir::MlirOptMainConfig config =
      mlir::MlirOptMainConfig::createFromCLOptions();
  // Standard output and --show-dialects: MLIR's own driver.
  if (outputFilename == "-" || config.shouldShowDialects())
    return mlir::asMainReturnCode(mlir::MlirOptMain(
        argc, argv, inputFilename, outputFilename, registry));

  llvm::InitLLVM initLLVM(argc, argv);
  std::string error;
  std::unique_ptr<llvm::MemoryBuffer> input =
      mlir::openInputFile(inputFilename, &error);
  if (!input) {
    llvm::errs() << "dtfm-opt: error: " << error << "\n";
    return 1;
  }
  std::string output;
  llvm::raw_string_ostream os(output);
  if (mlir::failed(mlir::MlirOptMain(os, std::move(input), registry, config)))
    return 1;
  os.flush();
  if (!dtfm::format::writeFileAtomically(outputFilename, output, error)) {
    llvm::errs() << "dtfm-opt: error: " << error << "\n";
    return 1;
  }
  return 0;
}
