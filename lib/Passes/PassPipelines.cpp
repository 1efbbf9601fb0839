//===- PassPipelines.cpp - --dtfm-plan and friends ------------------------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//

#include "dtfm/Format/PlanInputs.h"
#include "dtfm/Passes/Passes.h"
#include "dtfm/Planner/Search.h"
#include "dtfm/Planner/Workload.h"

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassOptions.h"
#include "mlir/Pass/PassRegistry.h"

using namespace mlir;
using namespace mlir::dtfm;

namespace {
struct PlanOptions : public PassPipelineOptions<PlanOptions> {
  Option<std::string> cluster{*this, "cluster",
                              llvm::cl::desc("Cluster file (text format)")};
  Option<std::string> algorithm{
      *this, "algorithm",
      llvm::cl::desc("Device assignment: rank-order, random, kl, op-fence, "
                     "genetic-paper or genetic"),
      llvm::cl::init("genetic")};
  Option<uint64_t> seed{*this, "seed", llvm::cl::desc("Random seed"),
                        llvm::cl::init(0)};
  Option<double> budget{
      *this, "budget",
      llvm::cl::desc("Search budget in seconds (0: with global-batch, the "
                     "shape search's 3 s up to 128 devices and 10 s beyond; "
                     "without, no limit: the device search runs its fixed "
                     "rounds, deterministic)"),
      llvm::cl::init(0)};
  Option<int> dp{*this, "dp", llvm::cl::desc("D_DP (0: search)"),
                 llvm::cl::init(0)};
  Option<int> pp{*this, "pp", llvm::cl::desc("D_PP (0: search)"),
                 llvm::cl::init(0)};
  Option<int64_t> tensorParallel{
      *this, "tp",
      llvm::cl::desc("Tensor-parallel degree: devices of one node per group "
                     "(--dtfm-tensor-parallel; 1: none; 0: chosen with the "
                     "shape, with global-batch)"),
      llvm::cl::init(1)};
  Option<int64_t> syncOverlap{
      *this, "sync-overlap",
      llvm::cl::desc("Local steps: apply each exchange tau steps after it "
                     "starts, training on meanwhile (0: wait for it)"),
      llvm::cl::init(0)};
  Option<double> outerMixing{
      *this, "outer-mixing",
      llvm::cl::desc("Local steps with an overlap: the share of the "
                     "replica's own value kept when an exchange is applied"),
      llvm::cl::init(0.5)};
  ListOption<int64_t> stageTp{
      *this, "stage-tp",
      llvm::cl::desc("A tensor-parallel degree per pipeline stage (D_PP = "
                     "their count; --dtfm-tensor-parallel stage-degrees; with "
                     "algorithm=hetero)")};
  Option<int> microBatches{*this, "micro-batches",
                           llvm::cl::desc("Micro-batches per iteration"),
                           llvm::cl::init(1)};
  Option<std::string> schedule{*this, "schedule",
                               llvm::cl::desc(
                                   "Micro-batch schedule: auto (the "
                                   "default: with global-batch the shape "
                                   "search picks 1f1b or zb-h1 per plan, "
                                   "else 1f1b), 1f1b, zb-h1 (zero bubble "
                                   "within 1F1B's peak memory) or gpipe"),
                               llvm::cl::init("auto")};
  Option<std::string> optimizer{*this, "optimizer",
                                llvm::cl::desc("adamw or sgd"),
                                llvm::cl::init("adamw")};
  // The optimizer: the same options, defaults and meaning as
  // --dtfm-autodiff's (Passes.td), handed to it as they are.
  Option<double> lr{*this, "lr", llvm::cl::desc("Learning rate"),
                    llvm::cl::init(1e-3)};
  Option<double> momentum{*this, "momentum", llvm::cl::desc("SGD momentum"),
                          llvm::cl::init(0.9)};
  Option<double> beta1{*this, "beta1", llvm::cl::desc("AdamW beta1"),
                       llvm::cl::init(0.9)};
  Option<double> beta2{*this, "beta2", llvm::cl::desc("AdamW beta2"),
                       llvm::cl::init(0.999)};
  Option<double> epsilon{*this, "epsilon", llvm::cl::desc("AdamW epsilon"),
                         llvm::cl::init(1e-8)};
  Option<double> weightDecay{
      *this, "weight-decay",
      llvm::cl::desc("Weight decay (decoupled for AdamW)"),
      llvm::cl::init(0.01)};
  Option<std::string> decayParams{
      *this, "decay-params",
      llvm::cl::desc("Parameters that get weight decay: matrices (rank >= "
                     "2: no biases or norm gains), "
                     "matrices-except-embeddings, or all"),
      llvm::cl::init("matrices")};
  Option<std::string> lrSchedule{
      *this, "lr-schedule",
      llvm::cl::desc("Learning-rate schedule after the warmup: constant, "
                     "cosine, linear or wsd (warmup-stable-decay)"),
      llvm::cl::init("constant")};
  Option<int64_t> warmupSteps{
      *this, "warmup-steps",
      llvm::cl::desc("Linear warmup steps: step s < W trains at lr (s + 1) "
                     "/ (W + 1)"),
      llvm::cl::init(0)};
  Option<int64_t> totalSteps{
      *this, "total-steps",
      llvm::cl::desc("Steps the schedule runs over (cosine, linear, wsd): "
                     "from then on min-lr"),
      llvm::cl::init(0)};
  Option<int64_t> decaySteps{
      *this, "decay-steps",
      llvm::cl::desc("wsd: the last steps of total-steps, over which the "
                     "rate decays linearly to min-lr"),
      llvm::cl::init(0)};
  Option<double> minLr{
      *this, "min-lr",
      llvm::cl::desc("Learning rate at the end of a decaying schedule"),
      llvm::cl::init(0)};
  Option<double> clipGradNorm{
      *this, "clip-grad-norm",
      llvm::cl::desc("Clip the whole model's gradient norm to this before "
                     "each update, as torch.nn.utils.clip_grad_norm_ (0: no "
                     "clipping)"),
      llvm::cl::init(0)};
  Option<bool> printTable{*this, "print-table",
                          llvm::cl::desc("Print assignment and stages"),
                          llvm::cl::init(false)};
  Option<double> dpBytes{*this, "dp-bytes",
                         llvm::cl::desc("c_DP in bytes (0: derive)"),
                         llvm::cl::init(0)};
  Option<double> ppBytes{*this, "pp-bytes",
                         llvm::cl::desc("c_PP in bytes (0: derive)"),
                         llvm::cl::init(0)};
  Option<bool> programs{
      *this, "programs",
      llvm::cl::desc("Go on to stage programs: send/recv, compression, "
                     "gradient sync, schedule, one program per device"),
      llvm::cl::init(false)};
  Option<double> compressRatio{
      *this, "compress-ratio",
      llvm::cl::desc("AdaTopK target ratio (1: no compression)"),
      llvm::cl::init(1)};
  Option<int64_t> globalBatch{
      *this, "global-batch",
      llvm::cl::desc("Samples per iteration: search the plan's shape "
                     "(devices used, D_DP x D_PP, micro-batch size and count; "
                     "--dtfm-choose-shape)"),
      llvm::cl::init(0)};
  ListOption<int64_t> microBatchSizes{
      *this, "micro-batch-sizes",
      llvm::cl::desc("Micro-batch sizes the shape search may choose")};
  Option<std::string> sync{*this, "sync",
                           llvm::cl::desc("Gradient sync: auto, ps or ring"),
                           llvm::cl::init("auto")};
  Option<std::string> syncEvery{
      *this, "sync-every",
      llvm::cl::desc("Local steps (DiLoCo): exchange parameters every H "
                     "steps (0: gradients every step; auto: where "
                     "exchanging every step costs over 10% of the "
                     "pipeline, needs global-batch)"),
      llvm::cl::init("0")};
  Option<double> outerLr{*this, "outer-lr",
                         llvm::cl::desc("Local steps: outer learning rate"),
                         llvm::cl::init(0.7)};
  Option<int64_t> syncFragments{
      *this, "sync-fragments",
      llvm::cl::desc("Local steps: exchange the parameters in P fragments "
                     "on a staggered schedule (Streaming DiLoCo; 1: all at "
                     "once)"),
      llvm::cl::init(1)};
  Option<double> outerMomentum{
      *this, "outer-momentum",
      llvm::cl::desc("Local steps: outer Nesterov momentum"),
      llvm::cl::init(0.9)};
  Option<std::string> dpCompression{
      *this, "dp-compression",
      llvm::cl::desc("Gradients on the wire: none, int8 (with error "
                     "feedback) or auto (int8 where it saves 20%)"),
      llvm::cl::init("none")};
  Option<std::string> ppCompression{
      *this, "pp-compression",
      llvm::cl::desc("Pipeline transfers (activations and their gradients) "
                     "in 8 bits, as SWARM: none, int8 or auto (where they "
                     "save 20%); links AdaTopK compresses stay top-k"),
      llvm::cl::init("none")};
  Option<std::string> bucketMb{
      *this, "bucket-mb",
      llvm::cl::desc("Gradient bucket cap: auto or MiB (0: one bucket per "
                     "stage)"),
      llvm::cl::init("auto")};
  Option<int64_t> topkWarmup{
      *this, "topk-warmup",
      llvm::cl::desc("dp-compression=topk:R: steps synchronised dense "
                     "before top-k starts (AdamW's second moment frozen "
                     "after them)"),
      llvm::cl::init(20)};
  Option<std::string> recompute{
      *this, "recompute",
      llvm::cl::desc("Activation recomputation (programs=true): a micro-batch "
                     "keeps only its layers' inputs between forward and "
                     "backward, and each layer's forward runs again before "
                     "its backward -- auto: on the device programs that "
                     "would not fit without it; all; none. A plan that "
                     "still does not fit is refused"),
      llvm::cl::init("auto")};
  Option<std::string> shardState{
      *this, "shard-state",
      llvm::cl::desc("Sharded optimizer state (programs=true; ZeRO-1): each "
                     "member of a data-parallel group keeps the optimizer "
                     "state of 1/D of every parameter (reduce-scatter, "
                     "shard update, all-gather) -- auto: the groups with a "
                     "program that would not fit without it; all; none"),
      llvm::cl::init("auto")};
  Option<bool> simulateCandidates{
      *this, "simulate-candidates",
      llvm::cl::desc("algorithm=hetero with programs=true: also plan with "
                     "each DT-FM algorithm at the same shape, simulate every "
                     "plan and keep the fastest"),
      llvm::cl::init(true)};
};

/// The options of --dtfm-plan's passes from device assignment on, as plain
/// values: SimulateCandidates keeps a copy to build the tail per candidate.
struct PlanTail {
  std::string algorithm;
  uint64_t seed;
  double budget;
  int dp, pp, microBatches;
  std::string schedule, optimizer;
  bool printTable;
  double dpBytes, ppBytes;
  bool programs;
  double compressRatio;
  std::string sync, syncEvery;
  double outerLr, outerMomentum;
  int64_t syncFragments, syncOverlap;
  double outerMixing;
  std::string dpCompression, ppCompression, bucketMb;
  int64_t topkWarmup;
  std::string recompute, shardState;

  explicit PlanTail(const PlanOptions &o)
      : algorithm(o.algorithm), seed(o.seed), budget(o.budget), dp(o.dp),
        pp(o.pp), microBatches(o.microBatches), schedule(o.schedule),
        optimizer(o.optimizer), printTable(o.printTable), dpBytes(o.dpBytes),
        ppBytes(o.ppBytes), programs(o.programs),
        compressRatio(o.compressRatio), sync(o.sync), syncEvery(o.syncEvery),
        outerLr(o.outerLr), outerMomentum(o.outerMomentum),
        syncFragments(o.syncFragments), syncOverlap(o.syncOverlap),
        outerMixing(o.outerMixing),
        dpCompression(o.dpCompression), ppCompression(o.ppCompression),
        bucketMb(o.bucketMb), topkWarmup(o.topkWarmup),
        recompute(o.recompute), shardState(o.shardState) {}
};

/// hetero's layout (as recorded by the plan asked for) re-planned with
/// uneven replicas by whole pipeline time, links included: a candidate of
/// SimulateCandidates only.
constexpr llvm::StringLiteral kHeteroLinkShares = "hetero:link-shares";

/// The tail's first part: device assignment with `algorithm`.
void buildAssignment(OpPassManager &pm, const PlanTail &options,
                     StringRef algorithm, bool printTable,
                     double budgetSeconds) {
  AssignDevicesOptions assign;
  assign.algorithm = algorithm.str();
  if (algorithm == kHeteroLinkShares) {
    assign.algorithm = "hetero";
    assign.unevenByLinks = true;
    assign.keepLayout = true;
  }
  assign.seed = options.seed;
  assign.budget = budgetSeconds;
  assign.dataParallel = options.dp;
  assign.pipelineParallel = options.pp;
  assign.microBatches = options.microBatches;
  assign.schedule = options.schedule;
  assign.printTable = printTable;
  assign.dpBytes = options.dpBytes;
  assign.ppBytes = options.ppBytes;
  assign.sync = options.sync;
  assign.bucketMb = options.bucketMb;
  assign.syncEvery = options.syncEvery;
  assign.syncFragments = options.syncFragments;
  assign.syncOverlap = options.syncOverlap;
  assign.dpCompression = options.dpCompression;
  assign.compressRatio = options.compressRatio;
  assign.ppCompression = options.ppCompression;
  assign.recompute = options.recompute;
  assign.shardState = options.shardState;
  pm.addPass(createAssignDevices(assign));
}

/// The rest: partition, and with programs=true: -> send/recv ->
/// [compression] -> gradient sync -> schedule -> one program per device ->
/// verify -> fit memory.
void buildAfterAssignment(OpPassManager &pm, const PlanTail &options,
                          bool printTable) {
  PartitionStagesOptions partition;
  partition.schedule = options.schedule;
  partition.microBatches = options.microBatches;
  partition.recompute = options.recompute;
  // Sharded state only where the syncs allow it, as AssignDevices reads
  // them (a malformed option fails there, first).
  ::dtfm::planner::TrainingOptions training;
  std::string ignored;
  partition.shardState =
      ::dtfm::planner::parseCommunication(options.sync, options.compressRatio,
                                  options.bucketMb, options.syncEvery,
                                  options.dpCompression, options.ppCompression,
                                  training, ignored) &&
              ::dtfm::planner::parseMemoryOptions(options.recompute, options.shardState,
                                          training, ignored)
          ? ::dtfm::planner::memoryOptionName(training.stages.shardState)
          : options.shardState;
  partition.printTable = printTable;
  pm.addPass(createPartitionStages(partition));
  if (!options.programs)
    return;
  pm.addPass(createInsertSendRecv());
  if (options.compressRatio > 1 || options.ppCompression != "none") {
    InsertCompressionOptions compression;
    compression.ratio = options.compressRatio;
    compression.int8 = options.ppCompression;
    pm.addPass(createInsertCompression(compression));
  }
  InsertGradSyncOptions sync;
  sync.sync = options.sync;
  sync.bucketMb = options.bucketMb;
  sync.syncEvery = options.syncEvery;
  sync.dpCompression = options.dpCompression;
  sync.outerLr = options.outerLr;
  sync.outerMomentum = options.outerMomentum;
  sync.syncFragments = options.syncFragments;
  sync.syncOverlap = options.syncOverlap;
  sync.outerMixing = options.outerMixing;
  sync.topkWarmup = options.topkWarmup;
  pm.addPass(createInsertGradSync(sync));
  ScheduleMicrobatchesOptions schedule;
  schedule.schedule = options.schedule;
  schedule.microBatches = options.microBatches;
  pm.addPass(createScheduleMicrobatches(schedule));
  pm.addPass(createEmitStagePrograms(
      EmitStageProgramsOptions{/*recompute=*/options.recompute == "all"}));
  pm.addPass(createVerifyPlan());
  pm.addPass(
      createFitMemory(FitMemoryOptions{options.recompute, options.shardState}));
}

/// A part of the tail, for SimulateCandidates.
void buildPlanTail(OpPassManager &pm, const PlanTail &options,
                   PlanTailPart part, StringRef algorithm, bool printTable,
                   double budgetSeconds) {
  if (part == PlanTailPart::Assignment) {
    buildAssignment(pm, options, algorithm, printTable, budgetSeconds);
    return;
  }
  buildAfterAssignment(pm, options, printTable);
}

/// The whole tail, as asked.
void buildPlanTail(OpPassManager &pm, const PlanTail &options) {
  buildAssignment(pm, options, options.algorithm, options.printTable,
                  options.budget);
  buildAfterAssignment(pm, options, options.printTable);
}

/// The options to record on the plan (--dtfm-record-plan-inputs): every
/// option as MLIR prints it, less the cluster (re-planning names its own)
/// and print-table, with every number exact (MLIR prints doubles with six
/// digits, and a learning rate rounded there would train another run).
std::string recordedOptions(const PlanOptions &options) {
  std::string printed;
  llvm::raw_string_ostream os(printed);
  // print() only reads the options; it is not declared const.
  const_cast<PlanOptions &>(options).print(os);
  os.flush();
  std::vector<::dtfm::format::PlanOption> items;
  std::string error;
  if (!::dtfm::format::parsePlanOptions(printed, items, error))
    llvm::report_fatal_error(llvm::Twine("dtfm-plan: own options: ") + error);
  ::dtfm::format::erasePlanOption(items, "cluster");
  ::dtfm::format::erasePlanOption(items, "print-table");
  auto exact = [&](const char *key, double value) {
    // The shortest text that reads back to the same double.
    char text[64];
    for (int digits = 6; digits <= 17; ++digits) {
      std::snprintf(text, sizeof text, "%.*g", digits, value);
      if (std::strtod(text, nullptr) == value)
        break;
    }
    ::dtfm::format::setPlanOption(items, key, text);
  };
  exact("budget", options.budget);
  exact("lr", options.lr);
  exact("momentum", options.momentum);
  exact("beta1", options.beta1);
  exact("beta2", options.beta2);
  exact("epsilon", options.epsilon);
  exact("weight-decay", options.weightDecay);
  exact("min-lr", options.minLr);
  exact("clip-grad-norm", options.clipGradNorm);
  exact("dp-bytes", options.dpBytes);
  exact("pp-bytes", options.ppBytes);
  exact("compress-ratio", options.compressRatio);
  exact("outer-lr", options.outerLr);
  exact("outer-momentum", options.outerMomentum);
  exact("outer-mixing", options.outerMixing);
  return ::dtfm::format::joinPlanOptions(items);
}

/// [import the cluster] -> annotate -> [choose shape -> annotate] -> autodiff
/// -> the tail (buildPlanTail). Devices are assigned before the stages are
/// sized because the stage sizes depend on which devices run them (speed
/// and memory of each data-parallel group). The cluster file is read once,
/// into the module's `dtfm.cluster`, which the planning passes read. With
/// algorithm=hetero and programs=true the tail runs once per candidate
/// algorithm -- and once more with hetero's replicas sharing the micro-batches
/// by whole pipeline time, links included -- and the plan that simulates
/// fastest is kept (SimulateCandidates.cpp; simulate-candidates=false turns
/// it off).
void buildPlanPipeline(OpPassManager &pm, const PlanOptions &options) {
  pm.addPass(createRecordPlanInputs(
      RecordPlanInputsOptions{recordedOptions(options)}));
  if (!options.cluster.empty())
    pm.addPass(createImportCluster(ImportClusterOptions{options.cluster}));
  // tp=0 with global-batch: the shape search chooses the degree (and an
  // explicit degree shards the model first); without, the pass refuses 0.
  if (options.tensorParallel != 1 &&
      !(options.tensorParallel == 0 && options.globalBatch != 0))
    pm.addPass(
        createTensorParallel(TensorParallelOptions{options.tensorParallel}));
  if (!options.stageTp.empty()) {
    std::vector<int64_t> degrees(options.stageTp.begin(),
                                 options.stageTp.end());
    TensorParallelOptions stages;
    stages.stageDegrees = degrees; // copied by the pass
    stages.dataParallel = options.dp > 0 ? options.dp : 1;
    stages.microBatches = options.microBatches;
    pm.addPass(createTensorParallel(stages));
  }
  pm.addPass(createAnnotateCosts());
  if (options.globalBatch != 0) {
    // The shape first: it may change the micro-batch size, hence the costs.
    ChooseShapeOptions shape;
    shape.globalBatch = options.globalBatch;
    shape.tensorParallel = options.tensorParallel == 0 ? 0 : 1;
    shape.microBatchSizes = options.microBatchSizes;
    shape.budget = options.budget;
    shape.schedule = options.schedule;
    shape.dataParallel = options.dp;
    shape.pipelineParallel = options.pp;
    shape.sync = options.sync;
    shape.bucketMb = options.bucketMb;
    shape.syncEvery = options.syncEvery;
    shape.syncFragments = options.syncFragments;
    shape.syncOverlap = options.syncOverlap;
    shape.dpCompression = options.dpCompression;
    shape.compressRatio = options.compressRatio;
    shape.ppCompression = options.ppCompression;
    shape.recompute = options.recompute;
    shape.optimizer = options.optimizer;
    shape.clipGradNorm = options.clipGradNorm;
    shape.shardState = options.shardState;
    pm.addPass(createChooseShape(shape));
    pm.addPass(createAnnotateCosts());
  }
  AutodiffOptions autodiff;
  autodiff.optimizer = options.optimizer;
  autodiff.lr = options.lr;
  autodiff.momentum = options.momentum;
  autodiff.beta1 = options.beta1;
  autodiff.beta2 = options.beta2;
  autodiff.epsilon = options.epsilon;
  autodiff.weightDecay = options.weightDecay;
  autodiff.decayParams = options.decayParams;
  autodiff.lrSchedule = options.lrSchedule;
  autodiff.warmupSteps = options.warmupSteps;
  autodiff.totalSteps = options.totalSteps;
  autodiff.decaySteps = options.decaySteps;
  autodiff.minLr = options.minLr;
  autodiff.clipGradNorm = options.clipGradNorm;
  pm.addPass(createAutodiff(autodiff));
  PlanTail tail(options);
  // A degree per stage fixes the layout: no other algorithm's to compare.
  if (!(options.programs && options.algorithm == "hetero" &&
        options.simulateCandidates && options.stageTp.empty())) {
    buildPlanTail(pm, tail);
    return;
  }
  std::vector<std::string> algorithms{"hetero", kHeteroLinkShares.str()};
  for (::dtfm::planner::SearchAlgorithm baseline :
       ::dtfm::planner::allSearchAlgorithms())
    algorithms.push_back(::dtfm::planner::searchAlgorithmName(baseline));
  pm.addPass(createSimulateCandidates(
      [tail](OpPassManager &nested, PlanTailPart part, StringRef algorithm,
             bool printTable, double budgetSeconds) {
        buildPlanTail(nested, tail, part, algorithm, printTable,
                      budgetSeconds);
      },
      std::move(algorithms), tail.printTable, tail.budget));
}
} // namespace

void mlir::dtfm::registerDtfmPipelines() {
  PassPipelineRegistration<PlanOptions>(
      "dtfm-plan",
      "Plan training on a cluster: annotate costs, build the backward graph, "
      "assign devices, partition stages",
      buildPlanPipeline);
}
