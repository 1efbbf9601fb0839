//===- Elastic.cpp - Re-plan and go on when a device is lost --------------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//

#include "dtfm/Runtime/Elastic.h"
#include "dtfm/Format/PlanFile.h"
#include "dtfm/Format/PlanInputs.h"
#include "dtfm/Format/TensorFile.h"
#include "dtfm/Plan/SimInput.h"
#include "dtfm/Plan/Simulator.h"
#include "dtfm/Plan/Verifier.h"
#include "dtfm/Planner/Cluster.h"
#include "dtfm/Runtime/Agents.h"
#include "dtfm/Runtime/Checkpoints.h"
#include "dtfm/Runtime/Launcher.h"
#include "dtfm/Runtime/StepReport.h"

#include "plan.pb.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <fstream>
#include <limits>
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
  plan::SimInput input;
  plan::SimResult result;
  std::string error;
  if (!plan::simulationInput(plan, input, error) ||
      !plan::simulate(input, result, error))
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
    if (std::optional<int64_t> logged = loggedStep(line))
      step = std::max(step, *logged);
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
                                   O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW,
                                   0644);
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
    std::string error; // unknown: "./dtfm-opt", which checkElastic refuses
    dir = folderOf(thisExecutable(error));
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
  if (!planner::clusterFromPlan(plan, cluster, error))
    return false;
  for (const std::string &name : lost)
    if (std::none_of(cluster.devices.begin(), cluster.devices.end(),
                     [&](const planner::Device &d) { return d.name == name; })) {
      error = "no device '" + name + "' in the plan's cluster '" +
              cluster.name + "'";
      return false;
    }
  return replanOn(plan, planner::withoutDevices(cluster, lost), dir, options,
                  out, error);
}

bool dtfm::runtime::replanOn(const proto::Plan &plan,
                             const planner::Cluster &survivors,
                             const std::string &dir,
                             const ElasticOptions &options, Replan &out,
                             std::string &error) {
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
      !plan::verifyPlan(*out.plan, out.path, error))
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

namespace {

/// Creates DIR/replan-<n> and its checkpoints folder; false with `error`.
bool makeReplanDir(const std::string &checkpointDir, int n, std::string &dir,
                   std::string &error) {
  dir = checkpointDir + "/replan-" + std::to_string(n);
  for (const std::string &path : {dir, dir + "/checkpoints"})
    if (::mkdir(path.c_str(), 0755) != 0 && errno != EEXIST) {
      error = "cannot create " + path + ": " + std::strerror(errno);
      return false;
    }
  return true;
}

/// The join requests in `joinsDir` not seen before, read and checked; a
/// request that is refused says why in one line and is renamed
/// `<file>.refused`.
std::vector<planner::JoinRequest>
freshJoins(const std::string &joinsDir, std::set<std::string> &seen) {
  std::vector<planner::JoinRequest> fresh;
  std::vector<std::string> names;
  if (DIR *dir = ::opendir(joinsDir.c_str())) {
    while (struct dirent *entry = ::readdir(dir)) {
      std::string name = entry->d_name;
      const std::string suffix = ".textproto";
      if (name.size() > suffix.size() &&
          name.compare(name.size() - suffix.size(), suffix.size(), suffix) ==
              0 &&
          !seen.count(name))
        names.push_back(name);
    }
    ::closedir(dir);
  }
  std::sort(names.begin(), names.end());
  for (const std::string &name : names) {
    seen.insert(name);
    std::string path = joinsDir + "/" + name, text, error;
    planner::JoinRequest request;
    if (!format::readWholeFile(path, text, error) ||
        !planner::parseJoinRequest(text, path, request, error)) {
      std::printf("dtfm-run: elastic: refusing a join request: %s\n",
                  error.c_str());
      std::fflush(stdout);
      std::rename(path.c_str(), (path + ".refused").c_str());
      continue;
    }
    fresh.push_back(std::move(request));
  }
  return fresh;
}

/// `cluster` with every request's device added in turn; a request that
/// does not fit is refused in one line and left out.
planner::Cluster withJoins(planner::Cluster cluster,
                           std::vector<planner::JoinRequest> &requests) {
  std::vector<planner::JoinRequest> kept;
  for (planner::JoinRequest &request : requests) {
    planner::Cluster grown;
    std::string error;
    if (!planner::withJoinedDevice(cluster, request, grown, error)) {
      std::printf("dtfm-run: elastic: refusing %s's join request: %s\n",
                  request.device.name.c_str(), error.c_str());
      std::fflush(stdout);
      continue;
    }
    cluster = std::move(grown);
    kept.push_back(std::move(request));
  }
  requests = std::move(kept);
  return cluster;
}

/// Devices of the run's first cluster that an agent serves again after
/// they were lost (a restarted pod, a host back): join requests with their
/// first description, their links taken like a device left of their node,
/// else of their region, else the first device left. `asked` keeps each
/// return to one request until the device is lost again.
std::vector<planner::JoinRequest>
returnedDevices(const planner::Cluster &first, const planner::Cluster &current,
                const std::set<std::string> &served,
                std::set<std::string> &asked) {
  std::vector<planner::JoinRequest> back;
  if (current.devices.empty())
    return back;
  auto present = [&](const std::string &name) {
    for (const planner::Device &d : current.devices)
      if (d.name == name)
        return true;
    return false;
  };
  for (const planner::Device &d : first.devices) {
    if (!served.count(d.name) || present(d.name) || asked.count(d.name))
      continue;
    const planner::Device *like = &current.devices.front();
    for (const planner::Device &c : current.devices)
      if (c.region == d.region && (like->region != d.region ||
                                   (c.node == d.node && like->node != d.node)))
        like = &c;
    planner::JoinRequest request;
    request.device = d;
    request.linksLike = like->name;
    asked.insert(d.name);
    back.push_back(std::move(request));
  }
  return back;
}

std::string namesOf(const std::vector<planner::JoinRequest> &requests) {
  std::string text;
  for (const planner::JoinRequest &r : requests)
    text += (text.empty() ? "" : ", ") + r.device.name;
  return text;
}

} // namespace

std::string dtfm::runtime::joinDirectory(const std::string &checkpointDir) {
  return checkpointDir + "/joins";
}

int dtfm::runtime::runElastic(const std::string &planPath,
                              const proto::Plan &firstPlan,
                              const std::vector<std::string> &workerArguments,
                              const std::string &checkpointDir,
                              const std::string &resumeFrom,
                              const std::string &logPath,
                              std::chrono::milliseconds timeout,
                              const ElasticOptions &options,
                              AgentCoordinator *agents) {
  proto::Plan plan = firstPlan;
  WorkerLauncher launch = launchLocalWorkersWithOutcome;
  if (agents) {
    launch = [agents](const std::vector<std::string> &arguments,
                      const std::vector<std::string> &devices,
                      std::chrono::milliseconds limit,
                      const LaunchHooks *hooks) {
      return agents->launch(arguments, devices, limit, hooks);
    };
    std::vector<std::string> names;
    for (const proto::PlanDevice &d : plan.devices())
      names.push_back(d.name());
    agents->setKnownDevices(names);
    std::vector<std::string> devices = devicesOf(plan);
    std::printf("dtfm-run: elastic: waiting for the agents of %zu devices "
                "on port %d\n",
                devices.size(), agents->port());
    std::fflush(stdout);
    std::string error;
    if (!agents->waitForDevices(devices, error))
      return stop(error);
  }
  std::string currentPlanPath = planPath;
  std::string currentCheckpoints = checkpointDir;
  std::string resumeDir = resumeFrom;
  std::string joinsDir = joinDirectory(checkpointDir);
  if (::mkdir(joinsDir.c_str(), 0755) != 0 && errno != EEXIST)
    return stop("cannot create " + joinsDir + ": " + std::strerror(errno));
  // Devices that joined while using them was not predicted faster: they
  // stand by, and every later plan may use them.
  std::vector<planner::JoinRequest> standby;
  std::set<std::string> seenJoins;
  // With agents, a lost device whose agent comes back (a restarted pod or
  // task) joins again.
  planner::Cluster firstCluster;
  std::set<std::string> returnsAsked;
  if (agents) {
    std::string error;
    if (!planner::clusterFromPlan(firstPlan, firstCluster, error))
      return stop(planPath + ": " + error);
  }
  for (int replans = 0;; ++replans) {
    std::string stopFile = currentCheckpoints + "/stop";
    std::remove(stopFile.c_str());
    std::vector<std::string> args = {currentPlanPath, "--execute"};
    args.insert(args.end(), workerArguments.begin(), workerArguments.end());
    args.insert(args.end(), {"--checkpoint-dir", currentCheckpoints,
                             "--stop-file", stopFile});
    if (!resumeDir.empty())
      args.insert(args.end(), {"--resume-from", resumeDir});
    std::vector<std::string> devices = devicesOf(plan);
    planner::Cluster cluster;
    std::string error;
    if (!planner::clusterFromPlan(plan, cluster, error))
      return stop(currentPlanPath + ": " + error);
    cluster = withJoins(cluster, standby);

    // Joins: planned while the workers run; when the new plan is predicted
    // faster, the workers stop at their next checkpoint and it takes over.
    proto::Plan joined;
    Replan joinMade;
    joinMade.plan = &joined;
    std::vector<planner::JoinRequest> joining;
    std::string joinDir;
    LaunchHooks hooks;
    hooks.stopFile = stopFile;
    hooks.poll = [&]() {
      if (replans >= options.maxReplans)
        return false;
      std::vector<planner::JoinRequest> fresh = freshJoins(joinsDir, seenJoins);
      if (agents) {
        for (planner::JoinRequest &r : agents->takeJoins())
          fresh.push_back(std::move(r));
        for (planner::JoinRequest &r :
             returnedDevices(firstCluster, cluster, agents->servedDevices(),
                             returnsAsked))
          fresh.push_back(std::move(r));
      }
      if (fresh.empty())
        return false;
      planner::Cluster target = withJoins(cluster, fresh);
      if (fresh.empty())
        return false;
      std::string problem;
      if (!makeReplanDir(checkpointDir, replans + 1, joinDir, problem) ||
          !replanOn(plan, target, joinDir, options, joinMade, problem)) {
        std::printf("dtfm-run: elastic: %s asked to join; planning with it "
                    "failed: %s; going on without it\n",
                    namesOf(fresh).c_str(), problem.c_str());
        std::fflush(stdout);
        return false;
      }
      double before = predictedIteration(plan);
      double after = predictedIteration(joined);
      if (!(after >= 0 && before >= 0 && after < before)) {
        std::printf("dtfm-run: elastic: %s joined and stands by: predicted "
                    "%s per iteration with it, %s without\n",
                    namesOf(fresh).c_str(), seconds(after).c_str(),
                    seconds(before).c_str());
        std::fflush(stdout);
        standby.insert(standby.end(), fresh.begin(), fresh.end());
        cluster = target;
        return false;
      }
      joining = std::move(fresh);
      return true;
    };
    LaunchOutcome outcome = launch(args, devices, timeout, &hooks);
    bool stopped =
        outcome.status == 0 &&
        std::any_of(outcome.ends.begin(), outcome.ends.end(),
                    [](WorkerEnd e) { return e == WorkerEnd::Stopped; });
    if (outcome.status == 0 && !stopped)
      return 0;
    if (stopped) {
      int64_t step = newestCompleteStep(currentCheckpoints, devices);
      if (step < 0)
        return stop("the workers stopped for " + namesOf(joining) +
                    " to join, but no checkpoint of theirs is complete");
      // Devices that stood by and the new plan uses are named too.
      std::vector<std::string> used = devicesOf(joined);
      std::vector<planner::JoinRequest> woken;
      for (const planner::JoinRequest &r : standby)
        if (std::count(used.begin(), used.end(), r.device.name))
          woken.push_back(r);
      std::string who = namesOf(joining);
      if (!woken.empty())
        who += " (with " + namesOf(woken) + ", standing by)";
      std::printf("dtfm-run: elastic: %s joined; re-planned in %.2f s: %s; "
                  "resuming from step %lld (0 steps lost); plan %s\n",
                  who.c_str(), joinMade.seconds,
                  describeReplan(plan, joined).c_str(),
                  static_cast<long long>(step), joinMade.path.c_str());
      std::fflush(stdout);
      plan = std::move(joined);
      currentPlanPath = joinMade.path;
      resumeDir = currentCheckpoints;
      currentCheckpoints = joinDir + "/checkpoints";
      standby.clear(); // the new plan's cluster holds them
      continue;
    }
    Clock::time_point failedAt = Clock::now();
    // A join planned but not reached stands by for the next plan.
    if (!joining.empty()) {
      cluster = withJoins(cluster, joining);
      standby.insert(standby.end(), joining.begin(), joining.end());
    }

    std::vector<std::string> lost;
    std::string why;
    for (size_t rank = 0; rank < devices.size(); ++rank)
      if (deviceLost(outcome.ends[rank])) {
        lost.push_back(devices[rank]);
        why += (why.empty() ? "" : ", ") + devices[rank] +
               (outcome.ends[rank] == WorkerEnd::Hung ? std::string(" (hung)")
                : outcome.ends[rank] == WorkerEnd::Unreachable
                    ? std::string(" (host lost)")
                    : " (signal " + std::to_string(outcome.signals[rank]) +
                          ")");
      }
    if (lost.empty())
      return stop("no device was lost (a worker failed by itself, above); "
                  "not re-planning");
    for (const std::string &name : lost)
      returnsAsked.erase(name); // it may come back again

    // The generation the next plan resumes from: this plan's newest
    // complete one, else the one this plan resumed from.
    int64_t step = newestCompleteStep(currentCheckpoints, devices);
    if (step >= 0) {
      resumeDir = currentCheckpoints;
      // A newer generation some devices wrote before the loss would let
      // the next plan resume later (the replicas' files assemble it), past
      // a step rank 0 may never have logged (it logs a step before its own
      // checkpoint): the log would skip it. Only the complete one stays.
      for (const Generation &generation : listGenerations(resumeDir))
        if (generation.step > step)
          for (const auto &[device, planHash] : generation.files)
            CheckpointStore(resumeDir, device, planHash)
                .prune(std::numeric_limits<size_t>::max(), step);
    } else {
      std::vector<Generation> earlier =
          resumeDir.empty() ? std::vector<Generation>()
                            : listGenerations(resumeDir);
      step = earlier.empty() ? 0 : earlier.front().step;
    }
    // Rank 0 logs a step once the next is under way (and before its
    // checkpoint): the log may be a step newer than the checkpoint.
    int64_t reached = std::max(lastLoggedStep(logPath), step);
    std::string keep =
        step > 0 ? "the checkpoint of step " + std::to_string(step) +
                       " is intact in " + resumeDir
                 : "no checkpoint was written yet";

    // Devices the plan left idle, and those that joined, stand by: they
    // count.
    std::vector<std::string> gone = lost;
    if (agents) {
      // A device no agent serves now cannot take part either.
      std::set<std::string> served = agents->servedDevices();
      for (const planner::Device &d : cluster.devices)
        if (!served.count(d.name) &&
            std::find(gone.begin(), gone.end(), d.name) == gone.end())
          gone.push_back(d.name);
    }
    planner::Cluster survivors = planner::withoutDevices(cluster, gone);
    int left = static_cast<int>(survivors.devices.size());
    if (replans >= options.maxReplans)
      return stop("lost " + why + " after " + std::to_string(replans) +
                  " re-plans (--max-replans " +
                  std::to_string(options.maxReplans) + "); stopping: " + keep);
    if (left < options.minDevices)
      return stop("lost " + why + ": " + std::to_string(left) +
                  " devices left, fewer than --min-devices " +
                  std::to_string(options.minDevices) + "; stopping: " + keep);

    std::string dir;
    if (!makeReplanDir(checkpointDir, replans + 1, dir, error))
      return stop(error);
    proto::Plan next;
    Replan made;
    made.plan = &next;
    if (!replanOn(plan, survivors, dir, options, made, error))
      return stop("lost " + why + "; planning on the " +
                  std::to_string(left) + " devices left failed: " + error +
                  "; stopping: " + keep);
    double downtime =
        std::chrono::duration<double>(Clock::now() - failedAt).count();
    long long stepsLost = std::max<int64_t>(0, reached - step);
    std::printf("dtfm-run: elastic: lost %s at step %lld; re-planned in %.2f "
                "s (%.2f s after the failure): %s; resuming from step %lld "
                "(%lld step%s lost); plan %s\n",
                why.c_str(), static_cast<long long>(reached), made.seconds,
                downtime, describeReplan(plan, next).c_str(),
                static_cast<long long>(step), stepsLost,
                stepsLost == 1 ? "" : "s", made.path.c_str());
    std::fflush(stdout);
    plan = std::move(next);
    currentPlanPath = made.path;
    currentCheckpoints = dir + "/checkpoints";
    standby.clear();
    if (step == 0)
      resumeDir.clear();
  }
}
