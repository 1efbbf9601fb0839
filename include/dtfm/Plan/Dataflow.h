//===- Dataflow.h - How values flow through a stage program -----*- C++ -*-===//
//
// Part of dtfm. Plain C++ (no MLIR, no backend).
//
//===----------------------------------------------------------------------===//
//
// Questions about a decoded program (Program.h) that its executors, the
// worker and the memory model ask alike: the steps a micro-batch runs (with
// recomputation), when each value may be freed, what the program sends, the
// gradients the optimizer phase reads and the parameters it updates.
//
//===----------------------------------------------------------------------===//

#ifndef DTFM_PLAN_DATAFLOW_H
#define DTFM_PLAN_DATAFLOW_H

#include "dtfm/Plan/Program.h"

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace dtfm::plan {

/// Layers recomputation may run again: those with backward ops whose
/// forward has no op its kind's Impurity forbids running twice
/// (OpKinds.def: a training batch norm, a custom op).
std::vector<std::string> recomputableLayers(const StageProgram &program);

/// The gradients the optimizer phase reads, summed over the micro-batches:
/// each dtfm.grad_sync's input (with that op) and each update's gradient
/// that no sync produces (with null).
std::map<int64_t, const ProgramOp *>
gradientInputs(const StageProgram &program);

/// Each optimizer update of the program with the dtfm.param it updates
/// and the dtfm.grad_sync whose result it reads (null: none), in program
/// order; updates of no parameter are left out.
struct ParameterUpdate {
  const ProgramOp *update = nullptr, *param = nullptr, *sync = nullptr;
};
std::vector<ParameterUpdate> parameterUpdates(const StageProgram &program);

/// The values the program's dtfm.send ops send, each with whether it is
/// sent only once per iteration (a tied weight: the runtime copies it into
/// micro-batch 0's values only) rather than every micro-batch.
std::map<int64_t, bool> sentValues(const StageProgram &program);

/// Fills `steps` from `byPhase`, the ops' layers and `recompute`
/// (decodeProgram does).
void buildSteps(StageProgram &program);

/// When the values of one micro-batch may be freed, along its steps: each
/// value (each time a step makes it) after its last reader; a value the
/// worker sends after a phase once that phase's sends are made (unless a
/// later step reads it); a gradient the optimizer takes once it is summed:
/// after the step that makes it, or, when received, when the micro-batch's
/// backward ends. A value no step reads is freed right after the step
/// that makes it. The runtime frees by it and the memory model
/// (MemoryModel.h) counts by it.
struct ValueLifetimes {
  /// Value ids to free after each step of the forward (0), backward (1)
  /// and weight-gradient half (2).
  std::array<std::vector<std::vector<int64_t>>, kMicroBatchPhases>
      freeAfterStep;
  /// Value ids to free once a phase's sends of a micro-batch are made.
  std::array<std::vector<int64_t>, kMicroBatchPhases> freeAfterSends;
};
ValueLifetimes valueLifetimes(const StageProgram &program);

} // namespace dtfm::plan

#endif // DTFM_PLAN_DATAFLOW_H
