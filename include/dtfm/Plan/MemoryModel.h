//===- MemoryModel.h - What a worker holds, predicted from its plan -*- C++ -*-===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//
//
// The memory one CPU worker allocates for its device program, counted the
// way the runtime allocates it (every tensor in f32, whatever the plan's
// dtype): parameters (read in place by the kernels), optimizer moments
// (AdamW: m and v; SGD: its velocity; with sharded state, dtfm.shard_state,
// of this member's shard alone), error-feedback residuals of
// compressed syncs, local steps' anchors and outer momentum, the gradient
// buckets, the receive buffers (one per micro-batch), the iteration's
// gradient sums, the micro-batches' inputs, and the values of the
// micro-batches in flight, replayed along the compute stream with the
// lifetimes the executor frees by (ValueLifetimes) -- at the moment of the
// step where their sum peaks, with the largest scratch buffer of the op
// running then. What it does not count is the process itself (code,
// libraries, the plan, thread stacks), which a measurement takes as the
// resident memory before the worker allocates anything.
//
//===----------------------------------------------------------------------===//

#ifndef DTFM_PLAN_MEMORYMODEL_H
#define DTFM_PLAN_MEMORYMODEL_H

#include <string>
#include <vector>

namespace dtfm::proto {
class Plan;
} // namespace dtfm::proto

namespace dtfm::plan {

/// Bytes by what holds them; `values` is the in-flight micro-batches'
/// values (and the running op's scratch) at the peak.
struct WorkerMemory {
  double parameters = 0, optimizer = 0, residuals = 0, localSteps = 0,
         buckets = 0, receiveBuffers = 0, gradientSums = 0, inputs = 0,
         values = 0;
  /// Its optimizer state is sharded (dtfm.shard_state): not bytes.
  bool shardedState = false;
  double total() const {
    return parameters + optimizer + residuals + localSteps + buckets +
           receiveBuffers + gradientSums + inputs + values;
  }
  /// {"parameters":...,...} (integers, bytes).
  std::string json() const;
};

/// The peak of the worker of `rank` (its device program), or false with a
/// one-line `error` when the program cannot be decoded.
bool predictWorkerMemory(const proto::Plan &plan, int rank, WorkerMemory &out,
                         std::string &error);

/// One device of a plan: its predicted peak and its capacity (the plan's
/// device memory_bytes; 0 when the plan names no such device).
struct DeviceMemory {
  std::string device;
  WorkerMemory predicted;
  double capacityBytes = 0;
  bool fits() const { return predicted.total() <= capacityBytes; }
};

/// Every device program of the plan, in program order; false with a
/// one-line `error` when one cannot be decoded.
bool planMemory(const proto::Plan &plan, std::vector<DeviceMemory> &out,
                std::string &error);

} // namespace dtfm::plan

#endif // DTFM_PLAN_MEMORYMODEL_H
