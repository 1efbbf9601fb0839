//===- dtfm-run.cpp - Run (or simulate) a plan ----------------------------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//
//
//   dtfm-run plan.pb --simulate [--trace out.json] [--report out.html] [--json]
//   dtfm-run plan.pb --execute [--steps N] [--seed S] [--tokens file.bin]
//            [--inputs inputs.bin] [--init-from params.bin]
//            [--save-params params.bin]
//
// Simulates one training iteration of the plan's device programs on the
// cluster the plan carries (lib/Runtime/Simulator.h) and prints the
// iteration time, per-device busy and idle time, the bubble fraction, the
// bytes per link and the achieved FLOP/s. --execute trains for real on the
// CPU (lib/Runtime/Executor.h); this build executes single-device plans
// (multi-device execution needs the transport, not built yet) and says so
// for others.
//
//===----------------------------------------------------------------------===//

#include "dtfm/Runtime/Executor.h"
#include "dtfm/Runtime/PlanLoader.h"
#include "dtfm/Runtime/Report.h"
#include "dtfm/Runtime/Simulator.h"

#include "plan.pb.h"

#include <cstdio>
#include <cstdlib>
#include <map>
#include <random>
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
    "[--report out.html] [--json]\n"
    "       dtfm-run <plan.pb> --execute [--steps N] [--seed S] "
    "[--tokens file.bin] [--inputs inputs.bin] [--init-from params.bin] "
    "[--save-params params.bin]\n";

/// Vocabulary size: rows of the table an embedding reads, or 0.
static int64_t vocabularyOf(const proto::DeviceProgram &program) {
  std::map<int64_t, int64_t> rows;
  for (const proto::PlanOp &op : program.ops()) {
    if (op.name() == "dtfm.param" && op.results_size() == 1 &&
        op.results(0).shape_size() == 2)
      rows[op.results(0).id()] = op.results(0).shape(0);
    if (op.name() == "dtfm.embedding" && op.operands_size() == 2 &&
        rows.count(op.operands(1)))
      return rows[op.operands(1)];
  }
  return 0;
}

/// Trains a single-device plan for real.
static int execute(const std::string &planPath, const proto::Plan &plan,
                   int steps, uint64_t seed, const std::string &tokensPath,
                   const std::string &inputsPath, const std::string &initPath,
                   const std::string &savePath) {
  if (plan.programs_size() != 1)
    return fail(planPath + ": " + std::to_string(plan.programs_size()) +
                " device programs; this build executes single-device plans "
                "only (use --simulate for the others)");
  const proto::DeviceProgram &program = plan.programs(0);
  runtime::ProgramExecutor executor(program);
  std::string error;
  if (!(initPath.empty() ? executor.initialize(seed, error)
                         : executor.loadParameters(initPath, error)))
    return fail(error);
  int microBatches = static_cast<int>(std::max<int64_t>(1, plan.micro_batches()));
  std::vector<runtime::InputSpec> specs = executor.inputs();
  int64_t vocab = vocabularyOf(program);

  // Token stream: from the file (int32), or synthetic from the seed. Each
  // micro-batch takes B x (S + 1) tokens: inputs are the first S of a row,
  // labels the last S (next-token prediction).
  std::vector<int32_t> stream;
  if (!tokensPath.empty()) {
    std::ifstream in(tokensPath, std::ios::binary | std::ios::ate);
    if (!in)
      return fail(tokensPath + ": cannot open token file");
    std::streamsize size = in.tellg();
    if (size <= 0 || size % 4 != 0)
      return fail(tokensPath + ": expected int32 tokens");
    stream.resize(size / 4);
    in.seekg(0);
    in.read(reinterpret_cast<char *>(stream.data()), size);
    for (int32_t t : stream)
      if (t < 0 || (vocab > 0 && t >= vocab))
        return fail(tokensPath + ": token " + std::to_string(t) +
                    " outside the vocabulary of " + std::to_string(vocab));
  }
  // Explicit inputs: tensors named "<input>@<k>" for the k-th micro-batch of
  // the run (counting across steps).
  std::map<std::string, runtime::cpu::Tensor> given;
  if (!inputsPath.empty() &&
      !runtime::readTensorFile(inputsPath, given, error))
    return fail(error);
  int64_t microBatchIndex = 0;
  std::mt19937_64 rng(seed ^ 0x5eedull);
  size_t cursor = 0;
  auto nextToken = [&]() -> float {
    if (!stream.empty()) {
      int32_t t = stream[cursor % stream.size()];
      ++cursor;
      return static_cast<float>(t);
    }
    return static_cast<float>(rng() % static_cast<uint64_t>(std::max<int64_t>(vocab, 2)));
  };
  for (int step = 1; step <= steps; ++step) {
    std::vector<runtime::MicroBatch> batches(microBatches);
    for (runtime::MicroBatch &batch : batches) {
      for (const runtime::InputSpec &spec : specs) {
        auto it = given.find(spec.name + "@" + std::to_string(microBatchIndex));
        if (it == given.end())
          continue;
        if (it->second.shape != spec.shape)
          return fail(inputsPath + ": '" + it->first + "' has the wrong shape");
        batch[spec.name] = it->second;
      }
      ++microBatchIndex;
      const runtime::InputSpec *tokens = nullptr, *labels = nullptr;
      for (const runtime::InputSpec &spec : specs) {
        if (spec.isInteger && !spec.isLabel && spec.shape.size() == 2)
          tokens = &spec;
        if (spec.isInteger && spec.isLabel && spec.shape.size() == 2)
          labels = &spec;
      }
      if (tokens && labels && tokens->shape == labels->shape &&
          !batch.count(tokens->name) && !batch.count(labels->name)) {
        runtime::cpu::Tensor in(tokens->shape), out(labels->shape);
        int64_t rows = tokens->shape[0], seq = tokens->shape[1];
        for (int64_t r = 0; r < rows; ++r) {
          std::vector<float> row(seq + 1);
          for (float &t : row)
            t = nextToken();
          for (int64_t j = 0; j < seq; ++j) {
            in.data[r * seq + j] = row[j];
            out.data[r * seq + j] = row[j + 1];
          }
        }
        batch[tokens->name] = in;
        batch[labels->name] = out;
      }
      for (const runtime::InputSpec &spec : specs) {
        if (batch.count(spec.name))
          continue;
        runtime::cpu::Tensor t(spec.shape);
        std::normal_distribution<double> normal(0, 1);
        for (float &x : t.data)
          x = spec.isInteger ? nextToken() : static_cast<float>(normal(rng));
        batch[spec.name] = t;
      }
    }
    double loss = 0;
    if (!executor.step(batches, loss, error))
      return fail(planPath + ": " + error);
    std::printf("step %d loss %.6f\n", step, loss);
    std::fflush(stdout);
  }
  if (!savePath.empty() && !executor.saveParameters(savePath, error))
    return fail(error);
  return 0;
}

int main(int argc, char **argv) {
  std::string planPath, tracePath, reportPath, tokensPath, inputsPath,
      initPath, savePath;
  bool simulateFlag = false, json = false, executeFlag = false;
  int steps = 1;
  uint64_t seed = 0;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--simulate")
      simulateFlag = true;
    else if (arg == "--execute")
      executeFlag = true;
    else if (arg == "--steps" && i + 1 < argc) {
      steps = std::atoi(argv[++i]);
      if (steps <= 0)
        return fail("--steps must be positive");
    } else if (arg == "--seed" && i + 1 < argc)
      seed = std::strtoull(argv[++i], nullptr, 10);
    else if (arg == "--tokens" && i + 1 < argc)
      tokensPath = argv[++i];
    else if (arg == "--inputs" && i + 1 < argc)
      inputsPath = argv[++i];
    else if (arg == "--init-from" && i + 1 < argc)
      initPath = argv[++i];
    else if (arg == "--save-params" && i + 1 < argc)
      savePath = argv[++i];
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
  if (simulateFlag == executeFlag)
    return fail(std::string("give exactly one of --simulate and --execute\n") +
                kUsage);
  if (executeFlag)
    return execute(planPath, plan, steps, seed, tokensPath, inputsPath,
                   initPath, savePath);

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
