//===- JobAuthTest.cpp - The control plane against hostile peers ----------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//
//
// The job token (loading, its exchange), the rendezvous store behind its
// gate, and an agent's checks of what its coordinator sends -- each tried
// as a peer without the token, an impostor server, a flood of idle and
// slow connections and a careless operator would.
//
//===----------------------------------------------------------------------===//

#include "dtfm/Runtime/Agents.h"
#include "dtfm/Runtime/JobToken.h"
#include "dtfm/Support/Sha256.h"

#include "JobAuth.h"
#include "Rendezvous.h"

#include <gtest/gtest.h>

#include <dirent.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <climits>
#include <thread>

using namespace dtfm;
using namespace dtfm::runtime;
using namespace dtfm::runtime::rendezvous;
using Clock = std::chrono::steady_clock;

namespace {

const std::string kToken(64, 'a');
const std::string kOtherToken(64, 'b');

std::string freshFolder() {
  char pattern[] = "/tmp/dtfm-jobauth-test-XXXXXX";
  const char *dir = ::mkdtemp(pattern);
  EXPECT_NE(dir, nullptr);
  return dir ? dir : "/tmp";
}

void writeFile(const std::string &path, const std::string &text,
               mode_t mode) {
  std::ofstream(path) << text;
  ::chmod(path.c_str(), mode);
}

int rawConnect(int port) {
  std::string error;
  int fd = connectWithin("127.0.0.1", port, std::chrono::milliseconds(2000),
                         error);
  EXPECT_GE(fd, 0) << error;
  return fd;
}

int openDescriptors() {
  int count = 0;
  if (DIR *d = ::opendir("/proc/self/fd")) {
    while (::readdir(d))
      ++count;
    ::closedir(d);
  }
  return count;
}

} // namespace

TEST(JobToken, LoadedFromAFileOnlyItsOwnerReadsOrTheEnvironment) {
  std::string dir = freshFolder(), token, error;
  writeFile(dir + "/ok", kToken + "\n", 0600);
  ASSERT_TRUE(loadJobToken(dir + "/ok", nullptr, token, error)) << error;
  EXPECT_EQ(token, kToken);
  ASSERT_TRUE(loadJobToken("", kToken.c_str(), token, error)) << error;
  EXPECT_EQ(token, kToken);
  ASSERT_TRUE(loadJobToken("", nullptr, token, error));
  EXPECT_EQ(token, "");
  // The same token twice is one; two tokens are a mistake.
  EXPECT_TRUE(loadJobToken(dir + "/ok", kToken.c_str(), token, error));
  EXPECT_FALSE(loadJobToken(dir + "/ok", kOtherToken.c_str(), token, error));
  EXPECT_NE(error.find("hold different tokens"), std::string::npos) << error;

  writeFile(dir + "/open", kToken, 0644);
  EXPECT_FALSE(loadJobToken(dir + "/open", nullptr, token, error));
  EXPECT_NE(error.find("other users can read it"), std::string::npos) << error;
  writeFile(dir + "/short", "abc\n", 0600);
  EXPECT_FALSE(loadJobToken(dir + "/short", nullptr, token, error));
  EXPECT_NE(error.find("at least 32 characters"), std::string::npos) << error;
  writeFile(dir + "/spaces", std::string(20, 'a') + " " + std::string(20, 'a'),
            0600);
  EXPECT_FALSE(loadJobToken(dir + "/spaces", nullptr, token, error));
  EXPECT_NE(error.find("character 21"), std::string::npos) << error;
  EXPECT_FALSE(loadJobToken(dir + "/missing", nullptr, token, error));
  EXPECT_FALSE(loadJobToken("", "short", token, error));
  EXPECT_NE(error.find("DTFM_JOB_TOKEN"), std::string::npos) << error;

  std::string a = freshJobToken(error), b = freshJobToken(error);
  EXPECT_EQ(a.size(), 64u);
  EXPECT_NE(a, b);
  EXPECT_EQ(jobTokenProblem(a, "fresh"), "");
  std::filesystem::remove_all(dir);
}

TEST(JobAuth, OnlyAPeerWithTheTokenReachesTheStore) {
  TcpStoreServer server;
  std::string error;
  ASSERT_TRUE(server.start(0, kToken, error)) << error;
  auto client = TcpStoreClient::connect("127.0.0.1", server.port(), kToken,
                                        std::chrono::milliseconds(5000), error);
  ASSERT_TRUE(client) << error;
  client->put("k", {'v'});
  std::vector<char> value;
  ASSERT_TRUE(client->peek("k", value));
  EXPECT_EQ(value, std::vector<char>{'v'});

  // Another job's token is refused at once, in one line.
  Clock::time_point start = Clock::now();
  auto stranger = TcpStoreClient::connect(
      "127.0.0.1", server.port(), kOtherToken, std::chrono::milliseconds(5000),
      error);
  EXPECT_FALSE(stranger);
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(2));
  EXPECT_NE(error.find("refused this job token"), std::string::npos) << error;
  EXPECT_EQ(error.find('\n'), std::string::npos);

  // A peer that skips the exchange and sends a request (a forged key)
  // never reaches the parser: the key is not set.
  int raw = rawConnect(server.port());
  std::string forged("S\x08\0\0\0world/1\x01\0\0\0x", 18);
  ::send(raw, forged.data(), forged.size(), MSG_NOSIGNAL);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_FALSE(client->has("world/1"));
  ::close(raw);
  Clock::time_point wait = Clock::now() + std::chrono::seconds(5);
  while (server.gateCounts().dropped < 1 && Clock::now() < wait)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(server.gateCounts().refused, 1u); // the stranger
  EXPECT_EQ(server.gateCounts().dropped, 1u); // the forger, 18 bytes short
  EXPECT_EQ(server.gateCounts().admitted, 1u);
}

TEST(JobAuth, AClientNeverTalksToAServerWithoutTheToken) {
  // An impostor that answers '+' without knowing the token.
  std::string error;
  int listener = listenOn(0, error);
  ASSERT_GE(listener, 0);
  int port = listeningPort(listener);
  std::thread impostor([listener] {
    int fd = acceptWaiting(listener, 5000);
    std::string challenge = std::string(auth::kGreeting) + "S" +
                            std::string(auth::kNonceBytes, 'n');
    writeAll(fd, challenge.data(), challenge.size());
    char response[auth::kResponseBytes];
    readAll(fd, response, sizeof response);
    std::string verdict = "+" + std::string(auth::kMacBytes, 'x');
    writeAll(fd, verdict.data(), verdict.size());
    ::close(fd);
  });
  int fd = rawConnect(port);
  setSocketDeadline(fd, std::chrono::milliseconds(3000));
  EXPECT_EQ(auth::proveJobToken(fd, kToken, auth::Channel::Store, "impostor",
                                error),
            auth::Proof::NotTheJobs);
  EXPECT_NE(error.find("does not hold this job's token"), std::string::npos)
      << error;
  ::close(fd);
  impostor.join();

  // Something else entirely (an HTTP server, an old dtfm).
  std::thread other([listener] {
    int fd = acceptWaiting(listener, 5000);
    writeAll(fd, "HTTP/1.1 400 Bad\r\n\r\n", 20);
    ::close(fd);
  });
  fd = rawConnect(port);
  setSocketDeadline(fd, std::chrono::milliseconds(3000));
  EXPECT_EQ(auth::proveJobToken(fd, kToken, auth::Channel::Store, "other",
                                error),
            auth::Proof::NotDtfm);
  ::close(fd);
  other.join();
  // A store's proof is no agent channel's.
  TcpStoreServer store;
  ASSERT_TRUE(store.start(0, kToken, error));
  EXPECT_EQ(auth::connectProven("127.0.0.1", store.port(), kToken,
                                auth::Channel::Agents,
                                std::chrono::milliseconds(3000), error),
            -1);
  EXPECT_NE(error.find("another dtfm channel"), std::string::npos) << error;
  ::close(listener);
}

TEST(JobAuth, TheStoreServesUnderAFloodOfIdleAndSlowConnections) {
  TcpStoreServer server;
  std::string error;
  ASSERT_TRUE(server.start(0, kToken, error)) << error;
  int before = openDescriptors();
  // 300 connections that never answer, a slowloris dribbling its proof,
  // and one that names a 4 GiB length instead of proving anything.
  std::vector<int> flood;
  for (int i = 0; i < 300; ++i)
    flood.push_back(rawConnect(server.port()));
  int slow = rawConnect(server.port());
  ::send(slow, "x", 1, MSG_NOSIGNAL);
  int huge = rawConnect(server.port());
  ::send(huge, "S\xff\xff\xff\xff", 5, MSG_NOSIGNAL);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  // The server holds at most its cap of unproven connections.
  EXPECT_LE(openDescriptors() - before,
            static_cast<int>(auth::AuthGate::kMaxUnproven) + 302 + 4);
  // A real rank still gets in, and quickly.
  Clock::time_point start = Clock::now();
  auto client = TcpStoreClient::connect("127.0.0.1", server.port(), kToken,
                                        std::chrono::milliseconds(10000),
                                        error);
  ASSERT_TRUE(client) << error;
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(3));
  client->put("alive", {'1'});
  EXPECT_TRUE(client->has("alive"));
  auth::AuthGate::Counts counts = server.gateCounts();
  EXPECT_GE(counts.evicted, 300u - auth::AuthGate::kMaxUnproven);
  EXPECT_EQ(counts.admitted, 1u);
  // After an authenticated peer's bad request (a length over the bound),
  // only its own connection closes.
  int careless = auth::connectProven("127.0.0.1", server.port(), kToken,
                                     auth::Channel::Store,
                                     std::chrono::milliseconds(5000), error);
  ASSERT_GE(careless, 0) << error;
  ::send(careless, "S\xf0\xff\xff\x7f", 5, MSG_NOSIGNAL);
  char byte = 0;
  EXPECT_EQ(::recv(careless, &byte, 1, 0), 0); // closed, nothing allocated
  ::close(careless);
  EXPECT_TRUE(client->has("alive"));
  for (int fd : flood)
    ::close(fd);
  ::close(slow);
  ::close(huge);
}

TEST(AgentChecks, PathsFromTheCoordinatorStayInsideTheRoots) {
  std::string root = freshFolder(), outside = freshFolder();
  char resolved[PATH_MAX];
  ASSERT_TRUE(::realpath(root.c_str(), resolved));
  std::vector<std::string> roots = {resolved};
  ::mkdir((root + "/ckpt").c_str(), 0755);
  writeFile(root + "/plan.pb", "x", 0644);
  ::symlink(outside.c_str(), (root + "/escape").c_str());
  EXPECT_EQ(pathOutsideRoots("p", root + "/plan.pb", "/", roots), "");
  EXPECT_EQ(pathOutsideRoots("p", "plan.pb", root, roots), "");
  EXPECT_EQ(pathOutsideRoots("p", "ckpt/new-file", root, roots), "");
  EXPECT_EQ(pathOutsideRoots("p", root, "/", roots), "");
  std::string nul = root + "/plan.pb";
  nul += '\0';
  nul += "x";
  EXPECT_NE(pathOutsideRoots("p", nul, "/", roots).find("NUL"),
            std::string::npos);
  EXPECT_NE(pathOutsideRoots("p", root + "/ckpt/../plan.pb", "/", roots)
                .find("'..' component"),
            std::string::npos);
  EXPECT_NE(pathOutsideRoots("p", "/etc/passwd", "/", roots).find("outside"),
            std::string::npos);
  EXPECT_NE(pathOutsideRoots("p", "escape/x", root, roots).find("outside"),
            std::string::npos);
  EXPECT_NE(pathOutsideRoots("p", "nowhere/x", root, roots)
                .find("its folder does not exist"),
            std::string::npos);
  EXPECT_NE(pathOutsideRoots("p", "", root, roots).find("empty"),
            std::string::npos);
  std::filesystem::remove_all(root);
  std::filesystem::remove_all(outside);
}

TEST(AgentChecks, OnlyTheWorkerFlagsOfTheListPass) {
  std::string root = freshFolder();
  char resolved[PATH_MAX];
  ASSERT_TRUE(::realpath(root.c_str(), resolved));
  AgentOptions options;
  options.roots = {resolved};
  writeFile(root + "/plan.pb", "x", 0644);
  writeFile(root + "/mine.so", "x", 0644);
  options.plugins = {root + "/mine.so"};
  auto problem = [&](std::vector<std::string> args) {
    return workerArgumentsProblem(args, root, options);
  };
  EXPECT_EQ(problem({"plan.pb", "--execute", "--steps", "5", "--log",
                     "run.jsonl", "--trace=t.json", "--check-finite",
                     "--load-dtfm-plugin=" + root + "/mine.so"}),
            "");
  EXPECT_NE(problem({"plan.pb"}).find("do not start with a plan"),
            std::string::npos);
  EXPECT_NE(problem({"plan.pb", "--execute", "--rendezvous", "x:1"})
                .find("not a worker flag"),
            std::string::npos);
  EXPECT_NE(problem({"plan.pb", "--execute", "--agent", "x:1"})
                .find("not a worker flag"),
            std::string::npos);
  EXPECT_NE(problem({"plan.pb", "--execute", "--load-dtfm-plugin=/tmp/evil.so"})
                .find("was not started with"),
            std::string::npos);
  EXPECT_NE(problem({"plan.pb", "--execute", "--save-params", "/etc/x"})
                .find("outside"),
            std::string::npos);
  EXPECT_NE(problem({"/etc/passwd", "--execute"}).find("outside"),
            std::string::npos);
  EXPECT_NE(problem({"plan.pb", "--execute", "--steps"}).find("no value"),
            std::string::npos);
  EXPECT_NE(problem({"plan.pb", "--execute", "--check-finite=1"})
                .find("takes no value"),
            std::string::npos);
  std::filesystem::remove_all(root);
}
