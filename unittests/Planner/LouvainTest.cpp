//===- LouvainTest.cpp - Louvain community detection ----------------------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//

#include "PlannerTestUtils.h"
#include "dtfm/Planner/Louvain.h"

#include <gtest/gtest.h>

#include <cstdlib>

using namespace dtfm::planner;

namespace {

TEST(Louvain, RecoversPlantedBandwidthClusters) {
  // Three regions of 4, 3 and 5 devices: 10 Gbps inside, 0.2-0.5 between.
  std::vector<int> region{0, 0, 0, 0, 1, 1, 1, 2, 2, 2, 2, 2};
  int n = region.size();
  std::mt19937_64 rng(4);
  std::uniform_real_distribution<double> slow(0.2, 0.5);
  Cluster c;
  c.bandwidthGbps = SquareMatrix(n);
  c.delayMs = SquareMatrix(n);
  for (int i = 0; i < n; ++i) {
    c.devices.push_back({"d" + std::to_string(i), "r", 1, 1, 1});
    for (int j = i + 1; j < n; ++j)
      c.bandwidthGbps(i, j) = c.bandwidthGbps(j, i) =
          region[i] == region[j] ? 10 : slow(rng);
  }
  std::vector<int> found = clusterDevicesByBandwidth(c);
  EXPECT_EQ(found, region);
}

TEST(Louvain, NeverWorseThanSingletonsOrOneCommunityAndDeterministic) {
  std::mt19937_64 rng(8);
  for (int trial = 0; trial < 50; ++trial) {
    int n = 4 + trial % 12;
    Cluster c = testutil::randomCluster(n, rng);
    std::vector<double> w(n * n, 0);
    for (int i = 0; i < n; ++i)
      for (int j = 0; j < n; ++j)
        if (i != j)
          w[i * n + j] = c.bandwidthGbps(i, j);
    std::vector<int> labels = louvain(w, n);
    EXPECT_EQ(labels, louvain(w, n));
    std::vector<int> singletons(n), one(n, 0);
    for (int i = 0; i < n; ++i)
      singletons[i] = i;
    double q = modularity(w, n, labels);
    EXPECT_GE(q, modularity(w, n, singletons) - 1e-12);
    EXPECT_GE(q, modularity(w, n, one) - 1e-12);
  }
}

TEST(Louvain, ScenarioPresetsSplitAlongRegions) {
  Cluster c;
  std::string error;
  ASSERT_TRUE(loadClusterFile(testutil::sourceDir() +
                                  "/examples/clusters/multi-dc.textproto",
                              c, error))
      << error;
  std::vector<int> labels = clusterDevicesByBandwidth(c);
  for (size_t i = 0; i < c.size(); ++i)
    for (size_t j = 0; j < c.size(); ++j)
      EXPECT_EQ(labels[i] == labels[j],
                c.devices[i].region == c.devices[j].region);
}

} // namespace
