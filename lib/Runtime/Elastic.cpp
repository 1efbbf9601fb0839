//===- Elastic.cpp - Re-plan and go on when a device is lost --------------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//

#include "dtfm/Runtime/Elastic.h"
#include "dtfm/Format/PlanFile.h"
#include "dtfm/Format/PlanInputs.h"
#include "dtfm/Format/TensorFile.h"
#include "dtfm/Planner/Cluster.h"
#include "dtfm/Runtime/Checkpoints.h"
#include "dtfm/Runtime/Launcher.h"
#include "dtfm/Runtime/PlanLoader.h"
#include "dtfm/Runtime/PlanVerifier.h"
#include "dtfm/Runtime/Simulator.h"

#include "plan.pb.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <set>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

extern char **environ;

using namespace dtfm;
using namespace dtfm::runtime;
using Clock = std::chrono::steady_clock;

namespace {

/// A recorded planning input of the plan, or "" when it has none.
std::string recorded(const proto::Plan &plan, const char *name) {
  auto it = plan.module_attrs().find(name);
  return it == plan.module_attrs().end() ? "" : it->second.s();
}

std::string folderOf(const std::string &path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

bool executable(const std::string &path) {
  return ::access(path.c_str(), X_OK) == 0;
}

/// "dp 2 x pp 4" (and " x tp 2"), on N devices.
std::string shapeOf(const proto::Plan &plan) {
  int64_t pipelines = 0, stages = 0, tensorParallel = 1;
  for (const proto::DeviceProgram &p : plan.programs()) {
    pipelines = std::max(pipelines, p.pipeline() + 1);
    stages = std::max(stages, p.stage() + 1);
    tensorParallel = std::max<int64_t>(tensorParallel, p.tp_group_size());
  }
  std::string shape = "dp " + std::to_string(pipelines) + " x pp " +
                      std::to_string(stages);
  if (tensorParallel > 1)
    shape += " x tp " + std::to_string(tensorParallel);
  return shape + " on " + std::to_string(plan.programs_size()) + " devices";
}

/// The simulator's iteration time of `plan`, or -1 when it cannot say.
double predictedIteration(const proto::Plan &plan) {
  SimInput input;
  SimResult result;
  std::string error;
  if (!simulationInput(plan, input, error) || !simulate(input, result, error))
    return -1;
  return result.iterationSeconds;
}

std::string seconds(double value) {
  if (value < 0)
    return "unknown";
  char text[32];
  std::snprintf(text, sizeof text, "%.4g s", value);
  return text;
}

/// The last step rank 0 logged (0: none).
int64_t lastLoggedStep(const std::string &logPath) {
  std::ifstream in(logPath);
  std::string line;
  int64_t step = 0;
  while (std::getline(in, line)) {
    size_t at = line.find("\"step\":");
    if (at != std::string::npos)
      step = std::max<int64_t>(step, std::atoll(line.c_str() + at + 7));
  }
  return step;
}

/// The newest generation in `dir` that every one of `devices` wrote, or -1.
int64_t newestCompleteStep(const std::string &dir,
                           const std::vector<std::string> &devices) {
  for (const Generation &generation : listGenerations(dir)) {
    std::set<std::string> wrote;
    for (const auto &[device, hash] : generation.files)
      wrote.insert(device);
    if (std::all_of(devices.begin(), devices.end(),
                    [&](const std::string &d) { return wrote.count(d); }))
      return generation.step;
  }
  return -1;
}

std::vector<std::string> devicesOf(const proto::Plan &plan) {
  std::vector<std::string> devices;
  for (const proto::DeviceProgram &p : plan.programs())
    devices.push_back(p.device());
  return devices;
}

/// Runs `args` (args[0] the program) with stdout and stderr into
/// `logPath`, bounded by `deadline`. False with a one-line `error`.
bool runProgram(const std::vector<std::string> &args,
                const std::string &logPath, Clock::time_point deadline,
                std::string &error) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, logPath.c_str(),
                                   O_WRONLY | O_CREAT | O_APPEND, 0644);
  posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
  std::vector<std::string> copies = args;
  std::vector<char *> argv;
  for (std::string &a : copies)
    argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid;
  int spawned = ::posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(),
                              environ);
  posix_spawn_file_actions_destroy(&actions);
  std::string name = args[0].substr(args[0].rfind('/') + 1);
  if (spawned != 0) {
    error = "cannot start " + args[0] + ": " + std::strerror(spawned);
    return false;
  }
  int status = 0;
  while (true) {
    pid_t done = ::waitpid(pid, &status, WNOHANG);
    if (done == pid)
      break;
    if (done < 0 && errno != EINTR) {
      error = "lost " + name + ": " + std::strerror(errno);
      return false;
    }
    if (Clock::now() >= deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      error = name + " did not finish within --planning-timeout";
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
    return true;
  // The program's own first error line says what is wrong.
  std::ifstream in(logPath);
  std::string line, first;
  while (std::getline(in, line))
    if (line.find("error") != std::string::npos) {
      first = line;
      break;
    }
  error = name + " failed" + (first.empty() ? "" : ": " + first) + " (" +
          logPath + ")";
  return false;
}

/// The compiler's two programs.
struct Compiler {
  std::string opt, translate;
};

Compiler compilerIn(const ElasticOptions &options) {
  std::string dir = options.compilerDir;
  if (dir.empty()) {
    char self[4096];
    ssize_t length = ::readlink("/proc/self/exe", self, sizeof self - 1);
    self[length > 0 ? length : 0] = '\0';
    dir = folderOf(self);
  }
  return {dir + "/dtfm-opt", dir + "/dtfm-translate"};
}

int stop(const std::string &message) {
  std::fprintf(stderr, "dtfm-run: error: elastic: %s\n", message.c_str());
  return 1;
}

} // namespace

bool dtfm::runtime::replanWithout(const proto::Plan &plan,
                                  const std::vector<std::string> &lost,
                                  const std::string &dir,
                                  const ElasticOptions &options, Replan &out,
                                  std::string &error) {
  planner::Cluster cluster;
  if (!clusterFromPlan(plan, cluster, error))
    return false;
  for (const std::string &name : lost)
    if (std::none_of(cluster.devices.begin(), cluster.devices.end(),
                     [&](const planner::Device &d) { return d.name == name; })) {
      error = "no device '" + name + "' in the plan's cluster '" +
              cluster.name + "'";
      return false;
    }
  planner::Cluster survivors = planner::withoutDevices(cluster, lost);
  if (survivors.devices.empty()) {
    error = "no device would be left";
    return false;
  }
  if (recorded(plan, format::kPlanInputAttrName).empty()) {
    error = "the plan records no planning inputs (" +
            std::string(format::kPlanInputAttrName) + ")";
    return false;
  }
  std::string model = dir + "/model.mlir";
  std::string clusterPath = dir + "/cluster.textproto";
  if (!format::writeFileAtomically(
          model, recorded(plan, format::kPlanInputAttrName), error) ||
      !planner::writeClusterFile(survivors, clusterPath, error))
    return false;

  std::vector<format::PlanOption> items;
  if (!format::parsePlanOptions(recorded(plan, format::kPlanOptionsAttrName),
                                items, error)) {
    error = "the plan's recorded options: " + error;
    return false;
  }
  format::setPlanOption(items, "cluster", clusterPath);
  // The same samples per step, in whatever shape fits the devices left.
  double samples = format::samplesPerStep(plan);
  std::optional<std::string> globalBatch =
      format::findPlanOption(items, "global-batch");
  if (!globalBatch || *globalBatch == "0") {
    char text[32];
    std::snprintf(text, sizeof text, "%.0f", samples);
    format::setPlanOption(items, "global-batch", text);
  }
  format::setPlanOption(items, "dp", "0");
  format::setPlanOption(items, "pp", "0");

  Compiler compiler = compilerIn(options);
  std::string planned = dir + "/planned.mlir";
  out.path = dir + "/plan.pb";
  std::string log = dir + "/compiler.log";
  Clock::time_point start = Clock::now();
  Clock::time_point deadline = start + options.planningTimeout;
  if (!runProgram({compiler.opt, model,
                   "--dtfm-plan=" + format::joinPlanOptions(items), "-o",
                   planned},
                  log, deadline, error) ||
      !runProgram({compiler.translate, "--export-plan", "--cluster",
                   clusterPath, planned, "-o", out.path},
                  log, deadline, error))
    return false;
  out.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  if (!format::readPlanFile(out.path, *out.plan, error) ||
      !verifyPlan(*out.plan, out.path, error))
    return false;
  if (format::samplesPerStep(*out.plan) != samples) {
    char line[200];
    std::snprintf(line, sizeof line,
                  "%s takes %.0f samples per step, not %.0f: the data would "
                  "not continue where it stopped",
                  out.path.c_str(), format::samplesPerStep(*out.plan), samples);
    error = line;
    return false;
  }
  return true;
}

std::string dtfm::runtime::describeReplan(const proto::Plan &before,
                                          const proto::Plan &after) {
  return shapeOf(before) + " -> " + shapeOf(after) + ", predicted " +
         seconds(predictedIteration(before)) + " -> " +
         seconds(predictedIteration(after)) + " per iteration";
}

bool dtfm::runtime::checkElastic(const proto::Plan &plan,
                                 const std::string &planPath,
                                 ElasticOptions &options, std::string &error) {
  if (recorded(plan, format::kPlanInputAttrName).empty() ||
      recorded(plan, format::kPlanOptionsAttrName).empty()) {
    error = planPath + ": records no planning inputs (" +
            format::kPlanInputAttrName + ", " +
            format::kPlanOptionsAttrName +
            "), so it cannot be planned again: plan it with --dtfm-plan to "
            "run it --elastic";
    return false;
  }
  Compiler compiler = compilerIn(options);
  for (const std::string &program : {compiler.opt, compiler.translate})
    if (!executable(program)) {
      error = "--elastic re-plans with " + program +
              ", which is not there (--compiler-dir DIR names where "
              "dtfm-opt and dtfm-translate are)";
      return false;
    }
  if (options.minDevices > plan.devices_size()) {
    error = "--min-devices " + std::to_string(options.minDevices) +
            " is more than the " + std::to_string(plan.devices_size()) +
            " devices of the plan's cluster";
    return false;
  }
  return true;
}

int dtfm::runtime::runElastic(const std::string &planPath,
                              const proto::Plan &firstPlan,
                              const std::vector<std::string> &workerArguments,
                              const std::string &checkpointDir,
                              const std::string &resumeFrom,
                              const std::string &logPath,
                              std::chrono::milliseconds timeout,
                              const ElasticOptions &options) {
  proto::Plan plan = firstPlan;
  std::string currentPlanPath = planPath;
  std::string currentCheckpoints = checkpointDir;
  std::string resumeDir = resumeFrom;
  for (int replans = 0;; ++replans) {
    std::vector<std::string> args = {currentPlanPath, "--execute"};
    args.insert(args.end(), workerArguments.begin(), workerArguments.end());
    args.insert(args.end(), {"--checkpoint-dir", currentCheckpoints});
    if (!resumeDir.empty())
      args.insert(args.end(), {"--resume-from", resumeDir});
    std::vector<std::string> devices = devicesOf(plan);
    LaunchOutcome outcome =
        launchLocalWorkersWithOutcome(args, devices, timeout);
    if (outcome.status == 0)
      return 0;
    Clock::time_point failedAt = Clock::now();

    std::vector<std::string> lost;
    std::string why;
    for (size_t rank = 0; rank < devices.size(); ++rank)
      if (outcome.ends[rank] == WorkerEnd::Killed ||
          outcome.ends[rank] == WorkerEnd::Hung) {
        lost.push_back(devices[rank]);
        why += (why.empty() ? "" : ", ") + devices[rank] +
               (outcome.ends[rank] == WorkerEnd::Hung
                    ? std::string(" (hung)")
                    : " (signal " + std::to_string(outcome.signals[rank]) +
                          ")");
      }
    if (lost.empty())
      return stop("no device was lost (a worker failed by itself, above); "
                  "not re-planning");

    // The generation the next plan resumes from: this plan's newest
    // complete one, else the one this plan resumed from.
    int64_t step = newestCompleteStep(currentCheckpoints, devices);
    if (step >= 0) {
      resumeDir = currentCheckpoints;
    } else {
      std::vector<Generation> earlier =
          resumeDir.empty() ? std::vector<Generation>()
                            : listGenerations(resumeDir);
      step = earlier.empty() ? 0 : earlier.front().step;
    }
    int64_t reached = lastLoggedStep(logPath);
    std::string keep =
        step > 0 ? "the checkpoint of step " + std::to_string(step) +
                       " is intact in " + resumeDir
                 : "no checkpoint was written yet";

    // Devices the plan left idle stand by: they count.
    int left = plan.devices_size() - static_cast<int>(lost.size());
    if (replans >= options.maxReplans)
      return stop("lost " + why + " after " + std::to_string(replans) +
                  " re-plans (--max-replans " +
                  std::to_string(options.maxReplans) + "); stopping: " + keep);
    if (left < options.minDevices)
      return stop("lost " + why + ": " + std::to_string(left) +
                  " devices left, fewer than --min-devices " +
                  std::to_string(options.minDevices) + "; stopping: " + keep);

    std::string dir = checkpointDir + "/replan-" + std::to_string(replans + 1);
    std::string error;
    if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST)
      return stop("cannot create " + dir + ": " + std::strerror(errno));
    std::string newCheckpoints = dir + "/checkpoints";
    if (::mkdir(newCheckpoints.c_str(), 0755) != 0 && errno != EEXIST)
      return stop("cannot create " + newCheckpoints + ": " +
                  std::strerror(errno));
    proto::Plan next;
    Replan made;
    made.plan = &next;
    if (!replanWithout(plan, lost, dir, options, made, error))
      return stop("lost " + why + "; planning on the " +
                  std::to_string(left) + " devices left failed: " + error +
                  "; stopping: " + keep);
    double downtime =
        std::chrono::duration<double>(Clock::now() - failedAt).count();
    std::printf("dtfm-run: elastic: lost %s at step %lld; re-planned in %.2f "
                "s (%.2f s after the failure): %s; resuming from step %lld "
                "(%lld steps lost); plan %s\n",
                why.c_str(), static_cast<long long>(reached), made.seconds,
                downtime, describeReplan(plan, next).c_str(),
                static_cast<long long>(step),
                static_cast<long long>(std::max<int64_t>(0, reached - step)),
                made.path.c_str());
    std::fflush(stdout);
    plan = std::move(next);
    currentPlanPath = made.path;
    currentCheckpoints = newCheckpoints;
    if (step == 0)
      resumeDir.clear();
  }
}
