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
  EXPECT_EQ(o.id.describe(),
            "rank 3 of 8 from torchrun (RANK, WORLD_SIZE), rendezvous "
            "10.0.0.7:29500 (MASTER_ADDR, MASTER_PORT)");
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
  // MASTER_ADDR and MASTER_PORT, when the job script sets them, win.
  o = identityOf({{"SLURM_PROCID", "0"},
                  {"SLURM_NTASKS", "2"},
                  {"SLURM_JOB_NODELIST", "a,b"},
                  {"MASTER_ADDR", "head"},
                  {"MASTER_PORT", "4000"}});
  ASSERT_TRUE(o.ok) << o.error;
  EXPECT_EQ(o.id.rendezvous, "head:4000");
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
