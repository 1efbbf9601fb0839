//===- Launcher.cpp - Local workers, one process per device ---------------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//

#include "dtfm/Format/FileIo.h"
#include "dtfm/Runtime/Launcher.h"
#include "dtfm/Runtime/Worker.h"

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ftw.h>
#include <spawn.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

extern char **environ;

using namespace dtfm::runtime;
using Clock = std::chrono::steady_clock;

namespace {

// Workers to stop when the launcher is interrupted (signal-safe: plain
// array, kill() only).
constexpr int kMaxWorkers = 4096;
pid_t workerPids[kMaxWorkers];
volatile sig_atomic_t workerCount = 0;

void stopWorkers(int signal) {
  for (int i = 0; i < workerCount; ++i)
    if (workerPids[i] > 0)
      ::kill(workerPids[i], SIGKILL);
  ::_exit(128 + signal);
}

int removeEntry(const char *path, const struct stat *, int, struct FTW *) {
  return ::remove(path);
}

} // namespace

std::string dtfm::runtime::describeExitStatus(int status) {
  if (WIFSIGNALED(status)) {
    int signal = WTERMSIG(status);
    const char *name = ::strsignal(signal);
    return "was killed by signal " + std::to_string(signal) +
           (name ? std::string(" (") + name + ")" : "");
  }
  return "exited with status " + std::to_string(WEXITSTATUS(status));
}

void dtfm::runtime::StopFilePoller::poll(bool failed) {
  if (!hooks || !hooks->poll || stopRequested || failed ||
      std::chrono::steady_clock::now() < next)
    return;
  if (hooks->poll()) {
    std::string error;
    stopRequested = format::writeFileAtomically(hooks->stopFile, "", error);
  }
  next = std::chrono::steady_clock::now() + std::chrono::milliseconds(200);
}

void dtfm::runtime::reportWorker(const std::string &device, int rank,
                                 const std::string &what) {
  std::fprintf(stderr, "dtfm-run: error: worker %s (rank %d) %s\n",
               device.c_str(), rank, what.c_str());
}

std::string dtfm::runtime::hungAndKilled(std::chrono::milliseconds timeout) {
  return "did not stop within " + std::to_string(timeout.count()) +
         " ms of the failure; killed";
}

bool dtfm::runtime::deviceLost(WorkerEnd end) {
  return end == WorkerEnd::Killed || end == WorkerEnd::Hung ||
         end == WorkerEnd::Unreachable;
}

std::string dtfm::runtime::thisExecutable(std::string &error) {
  char self[4096];
  ssize_t length = ::readlink("/proc/self/exe", self, sizeof self - 1);
  if (length <= 0) {
    error = "cannot find this executable";
    return "";
  }
  return std::string(self, static_cast<size_t>(length));
}

int dtfm::runtime::launchLocalWorkers(const std::vector<std::string> &arguments,
                                      const std::vector<std::string> &devices,
                                      std::chrono::milliseconds timeout) {
  return launchLocalWorkersWithOutcome(arguments, devices, timeout).status;
}

LaunchOutcome dtfm::runtime::launchLocalWorkersWithOutcome(
    const std::vector<std::string> &arguments,
    const std::vector<std::string> &devices,
    std::chrono::milliseconds timeout, const LaunchHooks *hooks) {
  int count = static_cast<int>(devices.size());
  LaunchOutcome outcome;
  outcome.ends.assign(count, WorkerEnd::NotStarted);
  outcome.signals.assign(count, 0);
  outcome.status = 1;
  if (count > kMaxWorkers) {
    std::fprintf(stderr, "dtfm-run: error: %d workers is more than one "
                         "machine runs (at most %d)\n",
                 count, kMaxWorkers);
    return outcome;
  }
  const char *tmp = std::getenv("TMPDIR");
  std::string pattern = std::string(tmp && *tmp ? tmp : "/tmp") +
                        "/dtfm-rendezvous-XXXXXX";
  std::vector<char> dir(pattern.begin(), pattern.end());
  dir.push_back('\0');
  if (!::mkdtemp(dir.data())) {
    std::fprintf(stderr, "dtfm-run: error: cannot create a rendezvous "
                         "directory under %s: %s\n",
                 tmp && *tmp ? tmp : "/tmp", std::strerror(errno));
    return outcome;
  }
  std::string storeDir = dir.data();

  // One BLAS thread per worker: the workers share this machine's cores.
  if (!std::getenv("OPENBLAS_NUM_THREADS"))
    ::setenv("OPENBLAS_NUM_THREADS", "1", 1);
  std::signal(SIGINT, stopWorkers);
  std::signal(SIGTERM, stopWorkers);
  // SIGKILL cannot be caught: the workers watch for their parent's death.
  ::setenv(kLauncherPidVariable, std::to_string(::getpid()).c_str(), 1);

  std::string problem;
  std::string self = thisExecutable(problem);
  if (self.empty()) {
    std::fprintf(stderr, "dtfm-run: error: %s\n", problem.c_str());
    return outcome;
  }

  std::vector<pid_t> pids(count, -1);
  int failures = 0;
  for (int rank = 0; rank < count; ++rank) {
    std::vector<std::string> args = {self};
    args.insert(args.end(), arguments.begin(), arguments.end());
    args.insert(args.end(),
                {"--rank", std::to_string(rank), "--store", storeDir});
    std::vector<char *> argv;
    for (std::string &a : args)
      argv.push_back(a.data());
    argv.push_back(nullptr);
    pid_t pid;
    if (::posix_spawn(&pid, self.c_str(), nullptr, nullptr, argv.data(), environ) !=
        0) {
      std::fprintf(stderr, "dtfm-run: error: cannot start the worker of %s\n",
                   devices[rank].c_str());
      ++failures;
      break;
    }
    pids[rank] = pid;
    outcome.ends[rank] = WorkerEnd::Finished;
    workerPids[rank] = pid;
    workerCount = rank + 1;
  }

  // Wait; after the first failure the others get `timeout` to stop.
  int running = 0;
  for (pid_t p : pids)
    running += p > 0;
  Clock::time_point deadline = Clock::time_point::max();
  if (failures)
    deadline = Clock::now() + timeout;
  StopFilePoller poller(hooks);
  while (running > 0) {
    poller.poll(failures > 0);
    int status = 0;
    pid_t pid = ::waitpid(-1, &status, WNOHANG);
    if (pid > 0) {
      for (int rank = 0; rank < count; ++rank) {
        if (pids[rank] != pid)
          continue;
        pids[rank] = -1;
        workerPids[rank] = -1;
        --running;
        if (outcome.ends[rank] == WorkerEnd::Hung)
          continue; // killed below, already named
        if (WIFSIGNALED(status)) {
          outcome.ends[rank] = WorkerEnd::Killed;
          outcome.signals[rank] = WTERMSIG(status);
        } else if (poller.requested() &&
                   WEXITSTATUS(status) == kExitStoppedAtCheckpoint) {
          outcome.ends[rank] = WorkerEnd::Stopped;
          continue; // asked for, not a failure
        } else if (WEXITSTATUS(status) != 0) {
          outcome.ends[rank] = WorkerEnd::Failed;
        }
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
          reportWorker(devices[rank], rank, describeExitStatus(status));
          if (failures++ == 0)
            deadline = Clock::now() + timeout;
        }
      }
      continue;
    }
    if (Clock::now() >= deadline) {
      for (int rank = 0; rank < count; ++rank)
        if (pids[rank] > 0) {
          reportWorker(devices[rank], rank, hungAndKilled(timeout));
          outcome.ends[rank] = WorkerEnd::Hung;
          ::kill(pids[rank], SIGKILL);
        }
      deadline = Clock::time_point::max();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  workerCount = 0;
  std::signal(SIGINT, SIG_DFL);
  std::signal(SIGTERM, SIG_DFL);
  ::nftw(storeDir.c_str(), removeEntry, 16, FTW_DEPTH | FTW_PHYS);
  outcome.status = failures ? 1 : 0;
  return outcome;
}
