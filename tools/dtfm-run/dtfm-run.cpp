//===- dtfm-run.cpp - Run (or simulate) a plan ----------------------------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//
//
//   dtfm-run plan.pb --simulate [--trace out.json] [--report out.html] [--json]
//
// Simulates one training iteration of the plan's device programs on the
// cluster the plan carries (lib/Runtime/Simulator.h) and prints the
// iteration time, per-device busy and idle time, the bubble fraction, the
// bytes per link and the achieved FLOP/s. Executing a plan on real devices
// is not part of this build: without --simulate the tool says so and exits 1.
//
//===----------------------------------------------------------------------===//

#include "dtfm/Runtime/PlanLoader.h"
#include "dtfm/Runtime/Report.h"
#include "dtfm/Runtime/Simulator.h"

#include "plan.pb.h"

#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>

using namespace dtfm;

static int fail(const std::string &message) {
  std::fprintf(stderr, "dtfm-run: error: %s\n", message.c_str());
  return 1;
}

static const char *kUsage =
    "usage: dtfm-run <plan.pb> --simulate [--trace out.json] "
    "[--report out.html] [--json]\n";

int main(int argc, char **argv) {
  std::string planPath, tracePath, reportPath;
  bool simulateFlag = false, json = false;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--simulate")
      simulateFlag = true;
    else if (arg == "--json")
      json = true;
    else if (arg == "--trace" && i + 1 < argc)
      tracePath = argv[++i];
    else if (arg.rfind("--trace=", 0) == 0)
      tracePath = arg.substr(8);
    else if (arg == "--report" && i + 1 < argc)
      reportPath = argv[++i];
    else if (arg.rfind("--report=", 0) == 0)
      reportPath = arg.substr(9);
    else if (arg == "--help" || arg == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    } else if (!arg.empty() && arg[0] == '-')
      return fail("unknown option '" + arg + "'\n" + kUsage);
    else if (planPath.empty())
      planPath = arg;
    else
      return fail("more than one plan file given");
  }
  if (planPath.empty())
    return fail(std::string("no plan file given\n") + kUsage);

  proto::Plan plan;
  std::string error;
  if (!runtime::readPlanFile(planPath, plan, error))
    return fail(error);
  if (!simulateFlag)
    return fail("this build can only simulate plans; run with --simulate");

  runtime::SimInput input;
  if (!runtime::simulationInput(plan, input, error))
    return fail(planPath + ": " + error);
  runtime::SimResult result;
  if (!runtime::simulate(input, result, error))
    return fail(planPath + ": " + error);

  // Outputs are written next to their final name, then renamed: never
  // half-written.
  auto writeFile = [&](const std::string &path, const std::string &text) {
    std::string temp = path + ".tmp";
    {
      std::ofstream out(temp, std::ios::binary);
      out << text;
      if (!out) {
        std::remove(temp.c_str());
        return false;
      }
    }
    if (std::rename(temp.c_str(), path.c_str()) != 0) {
      std::remove(temp.c_str());
      return false;
    }
    return true;
  };
  if (!tracePath.empty() &&
      !writeFile(tracePath, runtime::chromeTrace(result)))
    return fail("cannot write '" + tracePath + "'");
  if (!reportPath.empty()) {
    std::string title = "dtfm plan: " + plan.model() + " on " +
                        plan.cluster_name();
    if (!writeFile(reportPath, runtime::planReport(title, input, result)))
      return fail("cannot write '" + reportPath + "'");
  }

  if (json) {
    std::printf("{\"plan\":\"%s\",\"cluster\":\"%s\",\"devices\":%zu,"
                "\"micro_batches\":%d,\"iteration_s\":%.9g,"
                "\"bubble_fraction\":%.6f,\"pflops\":%.9g}\n",
                planPath.c_str(), plan.cluster_name().c_str(),
                input.programs.size(), input.microBatches,
                result.iterationSeconds, result.bubbleFraction,
                result.achievedFlopsPerSecond() / 1e15);
    return 0;
  }
  std::printf("=== dtfm-run --simulate: %s ===\n", planPath.c_str());
  std::printf("model %s, cluster %s, %zu device programs, %s with %d "
              "micro-batches\n",
              plan.model().c_str(), plan.cluster_name().c_str(),
              input.programs.size(), plan.schedule().c_str(),
              input.microBatches);
  std::printf("iteration time      %.6g s\n", result.iterationSeconds);
  std::printf("bubble fraction     %.4f\n", result.bubbleFraction);
  std::printf("achieved            %.6g GFLOP/s (%.6g PFLOP/s)\n",
              result.achievedFlopsPerSecond() / 1e9,
              result.achievedFlopsPerSecond() / 1e15);
  std::printf("%-16s %12s %12s\n", "device", "busy s", "idle s");
  for (const runtime::SimProgram &p : input.programs)
    std::printf("%-16s %12.6g %12.6g\n", p.device.c_str(),
                result.busySeconds[p.device], result.idleSeconds[p.device]);
  std::printf("%-24s %14s\n", "link", "bytes");
  for (const auto &[link, bytes] : result.linkBytes)
    std::printf("%-24s %14.0f\n", link.c_str(), bytes);
  if (!tracePath.empty())
    std::printf("trace written to %s\n", tracePath.c_str());
  if (!reportPath.empty())
    std::printf("report written to %s\n", reportPath.c_str());
  return 0;
}
