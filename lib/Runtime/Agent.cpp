//===- Agent.cpp - Elastic runs across hosts: an agent --------------------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//
//
// `dtfm-run --agent`: on a host of an elastic run, it serves the host's
// devices to the coordinator (AgentCoordinator.cpp), starts the workers it
// is asked for, says when each ends, and takes them down with it when the
// coordinator goes.
//
//===----------------------------------------------------------------------===//

#include "dtfm/Format/PlanFile.h"
#include "dtfm/Format/TensorFile.h"
#include "dtfm/Plan/Verifier.h"
#include "dtfm/Runtime/Agents.h"
#include "dtfm/Runtime/JobToken.h"
#include "dtfm/Runtime/Launcher.h"
#include "dtfm/Runtime/Transport.h"
#include "dtfm/Runtime/Worker.h"
#include "dtfm/Support/PluginFlags.h"

#include "AgentProtocol.h"
#include "JobAuth.h"
#include "Rendezvous.h"
#include "plan.pb.h"

#include <climits>
#include <map>

#include <poll.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>

extern char **environ;

using namespace dtfm;
using namespace dtfm::runtime;
using namespace dtfm::runtime::agents;
using namespace dtfm::runtime::rendezvous;

std::string dtfm::runtime::pathOutsideRoots(
    const std::string &what, const std::string &path, const std::string &base,
    const std::vector<std::string> &roots) {
  if (path.find('\0') != std::string::npos)
    return what + " holds a NUL byte";
  if (path.empty())
    return what + " is empty";
  std::string whole = path[0] == '/' ? path : base + "/" + path;
  for (size_t begin = 0; begin <= whole.size();) {
    size_t end = whole.find('/', begin);
    if (end == std::string::npos)
      end = whole.size();
    if (whole.compare(begin, end - begin, "..") == 0 && end - begin == 2)
      return what + " '" + printable(path) + "' has a '..' component";
    begin = end + 1;
  }
  // Resolved, links followed; an output may not exist yet, its folder must.
  char resolved[PATH_MAX];
  std::string real;
  if (::realpath(whole.c_str(), resolved)) {
    real = resolved;
  } else {
    size_t slash = whole.find_last_of('/');
    std::string folder = slash == 0 ? "/" : whole.substr(0, slash);
    if (!::realpath(folder.c_str(), resolved))
      return what + " '" + printable(path) +
             "': its folder does not exist on this host";
    real = std::string(resolved) + (std::string(resolved) == "/" ? "" : "/") +
           whole.substr(slash + 1);
  }
  for (const std::string &root : roots)
    if (root == "/" || real == root || real.rfind(root + "/", 0) == 0)
      return "";
  std::string list;
  for (const std::string &root : roots)
    list += (list.empty() ? "" : ", ") + root;
  return what + " '" + printable(path) + "' (" + printable(real) +
         ") lies outside this agent's roots (" + list + "; --root DIR)";
}

namespace {

/// The flags a coordinator may pass to the workers an agent starts, and
/// what their values are.
enum class ValueKind { None, Plain, Path, Plugin };
const std::map<std::string, ValueKind> &workerFlags() {
  static const std::map<std::string, ValueKind> flags = {
      {"--execute", ValueKind::None},
      {"--check-finite", ValueKind::None},
      {"--shape-links", ValueKind::None},
      {"--serial-slots", ValueKind::None},
      {"--eval-only", ValueKind::None},
      {"--steps", ValueKind::Plain},
      {"--checkpoint-every", ValueKind::Plain},
      {"--timeout", ValueKind::Plain},
      {"--calibration-steps", ValueKind::Plain},
      {"--mtbf", ValueKind::Plain},
      {"--seed", ValueKind::Plain},
      {"--eval-every", ValueKind::Plain},
      {"--eval-batches", ValueKind::Plain},
      {"--save-dtype", ValueKind::Plain},
      {"--weight-names", ValueKind::Plain},
      {"--data-dtype", ValueKind::Plain},
      {"--data-order", ValueKind::Plain},
      {"--backend", ValueKind::Plain},
      {"--matmul-precision", ValueKind::Plain},
      {"--gpu-attention", ValueKind::Plain},
      {"--run-id", ValueKind::Plain},
      {"--tokens", ValueKind::Path},
      {"--data", ValueKind::Path},
      {"--val-data", ValueKind::Path},
      {"--inputs", ValueKind::Path},
      {"--init-from", ValueKind::Path},
      {"--cluster", ValueKind::Path},
      {"--resume-from", ValueKind::Path},
      {"--checkpoint-dir", ValueKind::Path},
      {"--stop-file", ValueKind::Path},
      {"--log", ValueKind::Path},
      {"--trace", ValueKind::Path},
      {"--save-params", ValueKind::Path},
      {"--memory-report", ValueKind::Path},
      {std::string("--") + kLoadPluginFlag, ValueKind::Plugin},
  };
  return flags;
}

} // namespace

bool dtfm::runtime::workerFlagTakesPath(const std::string &flag) {
  auto known = workerFlags().find(flag);
  return known != workerFlags().end() && known->second == ValueKind::Path;
}

std::string
dtfm::runtime::workerArgumentsProblem(const std::vector<std::string> &arguments,
                                      const std::string &workdir,
                                      const AgentOptions &options) {
  if (arguments.size() < 2 || arguments[1] != "--execute" ||
      arguments[0].empty() || arguments[0][0] == '-')
    return "its worker arguments do not start with a plan and --execute";
  if (std::string problem =
          pathOutsideRoots("the plan", arguments[0], workdir, options.roots);
      !problem.empty())
    return problem;
  for (size_t i = 2; i < arguments.size(); ++i) {
    std::string flag = arguments[i], value;
    size_t equals = flag.find('=');
    bool joinedValue = equals != std::string::npos;
    if (joinedValue) {
      value = flag.substr(equals + 1);
      flag = flag.substr(0, equals);
    }
    auto known = workerFlags().find(flag);
    if (known == workerFlags().end())
      return "it passes " + printable(flag, 64) +
             ", which is not a worker flag an agent passes on";
    if (known->second == ValueKind::None) {
      if (joinedValue)
        return flag + " takes no value";
      continue;
    }
    if (!joinedValue) {
      if (i + 1 >= arguments.size())
        return flag + " has no value";
      value = arguments[++i];
    }
    if (value.find('\0') != std::string::npos)
      return flag + "'s value holds a NUL byte";
    if (known->second == ValueKind::Path) {
      if (std::string problem =
              pathOutsideRoots(flag, value, workdir, options.roots);
          !problem.empty())
        return problem;
    } else if (known->second == ValueKind::Plugin) {
      char mine[PATH_MAX], theirs[PATH_MAX];
      bool allowed = false;
      for (const std::string &plugin : options.plugins)
        allowed |= plugin == value ||
                   (::realpath(plugin.c_str(), mine) &&
                    ::realpath(value.c_str(), theirs) &&
                    std::string(mine) == theirs);
      if (!allowed)
        return "it asks the workers to load the plugin " + printable(value) +
               ", which this agent was not started with (an agent's workers "
               "load only the agent's own --" +
               kLoadPluginFlag + ")";
    }
  }
  return "";
}

namespace {

int agentError(const std::string &message) {
  std::fprintf(stderr, "dtfm-run: error: agent: %s\n", message.c_str());
  return 1;
}

struct Child {
  pid_t pid;
  long long launch;
  int rank;
};

void killAll(std::vector<Child> &children) {
  for (const Child &c : children)
    ::kill(c.pid, SIGKILL);
  for (const Child &c : children)
    ::waitpid(c.pid, nullptr, 0);
  children.clear();
}

/// Starts the workers a "start" message asks for; false with `error` when
/// the message is not one.
bool startWorkers(const Message &start, const std::string &host,
                  const std::string &self, const AgentOptions &options,
                  const std::vector<std::string> &served,
                  std::vector<Child> &children,
                  std::vector<std::pair<Child, int>> &unstarted,
                  std::string &error) {
  std::optional<long long> launch, port;
  if (start.size() >= 5) {
    launch = number(start[1], 1, 1LL << 40);
    port = number(start[2], 1, 65535);
  }
  if (!launch || !port || start[3].empty() || start[3][0] != '/') {
    error = "the coordinator sent a malformed start";
    return false;
  }
  if (std::string problem =
          pathOutsideRoots("its working directory", start[3], "/",
                           options.roots);
      !problem.empty()) {
    error = "the coordinator's start refused: " + problem;
    return false;
  }
  std::vector<std::string> arguments(start.begin() + 5, start.end());
  if (std::string problem =
          workerArgumentsProblem(arguments, start[3], options);
      !problem.empty()) {
    error = "the coordinator's start refused: " + problem;
    return false;
  }
  std::vector<std::pair<int, std::string>> ranks;
  for (const std::string &item : split(start[4])) {
    size_t colon = item.find(':');
    std::optional<long long> rank =
        colon == std::string::npos ? std::nullopt
                                   : number(item.substr(0, colon), 0, 1000000);
    if (!rank) {
      error = "the coordinator sent a malformed start";
      return false;
    }
    ranks.push_back({static_cast<int>(*rank), item.substr(colon + 1)});
  }
  // The plan must verify, and each rank run a device this agent serves.
  std::string planPath = arguments[0][0] == '/' ? arguments[0]
                                                : start[3] + "/" + arguments[0];
  proto::Plan plan;
  std::string why;
  if (!format::readPlanFile(planPath, plan, why) ||
      !plan::verifyPlan(plan, planPath, why)) {
    error = "the coordinator's start refused: " + why;
    return false;
  }
  for (auto &[rank, device] : ranks)
    if (rank >= plan.programs_size() ||
        plan.programs(rank).device() != device ||
        !std::count(served.begin(), served.end(), device)) {
      error = "the coordinator's start refused: rank " +
              std::to_string(rank) + " as " + printable(device, 64) +
              (rank >= plan.programs_size() ||
                       plan.programs(rank).device() != device
                   ? " is not that rank's device in " + planPath
                   : ", a device this agent does not serve");
      return false;
    }
  for (auto &[rank, device] : ranks) {
    std::vector<std::string> args = {self};
    args.insert(args.end(), start.begin() + 5, start.end());
    args.insert(args.end(), {"--rank", std::to_string(rank), "--store-server",
                             host + ":" + std::to_string(*port)});
    std::vector<char *> argv;
    for (std::string &a : args)
      argv.push_back(a.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addchdir_np(&actions, start[3].c_str());
    pid_t pid;
    int spawned = ::posix_spawn(&pid, self.c_str(), &actions, nullptr,
                                argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    if (spawned != 0) {
      std::fprintf(stderr,
                   "dtfm-run: error: agent: cannot start the worker "
                   "of %s: %s\n",
                   device.c_str(), std::strerror(spawned));
      unstarted.push_back({{-1, *launch, rank}, 127 << 8});
      continue;
    }
    children.push_back({pid, *launch, rank});
  }
  return true;
}

} // namespace

pid_t dtfm::runtime::startAgentProcess(const AgentOptions &options,
                                      std::string &error) {
  std::string self = thisExecutable(error);
  if (self.empty())
    return -1;
  std::string devices;
  for (const std::string &d : options.devices)
    devices += (devices.empty() ? "" : ",") + d;
  long long seconds =
      std::max<long long>(1, (options.timeout.count() + 999) / 1000);
  std::vector<std::string> args = {self,    "--agent",   options.coordinator,
                                   "--devices", devices, "--timeout",
                                   std::to_string(seconds)};
  for (const std::string &root : options.roots)
    args.insert(args.end(), {"--root", root});
  for (const std::string &plugin : options.plugins)
    args.push_back("--" + std::string(kLoadPluginFlag) + "=" + plugin);
  std::vector<char *> argv;
  for (std::string &a : args)
    argv.push_back(a.data());
  argv.push_back(nullptr);
  // The token goes by the environment (a command line is world-readable).
  std::vector<std::string> environment;
  for (char **e = environ; *e; ++e)
    if (std::strncmp(*e, kJobTokenVariable, std::strlen(kJobTokenVariable)) !=
            0 ||
        (*e)[std::strlen(kJobTokenVariable)] != '=')
      environment.push_back(*e);
  environment.push_back(std::string(kJobTokenVariable) + "=" +
                        options.jobToken);
  std::vector<char *> envp;
  for (std::string &e : environment)
    envp.push_back(e.data());
  envp.push_back(nullptr);
  pid_t pid = -1;
  if (::posix_spawn(&pid, self.c_str(), nullptr, nullptr, argv.data(),
                    envp.data()) != 0) {
    error = "cannot start the agent of " + devices;
    return -1;
  }
  return pid;
}

int dtfm::runtime::runAgent(const AgentOptions &options) {
  std::string host, error;
  int port = 0;
  if (!parseHostPort(options.coordinator, host, port, error))
    return agentError("--agent: expected host:port, got '" +
                      options.coordinator + "'");
  std::string self = thisExecutable(error);
  if (self.empty())
    return agentError(error);
  if (options.jobToken.empty())
    return agentError(std::string("an agent proves the job's token to its "
                                  "coordinator: give --job-token FILE or ") +
                      kJobTokenVariable +
                      " (the coordinator prints it when it makes one)");
  // Every path the coordinator names is resolved against these.
  AgentOptions checked = options;
  checked.roots.clear();
  std::vector<std::string> roots = options.roots;
  if (roots.empty()) {
    char cwd[PATH_MAX];
    if (!::getcwd(cwd, sizeof cwd))
      return agentError("cannot read the working directory");
    roots.push_back(cwd);
  }
  for (const std::string &root : roots) {
    char resolved[PATH_MAX];
    struct stat st {};
    if (!::realpath(root.c_str(), resolved) || ::stat(resolved, &st) != 0 ||
        !S_ISDIR(st.st_mode))
      return agentError("--root " + root + ": not a folder");
    checked.roots.push_back(resolved);
  }
  bool unreachable = false;
  int fd = auth::connectProven(host, port, options.jobToken,
                               auth::Channel::Agents, options.timeout, error,
                               &unreachable);
  if (fd < 0)
    return agentError(unreachable ? "no coordinator: " + error : error);
  Message answer;
  if (!sendMessage(fd, {"hello", kProtocol, joined(options.devices),
                        options.joinRequest}) ||
      !readMessage(fd, answer)) {
    ::close(fd);
    return agentError("the coordinator at " + options.coordinator +
                      " did not answer in " + kProtocol);
  }
  if (answer.size() == 2 && answer[0] == "refused") {
    ::close(fd);
    return agentError("the coordinator refused this agent: " +
                      printable(answer[1]));
  }
  if (answer.size() != 3 || answer[0] != "welcome") {
    ::close(fd);
    return agentError("the coordinator at " + options.coordinator +
                      " does not speak " + kProtocol);
  }
  // The checkpoint directory is a path from the network: inside the
  // roots, or refused before it is read.
  if (std::string problem = pathOutsideRoots(
          "the checkpoint directory", answer[1], "/", checked.roots);
      !problem.empty() || answer[1][0] != '/') {
    std::string why = "the coordinator's welcome refused: " +
                      (problem.empty()
                           ? std::string("the checkpoint directory is not an "
                                         "absolute path")
                           : problem);
    sendMessage(fd, {"refused", why});
    ::close(fd);
    return agentError(why);
  }
  // The run's files are shared: the checkpoints must be the coordinator's.
  std::string seen;
  std::string problem;
  if (answer[2].empty() ||
      !format::readWholeFile(nonceFile(answer[1]), seen, problem, 4096) ||
      seen != answer[2] + "\n") {
    std::string why = "this host does not see the coordinator's checkpoint "
                      "directory " +
                      answer[1] +
                      " (its coordinator.id differs or is missing): the "
                      "hosts need a shared file system";
    sendMessage(fd, {"refused", why});
    ::close(fd);
    return agentError(why);
  }
  if (!sendMessage(fd, {"ready"})) {
    ::close(fd);
    return agentError("lost the coordinator at " + options.coordinator);
  }
  // The devices whose ranks a start may give this agent.
  std::vector<std::string> served = options.devices;
  planner::JoinRequest request;
  if (!options.joinRequest.empty() &&
      planner::parseJoinRequest(options.joinRequest, options.joinRequestPath,
                                request, error))
    served.push_back(request.device.name);
  std::vector<std::string> serving = options.devices;
  if (!options.joinRequestPath.empty())
    serving.push_back("a device joining from " + options.joinRequestPath);
  std::printf("dtfm-run: agent: serving %s for the elastic run at %s\n",
              joined(serving).c_str(), options.coordinator.c_str());
  std::fflush(stdout);

  // The workers die with this agent (Worker.cpp): a host that goes takes
  // its workers with it.
  if (!std::getenv("OPENBLAS_NUM_THREADS"))
    ::setenv("OPENBLAS_NUM_THREADS", "1", 1);
  ::setenv(kLauncherPidVariable, std::to_string(::getpid()).c_str(), 1);
  // The workers prove the token to the coordinator's rendezvous store.
  ::setenv(kJobTokenVariable, options.jobToken.c_str(), 1);
  std::vector<Child> children;
  std::chrono::milliseconds heartbeat =
      std::min(std::chrono::milliseconds(1000), options.timeout / 3);
  Clock::time_point nextBeat = Clock::now();
  Clock::time_point heard = Clock::now();
  auto lost = [&](const std::string &why) {
    killAll(children);
    ::close(fd);
    return agentError(why);
  };
  while (true) {
    if (Clock::now() >= nextBeat) {
      if (!sendMessage(fd, {"alive"}))
        return lost("lost the coordinator at " + options.coordinator);
      nextBeat = Clock::now() + heartbeat;
    }
    pollfd p{fd, POLLIN, 0};
    int ready = ::poll(&p, 1, 20);
    if (ready == 0 && Clock::now() - heard > options.timeout)
      return lost("the coordinator at " + options.coordinator +
                  " sent nothing within --timeout");
    if (ready > 0) {
      Message message;
      if (!readMessage(fd, message))
        return lost("lost the coordinator at " + options.coordinator);
      heard = Clock::now();
      if (message[0] == "alive")
        continue;
      if (message[0] == "exit") {
        killAll(children);
        ::close(fd);
        return 0;
      }
      if (message[0] == "kill" && message.size() == 2) {
        for (const Child &c : children)
          if (std::to_string(c.launch) == message[1])
            ::kill(c.pid, SIGKILL);
      } else if (message[0] == "start") {
        std::vector<std::pair<Child, int>> unstarted;
        if (!startWorkers(message, host, self, checked, served, children,
                          unstarted, error))
          return lost(error);
        for (auto &[child, status] : unstarted)
          if (!sendMessage(fd, {"end", std::to_string(child.launch),
                                std::to_string(child.rank),
                                std::to_string(status)}))
            return lost("lost the coordinator at " + options.coordinator);
      } else {
        return lost("the coordinator sent '" + printable(message[0], 40) +
                    "', which is not a message of " + kProtocol);
      }
    }
    int status = 0;
    pid_t pid;
    while ((pid = ::waitpid(-1, &status, WNOHANG)) > 0) {
      auto it = std::find_if(children.begin(), children.end(),
                             [&](const Child &c) { return c.pid == pid; });
      if (it == children.end())
        continue;
      Child child = *it;
      children.erase(it);
      if (!sendMessage(fd,
                       {"end", std::to_string(child.launch),
                        std::to_string(child.rank), std::to_string(status)}))
        return lost("lost the coordinator at " + options.coordinator);
    }
  }
}
