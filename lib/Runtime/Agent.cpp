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

#include "dtfm/Format/TensorFile.h"
#include "dtfm/Runtime/Agents.h"
#include "dtfm/Runtime/Launcher.h"
#include "dtfm/Runtime/Transport.h"
#include "dtfm/Runtime/Worker.h"

#include "AgentProtocol.h"
#include "Rendezvous.h"

#include <poll.h>
#include <spawn.h>
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
                  const std::string &self, std::vector<Child> &children,
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
  std::vector<char *> argv;
  for (std::string &a : args)
    argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = -1;
  if (::posix_spawn(&pid, self.c_str(), nullptr, nullptr, argv.data(),
                    environ) != 0) {
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
  int fd = connectWithin(host, port, options.timeout, error);
  if (fd < 0)
    return agentError("no coordinator: " + error);
  setSocketDeadline(fd, options.timeout);
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
    return agentError("the coordinator refused this agent: " + answer[1]);
  }
  if (answer.size() != 3 || answer[0] != "welcome") {
    ::close(fd);
    return agentError("the coordinator at " + options.coordinator +
                      " does not speak " + kProtocol);
  }
  // The run's files are shared: the checkpoints must be the coordinator's.
  std::string seen;
  std::string problem;
  if (!format::readWholeFile(nonceFile(answer[1]), seen, problem) ||
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
        if (!startWorkers(message, host, self, children, unstarted, error))
          return lost(error);
        for (auto &[child, status] : unstarted)
          if (!sendMessage(fd, {"end", std::to_string(child.launch),
                                std::to_string(child.rank),
                                std::to_string(status)}))
            return lost("lost the coordinator at " + options.coordinator);
      } else {
        return lost("the coordinator sent '" + message[0].substr(0, 40) +
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
