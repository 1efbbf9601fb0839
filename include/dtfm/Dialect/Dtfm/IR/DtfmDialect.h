//===- DtfmDialect.h - dtfm dialect -----------------------------*- C++ -*-===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//

#ifndef DTFM_DIALECT_DTFM_IR_DTFMDIALECT_H
#define DTFM_DIALECT_DTFM_IR_DTFMDIALECT_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/Dialect.h"

#include "dtfm/Dialect/Dtfm/IR/DtfmOpsDialect.h.inc"

namespace mlir::dtfm {

/// Discardable attribute naming the layer an op belongs to ("layer.3",
/// "embedding", ...); used to group costs per layer.
inline constexpr llvm::StringLiteral kLayerAttrName = "dtfm.layer";

// The discardable attributes the passes, importers and the plan exporter
// exchange: each name is spelled here only.

/// Discardable attribute written by --dtfm-annotate-costs.
inline constexpr llvm::StringLiteral kCostAttrName = "dtfm.cost";

/// An op's pipeline stage (--dtfm-partition-stages), and a device program's.
inline constexpr llvm::StringLiteral kStageAttrName = "dtfm.stage";

/// The module's stage bounds and per-stage figures (--dtfm-partition-stages).
inline constexpr llvm::StringLiteral kStagesAttrName = "dtfm.stages";

/// The devices of each stage and pipeline, the shape and predicted costs
/// (--dtfm-assign-devices).
inline constexpr llvm::StringLiteral kAssignmentAttrName = "dtfm.assignment";

/// The whole plans --dtfm-plan simulated and the one it kept.
inline constexpr llvm::StringLiteral kCandidatesAttrName = "dtfm.candidates";

/// The plan's shape chosen by --dtfm-choose-shape.
inline constexpr llvm::StringLiteral kShapeAttrName = "dtfm.shape";

/// The micro-batch schedule: kind, count, streams per stage
/// (--dtfm-schedule-microbatches).
inline constexpr llvm::StringLiteral kScheduleAttrName = "dtfm.schedule";

/// The devices and links the module is planned for (--dtfm-import-cluster).
inline constexpr llvm::StringLiteral kClusterAttrName = "dtfm.cluster";

/// The model's name (importers).
inline constexpr llvm::StringLiteral kModelAttrName = "dtfm.model";

/// The weights file an imported model's external parameters read.
inline constexpr llvm::StringLiteral kWeightsAttrName = "dtfm.weights";

/// The ONNX file a module was imported from (--import-onnx): where
/// --export-onnx writes trained values back into.
inline constexpr llvm::StringLiteral kOnnxModelAttrName = "dtfm.onnx_model";

/// On a dtfm.param: its values are the transpose of the ONNX initializer
/// of its name (a Gemm's transB weight, stored as dtfm.linear takes it).
inline constexpr llvm::StringLiteral kOnnxTransposedAttrName =
    "dtfm.onnx_transposed";

/// The device a device program runs on (--dtfm-emit-stage-programs).
inline constexpr llvm::StringLiteral kDeviceAttrName = "dtfm.device";

/// On a device program without a body: the program whose body it runs (a
/// replica of the same stage; dtfm/Dialect/Dtfm/IR/DevicePrograms.h).
inline constexpr llvm::StringLiteral kTemplateAttrName = "dtfm.template";

/// On such a program: the device at the other end of each transfer of the
/// body it runs, in op order.
inline constexpr llvm::StringLiteral kPeerDevicesAttrName =
    "dtfm.peer_devices";

/// A device program's pipeline (data-parallel replica).
inline constexpr llvm::StringLiteral kPipelineAttrName = "dtfm.pipeline";

/// A device program's previous and next devices.
inline constexpr llvm::StringLiteral kPeersAttrName = "dtfm.peers";

/// The micro-batches a device program's pipeline runs per iteration (they
/// differ between pipelines with uneven replicas).
inline constexpr llvm::StringLiteral kMicroBatchesAttrName =
    "dtfm.micro_batches";

/// A device program's receive, compute and send streams.
inline constexpr llvm::StringLiteral kStreamsAttrName = "dtfm.streams";

/// A device program's parameter-server shards.
inline constexpr llvm::StringLiteral kParamShardsAttrName = "dtfm.param_shards";

/// The tensor-parallel degree a model was sharded to (--dtfm-tensor-parallel;
/// a module attribute), and on a dtfm.param the shard it is of its whole
/// tensor: `array<i64: dim, degree>` (rank r of the group holds slice r of
/// `degree` equal slices along `dim`).
inline constexpr llvm::StringLiteral kTensorParallelAttrName =
    "dtfm.tensor_parallel";
inline constexpr llvm::StringLiteral kTpShardAttrName = "dtfm.tp_shard";

/// The tensor-parallel groups a module with a degree per stage is planned
/// on (a module attribute: an array of arrays of device names, each group
/// in rank order, groups of different sizes allowed).
inline constexpr llvm::StringLiteral kTpGroupsAttrName = "dtfm.tp_groups";

/// With a degree per stage, the stages' bounds in the model's chain of
/// layers (an i64 array, D_PP + 1 entries), fixed when the layers were
/// sharded: `dtfm.tp_groups` lists each stage's D_DP groups in stage order.
inline constexpr llvm::StringLiteral kTpStageBoundsAttrName =
    "dtfm.tp_stage_bounds";

/// A device program's tensor-parallel group (its devices, rank order) and
/// its rank in it.
inline constexpr llvm::StringLiteral kTpGroupAttrName = "dtfm.tp_group";
inline constexpr llvm::StringLiteral kTpRankAttrName = "dtfm.tp_rank";

/// A device program's peak memory in bytes as the runtime will allocate it
/// (Plan/MemoryModel.h), recorded by --dtfm-fit-memory.
inline constexpr llvm::StringLiteral kPeakMemoryAttrName =
    "dtfm.peak_memory_bytes";

/// A device program whose activations are recomputed during the backward
/// (a boolean; plan.proto's DeviceProgram.recompute).
inline constexpr llvm::StringLiteral kRecomputeAttrName = "dtfm.recompute";

/// Bytes of a device program's receive buffers.
inline constexpr llvm::StringLiteral kRecvBufferBytesAttrName =
    "dtfm.recv_buffer_bytes";

/// A transfer made once per iteration (tied parameters and their gradients).
inline constexpr llvm::StringLiteral kOncePerIterationAttrName =
    "dtfm.once_per_iteration";

/// The slot (recv, compute, send) an op runs on.
inline constexpr llvm::StringLiteral kSlotAttrName = "dtfm.slot";

/// When an op runs: "fwd", "bwd", "wgt" (a zero-bubble schedule's
/// weight-gradient half of the backward, kWeightPhase) or "opt".
inline constexpr llvm::StringLiteral kPhaseAttrName = "dtfm.phase";
inline constexpr llvm::StringLiteral kWeightPhase = "wgt";

/// The AdaTopK ratio of a compressed link.
inline constexpr llvm::StringLiteral kRatioAttrName = "dtfm.ratio";

/// A dtfm.backward's copy of its forward op's attributes.
inline constexpr llvm::StringLiteral kForwardAttrsAttrName =
    "dtfm.forward_attrs";

/// A dtfm.grad_sync's gradient bucket (Planner/Buckets.h): its index in
/// launch order, its predicted all-reduce seconds, and the fraction of a
/// micro-batch's backward done when it is complete.
inline constexpr llvm::StringLiteral kBucketAttrName = "dtfm.bucket";
inline constexpr llvm::StringLiteral kBucketSecondsAttrName =
    "dtfm.bucket_seconds";
inline constexpr llvm::StringLiteral kBucketReadyAttrName =
    "dtfm.bucket_ready";

/// Local steps on a dtfm.grad_sync (DiLoCo): exchange parameters every
/// `dtfm.sync_every` steps with an outer Nesterov step.
inline constexpr llvm::StringLiteral kSyncEveryAttrName = "dtfm.sync_every";
/// Local steps in fragments (Streaming DiLoCo): the fragment a dtfm.grad_sync's
/// parameter is exchanged with, and how many there are.
inline constexpr llvm::StringLiteral kSyncFragmentAttrName =
    "dtfm.sync_fragment";
inline constexpr llvm::StringLiteral kSyncFragmentsAttrName =
    "dtfm.sync_fragments";
/// Local steps whose exchange overlaps the next steps: after how many steps
/// it is applied, and how much of the replica's own value is kept then.
inline constexpr llvm::StringLiteral kSyncOverlapAttrName = "dtfm.sync_overlap";
inline constexpr llvm::StringLiteral kOuterMixingAttrName = "dtfm.outer_mixing";
inline constexpr llvm::StringLiteral kOuterLrAttrName = "dtfm.outer_lr";
inline constexpr llvm::StringLiteral kOuterMomentumAttrName =
    "dtfm.outer_momentum";

/// A dtfm.grad_sync whose group shards the optimizer state (ZeRO-1):
/// reduce-scatter, each member updates its shard, all-gather
/// (Plan/Program.h, OpAttrs::shardState). Uncompressed, synchronous
/// syncs only.
inline constexpr llvm::StringLiteral kShardStateAttrName = "dtfm.shard_state";

/// A dtfm.grad_sync's wire format: "int8" (format/Int8.h), with error
/// feedback.
inline constexpr llvm::StringLiteral kCompressionAttrName =
    "dtfm.compression";
/// dtfm.send / dtfm.recv whose value travels in another format: "int8"
/// (format/Int8.h; pp-compression).
inline constexpr llvm::StringLiteral kWireAttrName = "dtfm.wire";
/// dtfm.grad_sync with dtfm.compression = "topk": R, keep 1/R of each
/// gradient (format/Sparse.h).
inline constexpr llvm::StringLiteral kTopkRatioAttrName = "dtfm.topk_ratio";
/// dtfm.grad_sync with dtfm.compression = "topk": W, the first W steps
/// synchronise dense and AdamW's second moment is frozen after step W.
inline constexpr llvm::StringLiteral kTopkWarmupAttrName =
    "dtfm.topk_warmup";

} // namespace mlir::dtfm

#endif // DTFM_DIALECT_DTFM_IR_DTFMDIALECT_H
