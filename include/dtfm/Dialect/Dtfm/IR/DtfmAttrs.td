//===- DtfmAttrs.td - dtfm attribute definitions -----------*- tablegen -*-===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//
//
// The typed planning state the passes exchange as module attributes. Each
// attribute verifies its own form when it is built or parsed, so the passes
// that read it need not re-validate it.
//
//===----------------------------------------------------------------------===//

#ifndef DTFM_ATTRS
#define DTFM_ATTRS

include "dtfm/Dialect/Dtfm/IR/DtfmDialect.td"
include "mlir/IR/AttrTypeBase.td"

class Dtfm_Attr<string name, string attrMnemonic, list<Trait> traits = []>
    : AttrDef<Dtfm_Dialect, name, traits> {
  let mnemonic = attrMnemonic;
}

/// A list printed and parsed in square brackets, `[a, b]`, empty or not
/// (ArrayRefParameter alone cannot parse an empty list).
class Dtfm_BracketListParameter<string elementType, string desc>
    : ArrayRefParameter<elementType, desc> {
  let parser = "::mlir::dtfm::parseBracketList<" # elementType # ">($_parser)";
  let printer = "::mlir::dtfm::printBracketList($_printer, $_self)";
}

/// A bracket list left out of the struct when empty.
class Dtfm_OptionalBracketListParameter<string elementType, string desc>
    : Dtfm_BracketListParameter<elementType, desc> {
  let defaultValue = "::llvm::SmallVector<" # elementType # ">()";
  let comparator = cppType # "($_lhs) == " # cppType # "($_rhs)";
}

def Dtfm_StageStreamsAttr : Dtfm_Attr<"StageStreams", "streams"> {
  let summary = "The receive, compute and send streams of one pipeline stage";
  let description = [{
    Each entry keeps its text spelling (format/Stream.h): `"F3<1"` receives
    the forward of micro-batch 3 from stage 1, `"B3"` computes the backward
    of micro-batch 3, `"F3>1"` sends the forward of micro-batch 3 to
    stage 1. The enclosing `#dtfm.schedule` checks the entries, since only it
    knows how many stages there are.

    ```mlir
    #dtfm.streams<recv = ["B0<1"], compute = ["F0", "B0"], send = ["F0>1"]>
    ```
  }];
  let parameters = (ins
    Dtfm_BracketListParameter<"::mlir::StringAttr", "receive entries">:$recv,
    Dtfm_BracketListParameter<"::mlir::StringAttr", "compute entries">:$compute,
    Dtfm_BracketListParameter<"::mlir::StringAttr", "send entries">:$send
  );
  let assemblyFormat = "`<` struct(params) `>`";
}

def Dtfm_ScheduleAttr : Dtfm_Attr<"Schedule", "schedule"> {
  let summary = "The micro-batch schedule of a pipeline";
  let description = [{
    Written by --dtfm-schedule-microbatches as the module attribute
    `dtfm.schedule`: the schedule's kind (`"1f1b"` or `"gpipe"`), the number
    of micro-batches, the peak number of micro-batches each stage holds
    activations for, and the streams of each stage. With uneven replicas,
    `pipeline_micro_batches` gives each pipeline's count (left out when
    every pipeline runs `micro_batches`): `micro_batches`, the peaks and the
    streams are then those of the largest, and a pipeline with fewer runs
    the same kind of schedule for its own count.

    ```mlir
    #dtfm.schedule<kind = "1f1b", micro_batches = 1, peak_in_flight = [1, 1],
                   stages = [<recv = ["B0<1"], compute = ["F0", "B0"],
                              send = ["F0>1"]>,
                             <recv = ["F0<0"], compute = ["F0", "B0"],
                              send = ["B0>0"]>]>
    ```

    The verifier checks the form: a known kind, a positive micro-batch
    count, one peak per stage, every entry well formed for its slot with its
    peer stage in range, pipeline counts that are positive with
    `micro_batches` the largest. Whether the streams run to completion (no cycle) is
    checked by --dtfm-verify-plan.
  }];
  let parameters = (ins
    StringRefParameter<"schedule kind: 1f1b, zb-h1 or gpipe">:$kind,
    "int64_t":$micro_batches,
    Dtfm_BracketListParameter<"int64_t", "peak in-flight micro-batches per stage">:$peak_in_flight,
    Dtfm_BracketListParameter<"::mlir::dtfm::StageStreamsAttr", "streams per stage">:$stages,
    Dtfm_OptionalBracketListParameter<"int64_t", "uneven replicas: micro-batches of each pipeline">:$pipeline_micro_batches
  );
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

/// A double printed in the shortest decimal form that reads back exactly
/// (held as a StoredDouble, which llvm::hash_value can hash).
class Dtfm_DoubleParameter<string desc>
    : AttrParameter<"::mlir::dtfm::StoredDouble", desc> {
  let parser = "::mlir::dtfm::parseDouble($_parser)";
  let printer = "::mlir::dtfm::printDouble($_printer, $_self)";
}

/// A double that may be left out (then 0), and is left out when 0.
class Dtfm_ZeroDefaultDoubleParameter<string desc>
    : Dtfm_DoubleParameter<desc> {
  let defaultValue = "::mlir::dtfm::StoredDouble(0.0)";
}

def Dtfm_DeviceAttr : Dtfm_Attr<"Device", "device"> {
  let summary = "One accelerator of a cluster";
  let description = [{
    A device of `#dtfm.cluster` (planner::Device): its name, region, peak
    FLOP/s in the training precision, the fraction of the peak reached in
    practice, its memory in bytes (0: not given), the node (machine) it is
    in (left out when empty) and its sustained memory bandwidth in bytes/s
    (left out when not known).

    ```mlir
    #dtfm.device<name = "a100-0", region = "us", peak_flops = 3.12e+14,
                 efficiency = 0.5, memory_bytes = 8.0e+10>
    ```
  }];
  let parameters = (ins
    StringRefParameter<"device name">:$name,
    StringRefParameter<"region">:$region,
    Dtfm_DoubleParameter<"peak FLOP/s">:$peak_flops,
    Dtfm_DoubleParameter<"fraction of the peak reached">:$efficiency,
    Dtfm_DoubleParameter<"memory in bytes">:$memory_bytes,
    StringRefParameter<"the node (machine) it is in", "\"\"">:$node,
    Dtfm_ZeroDefaultDoubleParameter<"memory bandwidth in bytes/s">:$memory_bytes_per_second
  );
  let assemblyFormat = "`<` struct(params) `>`";
}

def Dtfm_ClusterAttr : Dtfm_Attr<"Cluster", "cluster"> {
  let summary = "The devices and links a module is planned for";
  let description = [{
    Set on the module as `dtfm.cluster` by --dtfm-import-cluster (or
    `dtfm-translate --import-cluster`), which reads a cluster file once; the
    planning passes read the cluster from here. `source` names the file it
    came from, so that whole-module diagnostics keep naming it. `delay_ms`
    and `bandwidth_gbps` are the n x n link matrices, row-major; or, where
    `link_classes` gives each device a class (its region, else its node,
    where those give every link exactly: planner::linksByClass), the C x C
    links between classes (a class's own entry: between two of its
    devices; a device's link to itself is 0). Every double prints in the
    shortest form that reads back exactly.

    ```mlir
    #dtfm.cluster<name = "two", source = "two.textproto",
                  devices = [<name = "a", region = "r", peak_flops = 1.0e+14,
                              efficiency = 1.0, memory_bytes = 0.0>,
                             <name = "b", region = "r", peak_flops = 1.0e+14,
                              efficiency = 1.0, memory_bytes = 0.0>],
                  delay_ms = [0.0, 1.0, 1.0, 0.0],
                  bandwidth_gbps = [0.0, 10.0, 10.0, 0.0]>
    #dtfm.cluster<name = "four", source = "four.textproto",
                  devices = [<name = "a", region = "r0", ...>, ...],
                  link_classes = [0, 0, 1, 1],
                  delay_ms = [0.01, 30.0, 30.0, 0.01],
                  bandwidth_gbps = [100.0, 5.0, 5.0, 100.0]>
    ```

    The verifier checks that both matrices are n x n (with classes: a class
    below C for every device and C x C links), then everything
    planner::Cluster::validate checks (finite values, delays >= 0, positive
    bandwidths off the diagonal, devices with positive speed).
  }];
  let parameters = (ins
    StringRefParameter<"cluster name">:$name,
    StringRefParameter<"the file the cluster was imported from">:$source,
    Dtfm_BracketListParameter<"::mlir::dtfm::DeviceAttr", "devices">:$devices,
    Dtfm_OptionalBracketListParameter<"int64_t", "each device's link class (empty: links are N x N)">:$link_classes,
    Dtfm_BracketListParameter<"::mlir::dtfm::StoredDouble", "one-way latency in ms, row-major">:$delay_ms,
    Dtfm_BracketListParameter<"::mlir::dtfm::StoredDouble", "bandwidth in Gbit/s, row-major">:$bandwidth_gbps
  );
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// The attribute holding `cluster`, imported from `source`.
    static ClusterAttr get(::mlir::MLIRContext *context,
                           const ::dtfm::planner::Cluster &cluster,
                           ::llvm::StringRef source);
    /// The plain C++ cluster the planner works on.
    ::dtfm::planner::Cluster toCluster() const;
  }];
}

/// A flag printed `true` or `false`; left out when false.
def Dtfm_FlagParameter : DefaultValuedParameter<"bool", "false", "a flag"> {
  let parser = "::mlir::dtfm::parseFlag($_parser)";
  let printer = "$_printer << ($_self ? \"true\" : \"false\")";
}

def Dtfm_ShapeChoiceAttr : Dtfm_Attr<"ShapeChoice", "shape_choice"> {
  let summary = "One plan shape the shape search scored";
  let description = [{
    A runner-up of `#dtfm.shape`: D_DP x D_PP, the micro-batch size and
    count, the devices it uses and its predicted iteration time.

    ```mlir
    #dtfm.shape_choice<dp = 2, pp = 2, micro_batch_size = 1,
                       micro_batches = 16, devices_used = 4,
                       iteration_s = 0.0049>
    ```
  }];
  let parameters = (ins
    "int64_t":$dp,
    "int64_t":$pp,
    "int64_t":$micro_batch_size,
    "int64_t":$micro_batches,
    "int64_t":$devices_used,
    Dtfm_DoubleParameter<"predicted iteration time in s">:$iteration_s
  );
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

def Dtfm_IdleDevicesAttr : Dtfm_Attr<"IdleDevices", "idle_devices"> {
  let summary = "Devices a plan shape leaves idle, with the reason";
  let description = [{
    ```mlir
    #dtfm.idle_devices<devices = ["far0", "far1"], reason = "region away">
    ```
  }];
  let parameters = (ins
    Dtfm_BracketListParameter<"::mlir::StringAttr", "device names">:$devices,
    StringRefParameter<"why they are idle">:$reason
  );
  let assemblyFormat = "`<` struct(params) `>`";
}

def Dtfm_ShapeAttr : Dtfm_Attr<"Shape", "shape"> {
  let summary = "The plan shape --dtfm-choose-shape chose";
  let description = [{
    Written by --dtfm-choose-shape as the module attribute `dtfm.shape`:
    the chosen D_DP x D_PP, micro-batch size and count, the devices used
    and their layout (`stages`: the device names of each pipeline stage),
    the predicted `iteration_s` = `pipeline_s` + `data_parallel_s`, up to
    three runner-up shapes, the idle devices with the reason, the number of
    shapes scored and whether the search budget cut the search
    (`budget_exhausted`, left out when false), and the tensor-parallel
    degree (`tp`: each device named is then the first of a group of `tp`,
    left out when 1; 0: a degree per stage, the groups in `dtfm.tp_groups`
    and each device named the first of its group), `bound_s`: the lower
    bound on any plan's iteration time (Planner/LowerBound.h; left out when
    not known, 0), and `schedule`: with schedule=auto, the micro-batch
    schedule chosen for the plan ("1f1b" or "zb-h1"; left out otherwise),
    which the later passes' schedule=auto reads. Every double prints in
    the shortest form that reads back exactly.

    ```mlir
    #dtfm.shape<cluster = "far", global_batch = 32, dp = 2, pp = 1,
                micro_batch_size = 4, micro_batches = 4, devices_used = 2,
                iteration_s = 0.0044, pipeline_s = 0.004,
                data_parallel_s = 4.0e-04, devices = ["near0", "near1"],
                stages = [["near0", "near1"]], runners_up = [],
                idle = [<devices = ["far0"], reason = "region away">],
                shapes_scored = 25>
    ```

    The verifier checks the form: positive degrees (tp >= 0), micro-batch
    size and count; devices_used = dp * pp = the number of devices, each named once;
    global_batch = dp * micro_batch_size * micro_batches; pp stages of dp
    devices each, every one among `devices`; runners-up with positive
    degrees and dp * pp = devices_used.
  }];
  let parameters = (ins
    StringRefParameter<"the cluster's name">:$cluster,
    "int64_t":$global_batch,
    "int64_t":$dp,
    "int64_t":$pp,
    "int64_t":$micro_batch_size,
    "int64_t":$micro_batches,
    "int64_t":$devices_used,
    Dtfm_DoubleParameter<"predicted iteration time in s">:$iteration_s,
    Dtfm_DoubleParameter<"predicted pipeline time in s">:$pipeline_s,
    Dtfm_DoubleParameter<"predicted gradient sync time in s">:$data_parallel_s,
    Dtfm_BracketListParameter<"::mlir::StringAttr", "the devices used">:$devices,
    Dtfm_BracketListParameter<"::mlir::ArrayAttr", "device names per stage">:$stages,
    Dtfm_BracketListParameter<"::mlir::dtfm::ShapeChoiceAttr", "runner-up shapes">:$runners_up,
    Dtfm_BracketListParameter<"::mlir::dtfm::IdleDevicesAttr", "idle devices">:$idle,
    "int64_t":$shapes_scored,
    Dtfm_FlagParameter:$budget_exhausted,
    DefaultValuedParameter<"int64_t", "1", "tensor-parallel degree">:$tp,
    Dtfm_ZeroDefaultDoubleParameter<"lower bound on any plan's iteration time in s">:$bound_s,
    StringRefParameter<"the micro-batch schedule chosen (schedule=auto)", [{""}]>:$schedule
  );
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

/// A double left out of the struct when absent.
class Dtfm_OptionalDoubleParameter<string desc>
    : AttrParameter<"std::optional<::mlir::dtfm::StoredDouble>", desc> {
  let defaultValue = "std::nullopt";
  let parser = "::mlir::dtfm::parseOptionalDouble($_parser)";
  let printer = "::mlir::dtfm::printDouble($_printer, *$_self)";
}

def Dtfm_AssignmentAttr : Dtfm_Attr<"Assignment", "assignment"> {
  let summary = "The devices --dtfm-assign-devices chose for each stage";
  let description = [{
    Written by --dtfm-assign-devices as the module attribute
    `dtfm.assignment`: the cluster and algorithm, the seed, D_DP x D_PP, the
    communication volumes it was scored with (`dp_bytes`, `pp_bytes`), its
    cost (`data_parallel_cost_s` + `pipeline_cost_s` = `total_cost_s`) and
    the device names of each stage. hetero adds its predicted iteration
    time and the stage bounds (block indices) it chose with the layout;
    the other algorithms leave both out.

    ```mlir
    #dtfm.assignment<cluster = "two", algorithm = "hetero", seed = 0, dp = 1,
                     pp = 2, dp_bytes = 0.0, pp_bytes = 1.0e+06,
                     data_parallel_cost_s = 0.0, pipeline_cost_s = 0.5,
                     total_cost_s = 0.5, stages = [["a"], ["b"]],
                     iteration_s = 0.75, stage_bounds = [0, 3, 6]>
    ```

    The verifier checks the form: positive degrees, pp stages of dp device
    names each, and, when present, pp + 1 stage bounds and dp positive
    pipeline micro-batch counts.
  }];
  let parameters = (ins
    StringRefParameter<"the cluster's name">:$cluster,
    StringRefParameter<"the assignment algorithm">:$algorithm,
    "int64_t":$seed,
    "int64_t":$dp,
    "int64_t":$pp,
    Dtfm_DoubleParameter<"data-parallel bytes per iteration">:$dp_bytes,
    Dtfm_DoubleParameter<"pipeline bytes per iteration">:$pp_bytes,
    Dtfm_DoubleParameter<"data-parallel cost in s">:$data_parallel_cost_s,
    Dtfm_DoubleParameter<"pipeline cost in s">:$pipeline_cost_s,
    Dtfm_DoubleParameter<"total cost in s">:$total_cost_s,
    Dtfm_BracketListParameter<"::mlir::ArrayAttr", "device names per stage">:$stages,
    Dtfm_OptionalDoubleParameter<"hetero: predicted iteration time in s">:$iteration_s,
    Dtfm_OptionalBracketListParameter<"int64_t", "hetero: stage bounds">:$stage_bounds,
    Dtfm_OptionalBracketListParameter<"int64_t", "hetero, uneven replicas: micro-batches of each pipeline">:$pipeline_micro_batches
  );
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

def Dtfm_CandidatePlanAttr : Dtfm_Attr<"CandidatePlan", "candidate_plan"> {
  let summary = "One whole plan --dtfm-plan simulated before choosing";
  let description = [{
    The device-assignment algorithm the candidate was planned with and its
    simulated iteration time (`iteration_s`), or, for a candidate that could
    not be planned, the first line of its error. A candidate whose device
    assignment came out the same as an earlier one's (same stages, stage
    bounds and micro-batch shares) is not carried through the rest of the
    pipeline again: `same_as` names that earlier candidate, whose time it
    shares.

    ```mlir
    #dtfm.candidate_plan<algorithm = "genetic", iteration_s = 30.708>
    #dtfm.candidate_plan<algorithm = "kl", iteration_s = 30.708,
                         same_as = "genetic">
    #dtfm.candidate_plan<algorithm = "kl", error = "no device layout fits">
    ```
  }];
  let parameters = (ins
    StringRefParameter<"the assignment algorithm">:$algorithm,
    Dtfm_OptionalDoubleParameter<"simulated iteration time in s">:$iteration_s,
    StringRefParameter<"why it could not be planned", [{""}]>:$error,
    StringRefParameter<"the earlier candidate with the same assignment", [{""}]>:$same_as
  );
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

def Dtfm_CandidatesAttr : Dtfm_Attr<"Candidates", "candidates"> {
  let summary = "The whole plans --dtfm-plan simulated, and the one it kept";
  let description = [{
    Written by `--dtfm-plan algorithm=hetero programs=true` as the module
    attribute `dtfm.candidates`: the plan asked for and the plans of DT-FM's
    assignment algorithms at the same shape, each carried through every
    pass and simulated as dtfm-run --simulate would; `chosen` names the
    fastest (the one asked for on a tie), whose plan the module holds.
    `search_budget_s` is the search budget each later candidate's
    assignment had (the search asked for shares its budget among them);
    absent, their searches ran their fixed rounds.

    ```mlir
    #dtfm.candidates<chosen = "genetic", plans = [
        <algorithm = "hetero", iteration_s = 30.745>,
        <algorithm = "genetic", iteration_s = 30.708>]>
    ```

    The verifier checks the form: each candidate has a positive finite
    `iteration_s` or an error, not both, algorithms are named once, a
    `same_as` names an earlier simulated candidate of the same time,
    `chosen` names a simulated candidate no slower than any other, and a
    search budget is positive and finite.
  }];
  let parameters = (ins
    StringRefParameter<"the algorithm whose plan was kept">:$chosen,
    Dtfm_BracketListParameter<"::mlir::dtfm::CandidatePlanAttr", "the candidates, in the order planned">:$plans,
    Dtfm_OptionalDoubleParameter<"each later candidate's search budget in s (absent: none)">:$search_budget_s
  );
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

def Dtfm_CostAttr : Dtfm_Attr<"Cost", "cost"> {
  let summary = "An op's cost, fixed by --dtfm-annotate-costs";
  let description = [{
    Written on every op with a cost by --dtfm-annotate-costs as `dtfm.cost`:
    the forward and backward FLOPs, the bytes the op saves for its backward,
    its parameter bytes, the bytes of each result, and the bytes its forward
    and backward move through device memory (the roofline's; 0 when absent).
    The cost analysis reads it in place of the op's cost interface, so a
    hand-edited cost overrides the computed one.

    ```mlir
    #dtfm.cost<fwd_flops = 96, bwd_flops = 192, saved_bytes = 128,
               param_bytes = 0, result_bytes = [64], fwd_bytes = 192,
               bwd_bytes = 384>
    ```

    The verifier checks that every count is non-negative; the cost analysis
    checks that there is one result size per result.
  }];
  let parameters = (ins
    "int64_t":$fwd_flops,
    "int64_t":$bwd_flops,
    "int64_t":$saved_bytes,
    "int64_t":$param_bytes,
    Dtfm_BracketListParameter<"int64_t", "bytes of each result">:$result_bytes,
    DefaultValuedParameter<"int64_t", "0", "bytes the forward moves">:$fwd_bytes,
    DefaultValuedParameter<"int64_t", "0", "bytes the backward moves">:$bwd_bytes
  );
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

def Dtfm_StagesAttr : Dtfm_Attr<"Stages", "stages"> {
  let summary = "The stage bounds --dtfm-partition-stages chose";
  let description = [{
    Written by --dtfm-partition-stages as the module attribute
    `dtfm.stages`: the stage bounds (block indices, one more than there are
    stages), each stage's predicted compute time and memory, and the
    bottleneck (the slowest stage). Every double prints in the shortest form
    that reads back exactly.

    ```mlir
    #dtfm.stages<bounds = [0, 2, 4], stage_seconds = [0.5, 0.25],
                 memory_bytes = [1024, 512], bottleneck_s = 0.5>
    ```

    The verifier checks the form: increasing bounds from 0, one time and one
    memory figure per stage, none negative.
  }];
  let parameters = (ins
    Dtfm_BracketListParameter<"int64_t", "stage bounds (block indices)">:$bounds,
    Dtfm_BracketListParameter<"::mlir::dtfm::StoredDouble", "compute time of each stage in s">:$stage_seconds,
    Dtfm_BracketListParameter<"int64_t", "memory of each stage in bytes">:$memory_bytes,
    Dtfm_DoubleParameter<"the slowest stage's time in s">:$bottleneck_s
  );
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

def Dtfm_PeersAttr : Dtfm_Attr<"Peers", "peers"> {
  let summary = "A device program's neighbours in its pipeline";
  let description = [{
    Set on each device program by --dtfm-emit-stage-programs as
    `dtfm.peers`: the devices of the previous and the next stage of the same
    pipeline (empty on the first and the last stage).

    ```mlir
    #dtfm.peers<prev = "", next = "gpu1">
    ```
  }];
  let parameters = (ins
    StringRefParameter<"the previous stage's device, or empty">:$prev,
    StringRefParameter<"the next stage's device, or empty">:$next
  );
  let assemblyFormat = "`<` struct(params) `>`";
}

def Dtfm_ParamShardAttr : Dtfm_Attr<"ParamShard", "param_shard"> {
  let summary = "The part of a parameter a device program owns";
  let description = [{
    One element of a device program's `dtfm.param_shards`: the parameter's
    name, the element range [begin, end) the device owns under the sharded
    optimizer, and the parameter's whole size in bytes.

    ```mlir
    #dtfm.param_shard<name = "wte", begin = 0, end = 8192, bytes = 65536>
    ```

    The verifier checks 0 <= begin <= end and bytes >= 0.
  }];
  let parameters = (ins
    StringRefParameter<"parameter name">:$name,
    "int64_t":$begin,
    "int64_t":$end,
    "int64_t":$bytes
  );
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

#endif // DTFM_ATTRS
