//===- dtfm-translate.cpp - Import models into the dtfm dialect -----------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//
//
//   dtfm-translate --import-gpt gpt3-1.3b [--layers N ...] [-o out.mlir]
//   dtfm-translate --import-gpt custom --layers 4 --hidden 256 --heads 8 \
//                  --seq-len 128 --vocab 1000
//   dtfm-translate --list-gpt-presets
//   dtfm-translate --export-plan --cluster c.textproto planned.mlir -o plan.pb
//   dtfm-translate --import-plan [--cluster c.textproto] plan.pb
//   dtfm-translate --import-cluster c.textproto [-o cluster.mlir]
//   dtfm-translate --export-onnx model.mlir --weights trained.safetensors \
//                  -o trained.onnx
//
// A preset gives every size; any flag overrides it. `custom` starts from no
// sizes and needs all of them. The module is verified before anything is
// written; on error nothing is written and the exit code is 1.
//
//===----------------------------------------------------------------------===//

#include "dtfm/Analysis/ClusterAnalysis.h"
#include "dtfm/Format/PlanFile.h"
#include "dtfm/Format/TensorFile.h"
#include "dtfm/InitAll.h"
#include "dtfm/Plan/Verifier.h"
#include "dtfm/Support/PluginFlags.h"
#include "dtfm/Target/Gpt/ImportGpt.h"
#include "dtfm/Target/Onnx/ExportOnnx.h"
#include "dtfm/Target/Onnx/ImportOnnx.h"
#include "dtfm/Target/Plan/Plan.h"

#include "plan.pb.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
namespace cl = llvm::cl;

namespace {

/// Every flag of dtfm-translate (registered while the struct lives: main
/// makes one before it parses the command line).
struct TranslateOptions {
  cl::OptionCategory gptCategory{"GPT import options"};

  cl::opt<std::string> importGpt{
      "import-gpt",
      cl::desc("Build a decoder model (GPT or Llama) from a preset "
               "(or 'custom')"),
      cl::value_desc("preset"), cl::cat(gptCategory)};
  cl::opt<bool> listPresets{"list-gpt-presets",
                            cl::desc("List the GPT presets and exit"),
                            cl::cat(gptCategory)};
  cl::opt<int64_t> layers{"layers", cl::desc("Transformer blocks"),
                          cl::cat(gptCategory)};
  cl::opt<int64_t> hidden{"hidden", cl::desc("Model width d_model"),
                          cl::cat(gptCategory)};
  cl::opt<int64_t> heads{"heads", cl::desc("Attention heads"),
                         cl::cat(gptCategory)};
  cl::opt<std::string> architecture{
      "architecture",
      cl::desc("Decoder architecture of --import-gpt=custom: gpt "
               "(the default) or llama"),
      cl::cat(gptCategory)};
  cl::opt<int64_t> kvHeads{
      "kv-heads",
      cl::desc("Key/value heads of grouped-query attention (Llama; "
               "default: --heads)"),
      cl::cat(gptCategory)};
  cl::opt<int64_t> ffnHidden{
      "ffn-hidden",
      cl::desc("Width of the MLP's hidden layer (default: 4 x hidden)"),
      cl::cat(gptCategory)};
  cl::opt<double> ropeTheta{
      "rope-theta",
      cl::desc("Base of the rotary embedding's angles (Llama; default "
               "10000)"),
      cl::cat(gptCategory)};
  cl::opt<int64_t> seqLen{"seq-len", cl::desc("Sequence length"),
                          cl::cat(gptCategory)};
  cl::opt<int64_t> vocab{"vocab", cl::desc("Vocabulary size"),
                         cl::cat(gptCategory)};
  cl::opt<int64_t> padVocab{
      "pad-vocab",
      cl::desc("Round the vocabulary up to a multiple of N: the token table "
               "and the logits get padding classes the loss leaves out (128, "
               "as Megatron-LM, lets tensor parallelism split GPT-3's 50257 "
               "and gives GPU products aligned rows)"),
      cl::value_desc("N"), cl::cat(gptCategory)};
  cl::opt<int64_t> microBatch{"micro-batch",
                              cl::desc("Sequences per micro-batch"),
                              cl::cat(gptCategory)};
  cl::opt<std::string> dtype{"dtype",
                             cl::desc("Element type: f32, f16 or bf16"),
                             cl::cat(gptCategory)};
  cl::OptionCategory onnxCategory{"ONNX import options"};
  cl::opt<std::string> importOnnxPath{
      "import-onnx", cl::desc("Import an ONNX model (as PyTorch exports it)"),
      cl::value_desc("model.onnx"), cl::cat(onnxCategory)};
  cl::opt<std::string> weightsFile{
      "weights",
      cl::desc("Where --import-onnx writes the initializers' values (default: "
               "the output file + .weights.bin); the trained weights "
               "--export-onnx writes back (dtfm-run --save-params)"),
      cl::value_desc("file"), cl::cat(onnxCategory)};
  cl::opt<bool> exportOnnx{
      "export-onnx",
      cl::desc("Write the ONNX file an imported module came from again, with "
               "the trained --weights as its initializers"),
      cl::cat(onnxCategory)};
  cl::list<std::string> shapeOverrides{
      "shape",
      cl::desc("Static shape of an input with dynamic "
               "dimensions (repeatable)"),
      cl::value_desc("name=d0,d1,..."), cl::cat(onnxCategory)};
  cl::opt<std::string> lossKind{
      "loss", cl::desc("Append a training loss: cross-entropy"),
      cl::cat(onnxCategory)};
  cl::opt<std::string> labelsName{"labels",
                                  cl::desc("Name of the loss's label input"),
                                  cl::init("labels"), cl::cat(onnxCategory)};
  cl::opt<std::string> paramsFrom{
      "params-from",
      cl::desc("A file naming the model's parameters, one per line "
               "(model.named_parameters()): every other float initializer "
               "is imported frozen"),
      cl::value_desc("file"), cl::cat(onnxCategory)};
  cl::list<std::string> freezePatterns{
      "freeze",
      cl::desc("Import the float initializers this glob matches frozen "
               "(repeatable)"),
      cl::value_desc("pattern"), cl::cat(onnxCategory)};

  cl::OptionCategory planCategory{"Plan file options"};
  cl::opt<bool> exportPlan{
      "export-plan",
      cl::desc("Write the plan file (protobuf) of a planned module"),
      cl::cat(planCategory)};
  cl::opt<bool> importPlan{"import-plan",
                           cl::desc("Read a plan file back into MLIR"),
                           cl::cat(planCategory)};
  cl::opt<std::string> clusterFile{
      "cluster",
      cl::desc("Cluster file the plan is for (required by "
               "--export-plan, checked by --import-plan)"),
      cl::value_desc("file.textproto"), cl::cat(planCategory)};
  cl::opt<std::string> importClusterPath{
      "import-cluster",
      cl::desc("Print a module holding the cluster file's dtfm.cluster"),
      cl::value_desc("file.textproto"), cl::cat(planCategory)};
  cl::opt<bool> planText{
      "plan-text",
      cl::desc("Write the plan in protobuf text format instead of binary"),
      cl::cat(planCategory)};
  cl::opt<bool> wholePrograms{
      "whole-programs",
      cl::desc("With --export-plan: write every device's program whole, not "
               "as its stage's template and its own entry (larger; a "
               "device's program reads on its own)"),
      cl::cat(planCategory)};
  cl::opt<std::string> inputFilename{cl::Positional, cl::desc("<input file>"),
                                     cl::init("-")};
  cl::opt<std::string> outputFilename{
      "o", cl::desc("Output file"), cl::value_desc("filename"), cl::init("-")};
  cl::list<std::string> pluginPaths{
      ::dtfm::kLoadPluginFlag,
      cl::desc("Load a custom-op plugin (shared library)"),
      cl::value_desc("path")};
};

} // namespace

static int fail(const std::string &message) {
  llvm::errs() << "dtfm-translate: error: " << message << "\n";
  return 1;
}

/// The GPT config from --import-gpt and the size flags, or an error.
static FailureOr<mlir::dtfm::GptConfig>
gptConfigFromFlags(const TranslateOptions &flags, std::string &error) {
  mlir::dtfm::GptConfig config;
  bool custom = flags.importGpt == "custom";
  if (!custom) {
    std::optional<mlir::dtfm::GptConfig> preset =
        mlir::dtfm::getGptPreset(flags.importGpt);
    if (!preset) {
      error = "unknown GPT preset '" + flags.importGpt + "' (known: ";
      for (const std::string &name : mlir::dtfm::getGptPresetNames())
        error += name + ", ";
      error += "custom)";
      return failure();
    }
    config = *preset;
  }
  struct Override {
    const cl::opt<int64_t> &flag;
    int64_t &field;
  } overrides[] = {
      {flags.layers, config.layers},      {flags.hidden, config.hidden},
      {flags.heads, config.heads},        {flags.seqLen, config.seqLen},
      {flags.vocab, config.vocab},        {flags.microBatch, config.microBatch},
      {flags.kvHeads, config.kvHeads},    {flags.ffnHidden, config.ffnHidden},
      {flags.padVocab, config.padVocabTo}};
  std::string missing;
  for (Override &o : overrides) {
    // 0 means "the default" in the config; given on the command line it is
    // an error like any other non-positive size.
    if (o.flag.getNumOccurrences() && o.flag <= 0) {
      error = "--" + o.flag.ArgStr.str() + " must be positive, got " +
              std::to_string(o.flag);
      return failure();
    }
    if (o.flag.getNumOccurrences())
      o.field = o.flag;
    else if (custom && &o.field != &config.microBatch &&
             &o.field != &config.kvHeads && &o.field != &config.ffnHidden &&
             &o.field != &config.padVocabTo)
      missing += (missing.empty() ? "--" : ", --") + o.flag.ArgStr.str();
  }
  if (flags.architecture.getNumOccurrences()) {
    if (!custom) {
      error = "--architecture is for --import-gpt=custom; the preset '" +
              flags.importGpt + "' is " +
              mlir::dtfm::decoderArchitectureName(config.architecture);
      return failure();
    }
    std::optional<mlir::dtfm::DecoderArchitecture> parsed =
        mlir::dtfm::parseDecoderArchitecture(flags.architecture);
    if (!parsed) {
      error = "--architecture must be gpt or llama, got '" +
              flags.architecture + "'";
      return failure();
    }
    config.architecture = *parsed;
  }
  if (flags.ropeTheta.getNumOccurrences())
    config.ropeTheta = flags.ropeTheta;
  if (!missing.empty()) {
    error = "--import-gpt=custom needs " + missing;
    return failure();
  }
  if (flags.dtype.getNumOccurrences())
    config.dtype = flags.dtype;
  if (!mlir::dtfm::validateGptConfig(config, error))
    return failure();
  return config;
}

/// Writes `text` to the output file; nothing is left behind on failure.
static int writeOutput(const TranslateOptions &flags, llvm::StringRef text) {
  if (flags.outputFilename == "-") {
    llvm::outs() << text;
    llvm::outs().flush();
    if (std::error_code ec = llvm::outs().error()) {
      // Cleared, or LLVM would report it again, fatally, at exit.
      llvm::outs().clear_error();
      return fail("cannot write to standard output (" + ec.message() + ")");
    }
    return 0;
  }
  // Through a temporary file and a rename, never half-written; a device or
  // FIFO is written through, a symbolic link or folder refused.
  std::string error;
  if (!::dtfm::format::writeFileAtomically(flags.outputFilename, text.str(),
                                           error))
    return fail(error);
  return 0;
}

/// Writes `module` as text, ending with a newline as dtfm-opt does.
static int writeModule(const TranslateOptions &flags, ModuleOp module) {
  std::string text;
  llvm::raw_string_ostream os(text);
  module->print(os);
  os << "\n";
  os.flush();
  return writeOutput(flags, text);
}

/// --export-plan and --import-plan.
static int runPlanTranslation(const TranslateOptions &flags) {
  if (flags.exportPlan && flags.importPlan)
    return fail("give --export-plan or --import-plan, not both");
  std::optional<::dtfm::planner::Cluster> cluster;
  std::string error;
  if (!flags.clusterFile.empty()) {
    cluster.emplace();
    if (!::dtfm::planner::loadClusterFile(flags.clusterFile, *cluster, error))
      return fail(error);
  }
  std::string errorMessage;
  std::unique_ptr<llvm::MemoryBuffer> input =
      openInputFile(flags.inputFilename, &errorMessage);
  if (!input)
    return fail(errorMessage);

  DialectRegistry registry;
  mlir::dtfm::registerAllDialects(registry);
  MLIRContext context(registry);
  context.loadAllAvailableDialects();

  if (flags.exportPlan) {
    llvm::SourceMgr sourceMgr;
    sourceMgr.AddNewSourceBuffer(std::move(input), llvm::SMLoc());
    SourceMgrDiagnosticHandler handler(sourceMgr, &context);
    OwningOpRef<ModuleOp> module =
        parseSourceFile<ModuleOp>(sourceMgr, &context);
    if (!module)
      return 1;
    // Without --cluster, the cluster the module was planned for.
    if (!cluster) {
      if (!mlir::dtfm::getModuleCluster(*module))
        return fail("--export-plan needs --cluster=<file.textproto> (or a "
                    "module with dtfm.cluster)");
      FailureOr<::dtfm::planner::Cluster> imported =
          mlir::dtfm::moduleCluster(*module, error);
      if (failed(imported))
        return fail(error);
      cluster = std::move(*imported);
    }
    ::dtfm::proto::Plan plan;
    if (failed(mlir::dtfm::exportPlan(*module, *cluster, plan)))
      return 1;
    std::string bytes;
    if (!::dtfm::format::serializePlan(std::move(plan), flags.planText, bytes,
                                       error,
                                       /*share=*/!flags.wholePrograms))
      return fail(error);
    return writeOutput(flags, bytes);
  }

  // On an arena, as dtfm-run reads it (millions of small messages).
  google::protobuf::Arena arena;
  ::dtfm::proto::Plan &plan =
      *google::protobuf::Arena::CreateMessage<::dtfm::proto::Plan>(&arena);
  if (!::dtfm::format::parsePlan(input->getBuffer().str(), flags.inputFilename,
                                 plan, error) ||
      !::dtfm::plan::verifyPlan(plan, flags.inputFilename, error))
    return fail(error);
  if (!mlir::dtfm::checkPlan(plan, cluster ? &*cluster : nullptr, error))
    return fail(flags.inputFilename + ": " + error);
  OwningOpRef<ModuleOp> module = mlir::dtfm::importPlan(&context, plan);
  if (!module || failed(verify(*module)))
    return fail(flags.inputFilename +
                ": the plan does not rebuild a valid module");
  return writeModule(flags, *module);
}

/// --import-cluster: a module holding only the cluster's dtfm.cluster.
static int runClusterImport(const TranslateOptions &flags) {
  DialectRegistry registry;
  mlir::dtfm::registerAllDialects(registry);
  MLIRContext context(registry);
  context.loadAllAvailableDialects();
  OwningOpRef<ModuleOp> module = ModuleOp::create(UnknownLoc::get(&context));
  std::string error;
  if (failed(
          mlir::dtfm::importCluster(*module, flags.importClusterPath, error)))
    return fail(error);
  if (failed(verify(*module)))
    return fail(flags.importClusterPath + ": the cluster does not verify (see "
                                          "above)");
  return writeModule(flags, *module);
}

/// --export-onnx: the module's ONNX file with trained initializers.
static int runOnnxExport(const TranslateOptions &flags) {
  if (flags.weightsFile.empty())
    return fail("--export-onnx needs --weights=<trained weights> (what "
                "dtfm-run --save-params wrote)");
  if (flags.outputFilename == "-")
    return fail("--export-onnx writes a binary ONNX file: give -o "
                "<trained.onnx>");
  ::dtfm::format::TensorMap weights;
  std::string error;
  if (!::dtfm::format::readTensorFile(flags.weightsFile, weights, error))
    return fail(error);
  std::string errorMessage;
  std::unique_ptr<llvm::MemoryBuffer> input =
      openInputFile(flags.inputFilename, &errorMessage);
  if (!input)
    return fail(errorMessage);
  DialectRegistry registry;
  mlir::dtfm::registerAllDialects(registry);
  MLIRContext context(registry);
  context.loadAllAvailableDialects();
  llvm::SourceMgr sourceMgr;
  sourceMgr.AddNewSourceBuffer(std::move(input), llvm::SMLoc());
  SourceMgrDiagnosticHandler handler(sourceMgr, &context);
  OwningOpRef<ModuleOp> module = parseSourceFile<ModuleOp>(sourceMgr, &context);
  if (!module)
    return 1;
  std::string bytes;
  if (!mlir::dtfm::exportTrainedOnnx(*module, weights, flags.weightsFile,
                                     bytes, error))
    return fail(error);
  return writeOutput(flags, bytes);
}

/// --import-onnx: the module to the output, the weights beside it.
static int runOnnxImport(const TranslateOptions &flags) {
  mlir::dtfm::OnnxImportOptions options;
  std::string error;
  for (const std::string &text : flags.shapeOverrides)
    if (!mlir::dtfm::parseShapeOverride(text, options.shapes, error))
      return fail(error);
  options.loss = flags.lossKind;
  options.labels = flags.labelsName;
  options.paramsFrom = flags.paramsFrom;
  options.freeze.assign(flags.freezePatterns.begin(),
                        flags.freezePatterns.end());
  options.warn = [](const std::string &message) {
    llvm::errs() << "warning: " << message << "\n";
  };
  if (!flags.weightsFile.empty())
    options.weightsPath = flags.weightsFile;
  else if (flags.outputFilename != "-")
    options.weightsPath = flags.outputFilename + ".weights.bin";
  else
    return fail("--import-onnx writing to stdout needs --weights=<file>");
  DialectRegistry registry;
  mlir::dtfm::registerAllDialects(registry);
  MLIRContext context(registry);
  // Diagnostics (a verifier failure) would name the ONNX file.
  OwningOpRef<ModuleOp> module =
      mlir::dtfm::importOnnx(&context, flags.importOnnxPath, options, error);
  if (!module)
    return fail(error);
  if (failed(verify(*module))) {
    std::remove(options.weightsPath.c_str());
    return fail(flags.importOnnxPath +
                ": the imported module does not verify (see "
                "above)");
  }
  int status = writeModule(flags, *module);
  if (status != 0)
    std::remove(options.weightsPath.c_str());
  return status;
}

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  if (!::dtfm::loadPluginsFromCommandLine("dtfm-translate", argc, argv))
    return 1;
  TranslateOptions flags;
  cl::ParseCommandLineOptions(argc, argv,
                              "dtfm translation tool: import models into the "
                              "dtfm dialect\n");

  if (flags.listPresets) {
    for (const std::string &name : mlir::dtfm::getGptPresetNames()) {
      mlir::dtfm::GptConfig c = *mlir::dtfm::getGptPreset(name);
      llvm::outs() << llvm::formatv(
          "{0,-10}  arch {1,-5}  layers {2,3}  hidden {3,5}  heads {4,3}  "
          "kv-heads {5,3}  ffn {6,5}  seq {7,4}  vocab {8,6}  micro-batch {9}"
          "  dtype {10,-4}  params {11}\n",
          name, mlir::dtfm::decoderArchitectureName(c.architecture), c.layers,
          c.hidden, c.heads, mlir::dtfm::keyValueHeadsOf(c),
          mlir::dtfm::ffnHiddenOf(c), c.seqLen, c.vocab, c.microBatch, c.dtype,
          mlir::dtfm::gptParameterCountClosedForm(c));
    }
    return 0;
  }
  // One translation per run: a second one given is an error, not ignored.
  std::vector<const char *> translations;
  if (flags.importGpt.getNumOccurrences())
    translations.push_back("--import-gpt");
  if (flags.importOnnxPath.getNumOccurrences())
    translations.push_back("--import-onnx");
  if (flags.importClusterPath.getNumOccurrences())
    translations.push_back("--import-cluster");
  if (flags.exportPlan)
    translations.push_back("--export-plan");
  if (flags.importPlan)
    translations.push_back("--import-plan");
  if (flags.exportOnnx)
    translations.push_back("--export-onnx");
  if (translations.size() > 1)
    return fail(std::string("give one translation, not ") + translations[0] +
                " and " + translations[1]);
  if (flags.exportPlan || flags.importPlan)
    return runPlanTranslation(flags);
  if (flags.importOnnxPath.getNumOccurrences())
    return runOnnxImport(flags);
  if (flags.exportOnnx)
    return runOnnxExport(flags);
  if (flags.importClusterPath.getNumOccurrences())
    return runClusterImport(flags);
  if (flags.importGpt.getNumOccurrences() == 0)
    return fail(
        "no translation given (use --import-gpt=<preset>, "
        "--import-onnx=<model.onnx>, --import-cluster=<file.textproto>, "
        "--export-plan, --import-plan, --export-onnx, --list-gpt-presets, "
        "or --help)");

  std::string error;
  FailureOr<mlir::dtfm::GptConfig> config = gptConfigFromFlags(flags, error);
  if (failed(config))
    return fail(error);

  DialectRegistry registry;
  mlir::dtfm::registerAllDialects(registry);
  MLIRContext context(registry);
  OwningOpRef<ModuleOp> module = mlir::dtfm::buildGptModule(&context, *config);
  if (failed(verify(*module)))
    return fail("the generated module does not verify (see above)");

  return writeModule(flags, *module);
}
