//===- dtfm-run.cpp - Run (or simulate) a plan ----------------------------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//
//
//   dtfm-run plan.pb --simulate [--trace out.json] [--report out.html] [--json]
//   dtfm-run plan.pb --execute [options]
//
// --simulate runs one training iteration of the plan's device programs on
// the cluster the plan carries (lib/Plan/Simulator.h) and prints the
// iteration time, per-device busy and idle time, the bubble fraction, the
// bytes per link and the achieved FLOP/s.
//
// --execute trains for real: one worker process per device program on this
// machine (lib/Runtime/Launcher.h), or this process as one worker of a
// multi-host run (--rank with --rendezvous, or --store for a shared
// directory); see lib/Runtime/Worker.h. --backend=cpu|cuda|auto (default
// auto: CUDA when there is a device and every op has a CUDA kernel, else
// the CPU with a one-line notice) picks what runs the programs.
//
//===----------------------------------------------------------------------===//

#include "dtfm/Format/PlanFile.h"
#include "dtfm/Format/Safetensors.h"
#include "dtfm/Format/TensorFile.h"
#include "dtfm/Plan/MemoryModel.h"
#include "dtfm/Plan/SimInput.h"
#include "dtfm/Plan/Simulator.h"
#include "dtfm/Plan/Verifier.h"
#include "dtfm/Planner/Cluster.h"
#include "dtfm/Runtime/Agents.h"
#include "dtfm/Runtime/Backend.h"
#include "dtfm/Runtime/Checkpoints.h"
#include "dtfm/Runtime/Elastic.h"
#include "dtfm/Runtime/HostMemory.h"
#include "dtfm/Runtime/JobToken.h"
#include "dtfm/Runtime/LaunchEnvironment.h"
#include "dtfm/Runtime/Launcher.h"
#include "dtfm/Runtime/Report.h"
#include "dtfm/Runtime/Transport.h"
#include "dtfm/Runtime/Worker.h"
#include "dtfm/Support/PluginFlags.h"

#include "plan.pb.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <optional>
#include <set>
#include <string>
#include <csignal>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

using namespace dtfm;

static int fail(const std::string &message) {
  std::fprintf(stderr, "dtfm-run: error: %s\n", message.c_str());
  return 1;
}

static const char *kUsage =
    "usage: dtfm-run <plan.pb> --simulate [--trace out.json] "
    "[--report out.html [--log steps.jsonl]] [--json]\n"
    "                      (--log: the report draws that run's training "
    "curves, during or after it)\n"
    "       dtfm-run <plan.pb> --execute [--steps N] [--seed S]\n"
    "         data:        [--data SHARD|DIR|GLOB]... [--data-dtype "
    "uint16|uint32|int32]\n"
    "                      [--data-order shuffled|sequential] (token "
    "shards; default shuffled)\n"
    "                      [--tokens file.bin] (int32 tokens in order) "
    "[--inputs inputs.bin]\n"
    "         validation:  [--val-data SHARD|DIR|GLOB]... [--eval-every N] "
    "[--eval-batches K] (default 4)\n"
    "                      [--eval-only] (one evaluation of --init-from's "
    "weights, no training)\n"
    "         parameters:  [--init-from WEIGHTS] (safetensors, or dtfm's "
    "DTFMPAR1)\n"
    "                      [--save-params model.safetensors] [--save-dtype "
    "f32|f16|bf16] (default f32)\n"
    "                      [--weight-names dtfm|hf] (hf: Hugging Face's "
    "GPT-2/Llama names and layouts)\n"
    "         checkpoints: [--checkpoint-dir DIR] [--checkpoint-every K] "
    "[--resume-from DIR]\n"
    "                      [--mtbf SECONDS] (the interval from the failure "
    "rate, Daly's)\n"
    "         links:       [--shape-links] [--serial-slots] "
    "[--timeout SECONDS]\n"
    "         debugging:   [--check-finite] (stop at the first op whose "
    "result is not finite, naming it and its operands)\n"
    "         output:      [--trace out.json] [--log steps.jsonl] "
    "[--calibration-steps N]\n"
    "                      [--report out.html] (after the run: its "
    "training curves beside the simulated plan)\n"
    "                      [--memory-report memory.jsonl] (each worker's "
    "peak memory, measured and predicted)\n"
    "         cluster:     [--cluster cluster.textproto] (refuse a plan "
    "made for another)\n"
    "         elastic:     [--elastic] (a lost device: re-plan on the "
    "rest, resume; needs --checkpoint-dir)\n"
    "                      [--min-devices N] [--max-replans N] "
    "[--planning-timeout SECONDS] [--compiler-dir DIR]\n"
    "                      [--agents PORT] (the workers run on the hosts "
    "of agents that connect to PORT)\n"
    "         multi-host:  --rank R (--rendezvous HOST:PORT | --store DIR)\n"
    "                      (or none of them: torchrun's, SLURM's or a "
    "Kubernetes Job's variables)\n"
    "                      [--rendezvous redis://HOST:PORT[/PREFIX]] (a "
    "Redis server as the store;\n"
    "                      its password, if it asks for one, in "
    "DTFM_REDIS_PASSWORD)\n"
    "                      [--run-id ID] (the job's keys in the store; "
    "default SLURM_JOB_ID or TORCHELASTIC_RUN_ID)\n"
    "                      [--iface NAME] (the interface the peers connect "
    "to; default GLOO_SOCKET_IFNAME)\n"
    "                      [--device-map FILE] (lines 'HOST DEVICE...': "
    "the plan devices each host runs, by local rank)\n"
    "                      [--job-token FILE] (the secret every connection "
    "to a TCP store or coordinator proves;\n"
    "                      or DTFM_JOB_TOKEN; `dtfm-run --new-job-token` "
    "prints a fresh one)\n"
    "         device:      [--backend cpu|cuda|auto] (default auto)\n"
    "                      [--matmul-precision plan|fp32] (GPU matmuls "
    "in the plan's f16/bf16, or fp32; default plan)\n"
    "                      [--gpu-attention auto|fused|unfused] (GPU "
    "attention without the probabilities in memory\n"
    "                      where the heads have 1-128 dimensions, or "
    "always the unfused reference; default auto)\n"
    "         kernels:     [--load-dtfm-plugin lib.so] (custom operators)\n"
    "       dtfm-run <plan.pb> --replan-without DEV[,DEV...] --replan-dir DIR\n"
    "                      (the plan made again without those devices, as "
    "--elastic does)\n"
    "       dtfm-run --join CHECKPOINT_DIR <request.textproto>  (a device "
    "asks to join an --elastic run)\n"
    "       dtfm-run --agent HOST:PORT (--devices DEV[,DEV...] | "
    "--join-request request.textproto)\n"
    "                      [--timeout SECONDS] (runs this host's workers of "
    "an --elastic --agents run)\n"
    "                      [--root DIR]... (the folders the coordinator's "
    "paths must lie in; default: here)\n"
    "                      [--job-token FILE] (or DTFM_JOB_TOKEN: the job's "
    "secret, which the coordinator prints)\n"
    "       dtfm-run --new-job-token  (prints a fresh job token)\n";

/// An integer option value in [low, high] (decimal, nothing before or after
/// it -- strtoll would skip leading blanks --, no overflow), or a one-line
/// error saying the range.
static bool integerIn(const char *flag, const char *text, long long low,
                      long long high, long long &value) {
  char *end = nullptr;
  errno = 0;
  value = std::strtoll(text, &end, 10);
  bool starts = text[0] == '-' || std::isdigit(static_cast<unsigned char>(text[0]));
  if (!starts || !end || end == text || *end != '\0' || errno != 0 ||
      value < low || value > high) {
    std::fprintf(stderr,
                 "dtfm-run: error: %s expects an integer in [%lld, %lld], "
                 "got '%s'\n",
                 flag, low, high, text);
    return false;
  }
  return true;
}

/// DEV[,DEV...] of `flag`; false after a one-line error for an empty name.
static bool deviceList(const char *flag, const std::string &text,
                       std::vector<std::string> &names) {
  for (size_t begin = 0; begin <= text.size();) {
    size_t end = text.find(',', begin);
    if (end == std::string::npos)
      end = text.size();
    std::string name = text.substr(begin, end - begin);
    if (name.empty()) {
      std::fprintf(stderr,
                   "dtfm-run: error: %s: an empty device name in '%s'\n", flag,
                   text.c_str());
      return false;
    }
    names.push_back(name);
    begin = end + 1;
  }
  return true;
}

namespace {

/// What the command line asks for.
struct Command {
  std::string planPath, tracePath, reportPath, clusterPath, tokensPath;
  bool simulateFlag = false, json = false, executeFlag = false;
  bool logGiven = false;
  bool elastic = false, elasticOptionGiven = false;
  runtime::ElasticOptions elasticOptions;
  std::string replanWithout, replanDir, joinDir;
  // A coordinator's port (--agents), or an agent's coordinator and devices.
  int agentsPort = -1;
  runtime::AgentOptions agent;
  std::string agentDevices, joinRequestPath;
  /// --device-map FILE: plan devices pinned to hosts (LaunchEnvironment.h).
  std::string deviceMapPath;
  runtime::BackendRequest backendRequest = runtime::BackendRequest::Auto;
  runtime::WorkerOptions worker;
  // What the launcher passes on to each local worker.
  std::vector<std::string> forwarded;
  /// --job-token FILE; --new-job-token; an agent's --root DIRs.
  std::string jobTokenPath;
  bool newJobToken = false;
  std::vector<std::string> roots;
};

/// The job token from --job-token or DTFM_JOB_TOKEN into `token` ("" when
/// neither gives one); false after a one-line error.
bool loadToken(const Command &c, std::string &token) {
  std::string error;
  if (!runtime::loadJobToken(c.jobTokenPath,
                             std::getenv(runtime::kJobTokenVariable), token,
                             error)) {
    std::fprintf(stderr, "dtfm-run: error: %s\n", error.c_str());
    return false;
  }
  return true;
}

/// Reads the command line into `c`: an exit code when the command ends
/// here (a bad flag, --help), nullopt to go on.
std::optional<int> parseCommandLine(int argc, char **argv, Command &c) {
  c.worker.rank = -1;
  // Custom operators' kernels (--load-dtfm-plugin, repeatable).
  if (!loadPluginsFromCommandLine("dtfm-run", argc, argv))
    return 1;
  for (const std::string &path : scanPluginFlags(argc, argv))
    c.forwarded.push_back("--" + std::string(kLoadPluginFlag) + "=" + path);
  // A flag given twice would have its first value silently replaced.
  std::set<std::string> given;
  for (int i = 1; i < argc; ++i) {
    std::string flag = argv[i];
    if (flag.rfind("--", 0) != 0)
      continue;
    flag = flag.substr(0, flag.find('='));
    if (flag != "--data" && flag != "--val-data" && flag != "--root" &&
        flag != "--" + std::string(kLoadPluginFlag) &&
        !given.insert(flag).second)
      return fail(flag + " is given twice (only --data, --val-data, --root "
                  "and --" + std::string(kLoadPluginFlag) + " repeat)");
  }
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg.rfind("--" + std::string(kLoadPluginFlag), 0) == 0) {
      if (arg == "--" + std::string(kLoadPluginFlag))
        ++i; // its value
      continue;
    }
    bool hasValue = i + 1 < argc;
    auto takesValue = [&](const char *flag) { return arg == flag && hasValue; };
    long long number = 0;
    if (arg == "--simulate")
      c.simulateFlag = true;
    else if (arg == "--elastic")
      c.elastic = true;
    else if (takesValue("--min-devices") || takesValue("--max-replans") ||
             takesValue("--planning-timeout")) {
      long long low = arg == "--max-replans" ? 0 : 1;
      if (!integerIn(arg.c_str(), argv[++i], low, 1000000, number))
        return 1;
      if (arg == "--min-devices")
        c.elasticOptions.minDevices = static_cast<int>(number);
      else if (arg == "--max-replans")
        c.elasticOptions.maxReplans = static_cast<int>(number);
      else
        c.elasticOptions.planningTimeout = std::chrono::seconds(number);
      c.elasticOptionGiven = true;
    } else if (takesValue("--compiler-dir")) {
      c.elasticOptions.compilerDir = argv[++i];
      c.elasticOptionGiven = true;
    } else if (takesValue("--stop-file")) {
      c.worker.stopFile = argv[++i];
      c.forwarded.insert(c.forwarded.end(), {arg, c.worker.stopFile});
      continue;
    } else if (takesValue("--join")) {
      c.joinDir = argv[++i];
      continue;
    } else if (takesValue("--agents")) {
      if (!integerIn("--agents", argv[++i], 0, 65535, number))
        return 1;
      c.agentsPort = static_cast<int>(number);
      continue;
    } else if (takesValue("--agent")) {
      c.agent.coordinator = argv[++i];
      continue;
    } else if (takesValue("--job-token")) {
      c.jobTokenPath = argv[++i];
      continue;
    } else if (arg == "--new-job-token") {
      c.newJobToken = true;
      continue;
    } else if (takesValue("--root")) {
      c.roots.push_back(argv[++i]);
      continue;
    } else if (takesValue("--devices")) {
      c.agentDevices = argv[++i];
      continue;
    } else if (takesValue("--join-request")) {
      c.joinRequestPath = argv[++i];
      continue;
    } else if (takesValue("--run-id")) {
      c.worker.runId = argv[++i];
      if (!runtime::validRunId(c.worker.runId))
        return fail("--run-id '" + c.worker.runId +
                    "': letters, digits, '.', '_' and '-' only (at most "
                    "128)");
      continue;
    } else if (takesValue("--device-map")) {
      c.deviceMapPath = argv[++i];
      continue;
    } else if (takesValue("--iface")) {
      c.worker.iface = argv[++i];
      c.worker.ifaceFrom = "--iface";
      continue;
    } else if (takesValue("--store-server")) {
      c.worker.rendezvous = argv[++i];
      c.worker.storeServedElsewhere = true;
      continue;
    } else if (takesValue("--replan-without"))
      c.replanWithout = argv[++i];
    else if (takesValue("--replan-dir"))
      c.replanDir = argv[++i];
    else if (arg == "--execute")
      c.executeFlag = true;
    else if (takesValue("--steps") || takesValue("--checkpoint-every") ||
             takesValue("--timeout") || takesValue("--calibration-steps") ||
             takesValue("--mtbf")) {
      const char *value = argv[++i];
      // Bounds that no run reaches and no conversion overflows: a billion
      // steps, a timeout of a million seconds (11.6 days per wait).
      long long low = arg == "--calibration-steps" ? 0 : 1;
      long long high = arg == "--timeout" ? 1000000 : 1000000000;
      if (!integerIn(arg.c_str(), value, low, high, number))
        return 1;
      if (arg == "--steps")
        c.worker.steps = static_cast<int>(number);
      else if (arg == "--checkpoint-every")
        c.worker.checkpointEvery = static_cast<int>(number);
      else if (arg == "--timeout")
        c.worker.timeout = std::chrono::seconds(number);
      else if (arg == "--mtbf")
        c.worker.mtbfSeconds = static_cast<double>(number);
      else
        c.worker.calibrationSteps = static_cast<int>(number);
      c.forwarded.insert(c.forwarded.end(), {arg, value});
      continue;
    } else if (takesValue("--seed")) {
      // strtoull would take "-1" as 2^64 - 1 and clamp what overflows.
      const char *text = argv[++i];
      char *end = nullptr;
      errno = 0;
      c.worker.seed = std::strtoull(text, &end, 10);
      if (!end || end == text || *end != '\0' || errno != 0 ||
          !std::isdigit(static_cast<unsigned char>(text[0])))
        return fail("--seed expects an integer in [0, 18446744073709551615], "
                    "got '" + std::string(text) + "'");
      c.forwarded.insert(c.forwarded.end(), {arg, argv[i]});
      continue;
    } else if (takesValue("--rank")) {
      if (!integerIn("--rank", argv[++i], 0, 1000000, number))
        return 1;
      c.worker.rank = static_cast<int>(number);
    } else if (takesValue("--data") || takesValue("--val-data")) {
      (arg == "--data" ? c.worker.data : c.worker.valData)
          .paths.push_back(argv[++i]);
      c.forwarded.insert(c.forwarded.end(), {arg, argv[i]});
      continue;
    } else if (takesValue("--eval-every") || takesValue("--eval-batches")) {
      const char *value = argv[++i];
      if (!integerIn(arg.c_str(), value, 1,
                     arg == "--eval-every" ? 1000000000 : 1000000, number))
        return 1;
      (arg == "--eval-every" ? c.worker.evalEvery : c.worker.evalBatches) =
          static_cast<int>(number);
      c.forwarded.insert(c.forwarded.end(), {arg, value});
      continue;
    } else if (arg == "--eval-only") {
      c.worker.evalOnly = true;
      c.forwarded.push_back(arg);
      continue;
    } else if (takesValue("--save-dtype")) {
      std::optional<format::WeightDtype> dtype =
          format::parseWeightDtype(argv[++i]);
      if (!dtype)
        return fail("--save-dtype expects f32, f16 or bf16, got '" +
                    std::string(argv[i]) + "'");
      c.worker.saveDtype = *dtype;
      c.forwarded.insert(c.forwarded.end(), {arg, argv[i]});
      continue;
    } else if (takesValue("--weight-names")) {
      std::string value = argv[++i];
      if (value != "dtfm" && value != "hf")
        return fail("--weight-names expects dtfm or hf, got '" + value + "'");
      c.worker.saveHfNames = value == "hf";
      c.forwarded.insert(c.forwarded.end(), {arg, value});
      continue;
    } else if (takesValue("--data-dtype")) {
      c.worker.data.dtype = format::parseTokenDtype(argv[++i]);
      if (!c.worker.data.dtype)
        return fail("--data-dtype expects uint16, uint32 or int32, got '" +
                    std::string(argv[i]) + "'");
      c.forwarded.insert(c.forwarded.end(), {arg, argv[i]});
      continue;
    } else if (takesValue("--data-order")) {
      std::string value = argv[++i];
      if (value != "shuffled" && value != "sequential")
        return fail("--data-order expects shuffled or sequential, got '" +
                    value + "'");
      c.worker.data.order = value == "shuffled"
                                ? runtime::DataOrder::Shuffled
                                : runtime::DataOrder::Sequential;
      c.forwarded.insert(c.forwarded.end(), {arg, value});
      continue;
    } else if (takesValue("--tokens") || takesValue("--inputs") ||
               takesValue("--init-from") || takesValue("--save-params") ||
               takesValue("--checkpoint-dir") || takesValue("--log") ||
               takesValue("--resume-from") || takesValue("--rendezvous") ||
               takesValue("--store") || takesValue("--cluster") ||
               takesValue("--memory-report")) {
      std::string value = argv[++i];
      if (arg == "--tokens")
        c.tokensPath = value;
      else if (arg == "--inputs")
        c.worker.data.inputsPath = value;
      else if (arg == "--init-from")
        c.worker.initPath = value;
      else if (arg == "--save-params")
        c.worker.savePath = value;
      else if (arg == "--checkpoint-dir")
        c.worker.checkpointDir = value;
      else if (arg == "--resume-from")
        c.worker.resumeFrom = value;
      else if (arg == "--log") {
        c.worker.logPath = value;
        c.logGiven = true;
      } else if (arg == "--rendezvous")
        c.worker.rendezvous = value;
      else if (arg == "--memory-report")
        c.worker.memoryReportPath = value;
      else if (arg == "--store")
        c.worker.storeDir = value;
      else
        c.clusterPath = value;
      if (arg != "--rendezvous" && arg != "--store")
        c.forwarded.insert(c.forwarded.end(), {arg, value});
      continue;
    } else if (takesValue("--backend") || arg.rfind("--backend=", 0) == 0) {
      std::string value = arg == "--backend" ? argv[++i] : arg.substr(10);
      if (!runtime::parseBackendRequest(value, c.backendRequest))
        return fail("--backend expects cpu, cuda or auto, got '" + value +
                    "'");
      continue;
    } else if (takesValue("--matmul-precision") ||
               arg.rfind("--matmul-precision=", 0) == 0) {
      std::string value =
          arg == "--matmul-precision" ? argv[++i] : arg.substr(19);
      if (value != "plan" && value != "fp32")
        return fail("--matmul-precision expects plan or fp32, got '" + value +
                    "'");
      c.worker.gpu.planPrecisionMatmuls = value == "plan";
      c.forwarded.insert(c.forwarded.end(), {"--matmul-precision", value});
      continue;
    } else if (takesValue("--gpu-attention") ||
               arg.rfind("--gpu-attention=", 0) == 0) {
      std::string value = arg == "--gpu-attention" ? argv[++i] : arg.substr(16);
      if (!runtime::parseGpuAttention(value, c.worker.gpu.attention))
        return fail("--gpu-attention expects auto, fused or unfused, got '" +
                    value + "'");
      c.forwarded.insert(c.forwarded.end(), {"--gpu-attention", value});
      continue;
    } else if (arg == "--check-finite") {
      c.worker.checkFinite = true;
      c.forwarded.push_back(arg);
      continue;
    } else if (arg == "--shape-links" || arg == "--serial-slots") {
      (arg == "--shape-links" ? c.worker.shapeLinks : c.worker.serialSlots) =
          true;
      c.forwarded.push_back(arg);
      continue;
    } else if (arg == "--json")
      c.json = true;
    else if (arg == "--trace" && hasValue) {
      c.tracePath = argv[++i];
      c.forwarded.insert(c.forwarded.end(), {arg, c.tracePath});
      continue;
    } else if (arg.rfind("--trace=", 0) == 0) {
      c.tracePath = arg.substr(8);
      c.forwarded.push_back(arg);
      continue;
    } else if (arg == "--report" && hasValue)
      c.reportPath = argv[++i];
    else if (arg.rfind("--report=", 0) == 0)
      c.reportPath = arg.substr(9);
    else if (arg == "--help" || arg == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    } else if (!arg.empty() && arg[0] == '-')
      return fail("unknown option '" + arg + "' (or its value is missing)\n" +
                  kUsage);
    else if (c.planPath.empty())
      c.planPath = arg;
    else
      return fail("more than one plan file given");
  }
  // Validation: the flags that shape it need its data; --eval-only
  // evaluates given weights and trains nothing.
  if (c.worker.valData.paths.empty()) {
    for (const char *flag : {"--eval-every", "--eval-batches", "--eval-only"})
      if (given.count(flag))
        return fail(std::string(flag) + " needs --val-data (the validation "
                                        "token shards)");
  } else {
    // The validation shards take --data-dtype or their sidecars.
    c.worker.valData.dtype = c.worker.data.dtype;
  }
  for (const char *flag : {"--save-dtype", "--weight-names"})
    if (given.count(flag) && c.worker.savePath.empty())
      return fail(std::string(flag) +
                  " goes with --save-params (the weights it writes)");
  if (c.worker.evalOnly) {
    if (c.worker.initPath.empty())
      return fail("--eval-only evaluates given weights: give --init-from");
    for (const char *flag :
         {"--steps", "--checkpoint-dir", "--resume-from", "--save-params",
          "--eval-every", "--elastic", "--data", "--tokens"})
      if (given.count(flag))
        return fail(std::string("--eval-only trains nothing: it takes no ") +
                    flag);
  }
  // --tokens: one int32 file read in order (the oldest form of --data).
  if (!c.tokensPath.empty()) {
    if (!c.worker.data.paths.empty() || c.worker.data.dtype)
      return fail("--tokens is an int32 file read in order: give it or "
                  "--data (with --data-dtype int32 --data-order sequential), "
                  "not both");
    c.worker.data.paths = {c.tokensPath};
    c.worker.data.dtype = format::TokenDtype::Int32;
    c.worker.data.order = runtime::DataOrder::Sequential;
  }
  return std::nullopt;
}

/// --agent HOST:PORT: this host serves devices of an elastic run across
/// hosts.
int agentMode(Command &c, int argc, char **argv) {
  if (!c.planPath.empty())
    return fail("--agent takes no plan: the coordinator sends it");
  if (c.agentDevices.empty() == c.joinRequestPath.empty())
    return fail("--agent needs exactly one of --devices DEV[,DEV...] and "
                "--join-request FILE");
  std::string error;
  if (!c.agentDevices.empty() &&
      !deviceList("--devices", c.agentDevices, c.agent.devices))
    return 1;
  if (!c.joinRequestPath.empty()) {
    planner::JoinRequest request;
    if (!format::readWholeFile(c.joinRequestPath, c.agent.joinRequest, error) ||
        !planner::parseJoinRequest(c.agent.joinRequest, c.joinRequestPath,
                                   request, error))
      return fail(error);
    c.agent.joinRequestPath = c.joinRequestPath;
  }
  c.agent.timeout = c.worker.timeout;
  c.agent.roots = c.roots;
  c.agent.plugins = scanPluginFlags(argc, argv);
  if (!loadToken(c, c.agent.jobToken))
    return 1;
  return runtime::runAgent(c.agent);
}

/// --join DIR REQUEST: a device asks to join the elastic run checkpointing
/// into DIR; its request is checked here and handed over atomically.
int joinMode(const Command &c) {
  if (c.planPath.empty())
    return fail("--join needs the join request file (cluster.proto's "
                "JoinRequest in text format)");
  std::string text, error;
  planner::JoinRequest request;
  if (!format::readWholeFile(c.planPath, text, error) ||
      !planner::parseJoinRequest(text, c.planPath, request, error))
    return fail(error);
  std::string joins = runtime::joinDirectory(c.joinDir);
  struct stat st {};
  if (::stat(joins.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    return fail("--join " + c.joinDir +
                ": not the checkpoint directory of a "
                "running --elastic run (it has no joins/)");
  std::string target = joins + "/" + request.device.name + ".textproto";
  if (::access(target.c_str(), F_OK) == 0)
    return fail("--join " + c.joinDir + ": " + request.device.name +
                " has asked to join already");
  if (!format::writeFileAtomically(target, text, error))
    return fail(error);
  std::printf("asked to join the elastic run of %s as %s (links like %s)\n",
              c.joinDir.c_str(), request.device.name.c_str(),
              request.linksLike.c_str());
  return 0;
}

/// --replan-without DEV --replan-dir DIR: the plan without those devices.
int replanMode(Command &c, const proto::Plan &plan) {
  std::string error;
  if (c.simulateFlag || c.executeFlag)
    return fail("--replan-without goes alone, not with --simulate or "
                "--execute");
  if (c.replanWithout.empty() || c.replanDir.empty())
    return fail("give both --replan-without DEV[,DEV...] and --replan-dir "
                "DIR");
  if (::access(c.replanDir.c_str(), W_OK | X_OK) != 0)
    return fail("--replan-dir " + c.replanDir + ": not a writable directory");
  std::vector<std::string> lost;
  if (!deviceList("--replan-without", c.replanWithout, lost))
    return 1;
  if (!runtime::checkElastic(plan, c.planPath, c.elasticOptions, error))
    return fail(error);
  proto::Plan next;
  runtime::Replan made;
  made.plan = &next;
  if (!runtime::replanWithout(plan, lost, c.replanDir, c.elasticOptions, made,
                              error))
    return fail(c.planPath + ": re-planning without " + c.replanWithout + ": " +
                error);
  std::printf("re-planned without %s in %.2f s: %s; plan %s\n",
              c.replanWithout.c_str(), made.seconds,
              runtime::describeReplan(plan, next).c_str(), made.path.c_str());
  return 0;
}

/// What the mode's flags must say before anything runs: one mode, outputs
/// that can be written, no flag of the other mode, the plan's cluster.
std::optional<int> checkModeFlags(int argc, char **argv, const Command &c,
                                  const proto::Plan &plan) {
  std::string error;
  if (c.simulateFlag == c.executeFlag)
    return fail(std::string("give exactly one of --simulate and --execute\n") +
                kUsage);
  // Outputs that could not be written are refused before anything runs.
  for (const std::string *output :
       {&c.tracePath, &c.reportPath, &c.worker.logPath, &c.worker.savePath,
        &c.worker.memoryReportPath})
    if (!output->empty())
      if (std::string problem = format::outputPathProblem(*output);
          !problem.empty())
        return fail(problem);
  // An output that is also an input would be destroyed by the run.
  std::vector<std::pair<std::string, std::string>> inputs = {
      {"the plan", c.planPath},
      {"--inputs", c.worker.data.inputsPath},
      {"--init-from", c.worker.initPath},
      {"--cluster", c.clusterPath},
      {"--device-map", c.deviceMapPath},
      {"--join-request", c.joinRequestPath},
      {"--tokens", c.tokensPath}};
  for (const std::string &path : c.worker.data.paths)
    inputs.push_back({"--data", path});
  for (const std::string &path : c.worker.valData.paths)
    inputs.push_back({"--val-data", path});
  if (c.simulateFlag && !c.reportPath.empty())
    inputs.push_back({"--log", c.worker.logPath}); // what --report draws
  std::string clash = format::outputThatIsAnInput(
      {{"--trace", c.tracePath},
       {"--report", c.reportPath},
       {"--save-params", c.worker.savePath},
       {"--memory-report", c.worker.memoryReportPath},
       {"--log", c.simulateFlag ? std::string() : c.worker.logPath}},
      inputs);
  if (!clash.empty())
    return fail(clash);
  // Flags of the other mode are errors, not silently ignored.
  if (c.simulateFlag)
    for (int i = 1; i < argc; ++i) {
      std::string flag = std::string(argv[i]).substr(
          0, std::string(argv[i]).find('='));
      for (const char *executeOnly : {"--steps",
                                      "--checkpoint-every",
                                      "--checkpoint-dir",
                                      "--resume-from",
                                      "--calibration-steps",
                                      "--seed",
                                      "--rank",
                                      "--rendezvous",
                                      "--store",
                                      "--run-id",
                                      "--iface",
                                      "--device-map",
                                      "--tokens",
                                      "--data",
                                      "--data-dtype",
                                      "--data-order",
                                      "--val-data",
                                      "--eval-every",
                                      "--eval-batches",
                                      "--eval-only",
                                      "--inputs",
                                      "--init-from",
                                      "--save-params",
                                      "--save-dtype",
                                      "--weight-names",
                                      "--backend",
                                      "--matmul-precision",
                                      "--gpu-attention",
                                      "--timeout",
                                      "--memory-report",
                                      "--stop-file",
                                      "--mtbf",
                                      "--elastic",
                                      "--agents",
                                      "--store-server",
                                      "--min-devices",
                                      "--max-replans",
                                      "--planning-timeout",
                                      "--compiler-dir",
                                      "--job-token"})
        if (flag == executeOnly)
          return fail(flag + " goes with --execute, not --simulate");
    }
  if (c.simulateFlag && c.logGiven && c.reportPath.empty())
    return fail("--log goes with --execute (it writes the log), or with "
                "--simulate --report (the report draws the log's curves)");
  if (c.executeFlag && c.json)
    return fail("--json goes with --simulate, not --execute (--execute "
                "writes --log and --trace)");
  if (!c.reportPath.empty() && c.reportPath == c.worker.logPath)
    return fail("--report " + c.reportPath +
                ": that is the step log (--log); name another file");
  if (c.executeFlag && c.worker.evalOnly && !c.reportPath.empty())
    return fail("--report draws a training run's log; --eval-only trains "
                "nothing and writes no log");
  if (!c.clusterPath.empty()) {
    planner::Cluster cluster;
    if (!planner::loadClusterFile(c.clusterPath, cluster, error))
      return fail(error);
    if (planner::clusterFingerprint(cluster) != plan.cluster_fingerprint())
      return fail(c.planPath + ": made for cluster '" + plan.cluster_name() +
                  "', not for " + c.clusterPath + " ('" + cluster.name +
                  "'); plan again for this cluster");
  }
  return std::nullopt;
}

/// A launcher's world must be the plan's device count: one process per
/// device program. The one-line error otherwise.
std::optional<std::string> launchWorldMismatch(const runtime::LaunchIdentity &launch,
                                               const Command &c,
                                               const proto::Plan &plan) {
  if (launch.worldSize == plan.programs_size())
    return std::nullopt;
  return launch.launcher + " launch: " + launch.worldFrom + " is " +
         std::to_string(launch.worldSize) + ", but " + c.planPath + " has " +
         std::to_string(plan.programs_size()) +
         " device programs (start one process per device program)";
}

/// The names of the plan's cluster's devices (those an agent may serve).
std::vector<std::string> planDeviceNames(const proto::Plan &plan) {
  std::vector<std::string> names;
  for (const proto::PlanDevice &d : plan.devices())
    names.push_back(d.name());
  return names;
}

/// --device-map: the launcher's process on this host with its local rank
/// runs the device the map names, whatever its global rank; said in one
/// line. False after printing the error.
bool mapLaunchToDevice(const Command &c, const proto::Plan &plan,
                       runtime::LaunchIdentity &launch) {
  std::string text, error;
  runtime::DeviceMap map;
  planner::Cluster cluster;
  if (!format::readWholeFile(c.deviceMapPath, text, error) ||
      !runtime::parseDeviceMap(text, c.deviceMapPath, map, error) ||
      !planner::clusterFromPlan(plan, cluster, error)) {
    fail(error);
    return false;
  }
  std::vector<std::string> devices;
  for (const proto::DeviceProgram &p : plan.programs())
    devices.push_back(p.device());
  std::vector<std::vector<std::string>> nodes;
  for (const std::vector<int> &members : planner::nodeMembers(cluster)) {
    nodes.emplace_back();
    for (int i : members)
      nodes.back().push_back(cluster.devices[i].name);
  }
  std::string host = launch.host;
  if (host.empty()) {
    char name[256] = {0};
    ::gethostname(name, sizeof name - 1);
    host = name;
  }
  int rank = -1;
  if (!runtime::rankFromDeviceMap(map, devices, nodes, host, launch.localRank,
                                  launch.localFrom, rank, error)) {
    fail(error);
    return false;
  }
  std::fprintf(stderr,
               "dtfm-run: %s: host %s, local rank %d (%s): device %s, plan "
               "rank %d (%s %d)\n",
               c.deviceMapPath.c_str(), host.c_str(), launch.localRank,
               launch.localFrom.c_str(), devices[rank].c_str(), rank,
               launch.rankFrom.c_str(), launch.rank);
  launch.rank = rank;
  launch.rankFrom = "--device-map";
  return true;
}

/// --elastic under srun, torchrun or a Kubernetes Job: process r serves the
/// plan's device r as an agent (Agents.h) of process 0, which also
/// coordinates -- plans, launches and re-plans -- on the launcher's
/// rendezvous port. A lost process is a lost host: the others re-plan
/// without its device and go on.
/// The folders this process's own command line names (and its working
/// directory): an agent started by a launcher with the coordinator's
/// command line takes paths inside them.
std::vector<std::string> ownFolders(const Command &c) {
  std::set<std::string> folders = {"."};
  auto folderOf = [](const std::string &path) {
    size_t slash = path.find_last_of('/');
    return slash == std::string::npos ? std::string(".")
           : slash == 0               ? std::string("/")
                                      : path.substr(0, slash);
  };
  folders.insert(folderOf(c.planPath));
  if (!c.worker.checkpointDir.empty())
    folders.insert(c.worker.checkpointDir);
  // The path flags an agent checks (Agents.h); the checkpoint directory
  // is a root itself.
  for (size_t k = 0; k + 1 < c.forwarded.size(); ++k)
    if (c.forwarded[k] != "--checkpoint-dir" &&
        runtime::workerFlagTakesPath(c.forwarded[k]))
      folders.insert(folderOf(c.forwarded[k + 1]));
  if (c.logGiven)
    folders.insert(folderOf(c.worker.logPath));
  if (!c.tracePath.empty())
    folders.insert(folderOf(c.tracePath));
  return std::vector<std::string>(folders.begin(), folders.end());
}

int elasticUnderLauncher(const Command &c, const proto::Plan &plan,
                         const runtime::LaunchIdentity &launch,
                         const std::vector<std::string> &arguments, int argc,
                         char **argv) {
  std::string host, error;
  int port = 0;
  if (!runtime::parseHostPort(launch.rendezvous, host, port, error))
    return fail(error);
  runtime::AgentOptions agent;
  agent.devices = {plan.programs(launch.rank).device()};
  agent.timeout = c.worker.timeout;
  agent.roots = ownFolders(c);
  agent.plugins = scanPluginFlags(argc, argv);
  if (!loadToken(c, agent.jobToken))
    return 1;
  if (agent.jobToken.empty())
    return fail("--elastic under " + launch.launcher +
                ": the coordinator (process 0) and its agents prove the "
                "job's token to each other: give every process the same "
                "--job-token FILE or " + runtime::kJobTokenVariable +
                " (`dtfm-run --new-job-token` makes one)");
  if (launch.rank != 0) {
    std::fprintf(stderr,
                 "dtfm-run: %s; --elastic: this process serves %s as an "
                 "agent of the coordinator, process 0\n",
                 launch.describe().c_str(), agent.devices[0].c_str());
    agent.coordinator = launch.rendezvous;
    return runtime::runAgent(agent);
  }
  std::fprintf(stderr,
               "dtfm-run: %s; --elastic: this process coordinates on port %d "
               "and serves %s as an agent\n",
               launch.describe().c_str(), port, agent.devices[0].c_str());
  int status = 1;
  pid_t child = -1;
  {
    runtime::AgentCoordinator agents; // its end tells every agent to stop
    agents.setKnownDevices(planDeviceNames(plan));
    if (!agents.listen(port, c.worker.checkpointDir, c.worker.timeout,
                       agent.jobToken, error))
      return fail(error);
    agent.coordinator = "127.0.0.1:" + std::to_string(port);
    child = runtime::startAgentProcess(agent, error);
    if (child < 0)
      return fail(error);
    status = runtime::runElastic(c.planPath, plan, arguments,
                                 c.worker.checkpointDir, c.worker.resumeFrom,
                                 c.worker.logPath, c.worker.timeout,
                                 c.elasticOptions, &agents);
  }
  // The agent leaves when told; one that does not within the timeout is
  // killed, never left behind.
  auto deadline = std::chrono::steady_clock::now() + c.worker.timeout;
  int childStatus = 0;
  while (::waitpid(child, &childStatus, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() >= deadline) {
      ::kill(child, SIGKILL);
      ::waitpid(child, &childStatus, 0);
      break;
    }
    ::usleep(20000);
  }
  return status;
}

/// --execute: this process as one worker (--rank), the plan's local
/// workers, or an elastic run of them.
int executeMode(Command &c, const proto::Plan &plan, int argc, char **argv) {
  std::string error;
  if (!c.logGiven) {
    // The default log is checked as --log is (a link planted there is
    // refused, not followed).
    c.worker.logPath = c.planPath + ".log.jsonl";
    if (std::string problem = format::outputPathProblem(c.worker.logPath);
        !problem.empty())
      return fail(problem + " (the default --log)");
  }
  c.worker.tracePath = c.tracePath;
  c.worker.progressBar = ::isatty(STDOUT_FILENO);
  if (c.worker.mtbfSeconds > 0 && c.worker.checkpointDir.empty())
    return fail("--mtbf tunes the checkpoint interval: it needs "
                "--checkpoint-dir DIR");
  if (!c.worker.checkpointDir.empty() &&
      ::access(c.worker.checkpointDir.c_str(), W_OK) != 0)
    return fail("--checkpoint-dir " + c.worker.checkpointDir +
                ": not a writable directory");
  if (!c.worker.resumeFrom.empty() &&
      ::access(c.worker.resumeFrom.c_str(), R_OK | X_OK) != 0)
    return fail("--resume-from " + c.worker.resumeFrom +
                ": not a readable directory");
  // The identity a launcher gives (srun, torchrun, a Kubernetes Job), when
  // no flag gives one.
  runtime::LaunchIdentity launch;
  if (c.worker.rank < 0 &&
      !runtime::launchIdentityFrom(
          [](const char *name) { return std::getenv(name); }, launch, error))
    return fail(error);
  if (launch.found())
    if (std::optional<std::string> mismatch =
            launchWorldMismatch(launch, c, plan))
      return fail(*mismatch);
  if (!c.deviceMapPath.empty()) {
    if (!launch.found())
      return fail("--device-map pins plan devices to the hosts of a "
                  "launcher's processes: it goes with torchrun's, SLURM's "
                  "or a Kubernetes Job's variables, not with --rank");
    if (!mapLaunchToDevice(c, plan, launch))
      return 1;
  }
  if (c.elastic) {
    // Without a launcher, --elastic starts the workers here; under one,
    // the launcher's processes are the agents (elasticUnderLauncher).
    if (c.worker.rank >= 0 || !c.worker.rendezvous.empty() ||
        !c.worker.storeDir.empty() || !c.worker.runId.empty() ||
        !c.worker.iface.empty())
      return fail("--elastic runs the plan's workers itself (on this "
                  "machine, or as a launcher's processes); it does not go "
                  "with --rank, --rendezvous, --store, --run-id or --iface");
    if (c.worker.checkpointDir.empty())
      return fail("--elastic needs --checkpoint-dir DIR (a lost device's "
                  "work resumes from the checkpoints there)");
    // Only the coordinator plans again.
    if ((!launch.found() || launch.rank == 0) &&
        !runtime::checkElastic(plan, c.planPath, c.elasticOptions, error))
      return fail(error);
    if (launch.found() && c.agentsPort >= 0)
      return fail("--agents PORT: under " + launch.launcher +
                  " the launcher's processes are the agents, and process 0 "
                  "coordinates on the rendezvous port");
  } else if (c.elasticOptionGiven) {
    return fail("--min-devices, --max-replans, --planning-timeout and "
                "--compiler-dir go with --elastic (or --replan-without)");
  }
  if (c.agentsPort >= 0 && !c.elastic)
    return fail("--agents PORT goes with --elastic (the coordinator of "
                "agents that run the workers on their hosts)");
  if (c.worker.storeServedElsewhere && c.worker.rank < 0)
    return fail("--store-server goes with --rank (an agent starts such "
                "workers)");
  // Resolved once here; local workers get the answer.
  std::string notice;
  if (!runtime::resolveBackend(c.backendRequest, plan, c.worker.backend, notice,
                               error))
    return fail(error);
  if (!notice.empty())
    std::fprintf(stderr, "dtfm-run: notice: %s\n", notice.c_str());
  c.forwarded.insert(c.forwarded.end(),
                     {"--backend", runtime::backendName(c.worker.backend)});
  // Workers this host cannot hold are refused before any starts (on the
  // CPU backend, where a worker's tensors are host memory; an elastic run
  // across agents is checked by no one host).
  if (c.worker.backend == runtime::Backend::Cpu &&
      (!c.elastic || (c.agentsPort < 0 && !launch.found()))) {
    std::vector<int> here;
    // (A rank outside the plan is refused later, by name.)
    if (c.worker.rank >= 0 && c.worker.rank < plan.programs_size())
      here = {c.worker.rank};
    else if (c.worker.rank < 0 && launch.found() &&
             c.deviceMapPath.empty() && launch.rank < plan.programs_size())
      here = {launch.rank};
    else if (c.worker.rank < 0 && !launch.found())
      for (int r = 0; r < plan.programs_size(); ++r)
        here.push_back(r);
    if (std::optional<runtime::HostMemory> host = runtime::hostMemory();
        host && !here.empty())
      if (std::string problem = runtime::hostMemoryProblem(
              plan, here, *host,
              static_cast<double>(runtime::procStatusBytes("VmRSS")));
          !problem.empty())
        return fail(c.planPath + ": " + problem);
  }
  if (c.elastic) {
    // Each launch names its own checkpoint and resume directories; every
    // worker of every launch joins this job's claim on them.
    std::string job = runtime::CheckpointClaim::freshJobId();
    std::vector<std::string> arguments = {"--run-id", job};
    for (size_t k = 0; k < c.forwarded.size(); ++k) {
      if (c.forwarded[k] == "--checkpoint-dir" ||
          c.forwarded[k] == "--resume-from") {
        ++k;
        continue;
      }
      arguments.push_back(c.forwarded[k]);
    }
    if (!c.logGiven)
      arguments.insert(arguments.end(), {"--log", c.worker.logPath});
    // The coordinator holds the claim for the whole job, across re-plans
    // (under a launcher, process 0 coordinates; the others are agents).
    std::unique_ptr<runtime::CheckpointClaim> claim;
    if (!launch.found() || launch.rank == 0) {
      claim = runtime::CheckpointClaim::claim(c.worker.checkpointDir, job,
                                              error);
      if (!claim)
        return fail(error);
    }
    if (launch.found())
      return elasticUnderLauncher(c, plan, launch, arguments, argc, argv);
    if (c.agentsPort < 0) {
      if (!c.jobTokenPath.empty())
        return fail("--job-token goes with --agents (an --elastic run on "
                    "this machine alone connects nobody)");
      return runtime::runElastic(c.planPath, plan, arguments,
                                 c.worker.checkpointDir, c.worker.resumeFrom,
                                 c.worker.logPath, c.worker.timeout,
                                 c.elasticOptions);
    }
    std::string token;
    if (!loadToken(c, token))
      return 1;
    bool madeToken = token.empty();
    if (madeToken && (token = runtime::freshJobToken(error)).empty())
      return fail(error);
    runtime::AgentCoordinator agents;
    // Known before the first agent can say hello.
    agents.setKnownDevices(planDeviceNames(plan));
    if (!agents.listen(c.agentsPort, c.worker.checkpointDir, c.worker.timeout,
                       token, error))
      return fail(error);
    if (madeToken) {
      // The one line an operator passes to the agents' hosts.
      char host[256] = "HOST";
      ::gethostname(host, sizeof host - 1);
      host[sizeof host - 1] = 0;
      std::printf("dtfm-run: elastic: no --job-token or %s given: this job's "
                  "token is made; start each agent with: %s=%s dtfm-run "
                  "--agent %s:%d --devices DEV[,DEV...]\n",
                  runtime::kJobTokenVariable, runtime::kJobTokenVariable,
                  token.c_str(), host,
                  agents.port());
      std::fflush(stdout);
    }
    return runtime::runElastic(c.planPath, plan, arguments,
                               c.worker.checkpointDir, c.worker.resumeFrom,
                               c.worker.logPath, c.worker.timeout,
                               c.elasticOptions, &agents);
  }
  // The job whose claim on the checkpoint directory a worker joins: the
  // --run-id it was given (by a user or the process that started it); a
  // launcher's run id with its rendezvous (torchrun's default id is the
  // same for every job); or the rendezvous or store its ranks share.
  c.worker.checkpointJob = c.worker.runId;
  if (c.worker.checkpointJob.empty() && launch.found())
    c.worker.checkpointJob = launch.runId + "@" + launch.rendezvous;
  if (c.worker.checkpointJob.empty() && c.worker.rank >= 0)
    c.worker.checkpointJob = c.worker.rendezvous.empty()
                                 ? "@store " + c.worker.storeDir
                                 : "@" + c.worker.rendezvous;
  // A process started by torchrun, srun or a Kubernetes Job: its identity
  // from the launcher's variables, where no flag gave it.
  if (c.worker.rank < 0) {
    if (launch.found()) {
      c.worker.rank = launch.rank;
      c.worker.localRank = launch.localRank;
      c.worker.peersOnOtherHosts = launch.hosts > 1;
      if (c.worker.rendezvous.empty() && c.worker.storeDir.empty())
        c.worker.rendezvous = launch.rendezvous;
      if (c.worker.runId.empty())
        c.worker.runId = launch.runId;
      std::fprintf(stderr, "dtfm-run: %s\n", launch.describe().c_str());
    }
  }
  if (c.worker.rank >= 0) {
    if (plan.programs_size() > 1 && c.worker.rendezvous.empty() &&
        c.worker.storeDir.empty())
      return fail("--rank needs --rendezvous HOST:PORT or --store DIR");
    if (!loadToken(c, c.worker.jobToken))
      return 1;
    if (const char *password = std::getenv("DTFM_REDIS_PASSWORD"))
      c.worker.redisPassword = password;
    if (c.worker.iface.empty() &&
        !runtime::interfaceFromEnvironment(
            [](const char *name) { return std::getenv(name); },
            runtime::hostInterfaces(), c.worker.iface, c.worker.ifaceFrom,
            error))
      return fail(error);
    return runtime::runWorker(c.planPath, plan, c.worker);
  }
  if (!c.worker.rendezvous.empty() || !c.worker.storeDir.empty() ||
      !c.worker.runId.empty() || !c.worker.iface.empty())
    return fail("--rendezvous, --store, --run-id and --iface go with --rank "
                "(or a launcher's variables)");
  if (!c.jobTokenPath.empty())
    return fail("--job-token goes with --rendezvous, --agents, --agent or a "
                "launcher's variables (the workers this machine starts "
                "alone share a folder, not a connection)");
  if (plan.programs_size() == 1) {
    c.worker.rank = 0;
    return runtime::runWorker(c.planPath, plan, c.worker);
  }
  std::vector<std::string> arguments = {c.planPath, "--execute"};
  arguments.insert(arguments.end(), c.forwarded.begin(), c.forwarded.end());
  if (!c.logGiven)
    arguments.insert(arguments.end(), {"--log", c.worker.logPath});
  // The launcher claims the checkpoint directory before any worker starts
  // (a second run is refused at once) and its workers join the claim.
  std::unique_ptr<runtime::CheckpointClaim> claim;
  if (!c.worker.checkpointDir.empty()) {
    std::string job = runtime::CheckpointClaim::freshJobId();
    claim = runtime::CheckpointClaim::claim(c.worker.checkpointDir, job,
                                            error);
    if (!claim)
      return fail(error);
    arguments.insert(arguments.end(), {"--run-id", job});
  }
  std::vector<std::string> devices;
  for (const proto::DeviceProgram &p : plan.programs())
    devices.push_back(p.device());
  return runtime::launchLocalWorkers(arguments, devices, c.worker.timeout);
}

/// The report at --report: the plan's simulated iteration and, with a step
/// log (`logPath` non-empty), the training curves of the run writing it.
/// False with `error`; nothing written then.
bool writeReport(const Command &c, const proto::Plan &plan,
                 const plan::SimInput &input, const plan::SimResult &result,
                 const std::string &logPath, std::string &error) {
  std::vector<runtime::LoggedStep> steps;
  bool incomplete = false;
  if (!logPath.empty() &&
      !runtime::readStepLog(logPath, steps, incomplete, error))
    return false;
  if (incomplete)
    std::fprintf(stderr,
                 "dtfm-run: notice: %s: the last line is a record still "
                 "being written; the report leaves it out\n",
                 logPath.c_str());
  std::string title = std::string(logPath.empty() ? "dtfm plan: "
                                                  : "dtfm run: ") +
                      plan.model() + " on " + plan.cluster_name();
  return format::writeFileAtomically(
      c.reportPath,
      runtime::planReport(title, input, result,
                          logPath.empty() ? nullptr : &steps),
      error);
}

/// --execute --report: after a run that ended well, on the machine that
/// holds its step log (the launcher's, or rank 0's).
int reportAfterRun(const Command &c, const proto::Plan &plan) {
  std::string error;
  plan::SimInput input;
  plan::SimResult result;
  if (!plan::simulationInput(plan, input, error) ||
      !plan::simulate(input, result, error) ||
      !writeReport(c, plan, input, result, c.worker.logPath, error))
    return fail("the run finished, but its report was not written: " +
                error);
  std::printf("report written to %s\n", c.reportPath.c_str());
  return 0;
}

/// --simulate: one iteration on the cluster the plan carries, its trace
/// and report.
int simulateMode(const Command &c, const proto::Plan &plan) {
  std::string error;
  plan::SimInput input;
  if (!plan::simulationInput(plan, input, error))
    return fail(c.planPath + ": " + error);
  plan::SimResult result;
  if (!plan::simulate(input, result, error))
    return fail(c.planPath + ": " + error);

  // Outputs are written next to their final name, then renamed: never
  // half-written (format::writeFileAtomically); a failed report takes the
  // trace written before it along.
  if (!c.tracePath.empty() &&
      !format::writeFileAtomically(c.tracePath, plan::chromeTrace(result),
                                   error))
    return fail(error);
  if (!c.reportPath.empty()) {
    if (!writeReport(c, plan, input, result,
                     c.logGiven ? c.worker.logPath : std::string(), error)) {
      struct stat st{};
      if (!c.tracePath.empty() && ::stat(c.tracePath.c_str(), &st) == 0 &&
          S_ISREG(st.st_mode))
        std::remove(c.tracePath.c_str());
      return fail(error);
    }
  }

  // Each device's memory as the runtime will allocate it, against its
  // capacity.
  std::vector<plan::DeviceMemory> memory;
  if (!plan::planMemory(plan, memory, error))
    return fail(c.planPath + ": " + error);
  bool fits = std::all_of(memory.begin(), memory.end(),
                          [](const auto &m) { return m.fits(); });

  std::string perPipeline; // uneven replicas: "4 2"
  for (int64_t count : input.pipelineMicroBatches)
    perPipeline += (perPipeline.empty() ? "" : " ") + std::to_string(count);
  if (c.json) {
    std::string list = perPipeline;
    std::replace(list.begin(), list.end(), ' ', ',');
    std::string peaks;
    for (const plan::DeviceMemory &m : memory)
      peaks += (peaks.empty() ? "" : ",") +
               std::to_string(static_cast<long long>(m.predicted.total()));
    std::string breakdown;
    for (const plan::DeviceMemory &m : memory)
      breakdown += (breakdown.empty() ? "" : ",") + m.predicted.json();
    std::printf("{\"plan\":\"%s\",\"cluster\":\"%s\",\"devices\":%zu,"
                "\"micro_batches\":%d,%s\"iteration_s\":%.9g,"
                "\"bubble_fraction\":%.6f,\"pflops\":%.9g,"
                "\"peak_memory_bytes\":[%s],\"memory\":[%s],"
                "\"memory_fits\":%s}\n",
                c.planPath.c_str(), plan.cluster_name().c_str(),
                input.programs.size(), input.microBatches,
                list.empty()
                    ? ""
                    : ("\"pipeline_micro_batches\":[" + list + "],").c_str(),
                result.iterationSeconds, result.bubbleFraction,
                result.achievedFlopsPerSecond() / 1e15, peaks.c_str(),
                breakdown.c_str(), fits ? "true" : "false");
    return 0;
  }
  std::printf("=== dtfm-run --simulate: %s ===\n", c.planPath.c_str());
  std::printf("model %s, cluster %s, %zu device programs, %s with %d "
              "micro-batches%s\n",
              plan.model().c_str(), plan.cluster_name().c_str(),
              input.programs.size(), plan.schedule().c_str(),
              input.microBatches,
              perPipeline.empty()
                  ? ""
                  : (" (uneven replicas: " + perPipeline + " per pipeline)")
                        .c_str());
  std::printf("iteration time      %.6g s\n", result.iterationSeconds);
  std::printf("bubble fraction     %.4f\n", result.bubbleFraction);
  std::printf("achieved            %.6g GFLOP/s (%.6g PFLOP/s)\n",
              result.achievedFlopsPerSecond() / 1e9,
              result.achievedFlopsPerSecond() / 1e15);
  std::printf("%-16s %12s %12s\n", "device", "busy s", "idle s");
  for (const plan::SimProgram &p : input.programs)
    std::printf("%-16s %12.6g %12.6g\n", p.device.c_str(),
                result.busySeconds[p.device], result.idleSeconds[p.device]);
  std::printf("%-16s %12s %12s\n", "device", "peak GB", "capacity GB");
  for (size_t r = 0; r < memory.size(); ++r) {
    const plan::DeviceMemory &m = memory[r];
    std::printf("%-16s %12.4f %12.4f%s%s%s\n", m.device.c_str(),
                m.predicted.total() / 1e9, m.capacityBytes / 1e9,
                m.predicted.shardedState ? "  optimizer state sharded" : "",
                format::sharedPart(plan, plan.programs(static_cast<int>(r)))
                        .recompute()
                    ? "  activations recomputed"
                    : "",
                m.fits() ? "" : "  over capacity");
  }
  std::printf("%-24s %14s\n", "link", "bytes");
  for (const auto &[link, bytes] : result.linkBytes)
    std::printf("%-24s %14.0f\n", link.c_str(), bytes);
  if (!c.tracePath.empty())
    std::printf("trace written to %s\n", c.tracePath.c_str());
  if (!c.reportPath.empty())
    std::printf("report written to %s\n", c.reportPath.c_str());
  return 0;
}

} // namespace

static int runCommand(int argc, char **argv) {
  Command c;
  if (std::optional<int> done = parseCommandLine(argc, argv, c))
    return *done;
  if (c.newJobToken) {
    if (argc != 2)
      return fail("--new-job-token goes alone: it prints a fresh job token");
    std::string error, token = runtime::freshJobToken(error);
    if (token.empty())
      return fail(error);
    std::printf("%s\n", token.c_str());
    return 0;
  }
  if (!c.roots.empty() && c.agent.coordinator.empty())
    return fail("--root goes with --agent (the folders the coordinator's "
                "paths must lie in)");
  if (!c.agent.coordinator.empty())
    return agentMode(c, argc, argv);
  if (!c.agentDevices.empty() || !c.joinRequestPath.empty())
    return fail("--devices and --join-request go with --agent HOST:PORT");
  if (!c.joinDir.empty())
    return joinMode(c);
  if (c.planPath.empty())
    return fail(std::string("no plan file given\n") + kUsage);

  // On an arena: a plan of thousands of devices is millions of small
  // messages, and allocating and freeing them one by one was a third of a
  // simulation at 1024 devices.
  google::protobuf::Arena arena;
  proto::Plan &plan = *google::protobuf::Arena::CreateMessage<proto::Plan>(&arena);
  std::string error;
  // The whole plan is checked before anything runs (or any worker starts).
  if (!format::readPlanFile(c.planPath, plan, error) ||
      !plan::verifyPlan(plan, c.planPath, error))
    return fail(error);
  if (!c.replanWithout.empty() || !c.replanDir.empty())
    return replanMode(c, plan);
  if (std::optional<int> bad = checkModeFlags(argc, argv, c, plan))
    return *bad;
  if (!c.executeFlag)
    return simulateMode(c, plan);
  int code = executeMode(c, plan, argc, argv);
  // The step log is on this machine unless this process is a worker of
  // another rank than 0.
  if (code == 0 && !c.reportPath.empty() && c.worker.rank <= 0)
    return reportAfterRun(c, plan);
  return code;
}

int main(int argc, char **argv) {
  int code = runCommand(argc, argv);
  // What was printed must have arrived: a full disk or a closed pipe under
  // `--simulate > out.txt` is an error, not a silent success.
  if (std::fflush(stdout) != 0 || std::ferror(stdout)) {
    std::fprintf(stderr, "dtfm-run: error: cannot write the standard output "
                         "(%s)\n",
                 std::strerror(errno));
    return code == 0 ? 1 : code;
  }
  return code;
}
