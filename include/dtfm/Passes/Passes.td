//===- Passes.td - dtfm passes -----------------------------*- tablegen -*-===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//

#ifndef DTFM_PASSES
#define DTFM_PASSES

include "mlir/Pass/PassBase.td"

def ImportCluster : Pass<"dtfm-import-cluster", "mlir::ModuleOp"> {
  let summary = "Read a cluster file once into the module's `dtfm.cluster`";
  let description = [{
    Loads the cluster file `file` (proto/cluster.proto text format; the CSV
    matrices it names are read relative to it) and sets it on the module as

      dtfm.cluster = #dtfm.cluster<name, source, devices, delay_ms,
                                   bandwidth_gbps>

    The planning passes (--dtfm-choose-shape, --dtfm-assign-devices,
    --dtfm-partition-stages, --dtfm-insert-send-recv,
    --dtfm-insert-grad-sync, --dtfm-emit-stage-programs) read the cluster
    from there; --dtfm-plan=cluster=FILE runs this pass first. Errors in the
    file are one line naming it.
  }];
  let options = [
    Option<"file", "file", "std::string", /*default=*/"\"\"",
           "Cluster file (proto/cluster.proto text format)">,
  ];
  let dependentDialects = ["mlir::dtfm::DtfmDialect"];
}

def RecordPlanInputs : Pass<"dtfm-record-plan-inputs", "mlir::ModuleOp"> {
  let summary = "Record the model and the planning options, to plan again later";
  let description = [{
    Sets two string attributes on the module (dtfm/Format/PlanInputs.h):

      dtfm.plan_input    the module as it is now (MLIR text), without its
                         dtfm.cluster and earlier plan inputs;
      dtfm.plan_options  `options` (key=value items).

    --dtfm-plan runs it first, with its own options less the cluster, so
    that a plan file carries what re-planning needs: `dtfm-run --elastic`
    plans the same model with the same options on the devices that are
    left when one is lost, by running dtfm-opt on them.
  }];
  let options = [
    Option<"recordedOptions", "options", "std::string", /*default=*/"\"\"",
           "The planning options to record (key=value items)">,
  ];
  let dependentDialects = ["mlir::dtfm::DtfmDialect"];
}

def AnnotateCosts : Pass<"dtfm-annotate-costs", "mlir::ModuleOp"> {
  let summary = "Write every op's cost (FLOPs, bytes) as a `dtfm.cost` attribute";
  let description = [{
    For each op implementing `CostOpInterface`, attaches

      dtfm.cost = {fwd_flops, bwd_flops, saved_bytes, param_bytes,
                   result_bytes = array<i64: ...>}

    (all for one micro-batch), so that later passes and readers of the IR see
    the numbers without recomputing them. Existing annotations are replaced.
  }];
  let dependentDialects = ["::mlir::dtfm::DtfmDialect"];
  let statistics = [
    Statistic<"numAnnotated", "num-annotated", "Ops annotated with a cost">,
  ];
}

def PrintCosts : Pass<"dtfm-print-costs", "mlir::ModuleOp"> {
  let summary = "Print a per-op and per-layer cost table with totals";
  let description = [{
    Prints, for one micro-batch, each op's forward and backward FLOPs, saved
    activation bytes, result bytes and parameter bytes; the same summed per
    layer (the `dtfm.layer` attribute, in order of first appearance); and the
    totals: parameter count and bytes, forward, backward and training FLOPs,
    saved activation bytes. Uses `dtfm.cost` annotations where present and
    the cost interface otherwise. `format=json` prints one JSON object
    instead. The IR is left unchanged.
  }];
  let options = [
    Option<"format", "format", "std::string", /*default=*/"\"table\"",
           "Output format: table or json">,
    Option<"perOp", "per-op", "bool", /*default=*/"true",
           "Include the per-op rows">,
  ];
}

def Autodiff : Pass<"dtfm-autodiff", "mlir::ModuleOp"> {
  let summary = "Build the backward graph and the optimizer updates";
  let description = [{
    For every function with a loss (`dtfm.cross_entropy`): walks the forward
    ops in reverse and adds, for each op on a path from a trainable parameter
    to the loss, one `dtfm.backward` op whose inputs are the forward op's
    operands (the saved activations, explicit values) and the gradients of
    its results, and whose results are the gradients of the operands that
    need them (`wrt`); gradients of values used more than once are summed by
    `dtfm.accumulate`. The forward op's own attributes (transpose_rhs,
    num_heads, epsilon, ...) are copied to its backward op as
    `dtfm.forward_attrs`. Each trainable `dtfm.param` then gets an
    `dtfm.sgd_update` or `dtfm.adamw_update` with the hyper-parameters as
    attributes: the learning rate's schedule (Support/LrSchedule.h) and the
    weight decay, which by default (decay-params=matrices, as nanoGPT and
    Hugging Face group them) only parameters of rank >= 2 get -- not biases
    and norm gains; matrices-except-embeddings also leaves out the tables of
    `dtfm.embedding`; all decays every parameter. Training ops carry the
    `dtfm.layer` of the op (or parameter) they belong to, so that stage
    partitioning keeps them with it. --dtfm-plan takes the same optimizer
    options.
  }];
  let options = [
    Option<"optimizer", "optimizer", "std::string", /*default=*/"\"adamw\"",
           "adamw or sgd">,
    Option<"lr", "lr", "double", /*default=*/"1e-3", "Learning rate">,
    Option<"momentum", "momentum", "double", /*default=*/"0.9",
           "SGD momentum">,
    Option<"beta1", "beta1", "double", /*default=*/"0.9", "AdamW beta1">,
    Option<"beta2", "beta2", "double", /*default=*/"0.999", "AdamW beta2">,
    Option<"epsilon", "epsilon", "double", /*default=*/"1e-8", "AdamW epsilon">,
    Option<"weightDecay", "weight-decay", "double", /*default=*/"0.01",
           "Weight decay (decoupled for AdamW)">,
    Option<"decayParams", "decay-params", "std::string",
           /*default=*/"\"matrices\"",
           "Parameters that get weight decay: matrices (rank >= 2: no "
           "biases or norm gains), matrices-except-embeddings, or all">,
    Option<"lrSchedule", "lr-schedule", "std::string",
           /*default=*/"\"constant\"",
           "Learning-rate schedule after the warmup: constant, cosine, "
           "linear or wsd (warmup-stable-decay)">,
    Option<"warmupSteps", "warmup-steps", "int64_t", /*default=*/"0",
           "Linear warmup steps: step s < W trains at lr (s + 1) / (W + 1)">,
    Option<"totalSteps", "total-steps", "int64_t", /*default=*/"0",
           "Steps the schedule runs over (cosine, linear, wsd): from then "
           "on min-lr">,
    Option<"decaySteps", "decay-steps", "int64_t", /*default=*/"0",
           "wsd: the last steps of total-steps, over which the rate decays "
           "linearly to min-lr">,
    Option<"minLr", "min-lr", "double", /*default=*/"0",
           "Learning rate at the end of a decaying schedule">,
    Option<"clipGradNorm", "clip-grad-norm", "double", /*default=*/"0",
           "Clip the whole model's gradient norm to this before each update, "
           "as torch.nn.utils.clip_grad_norm_ (0: no clipping)">,
  ];
}

def InsertSendRecv : Pass<"dtfm-insert-send-recv", "mlir::ModuleOp"> {
  let summary = "Turn every value that crosses stages into a send/recv pair";
  let description = [{
    After --dtfm-partition-stages: for each value defined on stage a and used
    on stage b != a (forward activations, backward gradients, a tied
    parameter), inserts a `dtfm.send` right after its definition and a
    `dtfm.recv` right before its first use on b, and makes b's uses read the
    received value. The pair shares a tag (numbered in IR order) and the
    value's bytes; latency and bandwidth are those of the slowest matched
    device pair between the two stages (the `dtfm.assignment` groups, or the
    cluster's first devices, one per stage). A parameter used on another
    stage (a tied weight) and the gradient that returns for it are marked
    `dtfm.once_per_iteration`: they move once per iteration, not once per
    micro-batch.
  }];
  let statistics = [
    Statistic<"numPairs", "num-pairs", "send/recv pairs inserted">,
  ];
}

def InsertCompression : Pass<"dtfm-insert-compression", "mlir::ModuleOp"> {
  let summary = "AdaTopK: top-k compression on the slowest links";
  let description = [{
    After --dtfm-insert-send-recv: estimates each transfer's dense time
    R_i = latency + bytes / bandwidth and gives it FusionLLM's ratio
    r_i = max(1, 3 r R_i / max_p R_p) (lib/Planner/Compression.h); a
    transfer whose r_i exceeds 3 (so that f32/bf16 values plus i64 indices
    are smaller than the dense tensor) and that is not faster than
    `dense-below` x the slowest becomes `dtfm.topk_compress` -> a send of the
    values (the original tag) and of the indices (a new tag) -> two recvs ->
    `dtfm.topk_decompress`. `uniform=true` is the baseline: ratio r on every
    transfer past the threshold. Transfers marked `dtfm.once_per_iteration`
    (a tied weight and its gradient) are neither compressed nor counted. The send/recv bytes are the compressed
    sizes, so everything downstream sees them.

    `int8=int8|auto` (SWARM's 8-bit transfers; `ratio` may then be 1): the
    per-micro-batch transfers top-k leaves dense -- every one, or those where
    the int8 format (format/Int8.h: a byte per element, a scale per 256)
    saves at least 20% of the transfer's time -- keep their send and recv,
    marked `dtfm.wire = "int8"` with the format's bytes; the runtime encodes
    activations and gradients on the way out and decodes them on the way in.
  }];
  let options = [
    Option<"ratio", "ratio", "double", /*default=*/"1",
           "Target compression ratio r on the slowest link (> 1)">,
    Option<"uniform", "uniform", "bool", /*default=*/"false",
           "Uniform top-k with ratio r instead of AdaTopK">,
    Option<"denseBelow", "dense-below", "double", /*default=*/"0",
           "Links faster than this fraction of the slowest stay dense">,
    Option<"int8", "int8", "std::string", /*default=*/"\"none\"",
           "8-bit transfers on the links top-k leaves dense: none, int8 "
           "(all) or auto (where they save 20%)">,
  ];
  let statistics = [
    Statistic<"numCompressed", "num-compressed", "Transfers compressed">,
    Statistic<"numInt8", "num-int8", "Transfers sent in 8 bits">,
  ];
}

def InsertGradSync : Pass<"dtfm-insert-grad-sync", "mlir::ModuleOp"> {
  let summary = "Synchronise gradients within each data-parallel group";
  let description = [{
    After --dtfm-autodiff, --dtfm-assign-devices and --dtfm-partition-stages:
    every optimizer update on stage s reads its gradient through a
    `dtfm.grad_sync` over stage s's data-parallel group. The algorithm is
    chosen per group by the cost model for the stage's total gradient bytes
    -- DT-FM's sharded parameter server (DATAP-COST) or ring all-reduce --
    or forced with `sync=ps|ring`. Groups of one device need no sync.

    The stage's gradients travel in buckets (Planner/Buckets.h), as PyTorch
    DDP sends them: in the order the backward produces them, cut at
    `bucket-mb` MiB (0: one bucket per stage). The default, `auto`, picks
    per stage the cap that leaves the least all-reduce after the last
    micro-batch's backward (on slow, far links every bucket pays the
    latency again and one bucket can win). Each sync records
    its bucket (`dtfm.bucket`, numbered in launch order), the bucket's
    predicted all-reduce time (`dtfm.bucket_seconds`; its own `seconds` is
    the tensor's if it travelled alone) and when the bucket is complete
    (`dtfm.bucket_ready`: the fraction of the stage's backward FLOPs done
    once its last gradient is produced), so that the runtime and the
    simulator overlap it with the rest of the backward.

    `sync-every=H` (>= 1; 0, the default, syncs gradients every step)
    trains with local steps (DiLoCo): each replica
    steps on its own gradients, and every H steps the replicas average
    their pseudo-gradients (parameters at the last exchange minus now) and
    take an outer Nesterov step (`outer-lr`, `outer-momentum`; DiLoCo's 0.7
    and 0.9). This changes what is computed: only on request. The syncs
    record `dtfm.sync_every`, `dtfm.outer_lr` and `dtfm.outer_momentum`; the
    exchange travels as one bucket after the optimizer step.
    `sync-fragments=P` (1 < P <= H, at most the layers holding parameters;
    Streaming DiLoCo) exchanges the parameters in P fragments of whole
    layers, strided (the k-th layer to hold a parameter in fragment
    k mod P), fragment p at the steps t with t mod H = ((p + 1) H / P)
    mod H: each replica's exchange moves 1/P of the parameters, P times
    per H steps. The syncs record `dtfm.sync_fragment = p` and
    `dtfm.sync_fragments = P`. `sync-overlap=tau` (0 <= tau < the fewest
    steps between two exchanges) applies each exchange tau steps after it
    starts, the replicas training on meanwhile, the parameter then
    becoming `outer-mixing` alpha (default 0.5) x its own value + (1 -
    alpha) x the new global one (`dtfm.sync_overlap`, `dtfm.outer_mixing`).
    `sync-every=auto` (needs the plan's shape, `dtfm.shape`) stays
    synchronous unless the slowest group's exchange left after the backward
    costs more than 10% of the shape's pipeline time, and then takes the
    smallest H of 2, 5, 10, 20, 50, 100 whose 1/H of a parameter exchange
    costs no more (planner::chooseSyncEvery, hetero's model alike).

    `dp-compression=int8` (default `none`; it changes what is computed)
    sends the gradients as int8 with one scale per 256 values (a quarter of
    the bytes; format/Int8.h), with error feedback: each replica adds to its
    gradient what the last exchange's rounding left out. The syncs record
    `dtfm.compression = "int8"` and their times for the compressed bytes.
    `dp-compression=auto` compresses only the groups where int8 saves at
    least 20% of the exchange's time (latency-bound groups stay dense).
    `dp-compression=topk:R` (R > 1; never chosen by auto) sends each
    gradient's 1/R entries of largest magnitude as (index, value) pairs
    (format/Sparse.h), with error feedback: what was not sent is added to
    the next step's gradient. The members gather each other's entries
    around a ring; the syncs record `dtfm.compression = "topk"` and
    `dtfm.topk_ratio = R`. Not with local steps. Top-k starts after
    `topk-warmup` steps (default 20, recorded as `dtfm.topk_warmup`)
    synchronised dense, and from then on AdamW keeps its second moment as it
    was at that step (1-bit Adam's recipe: the moment of bursty sparse
    gradients would shrink every step; 0 compresses from step 1 and freezes
    nothing).
  }];
  let options = [
    Option<"sync", "sync", "std::string", /*default=*/"\"auto\"",
           "auto, ps or ring">,
    Option<"bucketMb", "bucket-mb", "std::string", /*default=*/"\"auto\"",
           "Gradient bucket cap: auto or MiB (0: one bucket per stage)">,
    Option<"syncEvery", "sync-every", "std::string", /*default=*/"\"0\"",
           "Local steps: exchange parameters every H steps (0: gradients "
           "every step; auto: H from the plan's shape)">,
    Option<"outerLr", "outer-lr", "double", /*default=*/"0.7",
           "Local steps: the outer Nesterov step's learning rate">,
    Option<"outerMomentum", "outer-momentum", "double", /*default=*/"0.9",
           "Local steps: the outer Nesterov step's momentum">,
    Option<"syncFragments", "sync-fragments", "int64_t", /*default=*/"1",
           "Local steps: exchange the parameters in P fragments of whole "
           "layers on a staggered schedule (Streaming DiLoCo; 1: all at "
           "once)">,
    Option<"syncOverlap", "sync-overlap", "int64_t", /*default=*/"0",
           "Local steps: apply each exchange tau steps after it starts, "
           "training on meanwhile (0: the step waits for it)">,
    Option<"outerMixing", "outer-mixing", "double", /*default=*/"0.5",
           "Local steps with an overlap: the share of the replica's own "
           "value kept when the exchange is applied">,
    Option<"dpCompression", "dp-compression", "std::string",
           /*default=*/"\"none\"",
           "Gradients on the wire: none, int8 (with error feedback) or "
           "auto (int8 where it saves 20%)">,
    Option<"topkWarmup", "topk-warmup", "int64_t", /*default=*/"20",
           "dp-compression=topk:R: steps synchronised dense before top-k "
           "starts (AdamW's second moment frozen after them)">,
  ];
}

def ScheduleMicrobatches : Pass<"dtfm-schedule-microbatches",
                                 "mlir::ModuleOp"> {
  let summary = "GPipe, 1F1B or zero bubble over n_b micro-batches on three "
                "slots";
  let description = [{
    After partitioning (and send/recv insertion): puts every op on one of
    its stage's three slots (`dtfm.slot` = recv, compute or send, as DT-FM's
    runtime runs them on three streams so that transfers overlap compute)
    and tags its phase (`dtfm.phase` = fwd, bwd or opt), then records the
    per-stage instruction streams of the schedule (lib/Planner/Schedule.h) as
    `dtfm.schedule` = #dtfm.schedule<kind, micro_batches, peak_in_flight,
    stages> (DtfmAttrs.td), where each stage is a #dtfm.streams of its recv,
    compute and send streams, each instruction written "F3" / "B3" (forward /
    backward of micro-batch 3; receives and sends carry the peer stage,
    "F3<1"/"F3>1"). The schedule is checked to run to completion (no cycle
    across slots or stages).

    schedule=zb-h1 (Zero Bubble's ZB-H1): first splits each dtfm.backward
    that differentiates parameters and other values into two reading the
    same inputs, B (the others) and W (the parameters), their FLOPs split
    by weightGradientFlops (Analysis/CostAnalysis.h), and tags the W ops
    and the sums of their results `dtfm.phase = "wgt"` (what a send or a B
    op reads stays "bwd"); the compute streams get a "W3" entry per
    micro-batch, stage s running each W s micro-batches late
    (lib/Planner/Schedule.h). schedule=auto takes dtfm.shape's choice.
  }];
  let options = [
    Option<"schedule", "schedule", "std::string", /*default=*/"\"1f1b\"",
           "1f1b, zb-h1, gpipe or auto">,
    Option<"microBatches", "micro-batches", "int", /*default=*/"1",
           "Micro-batches per iteration (n_b)">,
  ];
}

def EmitStagePrograms : Pass<"dtfm-emit-stage-programs", "mlir::ModuleOp"> {
  let summary = "One self-contained program per device";
  let description = [{
    After --dtfm-schedule-microbatches: replaces the model function by one
    `func.func @<device>` per device of the plan, holding a copy of its
    stage's ops (which, after --dtfm-insert-send-recv, only use values of
    that stage) and, as attributes: `dtfm.device`, `dtfm.stage`,
    `dtfm.pipeline` (its index in the stage's data-parallel group, i.e. the
    micro-batch group it runs), `dtfm.peers` {prev, next} (the devices of
    its pipeline on the neighbouring stages), `dtfm.streams` (the ordered
    recv / compute / send instruction streams of its stage),
    `dtfm.param_shards` (for each parameter of the stage, the element range
    this device owns under the sharded parameter server) and
    `dtfm.recv_buffer_bytes` (bytes to preallocate for receives). Sends and
    receives gain `peer_device`. With `recompute=true` every program also
    gets `dtfm.recompute`: the runtime recomputes its layers' activations
    during the backward instead of keeping them (docs/Runtime.md, Memory).

    With tensor parallelism every member of a group (the planning passes
    placed it by its first member) gets the program, `dtfm.tp_group` and
    `dtfm.tp_rank`, and its gradient syncs go to the members of its rank.
    Stages may have degrees of their own (`dtfm.tp_groups`): member j of a
    receiving group takes each transfer from member j mod t of the sending
    one, so a send is copied for every receiver of its rank modulo its
    degree, and left out (with its stream entries) where the receiving
    group is smaller. A stage whose groups differ in size, or an op sharded
    for another degree than its stage's, is refused in one line.

    The replicas of a stage (at a rank) run the same ops: the first keeps
    its body, and each other becomes a private declaration naming it
    (`dtfm.template = @first`) that keeps its own attributes and lists the
    device at the other end of each transfer of that body, in op order
    (`dtfm.peer_devices`) -- so the module grows with stages, not devices
    (dtfm/Dialect/Dtfm/IR/DevicePrograms.h).
  }];
  let options = [
    Option<"recompute", "recompute", "bool", /*default=*/"false",
           "Activation recomputation on every device program">,
  ];
}

def FitMemory : Pass<"dtfm-fit-memory", "mlir::ModuleOp"> {
  let summary = "Recompute activations where a device program would not "
                "fit, and refuse a plan that still does not";
  let description = [{
    After --dtfm-emit-stage-programs: predicts each device program's peak
    memory as the runtime allocates it (Plan/MemoryModel.h) against its
    device's capacity. First, with `shard-state=auto`, each data-parallel
    group with a program that would not fit gets `dtfm.shard_state` on its
    synchronous, uncompressed gradient syncs (ZeRO-1: each member keeps the
    optimizer state of 1/D of every parameter; the same bytes cross the
    links, a reduce-scatter and an all-gather instead of an all-reduce);
    `all` shards every such group, `none` none. Then, with
    `recompute=auto`, each program that would still not fit gets
    `dtfm.recompute` (its layers' activations recomputed in the backward,
    whose time the simulator then counts) and only those (`all`, as
    --dtfm-plan passes it when every program recomputes already, does the
    same); `none` changes nothing. Sharding comes first because it costs no
    time. Every program records its peak as `dtfm.peak_memory_bytes`. A
    program still over its capacity fails the pass with one line naming
    the device, the bytes it needs (with the options it has) and the
    capacity: dtfm never emits a plan that does not fit.
  }];
  let options = [
    Option<"recompute", "recompute", "std::string", /*default=*/"\"auto\"",
           "auto (recompute where a program would not fit), all or none">,
    Option<"shardState", "shard-state", "std::string", /*default=*/"\"auto\"",
           "auto (shard the optimizer state of the data-parallel groups "
           "that would not fit), all or none">,
  ];
}

def VerifyPlan : Pass<"dtfm-verify-plan", "mlir::ModuleOp"> {
  let summary = "Check a planned module's communication";
  let description = [{
    Every `dtfm.send` has exactly one `dtfm.recv` with its tag, the same
    bytes and the same ends (sender and receiver: devices in device
    programs, stages before), and no recv lacks its send. When the module
    has a `dtfm.schedule`, its streams are rebuilt with their dependencies
    and must run to completion: no cycle across slots or stages. Read-only.
  }];
}

def AssignDevices : Pass<"dtfm-assign-devices", "mlir::ModuleOp"> {
  let summary = "Assign the cluster's devices to data-parallel groups and "
                "pipeline stages (DT-FM scheduler and baselines)";
  let description = [{
    Splits the N devices of a cluster file into D_PP data-parallel groups of
    D_DP devices, orders the groups into a pipeline and matches the devices of
    neighbouring stages, minimising DT-FM's communication cost
    (DATAP-COST + PIPELINEP-COST; lib/Planner/CostModel.h). The result is a
    `dtfm.assignment` dictionary on the module: the cluster, algorithm, seed,
    D_DP, D_PP, the communication volumes, the three costs in seconds, and
    `stages`: stage s lists its devices so that entry i of every stage belongs
    to pipeline i (the per-micro-batch-group device matching).

    Volumes derived from the model: c_DP = 4 bytes (fp32 gradient) x trainable
    parameters / D_PP, the gradient bytes of one stage; c_PP = the mean bytes
    of the values that cross from one `dtfm.layer` to a later one (the
    activation of one micro-batch at a stage boundary) x the micro-batches
    each pipeline carries per iteration (`micro-batches`). Both can be given
    directly instead. With dp = pp = 0 every factorisation N = D_DP x D_PP
    with D_PP no larger than the number of layers is searched and the
    cheapest kept.

    `algorithm=hetero` (docs/Scheduler.md) minimises the predicted iteration
    time instead -- FusionLLM's pipelined time over stages re-balanced for
    each candidate's devices, plus data-parallel synchronisation -- and adds
    `iteration_s` and `stage_bounds` to the record.
  }];
  let options = [
    Option<"algorithm", "algorithm", "std::string", /*default=*/"\"genetic\"",
           "rank-order, random, kl, op-fence, genetic-paper, genetic or hetero">,
    Option<"seed", "seed", "uint64_t", /*default=*/"0", "Random seed">,
    Option<"budget", "budget", "double", /*default=*/"0",
           "Time budget in seconds (0: none, deterministic)">,
    Option<"dataParallel", "dp", "int", /*default=*/"0",
           "D_DP (0 with pp=0: search every factorisation)">,
    Option<"pipelineParallel", "pp", "int", /*default=*/"0", "D_PP">,
    Option<"microBatches", "micro-batches", "int", /*default=*/"1",
           "Micro-batches each pipeline carries per iteration">,
    Option<"schedule", "schedule", "std::string", /*default=*/"\"1f1b\"",
           "Micro-batch schedule the plan will use (hetero's model): 1f1b, "
           "zb-h1, gpipe or auto (dtfm.shape's)">,
    Option<"dpBytes", "dp-bytes", "double", /*default=*/"0",
           "c_DP in bytes (0: derive from the model)">,
    Option<"ppBytes", "pp-bytes", "double", /*default=*/"0",
           "c_PP in bytes (0: derive from the model)">,
    Option<"printTable", "print-table", "bool", /*default=*/"false",
           "Print the assignment as a table on stdout">,
    Option<"progress", "progress", "bool", /*default=*/"false",
           "Report search progress on stderr">,
    Option<"sync", "sync", "std::string", /*default=*/"\"auto\"",
           "Gradient sync the plan will use (hetero's model): auto, ps or "
           "ring">,
    Option<"bucketMb", "bucket-mb", "std::string", /*default=*/"\"auto\"",
           "Gradient buckets the plan will use (hetero's model): auto or "
           "MiB (0: one bucket per stage)">,
    Option<"syncEvery", "sync-every", "std::string", /*default=*/"\"0\"",
           "Local steps the plan will take (hetero's model): parameters "
           "exchanged every H steps (0: gradients every step; auto: H "
           "where exchanging every step costs over 10% of the pipeline)">,
    Option<"syncFragments", "sync-fragments", "int64_t", /*default=*/"1",
           "Local steps the plan will take (hetero's model): the exchange "
           "in P fragments">,
    Option<"syncOverlap", "sync-overlap", "int64_t", /*default=*/"0",
           "Local steps the plan will take (hetero's model): each exchange "
           "overlapping tau steps">,
    Option<"dpCompression", "dp-compression", "std::string",
           /*default=*/"\"none\"",
           "Gradients on the wire the plan will use (hetero's model): none, "
           "int8 or auto">,
    Option<"compressRatio", "compress-ratio", "double", /*default=*/"1",
           "AdaTopK target ratio the plan will use (hetero's model; 1: "
           "dense)">,
    Option<"ppCompression", "pp-compression", "std::string",
           /*default=*/"\"none\"",
           "Pipeline transfers in 8 bits the plan will use (hetero's "
           "model): none, int8 or auto">,
    Option<"recompute", "recompute", "std::string", /*default=*/"\"none\"",
           "Stage memory may recompute activations: auto (where a stage "
           "would not fit otherwise, paying its forward FLOPs again), all "
           "or none">,
    Option<"shardState", "shard-state", "std::string", /*default=*/"\"none\"",
           "Stage memory may shard the optimizer moments over each stage's "
           "data-parallel group (ZeRO-1): auto (where a stage would not fit "
           "otherwise), all or none">,
    Option<"unevenByLinks", "uneven-by-links", "bool", /*default=*/"false",
           "hetero: uneven replicas also where only the pipelines' links "
           "differ (--dtfm-plan tries it as a candidate for the simulator)">,
    Option<"keepLayout", "keep-layout", "bool", /*default=*/"false",
           "hetero: re-plan the layout the module's dtfm.assignment records "
           "(its D_DP x D_PP and stages) instead of searching one">,
  ];
}

def PartitionStages : Pass<"dtfm-partition-stages", "mlir::ModuleOp"> {
  let summary = "Split the model into uneven, compute- and memory-aware "
                "pipeline stages";
  let description = [{
    Blocks are the maximal runs of consecutive ops (IR order, which is a
    topological order) that share a `dtfm.layer`; the pass splits them into
    D_PP contiguous non-empty stages minimising the slowest stage's
    FLOPs / (lambda peak) on the devices that run it, subject to each device
    holding its parameter state and the in-flight activations of the schedule
    (lib/Planner/StagePartition.h; exact dynamic programming).

    Stage devices: with a `dtfm.assignment` (from --dtfm-assign-devices),
    stage s runs on its data-parallel group, taken at its slowest and smallest
    member; otherwise every device of the cluster runs one stage, in file
    order (`stages` may pick the first N). Every op gets `dtfm.stage`; the
    module gets `dtfm.stages` = {bounds, stage_seconds, memory_bytes,
    bottleneck_s}.
  }];
  let options = [
    Option<"numStages", "stages", "int", /*default=*/"0",
           "Stages when there is no assignment (0: one per device)">,
    Option<"schedule", "schedule", "std::string", /*default=*/"\"1f1b\"",
           "Micro-batch schedule for activation memory: 1f1b, zb-h1, gpipe or auto">,
    Option<"microBatches", "micro-batches", "int", /*default=*/"1",
           "Micro-batches per iteration">,
    Option<"stateBytes", "state-bytes-per-param-byte", "double",
           /*default=*/"0",
           "Bytes of weights, gradients and optimizer state per parameter "
           "byte (0: as the runtime holds them, in f32, for the module's "
           "optimizer)">,
    Option<"recompute", "recompute", "std::string", /*default=*/"\"none\"",
           "Stage memory may recompute activations: auto (where a stage "
           "would not fit otherwise, paying its forward FLOPs again), all "
           "or none">,
    Option<"shardState", "shard-state", "std::string", /*default=*/"\"none\"",
           "Stage memory may shard the optimizer moments over each stage's "
           "data-parallel group (ZeRO-1): auto (where a stage would not fit "
           "otherwise), all or none">,
    Option<"printTable", "print-table", "bool", /*default=*/"false",
           "Print the stages as a table on stdout">,
  ];
}

def Rebatch : Pass<"dtfm-rebatch", "mlir::ModuleOp"> {
  let summary = "Change the micro-batch size of a forward graph";
  let description = [{
    The model's micro-batch size is dimension 0 of its `dtfm.input` and
    `dtfm.label` values (they must agree). Every value computed from them
    carries the batch in dimension 0 (also after reshapes that merge it
    with later dimensions); the pass scales that dimension from the old size
    to `micro-batch-size` and re-verifies the module. A model that moves the
    batch elsewhere (a transpose of it, a softmax or mean over it) fails
    verification and is refused with one line naming the op. Forward graphs
    only (before --dtfm-autodiff).
  }];
  let options = [
    Option<"microBatchSize", "micro-batch-size", "int64_t", /*default=*/"0",
           "The new micro-batch size">,
  ];
}

def TensorParallel : Pass<"dtfm-tensor-parallel", "mlir::ModuleOp"> {
  let summary = "Shard attention and MLP blocks and the vocabulary over a "
                "tensor-parallel group";
  let description = [{
    Megatron-LM's tensor parallelism as a rewrite of the forward graph into
    the program every member of a group of `degree` devices runs on its own
    shards. An attention block (Q, K and V `dtfm.linear`s feeding one
    `dtfm.causal_attention` whose result feeds an output `dtfm.linear`) is
    split by heads: Q/K/V column-parallel (weight [K, N/t], bias [N/t]),
    the attention over num_heads/t heads, the output projection
    row-parallel (weight [H/t, N]) followed by `dtfm.tp_all_reduce` and its
    bias, added once after the sum. An MLP (a `dtfm.linear`, elementwise
    activations, a `dtfm.linear`) is split the same way through its hidden
    width. The input of each block passes a `dtfm.tp_all_reduce
    in_backward` (the identity forward, the sum of the gradient backward).

    The vocabulary is split too (Megatron's vocabulary-parallel embedding
    and head): a rank-2 `dtfm.param` read only by `dtfm.embedding`s (as
    their table, rows = the vocabulary) and by heads (a `dtfm.matmul` or
    `dtfm.linear` whose logits only a `dtfm.cross_entropy` reads, tied or
    not) is split along the vocabulary, with a linear head's bias. The
    embeddings get `vocab_shard = t` (zeros outside the member's rows)
    followed by a forward `dtfm.tp_all_reduce`; each head reads its input
    through a `dtfm.tp_all_reduce in_backward` and computes V/t logits; the
    loss gets `vocab_shard = t` and sums its per-row parts over the group. A
    vocabulary the degree does not divide stays whole: pad it at import
    (`dtfm-translate --pad-vocab 128`, as Megatron-LM does; the loss's
    `classes` leaves the padding out) to split GPT-3's 50257.

    Everything else -- norms, position embeddings, biases of row-parallel
    linears -- is replicated: every member computes it identically. Each
    sharded `dtfm.param` records `dtfm.tp_shard = array<i64: dim, t>` and
    the module `dtfm.tensor_parallel = t`; the runtime gives member r slice
    r of the whole tensor's initial values.

    Only parameters used by nothing else are sharded (a tied weight stays
    whole). A degree that does not divide a block's heads or widths, a
    module with no block or vocabulary to shard, or one with a backward
    graph already
    is refused with one line. Run before --dtfm-annotate-costs (the
    pipelines do): sharded ops lose their `dtfm.cost`.

    `layer-degrees=LAYER:T,...` gives layers (by `dtfm.layer`) degrees of
    their own, as stages of different degrees need (the V100 stage at TP 4
    beside A100s at TP 1): each block at its layer's degree (1: whole), a
    vocabulary table at its readers' degree when they agree and whole
    otherwise, and the module's `dtfm.tensor_parallel` is 0 when more than
    one degree is used. An unknown layer or a malformed pair is refused.

    `stage-degrees=T0,T1,... dp=D` plans a degree per pipeline stage
    (mlir::dtfm::shardStagesTensorParallel): D groups of T_s devices per
    stage, cut from the cluster's nodes (larger degrees first, from the
    slowest nodes), the stage bounds chosen by the chain partitioner with
    each stage costed on the model sharded at its degree for
    `micro-batches` per iteration (Planner/StageDegrees.h), each layer
    sharded to its stage's degree, and `dtfm.tp_groups` (stage-major) and
    `dtfm.tp_stage_bounds` recorded: --dtfm-assign-devices and
    --dtfm-partition-stages keep that layout and those bounds, and
    --dtfm-emit-stage-programs pairs member j of a receiving group with
    member j mod T of the sending one. Needs the cluster (after
    --dtfm-import-cluster).
  }];
  let options = [
    Option<"degree", "degree", "int64_t", /*default=*/"1",
           "Devices per tensor-parallel group (1: leave the model whole)">,
    ListOption<"layerDegrees", "layer-degrees", "std::string",
               "LAYER:DEGREE pairs: those layers at their own degree (a "
               "degree per pipeline stage), the others at `degree`">,
    ListOption<"stageDegrees", "stage-degrees", "int64_t",
               "A degree per pipeline stage: groups cut from the nodes, "
               "stage bounds chosen, layers sharded to their stage's degree">,
    Option<"dataParallel", "dp", "int64_t", /*default=*/"1",
           "With stage-degrees: the groups per stage (D_DP)">,
    Option<"microBatches", "micro-batches", "int64_t", /*default=*/"1",
           "With stage-degrees: micro-batches per iteration (the "
           "activations the stages hold)">,
  ];
}

def ChooseShape : Pass<"dtfm-choose-shape", "mlir::ModuleOp"> {
  let summary = "Choose the plan's shape: devices used, D_DP x D_PP, "
                "micro-batch size and count";
  let description = [{
    For a global batch of `global-batch` samples per iteration, searches
    (lib/Planner/ShapeSearch.h) which devices of the cluster to use, D_PP
    (uneven stages), D_DP (the same in every stage: the runtime runs D_DP
    identical pipelines), the micro-batch size (among `micro-batch-sizes`,
    default every divisor of the global batch from a quarter to four times
    the model's, that the model accepts: see --dtfm-rebatch) and the
    micro-batch count, minimising the hetero model's predicted iteration
    time with every stage in memory. Rebatches the model to the chosen size
    and records `dtfm.shape` on the module: the shape, the devices used and
    the layout (`stages`), `iteration_s`, the runner-up shapes with their
    predicted times, the idle devices with the reason, how many shapes were
    scored and whether the budget cut the search (the search time is not
    recorded: plans would differ run to run).
    --dtfm-assign-devices, --dtfm-partition-stages and
    --dtfm-schedule-microbatches then follow it. Runs on forward graphs
    (before --dtfm-autodiff).

    With `tensor-parallel=0` it also chooses the tensor-parallel degree t:
    the search runs once per degree from 1 to the cluster's largest node
    that the model can be sharded to (--dtfm-tensor-parallel's rewrite, on
    a copy) and whose nodes give groups (planningCluster: groups planned as
    devices, their sums costed on the node's links); degree 1 searches with
    the whole budget (so it finds what tensor-parallel=1 finds) and the
    others share another; the fastest predicted shape wins (t = 1 on a tie), the
    model is sharded to it and `dtfm.shape` records `tp`. It then tries a
    degree per stage (lib/Planner/StageDegrees.h: D_PP 2-3, sequences of
    the degrees with two distinct ones at least); the best replaces the
    single degree only when predicted faster, also as the module sharded
    for it scores: the layers are sharded to their stages' degrees
    (mlir::dtfm::shardStageLayout: `dtfm.tp_groups`,
    `dtfm.tp_stage_bounds`) and `dtfm.shape` records `tp = 0`, the groups'
    first members as its devices and the best single degree as its
    runner-up.
  }];
  let options = [
    Option<"tensorParallel", "tensor-parallel", "int64_t", /*default=*/"1",
           "Tensor-parallel degree: 0 searches every degree the model and "
           "the cluster's nodes allow and shards the model to the best; 1 "
           "(or the degree --dtfm-tensor-parallel sharded it to) plans the "
           "module as it is">,
    Option<"globalBatch", "global-batch", "int64_t", /*default=*/"0",
           "Samples per iteration over all pipelines">,
    ListOption<"microBatchSizes", "micro-batch-sizes", "int64_t",
               "Candidate micro-batch sizes (default: see above)">,
    Option<"budget", "budget", "double", /*default=*/"0",
           "Search budget in seconds (0: 3 s up to 128 devices, else 10 s)">,
    Option<"schedule", "schedule", "std::string", /*default=*/"\"1f1b\"",
           "Micro-batch schedule for activation memory: 1f1b, zb-h1, gpipe, "
           "or auto (each shape scored under 1f1b and zb-h1, the faster "
           "recorded in dtfm.shape)">,
    Option<"stateBytes", "state-bytes-per-param-byte", "double",
           /*default=*/"0",
           "Bytes of weights, gradients and optimizer state per parameter "
           "byte (0: as the runtime holds them, in f32, for the module's "
           "optimizer)">,
    Option<"optimizer", "optimizer", "std::string", /*default=*/"\"adamw\"",
           "Optimizer the plan will use (its state's memory): adamw or sgd">,
    Option<"clipGradNorm", "clip-grad-norm", "double", /*default=*/"0",
           "Gradient-norm clipping (--dtfm-autodiff's clip-grad-norm, for a "
           "module without updates yet): the norm's reduction is costed">,
    Option<"recompute", "recompute", "std::string", /*default=*/"\"none\"",
           "Stage memory may recompute activations: auto (where a stage "
           "would not fit otherwise, paying its forward FLOPs again), all "
           "or none">,
    Option<"shardState", "shard-state", "std::string", /*default=*/"\"none\"",
           "Stage memory may shard the optimizer moments over each stage's "
           "data-parallel group (ZeRO-1): auto (where a stage would not fit "
           "otherwise), all or none">,
    Option<"dataParallel", "dp", "int", /*default=*/"0",
           "Only shapes with this D_DP (0: any)">,
    Option<"pipelineParallel", "pp", "int", /*default=*/"0",
           "Only shapes with this D_PP (0: any)">,
    Option<"sync", "sync", "std::string", /*default=*/"\"auto\"",
           "Gradient sync the plan will use (hetero's model): auto, ps or "
           "ring">,
    Option<"bucketMb", "bucket-mb", "std::string", /*default=*/"\"auto\"",
           "Gradient buckets the plan will use (hetero's model): auto or "
           "MiB (0: one bucket per stage)">,
    Option<"syncEvery", "sync-every", "std::string", /*default=*/"\"0\"",
           "Local steps the plan will take (hetero's model): parameters "
           "exchanged every H steps (0: gradients every step; auto: H "
           "where exchanging every step costs over 10% of the pipeline)">,
    Option<"syncFragments", "sync-fragments", "int64_t", /*default=*/"1",
           "Local steps the plan will take (hetero's model): the exchange "
           "in P fragments">,
    Option<"syncOverlap", "sync-overlap", "int64_t", /*default=*/"0",
           "Local steps the plan will take (hetero's model): each exchange "
           "overlapping tau steps">,
    Option<"dpCompression", "dp-compression", "std::string",
           /*default=*/"\"none\"",
           "Gradients on the wire the plan will use (hetero's model): none, "
           "int8 or auto">,
    Option<"compressRatio", "compress-ratio", "double", /*default=*/"1",
           "AdaTopK target ratio the plan will use (hetero's model; 1: "
           "dense)">,
    Option<"ppCompression", "pp-compression", "std::string",
           /*default=*/"\"none\"",
           "Pipeline transfers in 8 bits the plan will use (hetero's "
           "model): none, int8 or auto">,
  ];
}

def PrintPlanSummary : Pass<"dtfm-print-plan-summary", "mlir::ModuleOp"> {
  let summary = "Print the chosen shape, the runner-ups and the idle devices";
  let description = [{
    Prints the `dtfm.shape` record of --dtfm-choose-shape as a table on
    stdout: the chosen shape and its predicted iteration time, the runner-up
    shapes with theirs, the devices left idle with the reason, and how many
    shapes were scored. Once gradients are synchronised
    (--dtfm-insert-grad-sync), one line per data-parallel stage: its group,
    algorithm and buckets, and the all-reduce left after the last
    micro-batch's backward against one bucket. Read-only.
  }];
}

#endif // DTFM_PASSES
