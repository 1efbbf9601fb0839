//===- Dataflow.cpp - How values flow through a stage program -------------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//

#include "dtfm/Plan/Dataflow.h"

#include <set>

using namespace dtfm::plan;

std::vector<std::string>
dtfm::plan::recomputableLayers(const StageProgram &program) {
  std::set<std::string> withBackward, impure;
  for (OpPhase phase : {OpPhase::Backward, OpPhase::Weight})
    for (int index : program.opsOf(phase))
      if (program.ops[index].isBackward())
        withBackward.insert(program.ops[index].layer);
  for (int index : program.opsOf(OpPhase::Forward)) {
    const ProgramOp &op = program.ops[index];
    Impurity impurity = opKindInfo(op.kind).impurity;
    if (impurity == Impurity::Always ||
        (impurity == Impurity::WhenTraining && !op.attrs.inference))
      impure.insert(op.layer);
  }
  std::vector<std::string> layers;
  for (const std::string &layer : withBackward)
    if (!layer.empty() && !impure.count(layer))
      layers.push_back(layer);
  return layers;
}

std::map<int64_t, const ProgramOp *>
dtfm::plan::gradientInputs(const StageProgram &program) {
  std::map<int64_t, const ProgramOp *> inputs;
  std::set<int64_t> synced;
  for (int index : program.opsOf(OpPhase::Optimizer)) {
    const ProgramOp &op = program.ops[index];
    if (op.kind == OpKind::GradSync && !op.operands.empty()) {
      inputs[op.operands[0]] = &op;
      synced.insert(op.results[0].id);
    }
  }
  for (int index : program.opsOf(OpPhase::Optimizer)) {
    const ProgramOp &op = program.ops[index];
    if (op.kind != OpKind::GradSync && op.operands.size() >= 2 &&
        !synced.count(op.operands[1]))
      inputs.emplace(op.operands[1], nullptr);
  }
  return inputs;
}

std::vector<ParameterUpdate>
dtfm::plan::parameterUpdates(const StageProgram &program) {
  std::map<int64_t, const ProgramOp *> syncOf, paramOf;
  for (const ProgramOp &op : program.ops) {
    if (op.kind == OpKind::GradSync && !op.results.empty())
      syncOf[op.results[0].id] = &op;
    else if (op.kind == OpKind::Param && !op.results.empty())
      paramOf[op.results[0].id] = &op;
  }
  std::vector<ParameterUpdate> updates;
  for (int index : program.opsOf(OpPhase::Optimizer)) {
    const ProgramOp &op = program.ops[index];
    if (op.kind == OpKind::GradSync || op.operands.size() < 2)
      continue;
    auto param = paramOf.find(op.operands[0]);
    if (param == paramOf.end())
      continue;
    auto sync = syncOf.find(op.operands[1]);
    updates.push_back(
        {&op, param->second, sync == syncOf.end() ? nullptr : sync->second});
  }
  return updates;
}

std::map<int64_t, bool> dtfm::plan::sentValues(const StageProgram &program) {
  std::map<int64_t, bool> sent;
  for (const ProgramOp &op : program.ops)
    if (op.kind == OpKind::Send)
      for (int64_t id : op.operands) {
        // Sent by one op every micro-batch: copied every micro-batch.
        auto [it, added] = sent.emplace(id, op.attrs.oncePerIteration);
        if (!added)
          it->second = it->second && op.attrs.oncePerIteration;
      }
  return sent;
}

void dtfm::plan::buildSteps(StageProgram &program) {
  program.steps = {};
  for (int index : program.opsOf(OpPhase::Forward))
    program.steps[0].push_back({index, false});
  std::set<std::string> pending;
  if (program.recompute)
    for (const std::string &layer : recomputableLayers(program))
      pending.insert(layer);
  // A layer is recomputed before its first backward op, in the backward
  // or, when all of them are weight-gradient halves, in the weight phase
  // (which runs after the backward: what it recomputed stays for it).
  for (OpPhase phase : {OpPhase::Backward, OpPhase::Weight}) {
    std::vector<PhaseStep> &steps = program.steps[static_cast<int>(phase)];
    for (int index : program.opsOf(phase)) {
      const ProgramOp &op = program.ops[index];
      if (op.isBackward() && pending.erase(op.layer))
        for (int forward : program.opsOf(OpPhase::Forward)) {
          const ProgramOp &f = program.ops[forward];
          if (f.layer == op.layer && !isStructural(f.kind))
            steps.push_back({forward, true});
        }
      steps.push_back({index, false});
    }
  }
}

ValueLifetimes dtfm::plan::valueLifetimes(const StageProgram &program) {
  ValueLifetimes lifetimes;
  // A micro-batch's steps in the order they run: the forward's, the
  // backward's, then the weight-gradient half's. A value made again by a
  // recomputed op is a new instance: readers after that step read the new
  // one.
  struct Instance {
    int64_t id;
    size_t made, lastUse;
    int sentIn = -1; // the latest phase whose sends read it
    bool received = false;
  };
  std::vector<Instance> instances;
  std::map<int64_t, size_t> current; // value id -> its instance now
  // Where each phase's steps start along the micro-batch's positions.
  std::array<size_t, kMicroBatchPhases + 1> phaseStart = {0};
  for (int phase = 0; phase < kMicroBatchPhases; ++phase)
    phaseStart[phase + 1] = phaseStart[phase] + program.steps[phase].size();
  size_t position = 0;
  for (int phase = 0; phase < kMicroBatchPhases; ++phase) {
    lifetimes.freeAfterStep[phase].resize(program.steps[phase].size());
    for (const PhaseStep &step : program.steps[phase]) {
      const ProgramOp &op = program.ops[step.op];
      for (int64_t id : op.operands) {
        auto it = current.find(id);
        if (it == current.end())
          continue; // a parameter read in place before its op, or malformed
        Instance &instance = instances[it->second];
        if (op.kind == OpKind::Send)
          instance.sentIn = std::max(instance.sentIn, phase);
        else
          instance.lastUse = position;
      }
      for (const ProgramValue &result : op.results) {
        current[result.id] = instances.size();
        instances.push_back(
            {result.id, position, position, -1, op.kind == OpKind::Recv});
      }
      ++position;
    }
  }
  std::set<int64_t> optimizerInputs;
  for (int index : program.opsOf(OpPhase::Optimizer))
    for (int64_t id : program.ops[index].operands)
      optimizerInputs.insert(id);
  auto phaseAt = [&](size_t at) {
    int phase = 0;
    while (phase + 1 < kMicroBatchPhases && at >= phaseStart[phase + 1])
      ++phase;
    return phase;
  };
  auto freeAfter = [&](size_t at, int64_t id) {
    int phase = phaseAt(at);
    lifetimes.freeAfterStep[phase][at - phaseStart[phase]].push_back(id);
  };
  for (const Instance &instance : instances) {
    if (optimizerInputs.count(instance.id)) {
      // A gradient a step makes is summed as soon as it is made (the
      // executors' afterOp); one received is summed when the backward ends.
      if (!instance.received)
        freeAfter(instance.lastUse, instance.id);
      continue;
    }
    // Sends are made when their phase ends: a reader in a later phase keeps
    // the value longer.
    if (instance.sentIn >= 0 &&
        !(instance.lastUse >= phaseStart[instance.sentIn + 1])) {
      lifetimes.freeAfterSends[instance.sentIn].push_back(instance.id);
      continue;
    }
    freeAfter(instance.lastUse, instance.id);
  }
  return lifetimes;
}
