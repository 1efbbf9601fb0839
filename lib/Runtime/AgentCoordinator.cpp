//===- AgentCoordinator.cpp - Elastic runs across hosts: the coordinator --===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//
//
// The coordinator's side of an elastic run across hosts (Agents.h): it
// accepts agents, checks what they serve, keeps them alive, and launches
// workers on them, waiting for each to end as the local launcher does.
// The agents' side is Agent.cpp, their protocol AgentProtocol.h.
//
//===----------------------------------------------------------------------===//

#include "dtfm/Format/TensorFile.h"
#include "dtfm/Runtime/Agents.h"
#include "dtfm/Runtime/Transport.h"
#include "dtfm/Runtime/Worker.h"

#include "AgentProtocol.h"
#include "JobAuth.h"
#include "Rendezvous.h"

#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <deque>
#include <map>
#include <random>

using namespace dtfm;
using namespace dtfm::runtime;
using namespace dtfm::runtime::agents;
using namespace dtfm::runtime::rendezvous;

struct AgentCoordinator::Impl {
  struct Agent {
    int fd = -1;
    std::string address;
    std::vector<std::string> devices;
    bool alive = true;
  };
  /// What an agent's reader thread hands the launch loop.
  struct Event {
    int agent = 0;
    bool lost = false; ///< the agent left or stopped answering
    long long launch = 0;
    int rank = 0;
    int status = 0; ///< the worker's wait status
  };

  int listener = -1;
  std::string checkpointDir, nonce, jobToken;
  std::chrono::milliseconds timeout{60000};
  std::atomic<bool> stopping{false};
  /// Admits the agents that prove the job token; the rest never reach
  /// the protocol's parser.
  auth::AuthGate gate;
  std::thread heartbeat;
  std::vector<std::thread> readers;
  std::mutex mutex; ///< guards everything below, and writes to agents
  std::condition_variable changed;
  std::set<int> open; ///< every connection, registered or not
  std::vector<Agent> agents;
  std::set<std::string> known;
  std::vector<planner::JoinRequest> joins;
  std::deque<Event> events;
  long long launches = 0;

  /// A peer that sent a wrong proof of the job token: named, at most one
  /// line a second (a flood of them is counted, not printed).
  Clock::time_point lastRefusal{};
  long long unsaidRefusals = 0;
  void refusedPeer(int fd) {
    Clock::time_point now = Clock::now();
    if (now - lastRefusal < std::chrono::seconds(1)) {
      ++unsaidRefusals;
      return;
    }
    lastRefusal = now;
    std::string more =
        unsaidRefusals ? " (and " + std::to_string(unsaidRefusals) +
                             " more since the last such line)"
                       : "";
    unsaidRefusals = 0;
    std::printf("dtfm-run: elastic: refusing the peer at %s: it does not "
                "prove the job token%s\n",
                peerAddress(fd).c_str(), more.c_str());
    std::fflush(stdout);
  }

  void admit(int fd) {
    std::lock_guard<std::mutex> lock(mutex);
    if (stopping) {
      ::close(fd);
      return;
    }
    open.insert(fd);
    readers.emplace_back([this, fd] { serve(fd); });
  }

  /// The agents hear from the coordinator at least every second, also
  /// while it plans: one that hears nothing for --timeout stops.
  void beat() {
    std::chrono::milliseconds every =
        std::min(std::chrono::milliseconds(1000), timeout / 3);
    Clock::time_point next = Clock::now();
    while (!stopping) {
      if (Clock::now() >= next) {
        std::lock_guard<std::mutex> lock(mutex);
        for (Agent &agent : agents)
          if (agent.alive)
            sendMessage(agent.fd, {"alive"});
        next = Clock::now() + every;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }

  /// Why an agent saying `hello` cannot serve; "" when it can (and then
  /// `request` holds its join request, if it brought one).
  std::string refusal(const Message &hello, planner::JoinRequest &request,
                      bool &joining) {
    if (hello.size() != 4 || hello[0] != "hello")
      return "not an agent's hello";
    if (hello[1] != kProtocol)
      return "speaks '" + printable(hello[1], 40) + "', not '" + kProtocol +
             "'";
    std::vector<std::string> devices = split(hello[2]);
    joining = !hello[3].empty();
    if (joining) {
      std::string error;
      if (!planner::parseJoinRequest(hello[3], "its join request", request,
                                     error))
        return error;
      devices.push_back(request.device.name);
    }
    if (devices.empty())
      return "it names no device";
    for (const std::string &d : devices) {
      if (!format::isFileSafeDeviceName(d))
        return "'" + printable(d, 40) + "' is not a device name";
      for (const Agent &a : agents)
        if (a.alive && std::count(a.devices.begin(), a.devices.end(), d))
          return "device " + d + " is served by the agent at " + a.address +
                 " already";
      bool isJoining = joining && d == request.device.name;
      if (!isJoining && !known.count(d))
        return "device " + d +
               " is not in the run's cluster (a new device "
               "asks with --join-request)";
      if (isJoining && known.count(d))
        return "device " + d + " is in the run's cluster already";
    }
    return "";
  }

  void serve(int fd) {
    setSocketDeadline(fd, timeout);
    std::string address = peerAddress(fd);
    Message hello, answer;
    planner::JoinRequest request;
    bool joining = false;
    std::string why;
    {
      // The reader holds no lock while it waits for the hello.
      bool said = readMessage(fd, hello);
      std::lock_guard<std::mutex> lock(mutex);
      why = said ? refusal(hello, request, joining)
                 : std::string("said no hello (silent for --timeout, or not "
                               "speaking ") +
                       kProtocol + ")";
    }
    if (!why.empty()) {
      std::printf("dtfm-run: elastic: refusing the agent at %s: %s\n",
                  address.c_str(), why.c_str());
      std::fflush(stdout);
      sendMessage(fd, {"refused", why});
      forget(fd);
      return;
    }
    if (!sendMessage(fd, {"welcome", checkpointDir, nonce}) ||
        !readMessage(fd, answer) || answer.empty() || answer[0] != "ready") {
      std::string said = answer.size() == 2 && answer[0] == "refused"
                             ? printable(answer[1])
                             : "no answer";
      std::printf("dtfm-run: elastic: the agent at %s did not start: %s\n",
                  address.c_str(), said.c_str());
      std::fflush(stdout);
      forget(fd);
      return;
    }
    int id;
    {
      std::lock_guard<std::mutex> lock(mutex);
      Agent agent;
      agent.fd = fd;
      agent.address = address;
      agent.devices = split(hello[2]);
      if (joining) {
        agent.devices.push_back(request.device.name);
        joins.push_back(request);
      }
      agents.push_back(agent);
      id = static_cast<int>(agents.size()) - 1;
      changed.notify_all();
    }
    Message message;
    while (!stopping && readMessage(fd, message)) {
      if (message[0] == "alive")
        continue;
      std::optional<long long> launch, rank, status;
      if (message[0] == "end" && message.size() == 4) {
        launch = number(message[1], 1, 1LL << 40);
        rank = number(message[2], 0, 1000000);
        status = number(message[3], 0, 0xffff);
      }
      if (!launch || !rank || !status ||
          !(WIFEXITED(*status) || WIFSIGNALED(*status)))
        break; // not the protocol: the agent is dropped
      std::lock_guard<std::mutex> lock(mutex);
      events.push_back({id, false, *launch, static_cast<int>(*rank),
                        static_cast<int>(*status)});
      changed.notify_all();
    }
    std::lock_guard<std::mutex> lock(mutex);
    agents[id].alive = false;
    ::shutdown(fd, SHUT_RDWR);
    events.push_back({id, true, 0, 0, 0});
    changed.notify_all();
  }

  void forget(int fd) {
    std::lock_guard<std::mutex> lock(mutex);
    open.erase(fd);
    ::close(fd);
  }

  /// Numbers a new launch and asks each agent to start the workers of its
  /// ranks (rank r's on the agent serving devices[r]; `agentOf` says
  /// which). A rank no agent serves ends Unreachable and counts in
  /// `failures`, and then no worker is started.
  long long startLaunch(const std::vector<std::string> &arguments,
                        const std::vector<std::string> &devices, int storePort,
                        const std::string &cwd, std::vector<int> &agentOf,
                        LaunchOutcome &outcome, int &failures);
};

AgentCoordinator::AgentCoordinator() : impl(std::make_unique<Impl>()) {}

AgentCoordinator::~AgentCoordinator() {
  {
    std::lock_guard<std::mutex> lock(impl->mutex);
    for (Impl::Agent &agent : impl->agents)
      if (agent.alive)
        sendMessage(agent.fd, {"exit"});
  }
  impl->stopping = true;
  impl->gate.stop();
  if (impl->heartbeat.joinable())
    impl->heartbeat.join();
  {
    // Wake every reader, whatever its peer does.
    std::lock_guard<std::mutex> lock(impl->mutex);
    for (int fd : impl->open)
      ::shutdown(fd, SHUT_RDWR);
  }
  // No reader is added once the acceptor has stopped.
  for (std::thread &t : impl->readers)
    t.join();
  for (int fd : impl->open)
    ::close(fd);
  if (impl->listener >= 0)
    ::close(impl->listener);
}

bool AgentCoordinator::listen(int port, const std::string &checkpointDir,
                              std::chrono::milliseconds timeout,
                              const std::string &jobToken,
                              std::string &error) {
  impl->checkpointDir = checkpointDir;
  impl->timeout = timeout;
  std::random_device random;
  char nonce[40];
  std::snprintf(nonce, sizeof nonce, "%08x%08x%08x%08x", random(), random(),
                random(), random());
  impl->nonce = nonce;
  if (!format::writeFileAtomically(nonceFile(checkpointDir), impl->nonce + "\n",
                                   error))
    return false;
  std::string why;
  int fd = listenOn(port, why);
  if (fd < 0) {
    error = "--agents " + std::to_string(port) + ": cannot listen: " + why;
    return false;
  }
  impl->listener = fd;
  impl->jobToken = jobToken;
  impl->gate.start(
      fd, jobToken, auth::Channel::Agents,
      [this](int agent) { impl->admit(agent); },
      [this](int peer) { impl->refusedPeer(peer); });
  impl->heartbeat = std::thread([this] { impl->beat(); });
  return true;
}

int AgentCoordinator::port() const { return listeningPort(impl->listener); }

void AgentCoordinator::setKnownDevices(
    const std::vector<std::string> &devices) {
  std::lock_guard<std::mutex> lock(impl->mutex);
  impl->known.insert(devices.begin(), devices.end());
}

std::set<std::string> AgentCoordinator::servedDevices() {
  std::lock_guard<std::mutex> lock(impl->mutex);
  std::set<std::string> served;
  for (const Impl::Agent &agent : impl->agents)
    if (agent.alive)
      served.insert(agent.devices.begin(), agent.devices.end());
  return served;
}

bool AgentCoordinator::waitForDevices(const std::vector<std::string> &devices,
                                      std::string &error) {
  Clock::time_point deadline = Clock::now() + impl->timeout;
  while (true) {
    std::set<std::string> served = servedDevices();
    std::vector<std::string> missing;
    for (const std::string &d : devices)
      if (!served.count(d))
        missing.push_back(d);
    if (missing.empty())
      return true;
    if (Clock::now() >= deadline) {
      error = "no agent serves " + joined(missing) + " within " +
              std::to_string(impl->timeout.count()) +
              " ms (--timeout): start `dtfm-run --agent HOST:" +
              std::to_string(port()) + " --devices " + joined(missing) +
              "` on their hosts";
      return false;
    }
    std::unique_lock<std::mutex> lock(impl->mutex);
    impl->changed.wait_for(lock, std::chrono::milliseconds(50));
  }
}

std::vector<planner::JoinRequest> AgentCoordinator::takeJoins() {
  std::lock_guard<std::mutex> lock(impl->mutex);
  std::vector<planner::JoinRequest> taken;
  taken.swap(impl->joins);
  for (const planner::JoinRequest &r : taken)
    impl->known.insert(r.device.name);
  return taken;
}

long long
AgentCoordinator::Impl::startLaunch(const std::vector<std::string> &arguments,
                                    const std::vector<std::string> &devices,
                                    int storePort, const std::string &cwd,
                                    std::vector<int> &agentOf,
                                    LaunchOutcome &outcome, int &failures) {
  int count = static_cast<int>(devices.size());
  agentOf.assign(count, -1);
  std::map<int, std::vector<int>> ranksOf;
  std::lock_guard<std::mutex> lock(mutex);
  long long launch = ++launches;
  events.clear(); // ends of earlier launches no longer matter
  for (int rank = 0; rank < count; ++rank) {
    for (size_t a = 0; a < agents.size(); ++a)
      if (agents[a].alive && std::count(agents[a].devices.begin(),
                                        agents[a].devices.end(), devices[rank]))
        agentOf[rank] = static_cast<int>(a);
    if (agentOf[rank] < 0) {
      std::fprintf(stderr,
                   "dtfm-run: error: worker %s (rank %d): no agent "
                   "serves its device\n",
                   devices[rank].c_str(), rank);
      outcome.ends[rank] = WorkerEnd::Unreachable;
      ++failures;
    } else {
      ranksOf[agentOf[rank]].push_back(rank);
    }
  }
  for (auto &[agent, ranks] : ranksOf) {
    std::vector<std::string> list;
    for (int rank : ranks)
      list.push_back(std::to_string(rank) + ":" + devices[rank]);
    Message start = {"start", std::to_string(launch), std::to_string(storePort),
                     cwd, joined(list)};
    start.insert(start.end(), arguments.begin(), arguments.end());
    bool sent = !failures && sendMessage(agents[agent].fd, start);
    for (int rank : ranks)
      outcome.ends[rank] = sent ? WorkerEnd::Finished : WorkerEnd::NotStarted;
  }
  return launch;
}

namespace {

/// One launch's workers until each has ended, as the local launcher waits
/// (Launcher.cpp): after the first failure the others get `timeout` to
/// stop, then their agents kill them, and a worker whose agent does not say
/// it ended within another `timeout` is taken for gone with its host.
class LaunchWatch {
public:
  LaunchWatch(AgentCoordinator::Impl &impl, long long launch,
              const std::vector<std::string> &devices,
              const std::vector<int> &agentOf,
              std::chrono::milliseconds timeout, const LaunchHooks *hooks,
              LaunchOutcome &outcome, int failures)
      : impl(impl), launch(launch), devices(devices), agentOf(agentOf),
        timeout(timeout), poller(hooks), outcome(outcome), failures(failures),
        count(static_cast<int>(devices.size())), done(count, false) {
    for (int rank = 0; rank < count; ++rank)
      done[rank] = outcome.ends[rank] != WorkerEnd::Finished;
    if (failures)
      deadline = Clock::now(); // stop what started at once
  }

  /// Waits; the number of workers that failed.
  int run() {
    while (std::count(done.begin(), done.end(), false) > 0) {
      poller.poll(failures > 0);
      std::deque<AgentCoordinator::Impl::Event> events;
      {
        std::unique_lock<std::mutex> lock(impl.mutex);
        impl.changed.wait_for(lock, std::chrono::milliseconds(20),
                              [&] { return !impl.events.empty(); });
        events.swap(impl.events);
      }
      for (const AgentCoordinator::Impl::Event &e : events)
        take(e);
      Clock::time_point now = Clock::now();
      if (now >= deadline)
        killTheRest(now);
      if (now >= killDeadline)
        giveUpOnTheRest();
    }
    return failures;
  }

private:
  void fail(int rank, WorkerEnd end, const std::string &what) {
    if (outcome.ends[rank] != WorkerEnd::Hung)
      outcome.ends[rank] = end;
    done[rank] = true;
    reportWorker(devices[rank], rank, what);
    if (failures++ == 0)
      deadline = Clock::now() + timeout;
  }

  /// What an agent's reader said: it was lost, or a worker of it ended.
  void take(const AgentCoordinator::Impl::Event &e) {
    if (e.lost) {
      for (int rank = 0; rank < count; ++rank)
        if (agentOf[rank] == e.agent && !done[rank])
          fail(rank, WorkerEnd::Unreachable,
               "is lost with its host: its agent left or sent nothing "
               "within --timeout");
      return;
    }
    if (e.launch != launch || e.rank >= count || agentOf[e.rank] != e.agent ||
        done[e.rank])
      return;
    int status = e.status;
    if (outcome.ends[e.rank] == WorkerEnd::Hung) {
      done[e.rank] = true; // killed on request, already named
    } else if (WIFSIGNALED(status)) {
      outcome.signals[e.rank] = WTERMSIG(status);
      fail(e.rank, WorkerEnd::Killed, describeExitStatus(status));
    } else if (poller.requested() &&
               WEXITSTATUS(status) == kExitStoppedAtCheckpoint) {
      outcome.ends[e.rank] = WorkerEnd::Stopped;
      done[e.rank] = true;
    } else if (WEXITSTATUS(status) != 0) {
      fail(e.rank, WorkerEnd::Failed, describeExitStatus(status));
    } else {
      done[e.rank] = true;
    }
  }

  /// The failure's `timeout` is over: the agents kill what still runs.
  void killTheRest(Clock::time_point now) {
    std::lock_guard<std::mutex> lock(impl.mutex);
    std::set<int> asked;
    for (int rank = 0; rank < count; ++rank)
      if (!done[rank]) { // started, still running
        reportWorker(devices[rank], rank, hungAndKilled(timeout));
        outcome.ends[rank] = WorkerEnd::Hung;
        if (asked.insert(agentOf[rank]).second)
          sendMessage(impl.agents[agentOf[rank]].fd,
                      {"kill", std::to_string(launch)});
      }
    deadline = Clock::time_point::max();
    killDeadline = now + timeout;
  }

  void giveUpOnTheRest() {
    for (int rank = 0; rank < count; ++rank)
      if (!done[rank]) {
        std::fprintf(stderr,
                     "dtfm-run: error: worker %s (rank %d): its "
                     "agent did not say it ended; taken for gone\n",
                     devices[rank].c_str(), rank);
        outcome.ends[rank] = WorkerEnd::Unreachable;
        done[rank] = true;
      }
  }

  AgentCoordinator::Impl &impl;
  long long launch;
  const std::vector<std::string> &devices;
  const std::vector<int> &agentOf;
  std::chrono::milliseconds timeout;
  StopFilePoller poller;
  LaunchOutcome &outcome;
  int failures;
  int count;
  std::vector<bool> done;
  Clock::time_point deadline = Clock::time_point::max();
  Clock::time_point killDeadline = Clock::time_point::max();
};

} // namespace

LaunchOutcome
AgentCoordinator::launch(const std::vector<std::string> &arguments,
                         const std::vector<std::string> &devices,
                         std::chrono::milliseconds timeout,
                         const LaunchHooks *hooks) {
  int count = static_cast<int>(devices.size());
  LaunchOutcome outcome;
  outcome.ends.assign(count, WorkerEnd::NotStarted);
  outcome.signals.assign(count, 0);
  outcome.status = 1;
  TcpStoreServer store;
  std::string error;
  if (!store.start(0, impl->jobToken, error)) {
    std::fprintf(stderr, "dtfm-run: error: elastic: %s\n", error.c_str());
    return outcome;
  }
  char cwd[4096];
  if (!::getcwd(cwd, sizeof cwd)) {
    std::fprintf(stderr, "dtfm-run: error: elastic: cannot read the working "
                         "directory\n");
    return outcome;
  }
  // Each agent's ranks; a device no agent serves is gone.
  std::vector<int> agentOf;
  int failures = 0;
  long long launch = impl->startLaunch(arguments, devices, store.port(), cwd,
                                       agentOf, outcome, failures);
  failures = LaunchWatch(*impl, launch, devices, agentOf, timeout, hooks,
                         outcome, failures)
                 .run();
  outcome.status = failures ? 1 : 0;
  return outcome;
}
