//===- LaunchEnvironmentTest.cpp - Identity from torchrun, SLURM, K8s -----===//

#include "dtfm/Runtime/LaunchEnvironment.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

using namespace dtfm::runtime;

namespace {

/// The identity an environment of `variables` gives, or the error.
struct Outcome {
  bool ok = false;
  LaunchIdentity id;
  std::string error;
};

Outcome identityOf(const std::map<std::string, std::string> &variables) {
  Outcome o;
  o.ok = launchIdentityFrom(
      [&](const char *name) -> const char * {
        auto it = variables.find(name);
        return it == variables.end() ? nullptr : it->second.c_str();
      },
      o.id, o.error);
  return o;
}

TEST(LaunchEnvironment, NoLauncherLeavesTheIdentityUnset) {
  Outcome o = identityOf({{"HOME", "/root"}, {"MASTER_PORT", "29500"}});
  ASSERT_TRUE(o.ok) << o.error;
  EXPECT_FALSE(o.id.found());
}

TEST(LaunchEnvironment, TorchrunVariables) {
  Outcome o = identityOf({{"RANK", "3"},
                          {"WORLD_SIZE", "8"},
                          {"LOCAL_RANK", "1"},
                          {"LOCAL_WORLD_SIZE", "2"},
                          {"MASTER_ADDR", "10.0.0.7"},
                          {"MASTER_PORT", "29500"},
                          {"TORCHELASTIC_RUN_ID", "job42"},
                          // torchrun's variables win over SLURM's.
                          {"SLURM_PROCID", "0"},
                          {"SLURM_NTASKS", "1"}});
  ASSERT_TRUE(o.ok) << o.error;
  EXPECT_EQ(o.id.launcher, "torchrun");
  EXPECT_EQ(o.id.rank, 3);
  EXPECT_EQ(o.id.worldSize, 8);
  EXPECT_EQ(o.id.localRank, 1);
  EXPECT_EQ(o.id.rendezvous, "10.0.0.7:29500");
  EXPECT_EQ(o.id.runId, "job42");
  EXPECT_EQ(o.id.hosts, 4); // 8 processes, 2 per host
  EXPECT_EQ(o.id.describe(),
            "rank 3 of 8 from torchrun (RANK, WORLD_SIZE), rendezvous "
            "10.0.0.7:29500 (MASTER_ADDR, MASTER_PORT)");
  // torchrun's static rendezvous: its agent serves a store on MASTER_PORT.
  o = identityOf({{"RANK", "0"},
                  {"WORLD_SIZE", "2"},
                  {"LOCAL_RANK", "0"},
                  {"MASTER_ADDR", "n0"},
                  {"MASTER_PORT", "29500"},
                  {"TORCHELASTIC_USE_AGENT_STORE", "True"}});
  ASSERT_TRUE(o.ok) << o.error;
  EXPECT_EQ(o.id.rendezvous, "n0:29501");
}

TEST(LaunchEnvironment, SlurmVariables) {
  Outcome o = identityOf({{"SLURM_PROCID", "5"},
                          {"SLURM_NTASKS", "8"},
                          {"SLURM_LOCALID", "1"},
                          {"SLURM_JOB_NODELIST", "gpu[03-06,9],login1"},
                          {"SLURM_JOB_ID", "123456"}});
  ASSERT_TRUE(o.ok) << o.error;
  EXPECT_EQ(o.id.launcher, "SLURM");
  EXPECT_EQ(o.id.rank, 5);
  EXPECT_EQ(o.id.worldSize, 8);
  EXPECT_EQ(o.id.localRank, 1);
  // The first host, its zero padding kept; a port from the job's id.
  EXPECT_EQ(o.id.rendezvous, "gpu03:" + std::to_string(20000 + 123456 % 20000));
  EXPECT_EQ(o.id.runId, "123456");
  EXPECT_EQ(o.id.rendezvousFrom, "SLURM_JOB_NODELIST, a port from SLURM_JOB_ID");
  EXPECT_EQ(o.id.hosts, 0); // no node count given: unknown
  // MASTER_ADDR and MASTER_PORT, when the job script sets them, win.
  o = identityOf({{"SLURM_PROCID", "0"},
                  {"SLURM_NTASKS", "2"},
                  {"SLURM_JOB_NODELIST", "a,b"},
                  {"MASTER_ADDR", "head"},
                  {"MASTER_PORT", "4000"}});
  ASSERT_TRUE(o.ok) << o.error;
  EXPECT_EQ(o.id.rendezvous, "head:4000");
  // The step's node count says whether peers run elsewhere.
  o = identityOf({{"SLURM_PROCID", "0"},
                  {"SLURM_NTASKS", "2"},
                  {"SLURM_JOB_NODELIST", "a,b"},
                  {"SLURM_JOB_ID", "9"},
                  {"SLURM_NNODES", "3"},
                  {"SLURM_STEP_NUM_NODES", "2"}});
  ASSERT_TRUE(o.ok) << o.error;
  EXPECT_EQ(o.id.hosts, 2);
  // A run id unfit for store keys is refused by name.
  o = identityOf({{"SLURM_PROCID", "0"},
                  {"SLURM_NTASKS", "2"},
                  {"SLURM_JOB_NODELIST", "a"},
                  {"MASTER_PORT", "4000"},
                  {"SLURM_JOB_ID", "12/../x"}});
  EXPECT_FALSE(o.ok);
  EXPECT_EQ(o.error, "SLURM launch: SLURM_JOB_ID='12/../x' is not fit as the "
                     "run's id (letters, digits, '.', '_' and '-', at most "
                     "128; --run-id overrides it)");
}

TEST(LaunchEnvironment, RunIds) {
  EXPECT_TRUE(validRunId("job-42_a.b"));
  EXPECT_FALSE(validRunId(""));
  EXPECT_FALSE(validRunId("a b"));
  EXPECT_FALSE(validRunId("a/b"));
  EXPECT_FALSE(validRunId(std::string(129, 'a')));
}

TEST(LaunchEnvironment, InterfacesFromGlooAndNcclVariables) {
  std::vector<std::string> host = {"lo", "docker0", "eth0", "ib0"};
  auto pick = [&](std::map<std::string, std::string> variables,
                  std::string &name, std::string &from, std::string &error) {
    return interfaceFromEnvironment(
        [&](const char *n) -> const char * {
          auto it = variables.find(n);
          return it == variables.end() ? nullptr : it->second.c_str();
        },
        host, name, from, error);
  };
  std::string name, from, error;
  ASSERT_TRUE(pick({}, name, from, error));
  EXPECT_EQ(name, "");
  // Gloo's variable: its first name, exactly; it wins over NCCL's.
  ASSERT_TRUE(pick({{"GLOO_SOCKET_IFNAME", "ib0,eth0"},
                    {"NCCL_SOCKET_IFNAME", "eth"}},
                   name, from, error));
  EXPECT_EQ(name, "ib0");
  EXPECT_EQ(from, "GLOO_SOCKET_IFNAME");
  EXPECT_FALSE(pick({{"GLOO_SOCKET_IFNAME", "eth"}}, name, from, error));
  // NCCL's syntax: prefixes, "=" exact, "^" excluded.
  ASSERT_TRUE(pick({{"NCCL_SOCKET_IFNAME", "eth,ib"}}, name, from, error));
  EXPECT_EQ(name, "eth0");
  EXPECT_EQ(from, "NCCL_SOCKET_IFNAME");
  ASSERT_TRUE(pick({{"NCCL_SOCKET_IFNAME", "^lo,docker"}}, name, from, error));
  EXPECT_EQ(name, "eth0");
  ASSERT_TRUE(pick({{"NCCL_SOCKET_IFNAME", "=ib0"}}, name, from, error));
  EXPECT_EQ(name, "ib0");
  EXPECT_FALSE(pick({{"NCCL_SOCKET_IFNAME", "=ib"}}, name, from, error));
  EXPECT_EQ(error, "NCCL_SOCKET_IFNAME='=ib' selects no interface of this "
                   "host that is up with an IPv4 address");
}

TEST(LaunchEnvironment, KubernetesVariables) {
  // Kubeflow's PyTorchJob: RANK and WORLD_SIZE per pod, no LOCAL_RANK.
  Outcome o = identityOf({{"RANK", "1"},
                          {"WORLD_SIZE", "4"},
                          {"MASTER_ADDR", "job-master-0"},
                          {"MASTER_PORT", "23456"}});
  ASSERT_TRUE(o.ok) << o.error;
  EXPECT_EQ(o.id.launcher, "Kubernetes");
  EXPECT_EQ(o.id.rank, 1);
  EXPECT_EQ(o.id.localRank, 0);
  EXPECT_EQ(o.id.rendezvous, "job-master-0:23456");
  // An Indexed Job: the completion index is the rank.
  o = identityOf({{"JOB_COMPLETION_INDEX", "2"},
                  {"WORLD_SIZE", "4"},
                  {"MASTER_ADDR", "train-0.train"},
                  {"MASTER_PORT", "29500"}});
  ASSERT_TRUE(o.ok) << o.error;
  EXPECT_EQ(o.id.rank, 2);
  EXPECT_EQ(o.id.rankFrom, "JOB_COMPLETION_INDEX");
}

TEST(LaunchEnvironment, BadVariablesAreOneLineErrors) {
  struct Case {
    std::map<std::string, std::string> variables;
    std::string error;
  };
  for (const Case &c : std::vector<Case>{
           {{{"RANK", "4"}, {"LOCAL_RANK", "0"}, {"WORLD_SIZE", "4"},
             {"MASTER_ADDR", "h"}, {"MASTER_PORT", "1"}},
            "torchrun launch: RANK 4 is outside WORLD_SIZE 4"},
           {{{"RANK", "0"}, {"LOCAL_RANK", "0"}, {"WORLD_SIZE", "2"},
             {"MASTER_ADDR", "h"}},
            "torchrun launch: MASTER_PORT is not set"},
           {{{"RANK", "0"}, {"LOCAL_RANK", "0"}, {"WORLD_SIZE", "2"},
             {"MASTER_PORT", "29500"}},
            "torchrun launch: MASTER_ADDR is not set (rank 0's host)"},
           {{{"RANK", "-1"}, {"LOCAL_RANK", "0"}, {"WORLD_SIZE", "2"}},
            "torchrun launch: RANK='-1' is not a whole number in [0, 999999]"},
           {{{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "h"},
             {"MASTER_PORT", "70000"}},
            "Kubernetes launch: MASTER_PORT='70000' is not a whole number in "
            "[1, 65535]"},
           {{{"RANK", "0"}, {"MASTER_ADDR", "h"}, {"MASTER_PORT", "1"}},
            "Kubernetes launch: WORLD_SIZE is not set"},
           {{{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}},
            "SLURM launch: neither MASTER_ADDR nor SLURM_JOB_NODELIST is "
            "set (rank 0's host)"},
           {{{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"},
             {"SLURM_JOB_NODELIST", "node[1-2"}},
            "SLURM launch: SLURM_JOB_NODELIST='node[1-2' is not a node list"},
           {{{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"},
             {"SLURM_JOB_NODELIST", "n1"}},
            "SLURM launch: SLURM_JOB_ID is not set (and MASTER_PORT is not "
            "set either: the port of rank 0's rendezvous)"},
           {{{"SLURM_PROCID", "2"}, {"SLURM_NTASKS", "2"}},
            "SLURM launch: SLURM_PROCID 2 is outside SLURM_NTASKS 2"},
       }) {
    Outcome o = identityOf(c.variables);
    EXPECT_FALSE(o.ok);
    EXPECT_EQ(o.error, c.error);
    EXPECT_FALSE(o.id.found());
  }
}

TEST(LaunchEnvironment, NodeLists) {
  std::string host, error;
  for (auto [list, want] :
       {std::pair<std::string, std::string>{"n1", "n1"},
        {"n1,n2", "n1"},
        {"gpu[7]", "gpu7"},
        {"rack1-[001-004,010]", "rack1-001"},
        {"a[1-2],b[3-4]", "a1"}}) {
    ASSERT_TRUE(firstHostOfNodeList(list, host, error)) << list << error;
    EXPECT_EQ(host, want) << list;
  }
  for (std::string bad : {"", "[1-2]", "n[", "n[x]", "n[1]x", "n]1["})
    EXPECT_FALSE(firstHostOfNodeList(bad, host, error)) << bad;
}

} // namespace

namespace {

/// The plan rank a device map gives, or the error.
Outcome mapped(const std::string &text, const std::string &host, int local,
               const std::vector<std::vector<std::string>> &nodes) {
  Outcome o;
  DeviceMap map;
  std::vector<std::string> plan = {"gpu0", "gpu1", "gpu2", "gpu3"};
  o.ok = parseDeviceMap(text, "map.txt", map, o.error) &&
         rankFromDeviceMap(map, plan, nodes, host, local, "LOCAL_RANK",
                           o.id.rank, o.error);
  return o;
}

} // namespace

TEST(LaunchEnvironment, DeviceMapsPinPlanDevicesToHosts) {
  std::vector<std::vector<std::string>> nodes = {{"gpu0", "gpu1"},
                                                 {"gpu2", "gpu3"}};
  std::string map = "# host: its devices, by local rank\n"
                    "node-b.cluster gpu3 gpu2\n"
                    "node-a gpu0 gpu1  # the first node\n";
  Outcome o = mapped(map, "node-b.cluster", 0, nodes);
  ASSERT_TRUE(o.ok) << o.error;
  EXPECT_EQ(o.id.rank, 3);
  o = mapped(map, "node-a.cluster.local", 1, nodes); // the short name
  ASSERT_TRUE(o.ok) << o.error;
  EXPECT_EQ(o.id.rank, 1);

  auto error = [&](const std::string &text, const std::string &host,
                   int local) { return mapped(text, host, local, nodes).error; };
  EXPECT_EQ(error(map, "node-c", 0), "map.txt: this host (node-c) is not in it");
  EXPECT_EQ(error(map, "node-a", 2),
            "map.txt:3: host node-a runs 2 device(s), but this process is "
            "local rank 2 (LOCAL_RANK)");
  EXPECT_EQ(error("a gpu0 gpu1\nb gpu2\n", "a", 0),
            "map.txt: the plan's device gpu3 is on no host");
  EXPECT_EQ(error("a gpu0 gpu1\nb gpu2 gpu3 gpu9\n", "a", 0),
            "map.txt:2: device gpu9 is not one of the plan's");
  EXPECT_EQ(error("a gpu0 gpu1\nb gpu2 gpu1\n", "a", 0),
            "map.txt:2: device gpu1 is mapped twice (also line 1)");
  EXPECT_EQ(error("a gpu0 gpu1\na gpu2 gpu3\n", "a", 0),
            "map.txt:2: host a is listed twice (also line 1)");
  EXPECT_EQ(error("a gpu0 gpu2\nb gpu1 gpu3\n", "a", 0),
            "map.txt:1: host a holds gpu0 and gpu2, which the plan's "
            "cluster puts on different nodes (name each device's node in "
            "the cluster file)");
  EXPECT_EQ(error("a gpu0\nb gpu1\nc gpu2 gpu3\n", "a", 0),
            "map.txt: gpu0 and gpu1 are one node of the plan's cluster, but "
            "the map puts them on hosts a and b");
  EXPECT_EQ(error("a\n", "a", 0),
            "map.txt:1: expected a host and its devices, got 'a'");
  EXPECT_EQ(error("a gpu0 gpu1;rm\n", "a", 0),
            "map.txt:1: 'gpu1;rm' is not a host or device name (letters, "
            "digits, '.', '_', '-')");
  EXPECT_EQ(error("# nothing\n\n", "a", 0),
            "map.txt: no host in it (lines of 'HOST DEVICE [DEVICE...]')");
}
