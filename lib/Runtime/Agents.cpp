//===- Agents.cpp - Elastic runs across hosts: coordinator and agents -----===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//

#include "dtfm/Runtime/Agents.h"
#include "dtfm/Format/TensorFile.h"
#include "dtfm/Runtime/Transport.h"
#include "dtfm/Runtime/Worker.h"

#include "Rendezvous.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <deque>
#include <map>
#include <random>

extern char **environ;

using namespace dtfm;
using namespace dtfm::runtime;
using namespace dtfm::runtime::rendezvous;

namespace {

constexpr const char *kProtocol = "dtfm-agent 1";
/// No message of the protocol comes near this; a peer that says more is
/// not an agent (or coordinator).
constexpr size_t kMaxMessageBytes = 1 << 20;
constexpr size_t kMaxMessageParts = 4096;

using Message = std::vector<std::string>;

bool sendMessage(int fd, const Message &message) {
  uint32_t count = static_cast<uint32_t>(message.size());
  if (!writeAll(fd, &count, 4))
    return false;
  for (const std::string &part : message)
    if (!writeString(fd, part.data(), part.size()))
      return false;
  return true;
}

/// False when the peer closed, stopped answering within the socket's
/// deadline, or sent something that is not a message of the protocol.
bool readMessage(int fd, Message &message) {
  uint32_t count = 0;
  if (!readAll(fd, &count, 4) || count == 0 || count > kMaxMessageParts)
    return false;
  message.assign(count, std::string());
  size_t total = 0;
  for (std::string &part : message) {
    uint32_t length = 0;
    if (!readAll(fd, &length, 4) || length > kMaxMessageBytes - total)
      return false;
    total += length;
    part.resize(length);
    if (!readAll(fd, part.data(), length))
      return false;
  }
  return true;
}

std::string joined(const std::vector<std::string> &names) {
  std::string text;
  for (const std::string &n : names)
    text += (text.empty() ? "" : ",") + n;
  return text;
}

std::vector<std::string> split(const std::string &text) {
  std::vector<std::string> parts;
  for (size_t begin = 0; begin <= text.size() && !text.empty();) {
    size_t end = text.find(',', begin);
    if (end == std::string::npos)
      end = text.size();
    parts.push_back(text.substr(begin, end - begin));
    begin = end + 1;
  }
  return parts;
}

/// A decimal in [low, high], or nullopt.
std::optional<long long> number(const std::string &text, long long low,
                                long long high) {
  if (text.empty() || text.size() > 18)
    return std::nullopt;
  for (char c : text)
    if (c < '0' || c > '9')
      return std::nullopt;
  long long value = std::stoll(text);
  if (value < low || value > high)
    return std::nullopt;
  return value;
}

std::string nonceFile(const std::string &checkpointDir) {
  return checkpointDir + "/coordinator.id";
}

std::string peerAddress(int fd) {
  sockaddr_in addr{};
  socklen_t size = sizeof addr;
  char text[INET_ADDRSTRLEN] = "?";
  if (::getpeername(fd, reinterpret_cast<sockaddr *>(&addr), &size) == 0)
    ::inet_ntop(AF_INET, &addr.sin_addr, text, sizeof text);
  return std::string(text) + ":" + std::to_string(ntohs(addr.sin_port));
}

} // namespace

//===--- the coordinator --------------------------------------------------===//

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
  std::string checkpointDir, nonce;
  std::chrono::milliseconds timeout{60000};
  std::atomic<bool> stopping{false};
  std::thread acceptor, heartbeat;
  std::vector<std::thread> readers;
  std::mutex mutex; ///< guards everything below, and writes to agents
  std::condition_variable changed;
  std::set<int> open; ///< every connection, registered or not
  std::vector<Agent> agents;
  std::set<std::string> known;
  std::vector<planner::JoinRequest> joins;
  std::deque<Event> events;
  long long launches = 0;

  void acceptLoop() {
    while (!stopping) {
      int fd = acceptWaiting(listener, 50);
      if (fd < 0)
        continue;
      std::lock_guard<std::mutex> lock(mutex);
      open.insert(fd);
      readers.emplace_back([this, fd] { serve(fd); });
    }
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
      return "speaks '" + hello[1] + "', not '" + kProtocol + "'";
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
      if (!planner::isFileSafeDeviceName(d))
        return "'" + d + "' is not a device name";
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
                             ? answer[1]
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
  for (std::thread *t : {&impl->acceptor, &impl->heartbeat})
    if (t->joinable())
      t->join();
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
  impl->acceptor = std::thread([this] { impl->acceptLoop(); });
  impl->heartbeat = std::thread([this] { impl->beat(); });
  return true;
}

int AgentCoordinator::port() const {
  return listeningPort(impl->listener);
}

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
  if (!store.start(0, error)) {
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
  long long launch;
  std::vector<int> agentOf(count, -1);
  std::map<int, std::vector<int>> ranksOf;
  int failures = 0;
  {
    std::lock_guard<std::mutex> lock(impl->mutex);
    launch = ++impl->launches;
    impl->events.clear(); // ends of earlier launches no longer matter
    for (int rank = 0; rank < count; ++rank) {
      for (size_t a = 0; a < impl->agents.size(); ++a)
        if (impl->agents[a].alive &&
            std::count(impl->agents[a].devices.begin(),
                       impl->agents[a].devices.end(), devices[rank]))
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
      Message start = {"start", std::to_string(launch),
                       std::to_string(store.port()), cwd, joined(list)};
      start.insert(start.end(), arguments.begin(), arguments.end());
      bool sent = !failures && sendMessage(impl->agents[agent].fd, start);
      for (int rank : ranks) {
        outcome.ends[rank] = sent ? WorkerEnd::Finished : WorkerEnd::NotStarted;
      }
    }
  }

  // As the local launcher waits (Launcher.cpp): after the first failure
  // the others get `timeout` to stop, then their agents kill them, and a
  // worker whose agent does not say it ended within another `timeout` is
  // taken for gone with its host.
  std::vector<bool> done(count, false);
  for (int rank = 0; rank < count; ++rank)
    done[rank] = outcome.ends[rank] != WorkerEnd::Finished;
  Clock::time_point deadline = Clock::time_point::max();
  Clock::time_point killDeadline = Clock::time_point::max();
  if (failures)
    deadline = Clock::now(); // stop what started at once
  StopFilePoller poller(hooks);
  auto fail = [&](int rank, WorkerEnd end, const std::string &what) {
    if (outcome.ends[rank] != WorkerEnd::Hung)
      outcome.ends[rank] = end;
    done[rank] = true;
    reportWorker(devices[rank], rank, what);
    if (failures++ == 0)
      deadline = Clock::now() + timeout;
  };
  while (std::count(done.begin(), done.end(), false) > 0) {
    poller.poll(failures > 0);
    std::deque<Impl::Event> events;
    {
      std::unique_lock<std::mutex> lock(impl->mutex);
      impl->changed.wait_for(lock, std::chrono::milliseconds(20),
                             [&] { return !impl->events.empty(); });
      events.swap(impl->events);
    }
    for (const Impl::Event &e : events) {
      if (e.lost) {
        for (int rank = 0; rank < count; ++rank)
          if (agentOf[rank] == e.agent && !done[rank])
            fail(rank, WorkerEnd::Unreachable,
                 "is lost with its host: its agent left or sent nothing "
                 "within --timeout");
        continue;
      }
      if (e.launch != launch || e.rank >= count || agentOf[e.rank] != e.agent ||
          done[e.rank])
        continue;
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
    Clock::time_point now = Clock::now();
    if (now >= deadline) {
      std::lock_guard<std::mutex> lock(impl->mutex);
      std::set<int> asked;
      for (int rank = 0; rank < count; ++rank)
        if (!done[rank]) { // started, still running
          reportWorker(devices[rank], rank, hungAndKilled(timeout));
          outcome.ends[rank] = WorkerEnd::Hung;
          if (asked.insert(agentOf[rank]).second)
            sendMessage(impl->agents[agentOf[rank]].fd,
                        {"kill", std::to_string(launch)});
        }
      deadline = Clock::time_point::max();
      killDeadline = now + timeout;
    }
    if (now >= killDeadline) {
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
  }
  outcome.status = failures ? 1 : 0;
  return outcome;
}

//===--- the agent --------------------------------------------------------===//

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
