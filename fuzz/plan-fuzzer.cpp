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
#include "dtfm/Runtime/PlanLoader.h"
#include "dtfm/Runtime/PlanVerifier.h"
#include "dtfm/Runtime/Simulator.h"
#include "plan.pb.h"

using namespace dtfm;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string bytes(reinterpret_cast<const char *>(data), size), error;
  proto::Plan plan;
  if (!format::parsePlan(bytes, "fuzz.pb", plan, error) ||
      !runtime::verifyPlan(plan, "fuzz.pb", error))
    return 0;
  runtime::SimInput input;
  if (!runtime::simulationInput(plan, input, error))
    return 0;
  runtime::SimResult result;
  runtime::simulate(input, result, error);
  return 0;
}
