//===- Simulator.h - Discrete-event simulation of a plan --------*- C++ -*-===//
//
// Part of dtfm. Plain C++ (no MLIR).
//
//===----------------------------------------------------------------------===//
//
// Runs the device programs of a plan on a model of the cluster:
//
//  * every device has three slots -- receive, compute, send -- each running
//    its instruction stream in order (DT-FM's three CUDA streams);
//  * a compute instruction takes FLOPs / (lambda peak): the program's
//    forward or backward work of one micro-batch; it starts once the slot
//    is free, its input has been received and (backward) its own forward
//    is done;
//  * a send occupies the send slot and the directed link for bytes / beta;
//    transfers on one directed link are served one after the other in the
//    order they become ready (FIFO: the same total throughput as sharing
//    the bandwidth, with simpler arithmetic); the data arrives alpha later;
//  * a receive occupies the receive slot from when it starts until the data
//    arrives;
//  * gradients are synchronised in buckets (dtfm.bucket): each bucket's
//    all-reduce starts once the last micro-batch's backward has produced it
//    (dtfm.bucket_ready) and the previous bucket is done, and the optimizer
//    steps its parameters once it is back (Planner/Buckets.h); what moves
//    once per iteration (a tied weight's gradient) follows the last
//    micro-batch. Plans without dtfm.bucket_ready synchronise everything
//    after the last micro-batch, then step. With local steps
//    (dtfm.sync_every = H) the replicas step alone and exchange parameters
//    after the step every H iterations: the simulated iteration is the
//    average one, with 1/H of the exchange.
//
// The iteration ends when the last device finishes.
//
//===----------------------------------------------------------------------===//

#ifndef DTFM_PLAN_SIMULATOR_H
#define DTFM_PLAN_SIMULATOR_H

#include "dtfm/Format/Stream.h"
#include "dtfm/Planner/Buckets.h"
#include "dtfm/Planner/Cluster.h"

#include <array>
#include <map>
#include <string>
#include <vector>

namespace dtfm::plan {

/// One device program, as the simulator needs it.
struct SimProgram {
  std::string device;
  int stage = 0;
  std::string prev, next; ///< devices of the neighbouring stages, or ""
  double forwardFlops = 0;  ///< per micro-batch
  double backwardFlops = 0; ///< per micro-batch
  /// Per micro-batch, run again in the backward (activation recomputation):
  /// backward time but not work.
  double recomputeFlops = 0;
  double optimizerFlops = 0; ///< per iteration
  /// The forward's ops, and the backward's with the recomputation's, as
  /// the roofline sees them (plan.proto's OpWork): on a device with a
  /// memory bandwidth a phase takes its FLOPs and what its memory-bound ops
  /// add.
  planner::RooflineWork forwardWork, backwardWork;
  /// A split backward's weight-gradient half (the W entries): its part of
  /// backwardFlops and backwardWork; the B entries take the rest.
  double weightFlops = 0;
  planner::RooflineWork weightWork;
  /// Per micro-batch, by phase (0 forward, 1 backward): the tensor-parallel
  /// group's sums (dtfm.tp_all_reduce), each a ring all-reduce over the
  /// group's links, on the compute stream.
  std::array<double, 2> groupSumSeconds{0, 0};
  double syncSeconds = 0;    ///< gradient synchronisation per iteration
  /// The gradient buckets, in launch order, when the plan says when each
  /// is complete: they overlap the last backward (Planner/Buckets.h);
  /// otherwise `syncSeconds` follows the last micro-batch.
  std::vector<planner::SyncBucket> buckets;
  /// Local steps (dtfm.sync_every): the parameter exchange, `syncSeconds`,
  /// follows the optimizer step every syncEvery iterations; the simulated
  /// iteration carries 1/syncEvery of it (the average iteration).
  int64_t syncEvery = 0; ///< 0: gradients every iteration
  /// Local steps whose exchange overlaps this many steps (dtfm.sync_overlap):
  /// each bucket (with fragments, one a fragment) is exposed for what
  /// that many iterations do not cover.
  int64_t syncOverlap = 0;
  /// recv, compute and send streams.
  format::Streams streams;
  /// Bytes sent per micro-batch, by phase ('F' or 'B') and peer device.
  std::map<std::pair<char, std::string>, double> sendBytes;
  /// Per (phase, peer stage): the devices it sends to. One but where a
  /// tensor-parallel group feeds a larger one (member j of a receiving
  /// group takes from member j mod t of the sending one).
  std::map<std::pair<char, int64_t>, std::vector<std::string>> sendsTo;
  /// Bytes sent once per iteration (tied parameters and their gradients),
  /// by peer device: moved during the synchronisation step.
  std::map<std::string, double> iterationBytes;
};

struct SimInput {
  planner::Cluster cluster;
  std::vector<SimProgram> programs;
  int microBatches = 1; ///< per pipeline (uneven replicas: the largest)
  /// Uneven replicas: each pipeline's micro-batches (empty when even).
  std::vector<int64_t> pipelineMicroBatches;
  /// Gradient clipping (clip_grad_norm): seconds of the norm's reduction
  /// over the world, between the last gradient sync anywhere and the
  /// first update (0: the plan does not clip).
  double clipSeconds = 0;
};

/// One interval on one slot of one device (for traces).
struct SimEvent {
  std::string device;
  int slot = 0; ///< 0 recv, 1 compute, 2 send
  std::string name;
  double start = 0, end = 0;
};

struct SimResult {
  double iterationSeconds = 0;
  /// Per device: compute busy time and the rest of the iteration.
  std::map<std::string, double> busySeconds, idleSeconds;
  /// 1 - (compute busy time) / (devices x iteration).
  double bubbleFraction = 0;
  /// Bytes per directed link "a->b" in one iteration.
  std::map<std::string, double> linkBytes;
  double totalFlops = 0;
  double achievedFlopsPerSecond() const {
    return iterationSeconds > 0 ? totalFlops / iterationSeconds : 0;
  }
  std::vector<SimEvent> events;
};

/// Simulates one iteration. False with a one-line `error` on an unknown
/// device, a malformed stream or a schedule that cannot finish.
bool simulate(const SimInput &input, SimResult &result, std::string &error);

/// The events as Chrome Trace Event JSON (chrome://tracing, Perfetto): one
/// process per device, threads recv / compute / send, times in microseconds.
std::string chromeTrace(const SimResult &result);

} // namespace dtfm::plan

#endif // DTFM_PLAN_SIMULATOR_H
