//===- Worker.h - One device of a plan, trained for real ---------*- C++ -*-===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//
//
// A worker runs one device program of a plan (world rank = its index in the
// plan). Its three slots are three threads following the program's
// streams, the CPU counterpart of DT-FM's three CUDA streams: the receive
// thread takes "F3<1" entries in order into preallocated buffers, the
// compute thread runs "F3"/"B3" as soon as their receives are in, the send
// thread hands "F3>1" entries to the transport as soon as they are
// computed. Nothing waits for the other workers except the data it needs:
// no barrier per micro-batch; the gradient allreduce of each data-parallel
// group ends the iteration.
//
// Values used once per iteration (a tied embedding sent to the last stage)
// travel with micro-batch 0's forward; their gradients are summed over the
// micro-batches and travel with the last backward.
//
// Rank 0 reports each step (loss over every pipeline and micro-batch,
// tokens/s, GFLOP/s, measured vs simulated iteration time), gathers the
// parameters for --save-params and the events for --trace.
//
//===----------------------------------------------------------------------===//

#ifndef DTFM_RUNTIME_WORKER_H
#define DTFM_RUNTIME_WORKER_H

#include "dtfm/Format/Safetensors.h"
#include "dtfm/Runtime/Backend.h"
#include "dtfm/Runtime/DataSource.h"

#include <chrono>
#include <cstdint>
#include <string>

namespace dtfm::proto {
class Plan;
} // namespace dtfm::proto

namespace dtfm::runtime {

struct WorkerOptions {
  int rank = 0;
  int steps = 1;
  uint64_t seed = 0;
  /// Where the samples come from (DataSource.h).
  DataOptions data;
  /// Validation (--val-data, --eval-every, --eval-batches, --eval-only):
  /// `evalBatches` batches of the plan's samples per step from the start
  /// of `valData` (read in order, the same windows every time), forward
  /// only, after every `evalEvery` steps (0: only after the last) and
  /// after the last; with `evalOnly`, one evaluation of the initial
  /// parameters and no training.
  DataOptions valData;
  int evalEvery = 0, evalBatches = 4;
  bool evalOnly = false;
  /// --init-from (safetensors or DTFMPAR1) and --save-params (safetensors,
  /// whole tensors, stored as `saveDtype`).
  std::string initPath, savePath;
  format::WeightDtype saveDtype = format::WeightDtype::F32;
  /// --weight-names hf: --save-params writes Hugging Face's names and
  /// layouts (GPT and Llama presets, Format/HfWeights.h); --init-from
  /// reads them whenever a file has them.
  bool saveHfNames = false;
  /// Checkpoints: every `checkpointEvery` steps (0: only at the end) and
  /// at the end; a run resumes from the newest complete one.
  std::string checkpointDir;
  int checkpointEvery = 0;
  /// With a mean time between failures (seconds, > 0): after the first
  /// checkpoint the workers time it and a step, and checkpoint every
  /// dalyCheckpointInterval steps from then on (the slowest worker's
  /// figures; the first checkpoint comes after --checkpoint-every steps,
  /// or after step 1).
  double mtbfSeconds = 0;
  /// When `checkpointDir` holds no generation yet: resume from the newest
  /// generation in this directory written by another plan of the same
  /// model (another data-parallel width, stage bounds or devices;
  /// Checkpoints.h, assembleState) with the same samples per step.
  std::string resumeFrom;
  /// This process's index among the workers of its host, from its
  /// launcher (LOCAL_RANK, SLURM_LOCALID): it picks the host's GPU. -1:
  /// the world rank picks it (every worker on one host).
  int localRank = -1;
  /// --check-finite: the first op whose result holds an infinity or a NaN
  /// stops the run, named with its operands (StageExecutor::
  /// setCheckFinite).
  bool checkFinite = false;
  bool shapeLinks = false;
  /// One thread does receive, compute and send in turn (the baseline the
  /// overlap benchmark compares against).
  bool serialSlots = false;
  std::chrono::milliseconds timeout{60000};
  std::string storeDir, rendezvous;
  /// --store-server: `rendezvous` names a store the elastic coordinator
  /// serves (the workers an agent starts), so rank 0 serves none.
  bool storeServedElsewhere = false;
  /// The run's id, the interface to advertise and whether peers run on
  /// other hosts: see TransportOptions.
  std::string runId, iface, ifaceFrom;
  bool peersOnOtherHosts = false;
  /// The job token a TCP rendezvous store asks for (JobToken.h), and the
  /// password of a Redis one (DTFM_REDIS_PASSWORD).
  std::string jobToken, redisPassword;
  /// The job whose claim on `checkpointDir` this worker joins
  /// (CheckpointClaim, Checkpoints.h): every process of one job gives the
  /// same id; empty: a job of this process alone.
  std::string checkpointJob;
  std::string tracePath, logPath;
  /// Rank 0 writes each worker's measured peak memory next to the
  /// prediction (MemoryModel.h), one JSON object per device.
  std::string memoryReportPath;
  /// Steps that calibrate the simulator's device speeds before the
  /// predictions are printed (0: the plan's speeds as they are).
  int calibrationSteps = 1;
  bool progressBar = false;
  /// The device that runs the program (resolved: see Backend.h).
  Backend backend = Backend::Cpu;
  /// How the GPU runs the program (--matmul-precision, --gpu-attention).
  GpuOptions gpu;
  /// When this file exists at a checkpoint (on any worker: they agree by
  /// an all-reduce), every worker stops there with
  /// kExitStoppedAtCheckpoint: the elastic launcher moves the run to a
  /// new plan (a device joined).
  std::string stopFile;
};

/// The exit status of a worker that stopped at a checkpoint because its
/// stop file asked it to (not a failure).
inline constexpr int kExitStoppedAtCheckpoint = 75;

/// The environment variable through which the local launcher gives its
/// workers its pid: a worker dies with its launcher (PR_SET_PDEATHSIG).
inline constexpr const char *kLauncherPidVariable = "DTFM_LAUNCHER_PID";

/// Runs the worker of `options.rank`; returns the process exit status.
/// Errors are printed as "dtfm-run: error: <device> (rank r): ...".
int runWorker(const std::string &planPath, const proto::Plan &plan,
              const WorkerOptions &options);

} // namespace dtfm::runtime

#endif // DTFM_RUNTIME_WORKER_H
