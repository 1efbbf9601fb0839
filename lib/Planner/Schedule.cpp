//===- Schedule.cpp - Micro-batch schedules on three slots ----------------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//

#include "dtfm/Planner/Schedule.h"

#include <algorithm>
#include <array>
#include <map>
#include <tuple>

using namespace dtfm::planner;

/// The compute order of one stage as (phase, micro-batch) pairs.
/// ZB-H1 puts off `weightDelay` Ws at the stage (at most the stage's
/// index: more would not shorten the pipeline); a negative delay: the
/// stage's backward is not split (1F1B's order).
static std::vector<std::pair<Phase, int>>
computeOrder(PipelineSchedule kind, int stage, int stages, int microBatches,
             int weightDelay) {
  std::vector<std::pair<Phase, int>> order;
  if (kind == PipelineSchedule::GPipe) {
    for (int m = 0; m < microBatches; ++m)
      order.push_back({Phase::Forward, m});
    for (int m = microBatches - 1; m >= 0; --m)
      order.push_back({Phase::Backward, m});
    return order;
  }
  if (kind == PipelineSchedule::ZeroBubbleH1 && weightDelay >= 0) {
    // Zero Bubble's ZB-H1 (Qi et al., ICLR'24): 1F1B's forwards and Bs,
    // with stage s putting off the W of its first d = s micro-batches and
    // then running each W d micro-batches late, after a B and before the
    // next forward. The Ws fill what would be 1F1B's cool-down bubble: with
    // equal F, B and W times the iteration takes 3n + S - 1 of them for
    // n >= S, against 1F1B's 3(n + S - 1). A stage holds at most S
    // micro-batches from forward to W (1F1B's first stage's S, from
    // forward to backward) and as many as 1F1B from forward to B. A
    // smaller d (zeroBubbleWeightDelays: the memory allows no more) keeps
    // less and saves less; d = 0 is 1F1B with each backward split in two.
    int delay = std::clamp(weightDelay, 0, stage);
    int warmup = std::min(stages - stage, microBatches);
    int forward = 0, backward = 0, weight = 0;
    for (; forward < warmup; ++forward)
      order.push_back({Phase::Forward, forward});
    while (backward < microBatches) {
      order.push_back({Phase::Backward, backward++});
      if (backward - weight > delay)
        order.push_back({Phase::Weight, weight++});
      if (forward < microBatches)
        order.push_back({Phase::Forward, forward++});
    }
    while (weight < microBatches)
      order.push_back({Phase::Weight, weight++});
    return order;
  }
  int warmup = std::min(stages - stage - 1, microBatches);
  int forward = 0, backward = 0;
  for (; forward < warmup; ++forward)
    order.push_back({Phase::Forward, forward});
  while (forward < microBatches) {
    order.push_back({Phase::Forward, forward++});
    order.push_back({Phase::Backward, backward++});
  }
  while (backward < microBatches)
    order.push_back({Phase::Backward, backward++});
  return order;
}

std::vector<StageSchedule>
dtfm::planner::buildSchedule(PipelineSchedule kind, int stages,
                             int microBatches,
                             const std::vector<int> &weightDelays) {
  std::vector<StageSchedule> schedule(stages);
  // Where each (stage, phase, micro-batch) landed in each slot.
  std::map<std::tuple<int, Slot, Phase, int>, int> where;
  auto add = [&](int s, Slot slot, Instruction inst) {
    std::vector<Instruction> &list = schedule[s][slot];
    where[{s, slot, inst.phase, inst.microBatch}] = list.size();
    list.push_back(std::move(inst));
    return InstructionRef{s, slot, static_cast<int>(list.size()) - 1};
  };
  // Compute and receive slots follow the compute order; a receive comes
  // right before the compute that needs it.
  for (int s = 0; s < stages; ++s) {
    int delay =
        s < static_cast<int>(weightDelays.size()) ? weightDelays[s] : s;
    for (auto [phase, m] : computeOrder(kind, s, stages, microBatches, delay)) {
      Instruction compute{phase, m, -1, {}};
      if (phase == Phase::Weight) { // after its own B; nothing moves
        compute.deps.push_back(
            {s, Slot::Compute, where.at({s, Slot::Compute, Phase::Backward, m})});
        add(s, Slot::Compute, compute);
        continue;
      }
      int from = phase == Phase::Forward ? s - 1 : s + 1;
      if (from >= 0 && from < stages)
        compute.deps.push_back(add(s, Slot::Receive, {phase, m, from, {}}));
      if (phase == Phase::Backward) // its own forward, for the saved inputs
        compute.deps.push_back(
            {s, Slot::Compute, where.at({s, Slot::Compute, Phase::Forward, m})});
      InstructionRef done = add(s, Slot::Compute, compute);
      int to = phase == Phase::Forward ? s + 1 : s - 1;
      if (to >= 0 && to < stages)
        add(s, Slot::Send, {phase, m, to, {done}});
    }
  }
  // A receive waits for the matching send of its peer.
  for (int s = 0; s < stages; ++s)
    for (Instruction &recv : schedule[s][Slot::Receive])
      recv.deps.push_back(
          {recv.peer, Slot::Send,
           where.at({recv.peer, Slot::Send, recv.phase, recv.microBatch})});
  return schedule;
}

double dtfm::planner::pipelineMakespan(
    PipelineSchedule kind,
    const std::vector<std::array<double, 3>> &phaseSeconds,
    const std::vector<std::pair<double, double>> &hops, int microBatches,
    const std::vector<int> &weightDelays) {
  int stages = static_cast<int>(phaseSeconds.size());
  std::vector<std::vector<std::pair<Phase, int>>> orders(stages);
  std::vector<bool> split(stages, false);
  for (int s = 0; s < stages; ++s) {
    int delay =
        s < static_cast<int>(weightDelays.size()) ? weightDelays[s] : s;
    split[s] = kind == PipelineSchedule::ZeroBubbleH1 && delay >= 0;
    orders[s] = computeOrder(kind, s, stages, microBatches, delay);
  }
  // When each stage's forward and B of each micro-batch end (-1: not yet).
  std::vector<std::vector<double>> forwardEnd(
      stages, std::vector<double>(microBatches, -1.0));
  std::vector<std::vector<double>> backwardEnd = forwardEnd;
  std::vector<size_t> next(stages, 0);
  std::vector<double> free(stages, 0.0);
  double last = 0;
  for (bool progress = true; progress;) {
    progress = false;
    for (int s = 0; s < stages; ++s)
      while (next[s] < orders[s].size()) {
        auto [phase, m] = orders[s][next[s]];
        double ready = free[s];
        if (phase == Phase::Forward && s > 0) {
          if (forwardEnd[s - 1][m] < 0)
            break;
          ready = std::max(ready, forwardEnd[s - 1][m] + hops[s - 1].first);
        } else if (phase == Phase::Backward && s + 1 < stages) {
          if (backwardEnd[s + 1][m] < 0)
            break;
          ready = std::max(ready, backwardEnd[s + 1][m] + hops[s].second);
        }
        const std::array<double, 3> &took = phaseSeconds[s];
        double end =
            ready + (phase == Phase::Forward    ? took[0]
                     : phase == Phase::Backward ? took[1] + (split[s] ? 0 : took[2])
                                                : took[2]);
        // (a stage's own order puts its B after its F and its W after its B)
        if (phase == Phase::Forward)
          forwardEnd[s][m] = end;
        else if (phase == Phase::Backward)
          backwardEnd[s][m] = end;
        free[s] = end;
        last = std::max(last, end);
        ++next[s];
        progress = true;
      }
  }
  return last;
}

std::vector<int> dtfm::planner::zeroBubbleWeightDelays(
    const std::vector<ZeroBubbleStageBytes> &bytes, int microBatches) {
  int stages = static_cast<int>(bytes.size());
  // 1F1B's stage t holds min(n_b, S - t) micro-batches forward to backward.
  double budget = 0;
  for (int t = 0; t < stages; ++t)
    budget = std::max(budget, bytes[t].fixed + std::min(microBatches,
                                                        stages - t) *
                                                   bytes[t].untilBackward);
  std::vector<int> delays(stages, 0);
  for (int s = 0; s < stages; ++s) {
    const ZeroBubbleStageBytes &stage = bytes[s];
    for (int delay = s; delay > 0; --delay) {
      // Replay the order: a micro-batch holds untilBackward from its
      // forward to its B, then untilWeight until its W.
      int waitingBackward = 0, waitingWeight = 0;
      double peak = 0;
      for (auto [phase, m] : computeOrder(PipelineSchedule::ZeroBubbleH1, s,
                                          stages, microBatches, delay)) {
        (void)m;
        if (phase == Phase::Forward)
          ++waitingBackward;
        else if (phase == Phase::Backward)
          --waitingBackward, ++waitingWeight;
        else
          --waitingWeight;
        peak = std::max(peak, waitingBackward * stage.untilBackward +
                                  waitingWeight * stage.untilWeight);
      }
      if (stage.fixed + peak <= budget) {
        delays[s] = delay;
        break;
      }
    }
  }
  return delays;
}

int dtfm::planner::peakInFlight(const StageSchedule &stage) {
  // A micro-batch's values are held until its last phase: its W where the
  // backward is split, else its B.
  bool split = std::any_of(
      stage[Slot::Compute].begin(), stage[Slot::Compute].end(),
      [](const Instruction &inst) { return inst.phase == Phase::Weight; });
  Phase last = split ? Phase::Weight : Phase::Backward;
  int live = 0, peak = 0;
  for (const Instruction &inst : stage[Slot::Compute]) {
    live += inst.phase == Phase::Forward ? 1 : inst.phase == last ? -1 : 0;
    peak = std::max(peak, live);
  }
  return peak;
}

bool dtfm::planner::checkSchedule(const std::vector<StageSchedule> &schedule,
                                  std::string &error) {
  int stages = static_cast<int>(schedule.size());
  std::vector<std::array<int, 3>> next(stages, {0, 0, 0});
  auto done = [&](const InstructionRef &r) {
    return r.index < next[r.stage][static_cast<int>(r.slot)];
  };
  for (bool progress = true; progress;) {
    progress = false;
    for (int s = 0; s < stages; ++s)
      for (int slot = 0; slot < 3; ++slot) {
        const std::vector<Instruction> &list = schedule[s].slots[slot];
        while (next[s][slot] < static_cast<int>(list.size()) &&
               std::all_of(list[next[s][slot]].deps.begin(),
                           list[next[s][slot]].deps.end(), done)) {
          ++next[s][slot];
          progress = true;
        }
      }
  }
  for (int s = 0; s < stages; ++s)
    for (int slot = 0; slot < 3; ++slot) {
      const std::vector<Instruction> &list = schedule[s].slots[slot];
      if (next[s][slot] < static_cast<int>(list.size())) {
        const Instruction &stuck = list[next[s][slot]];
        error = "stage " + std::to_string(s) + " " +
                slotName(static_cast<Slot>(slot)) + " #" +
                std::to_string(next[s][slot]) + " (" +
                phaseName(stuck.phase) + " micro-batch " +
                std::to_string(stuck.microBatch) + ") never runs";
        return false;
      }
    }
  return true;
}

bool dtfm::planner::parseSchedule(
    const std::vector<std::array<std::vector<std::string>, 3>> &streams,
    std::vector<StageSchedule> &schedule, std::string &error) {
  int stages = static_cast<int>(streams.size());
  schedule.assign(stages, StageSchedule());
  std::map<std::tuple<int, Slot, Phase, int>, int> where;
  for (int s = 0; s < stages; ++s)
    for (int slot = 0; slot < 3; ++slot)
      for (const std::string &item : streams[s][slot]) {
        format::StreamEntry entry;
        bool ok = format::parseEntry(item, static_cast<Slot>(slot), entry) &&
                  entry.peerStage < stages;
        Instruction inst;
        inst.phase = entry.phase;
        inst.microBatch = entry.microBatch;
        inst.peer = entry.peerStage;
        if (!ok) {
          error = "stage " + std::to_string(s) + " " +
                  slotName(static_cast<Slot>(slot)) + ": malformed item '" +
                  item + "'";
          return false;
        }
        std::vector<Instruction> &list = schedule[s].slots[slot];
        if (!where.emplace(std::make_tuple(s, static_cast<Slot>(slot),
                                           inst.phase, inst.microBatch),
                           static_cast<int>(list.size()))
                 .second) {
          error = "stage " + std::to_string(s) + " " +
                  slotName(static_cast<Slot>(slot)) + ": '" + item +
                  "' twice";
          return false;
        }
        list.push_back(inst);
      }
  // Every stage computes the forward and the backward of every micro-batch.
  int microBatches = 0;
  for (int s = 0; s < stages; ++s)
    for (const Instruction &compute : schedule[s][Slot::Compute])
      microBatches = std::max(microBatches, compute.microBatch + 1);
  // A stage that splits its backward (any W) computes W of every
  // micro-batch too: the runtime ends a micro-batch at its W. (ZB-H1's
  // stages that put off no W do not split.)
  for (int s = 0; s < stages; ++s) {
    bool split = false;
    for (const Instruction &compute : schedule[s][Slot::Compute])
      split |= compute.phase == Phase::Weight;
    for (int m = 0; m < microBatches; ++m)
      for (Phase phase : {Phase::Forward, Phase::Backward, Phase::Weight})
        if ((phase != Phase::Weight || split) &&
            !where.count({s, Slot::Compute, phase, m})) {
          error = "stage " + std::to_string(s) + " never computes " +
                  format::phaseLetter(phase) + std::to_string(m) +
                  (split ? " (a stage that splits its backward computes F, "
                           "B and W"
                         : " (every stage computes F and B") +
                  " of micro-batches 0.." + std::to_string(microBatches - 1) +
                  ")";
          return false;
        }
  }
  auto find = [&](int s, Slot slot, Phase phase, int m, InstructionRef &ref) {
    auto it = where.find({s, slot, phase, m});
    if (it == where.end())
      return false;
    ref = {s, slot, it->second};
    return true;
  };
  for (int s = 0; s < stages; ++s) {
    for (Instruction &recv : schedule[s][Slot::Receive]) {
      InstructionRef send;
      if (!find(recv.peer, Slot::Send, recv.phase, recv.microBatch, send)) {
        error = "stage " + std::to_string(s) + " receives " +
                phaseName(recv.phase) + " micro-batch " +
                std::to_string(recv.microBatch) + " that stage " +
                std::to_string(recv.peer) + " never sends";
        return false;
      }
      recv.deps.push_back(send);
    }
    for (Instruction &compute : schedule[s][Slot::Compute]) {
      InstructionRef ref;
      if (find(s, Slot::Receive, compute.phase, compute.microBatch, ref))
        compute.deps.push_back(ref);
      if (compute.phase == Phase::Backward &&
          find(s, Slot::Compute, Phase::Forward, compute.microBatch, ref))
        compute.deps.push_back(ref);
      if (compute.phase == Phase::Weight &&
          find(s, Slot::Compute, Phase::Backward, compute.microBatch, ref))
        compute.deps.push_back(ref);
    }
    for (Instruction &send : schedule[s][Slot::Send]) {
      InstructionRef ref;
      if (!find(s, Slot::Compute, send.phase, send.microBatch, ref)) {
        error = "stage " + std::to_string(s) + " sends " +
                phaseName(send.phase) + " micro-batch " +
                std::to_string(send.microBatch) + " it never computes";
        return false;
      }
      send.deps.push_back(ref);
    }
  }
  return true;
}
