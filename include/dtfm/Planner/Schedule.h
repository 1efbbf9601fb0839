//===- Schedule.h - Micro-batch schedules on three slots ---------*- C++ -*-===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//
//
// GPipe and 1F1B schedules of n_b micro-batches through S pipeline stages,
// with every instruction on one of three slots per stage -- receive,
// compute, send -- as DT-FM's runtime does (its §3.5: three CUDA streams),
// so that transfers overlap computation. Each slot runs its instructions in
// order; an instruction also waits for its explicit dependencies.
//
//===----------------------------------------------------------------------===//

#ifndef DTFM_PLANNER_SCHEDULE_H
#define DTFM_PLANNER_SCHEDULE_H

#include "dtfm/Format/Stream.h"
#include "dtfm/Planner/StagePartition.h"

#include <array>
#include <string>
#include <vector>

namespace dtfm::planner {

/// Slots and phases are the plan format's (dtfm/Format/Stream.h).
using format::Phase;
using format::phaseName;
using format::Slot;
using format::slotName;

/// Names one instruction: its stage, slot and position in that slot.
struct InstructionRef {
  int stage = 0;
  Slot slot = Slot::Compute;
  int index = 0;
  bool operator==(const InstructionRef &o) const {
    return stage == o.stage && slot == o.slot && index == o.index;
  }
};

/// Receive: the activation (forward) or gradient (backward) of a
/// micro-batch from the neighbouring stage. Compute: the stage's forward or
/// backward of a micro-batch. Send: the result to the neighbour.
struct Instruction {
  Phase phase = Phase::Forward;
  int microBatch = 0;
  /// Stage at the other end (receive/send), -1 for compute.
  int peer = -1;
  std::vector<InstructionRef> deps;

  /// The entry of the plan's stream that this instruction is.
  format::StreamEntry entry() const { return {phase, microBatch, peer}; }
};

/// The three ordered instruction streams of one stage.
struct StageSchedule {
  std::vector<Instruction> slots[3];
  const std::vector<Instruction> &operator[](Slot s) const {
    return slots[static_cast<int>(s)];
  }
  std::vector<Instruction> &operator[](Slot s) {
    return slots[static_cast<int>(s)];
  }
};

/// Builds the schedule. GPipe: all forwards, then the backwards in reverse
/// order. 1F1B (PipeDream-flush): min(S - s - 1, n_b) warm-up forwards at
/// stage s, then one forward and one backward alternately, then the
/// remaining backwards. ZB-H1: 1F1B's forwards and Bs, stage s running
/// each W weightDelays[s] micro-batches late (at most s; s where the
/// vector leaves the stage out; a stage of a negative delay does not split
/// its backward and runs 1F1B's order).
std::vector<StageSchedule>
buildSchedule(PipelineSchedule kind, int stages, int microBatches,
              const std::vector<int> &weightDelays = {});

/// What a stage holds, for zeroBubbleWeightDelays: `fixed` whatever the
/// schedule (parameters, their gradients and optimizer state, its largest
/// passing buffer), and per micro-batch `untilBackward` from its forward
/// to its B and `untilWeight` from its B to its W (what the W reads).
struct ZeroBubbleStageBytes {
  double fixed = 0, untilBackward = 0, untilWeight = 0;
};

/// How many Ws each stage of a ZB-H1 pipeline may put off (at most its
/// index) while no stage holds more than 1F1B's fullest stage does (its
/// fixed bytes and min(n_b, S - s) micro-batches to their B): the
/// pipeline's peak stays 1F1B's, as the paper's H1 promises. With equal
/// stages every stage puts off its index; a stage whose micro-batches are
/// larger (a vocabulary's logits on the last) puts off fewer; 0 for a
/// stage that can put off none (the first always).
std::vector<int>
zeroBubbleWeightDelays(const std::vector<ZeroBubbleStageBytes> &bytes,
                       int microBatches);

/// Rebuilds a schedule from its written form (per stage: the recv, compute
/// and send streams as "F3<1", "F3", "F3>1"), deriving the dependencies as
/// buildSchedule does. On a malformed item or a transfer without its
/// counterpart returns false with a one-line `error`.
bool parseSchedule(
    const std::vector<std::array<std::vector<std::string>, 3>> &streams,
    std::vector<StageSchedule> &schedule, std::string &error);

/// Largest number of micro-batches whose activations stage `stage` holds at
/// once (forwards done minus backwards done, over its compute order).
int peakInFlight(const StageSchedule &stage);

/// The time `kind`'s compute order takes for `microBatches` micro-batches
/// when each stage runs it as soon as its inputs are there: stage s's
/// phase p takes phaseSeconds[s][p] (F, B, W; schedules that do not split
/// the backward run B + W as their B), an activation reaches stage s + 1
/// hops[s].first after its forward, a gradient stage s hops[s].second
/// after stage s + 1's B. Transfers overlap compute (the receive and send
/// slots); what they occupy is left to the callers' models. ZB-H1's
/// stages put off weightDelays[s] Ws as buildSchedule's do.
double pipelineMakespan(PipelineSchedule kind,
                        const std::vector<std::array<double, 3>> &phaseSeconds,
                        const std::vector<std::pair<double, double>> &hops,
                        int microBatches,
                        const std::vector<int> &weightDelays = {});

/// Executes the schedule abstractly (any slot whose next instruction's
/// dependencies are done may run it) and checks that everything finishes:
/// no cycle across slots or stages. On failure returns false with the first
/// stuck instruction in `error`.
bool checkSchedule(const std::vector<StageSchedule> &schedule,
                   std::string &error);

} // namespace dtfm::planner

#endif // DTFM_PLANNER_SCHEDULE_H
