//===- plan-fuzzer.cpp - Fuzzes the plan reader and the runtime verifier --===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//
//
// What dtfm-run does with a plan file before any worker starts: decode it
// (binary or text, checksum, shape), verify every program (runtime::
// verifyPlan), and for a plan that passes, build the simulator's input and
// simulate one iteration (dtfm-run --simulate).
//
//===----------------------------------------------------------------------===//

#include "dtfm/Format/PlanFile.h"
#include "dtfm/Plan/SimInput.h"
#include "dtfm/Plan/Simulator.h"
#include "dtfm/Plan/Verifier.h"
#include "plan.pb.h"

using namespace dtfm;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string bytes(reinterpret_cast<const char *>(data), size), error;
  proto::Plan plan;
  if (!format::parsePlan(bytes, "fuzz.pb", plan, error) ||
      !plan::verifyPlan(plan, "fuzz.pb", error))
    return 0;
  plan::SimInput input;
  if (!plan::simulationInput(plan, input, error))
    return 0;
  plan::SimResult result;
  plan::simulate(input, result, error);
  return 0;
}
