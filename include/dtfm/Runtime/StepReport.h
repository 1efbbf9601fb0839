//===- StepReport.h - What rank 0 prints for each step -----------*- C++
//-*-===//
//
// Part of dtfm. Plain C++ (no MLIR).
//
//===----------------------------------------------------------------------===//
//
// Each step's loss is the sum over the last stages' workers (every
// pipeline, every micro-batch), gathered by rank 0, which prints one line
// per step (step N/total, loss, tokens/s or samples/s, GFLOP/s and MFU,
// measured vs simulated iteration, elapsed time and ETA) and, with --log,
// one JSON object per step: the step log, read back by readStepLog for
// the training report. Rank 0 posts the receives of a step's losses and
// prints the step before, whose losses are in by then: waiting would hold
// the first stage back.
//
//===----------------------------------------------------------------------===//

#ifndef DTFM_RUNTIME_STEPREPORT_H
#define DTFM_RUNTIME_STEPREPORT_H

#include <cstdint>
#include <cstdio>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace dtfm::proto {
class Plan;
} // namespace dtfm::proto

namespace dtfm::runtime {

class Transport;

/// What one iteration of the whole plan processes: tokens (token models:
/// integer [batch, sequence] inputs) or samples, and FLOPs (the model's:
/// recomputation left out); and the peak FLOP/s of the plan's devices, one
/// per device program, against which MFU is measured (0: not known).
struct IterationWork {
  double tokens = 0, flops = 0;
  bool tokenModel = false;
  double peakFlops = 0;
};
IterationWork iterationWork(const proto::Plan &plan);

/// A finished step, as rank 0 reports it.
struct StepFigures {
  int64_t step = 0;
  double loss = 0, seconds = 0, simulatedSeconds = 0;
  bool calibrated = false;
  /// The sum of the hashes of the step's token windows (DataSource.h),
  /// from the last stages: logged as "samples_hash", equal for any plan
  /// that trains the same samples at this step.
  uint64_t sampleHash = 0;
  /// Rank 0's optimizer step (StageExecutor::lastOptimizerStep): the
  /// learning rate and the gradient norm, logged as "lr" and "grad_norm"
  /// when known (>= 0).
  double lr = -1, gradNorm = -1;
  /// The validation loss after the step, when evaluated (NaN: not), as
  /// "val_loss".
  double valLoss = std::numeric_limits<double>::quiet_NaN();
  /// Filled in by the reporter: the tokens (or samples) trained on up to
  /// and including this step, and the training's wall time at its end,
  /// both counted across the runs a resumed run continues ("tokens" or
  /// "samples", and "elapsed_s").
  double seen = 0, elapsedSeconds = 0;
};

/// Where a run's log begins: after the step it resumes from (0: a new
/// run), with the tokens seen and the wall time spent by then.
struct LogStart {
  int64_t step = 0;
  double seen = 0, elapsedSeconds = 0;
};

/// "step 3/20 loss 5.123456 | 1234 tok/s | 1.234 GFLOP/s, MFU 12.3% |
/// 12.34 ms (simulated 11.00 ms, calibrated) | 0:05 elapsed, ETA 0:31":
/// the ETA at the pace of this run's steps (from `start`) to `total`.
std::string stepLine(const StepFigures &figures, const IterationWork &work,
                     int64_t total, const LogStart &start);
/// The same as one JSON object (no newline).
std::string stepJson(const StepFigures &figures, const IterationWork &work);

/// The step a line of the JSON step log (stepJson) records, when it is one.
std::optional<int64_t> loggedStep(const std::string &line);

/// One record of the step log as read back; a field the record does not
/// have (or has as null) is NaN.
struct LoggedStep {
  int64_t step = 0;
  double loss, valLoss, lr, gradNorm, seen, rate, gflops, mfu,
      measuredSeconds, simulatedSeconds, elapsedSeconds;
  LoggedStep();
};

/// The step log at `path` (written by stepJson, or being written by a run
/// still going), each record checked: an object with a positive integer
/// "step", steps increasing, numbers where numbers belong. A last line
/// without its newline that does not parse is a record still being
/// written: left out, with `incomplete` set. False with a one-line
/// `error` naming the file and line.
bool readStepLog(const std::string &path, std::vector<LoggedStep> &steps,
                 bool &incomplete, std::string &error);

class StepReporter {
public:
  /// `lastStageRanks`: the workers whose loss sums make up the step's loss,
  /// averaged over `lossTerms` (the micro-batches of every pipeline).
  /// `start`: where the log of a resumed run goes on from (rank 0).
  StepReporter(Transport *transport, int rank, std::vector<int> lastStageRanks,
               double lossTerms, IterationWork work, int steps,
               bool progressBar, std::FILE *log, LogStart start = {});
  ~StepReporter();

  /// This worker's part of `figures.step` (its loss sum in `figures.loss`):
  /// sent to rank 0, or, on rank 0, gathered and printed a step later.
  bool report(const StepFigures &figures, std::string &error);
  /// Prints the step still pending (rank 0): at the end, and before each
  /// checkpoint, so that a complete checkpoint's step is always in the log
  /// (a run resumed from it starts at the step after).
  bool flush(std::string &error);
  /// Rank 0: the validation loss after the step still pending (evaluate
  /// before flushing), logged with it and printed on a line of its own.
  void validated(double loss);

private:
  struct Pending;
  bool print(Pending &pending, std::string &error);

  Transport *transport;
  int rank;
  std::vector<int> lastStageRanks;
  double lossTerms;
  IterationWork work;
  int steps;
  bool progressBar;
  std::FILE *log;
  LogStart start;
  std::unique_ptr<Pending> pending;
};

} // namespace dtfm::runtime

#endif // DTFM_RUNTIME_STEPREPORT_H
