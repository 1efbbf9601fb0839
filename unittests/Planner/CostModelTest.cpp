//===- CostModelTest.cpp - Matching, TSP and DT-FM costs ------------------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//

#include "PlannerTestUtils.h"
#include "dtfm/Planner/CostModel.h"
#include "dtfm/Planner/Matching.h"
#include "dtfm/Planner/Tsp.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <numeric>
#include <random>

using namespace dtfm::planner;

namespace {

double bruteForceBottleneck(const std::vector<double> &cost, int n) {
  std::vector<int> perm(n);
  std::iota(perm.begin(), perm.end(), 0);
  double best = 1e300;
  do {
    double worst = 0;
    for (int i = 0; i < n; ++i)
      worst = std::max(worst, cost[i * n + perm[i]]);
    best = std::min(best, worst);
  } while (std::next_permutation(perm.begin(), perm.end()));
  return best;
}

int bruteForceCheaperPairs(const std::vector<double> &cost, int n,
                           double bound) {
  std::vector<int> perm(n);
  std::iota(perm.begin(), perm.end(), 0);
  int most = 0;
  do {
    int cheaper = 0;
    for (int i = 0; i < n; ++i)
      cheaper += cost[i * n + perm[i]] < bound;
    most = std::max(most, cheaper);
  } while (std::next_permutation(perm.begin(), perm.end()));
  return most;
}

double bruteForceOpenTsp(const std::vector<double> &w, int n) {
  std::vector<int> perm(n);
  std::iota(perm.begin(), perm.end(), 0);
  double best = 1e300;
  do
    best = std::min(best, pathLength(w, n, perm));
  while (std::next_permutation(perm.begin(), perm.end()));
  return best;
}

TEST(BottleneckMatching, EqualsBruteForceOnRandomInstances) {
  std::mt19937_64 rng(1);
  for (int trial = 0; trial < 400; ++trial) {
    int n = 1 + trial % 7;
    // Few distinct values make ties common, the hard case for thresholds.
    std::uniform_int_distribution<int> value(0, trial % 2 ? 5 : 1000);
    std::vector<double> cost(n * n);
    for (double &c : cost)
      c = value(rng);
    std::vector<int> match;
    int below = -1;
    double ours = bottleneckPerfectMatching(cost, n, &match, &below);
    ASSERT_EQ(ours, bruteForceBottleneck(cost, n)) << "trial " << trial;
    // matchableBelow: the most pairs strictly cheaper than the bottleneck
    // that one permutation holds.
    EXPECT_EQ(below, bruteForceCheaperPairs(cost, n, ours)) << "trial "
                                                             << trial;
    // The returned permutation realises the bottleneck.
    std::vector<int> sorted = match;
    std::sort(sorted.begin(), sorted.end());
    for (int i = 0; i < n; ++i) {
      ASSERT_EQ(sorted[i], i);
      ASSERT_LE(cost[i * n + match[i]], ours);
    }
  }
}

/// A random symmetric n x n weight matrix with a zero diagonal.
std::vector<double> randomSymmetric(int n, std::mt19937_64 &rng) {
  std::uniform_real_distribution<double> value(0, 10);
  std::vector<double> w(n * n, 0);
  for (int i = 0; i < n; ++i)
    for (int j = i + 1; j < n; ++j)
      w[i * n + j] = w[j * n + i] = value(rng);
  return w;
}

TEST(OpenLoopTsp, ExactEqualsBruteForce) {
  std::mt19937_64 rng(2);
  for (int trial = 0; trial < 300; ++trial) {
    int n = 1 + trial % 8;
    std::vector<double> w = randomSymmetric(n, rng);
    std::vector<int> order;
    double ours = openLoopTsp(w, n, &order);
    EXPECT_NEAR(ours, bruteForceOpenTsp(w, n), 1e-9) << "trial " << trial;
    EXPECT_NEAR(pathLength(w, n, order), ours, 1e-9);
    std::sort(order.begin(), order.end());
    for (int i = 0; i < n; ++i)
      ASSERT_EQ(order[i], i);
  }
}

TEST(OpenLoopTsp, HeuristicIsNearlyAlwaysOptimalOnSmallInstances) {
  std::mt19937_64 rng(3);
  int optimal = 0, trials = 200;
  for (int trial = 0; trial < trials; ++trial) {
    int n = 4 + trial % 5;
    std::vector<double> w = randomSymmetric(n, rng);
    std::vector<int> order;
    double heuristic = openLoopTsp(w, n, &order, /*exactLimit=*/0);
    double exact = bruteForceOpenTsp(w, n);
    EXPECT_GE(heuristic, exact - 1e-9);
    EXPECT_NEAR(pathLength(w, n, order), heuristic, 1e-9);
    optimal += heuristic <= exact + 1e-9;
  }
  EXPECT_GE(optimal, trials * 98 / 100);
}

/// Four devices, D_DP = D_PP = 2, all delays 10 ms; costs worked by hand.
Cluster handCluster() {
  Cluster c;
  for (int i = 0; i < 4; ++i)
    c.devices.push_back({"d" + std::to_string(i), "r", 1e12, 1, 1e9});
  c.delayMs = SquareMatrix(4, 10);
  c.bandwidthGbps = SquareMatrix(4, 1);
  auto link = [&](int a, int b, double gbps) {
    c.bandwidthGbps(a, b) = c.bandwidthGbps(b, a) = gbps;
  };
  link(0, 1, 8);
  link(2, 3, 4);
  link(0, 2, 1);
  link(1, 3, 2);
  link(0, 3, 8);
  link(1, 2, 0.5);
  return c;
}

TEST(CostModel, HandComputedFourDevices) {
  Cluster c = handCluster();
  std::string error;
  ASSERT_TRUE(c.validate(error)) << error;
  CostModel model(c, {/*dataParallelBytes=*/1e9, /*pipelineBytes=*/1e8}, 2);
  // DP: each device sends c_DP / D_DP = 5e8 B = 4e9 bit.
  // {0,1} at 8 Gbps: 2 (0.01 + 0.5) = 1.02; {2,3} at 4 Gbps: 2 (0.01 + 1) = 2.02.
  EXPECT_NEAR(model.groupDataParallelCost({0, 1}), 1.02, 1e-12);
  EXPECT_NEAR(model.groupDataParallelCost({2, 3}), 2.02, 1e-12);
  // PP: c_PP = 8e8 bit. 0-2: 0.81, 1-3: 0.41, 0-3: 0.11, 1-2: 1.61.
  // Matchings {0-2, 1-3} -> 0.81, {0-3, 1-2} -> 1.61; the bottleneck is 0.81.
  std::vector<int> match;
  EXPECT_NEAR(model.groupPipelineWeight({0, 1}, {2, 3}, &match), 0.81, 1e-12);
  EXPECT_EQ(match, (std::vector<int>{0, 1}));
  LayoutCost cost = model.evaluate({{0, 1}, {2, 3}});
  EXPECT_NEAR(cost.dataParallel, 2.02, 1e-12);
  EXPECT_NEAR(cost.pipeline, 2 * 0.81, 1e-12);
  EXPECT_NEAR(cost.total(), 3.64, 1e-12);
  EXPECT_NEAR(model.totalCost({{0, 1}, {2, 3}}), 3.64, 1e-12);
  ASSERT_EQ(cost.matchings.size(), 1u);
  // The other split: {0,2} at 1 Gbps: 2 (0.01 + 4) = 8.02 dominates.
  EXPECT_NEAR(model.groupDataParallelCost({0, 2}), 8.02, 1e-12);
}

TEST(CostModel, DataParallelCostSumsOverPeersAndTakesTheWorstDevice) {
  Cluster c = handCluster();
  CostModel model(c, {1e9, 1e8}, 4);
  // Group of all 4 with c_DP/4 = 2.5e8 B = 2e9 bit per link. Device 0:
  // links to 1 (8 Gbps), 2 (1), 3 (8): 2 (0.03 + 0.25 + 2 + 0.25) = 5.06.
  // Device 2: to 0 (1), 1 (0.5), 3 (4): 2 (0.03 + 2 + 4 + 0.5) = 13.06.
  EXPECT_NEAR(model.groupDataParallelCost({0, 1, 2, 3}), 13.06, 1e-12);
}

TEST(CostModel, RingAllReduceIsNeverCheaperThanTheParameterServer) {
  Cluster c = handCluster();
  CostModel model(c, {1e9, 1e8}, 4);
  // Ring 0-1-2-3-0 moving c/4 = 2e9 bit per step: links 8, 0.5, 4, 8 Gbps;
  // slowest 1-2: 0.01 + 4 = 4.01 s; 2 (D - 1) = 6 steps: 24.06 s.
  EXPECT_NEAR(model.groupRingAllReduceCost({0, 1, 2, 3}), 24.06, 1e-9);
  EXPECT_LE(model.groupDataParallelCost({0, 1, 2, 3}),
            model.groupRingAllReduceCost({0, 1, 2, 3}));
  // Two devices: one exchange each way, the same for both algorithms.
  EXPECT_NEAR(model.groupRingAllReduceCost({0, 1}),
              model.groupDataParallelCost({0, 1}), 1e-12);
}

// GroupLinks gathers a group's links once (and keeps only the spokes that
// can be the slowest): every size costs what CostModel's pairwise matrices
// give, on random clusters and groups.
TEST(GroupLinks, EqualsThePairwiseCostsOnRandomGroups) {
  std::mt19937_64 rng(23);
  for (int trial = 0; trial < 30; ++trial) {
    Cluster c = testutil::randomCluster(9, rng);
    std::vector<int> group(c.size());
    std::iota(group.begin(), group.end(), 0);
    std::shuffle(group.begin(), group.end(), rng);
    group.resize(2 + trial % 7);
    GroupLinks links(c, group);
    for (double bytes : {0.0, 1e3, 4e6, 3e9}) {
      int dp = 1 + trial % 4;
      CostModel model(c, {bytes, 0}, dp);
      EXPECT_NEAR(links.dataParallelCost(bytes, dp),
                  model.groupDataParallelCost(group),
                  1e-12 * model.groupDataParallelCost(group));
      EXPECT_DOUBLE_EQ(links.ringAllReduceCost(bytes, dp),
                       model.groupRingAllReduceCost(group));
      double slowest = 0;
      for (size_t i = 0; i < group.size(); ++i)
        slowest = std::max(
            slowest,
            c.transferSeconds(group[i], group[(i + 1) % group.size()], bytes));
      EXPECT_DOUBLE_EQ(links.ringAllGatherCost(bytes),
                       static_cast<double>(group.size() - 1) * slowest);
    }
  }
}

TEST(Cluster, ValidationNamesTheLink) {
  Cluster c = handCluster();
  c.bandwidthGbps(1, 2) = 0;
  std::string error;
  EXPECT_FALSE(c.validate(error));
  EXPECT_EQ(error, "link d1 <-> d2: bandwidth must be finite and > 0, got "
                   "0.000000 Gbps");
}

TEST(Cluster, CsvErrorsNameFileLineAndColumn) {
  std::string dir = ::testing::TempDir();
  auto write = [&](const std::string &name, const std::string &text) {
    std::ofstream(dir + name) << text;
    return dir + name;
  };
  SquareMatrix m;
  std::string error;
  EXPECT_FALSE(readCsvMatrix(write("ragged.csv", "1,2\n3\n"), m, error));
  EXPECT_NE(error.find("ragged.csv:2: expected 2 columns, got 1"),
            std::string::npos)
      << error;
  EXPECT_FALSE(readCsvMatrix(write("nonsquare.csv", "1,2\n3,4\n5,6\n"), m,
                             error));
  EXPECT_NE(error.find("not square (3 rows, 2 columns)"), std::string::npos)
      << error;
  EXPECT_FALSE(readCsvMatrix(write("nan.csv", "1,nan\n3,4\n"), m, error));
  EXPECT_NE(error.find("nan.csv:1:2: expected a finite number, got 'nan'"),
            std::string::npos)
      << error;
  EXPECT_FALSE(readCsvMatrix(dir + "missing.csv", m, error));
  ASSERT_TRUE(readCsvMatrix(write("ok.csv", "0, 1\r\n3,0\n\n"), m, error))
      << error;
  m.symmetrize();
  EXPECT_EQ(m(0, 1), 2);
  EXPECT_EQ(m(1, 0), 2);
}

TEST(Cluster, LoadsTheDtfmScenarios) {
  std::string dir = testutil::scenariosDir();
  if (dir.empty())
    GTEST_SKIP() << "../shared/scenarios not found (set DTFM_SCENARIOS_DIR)";
  for (const char *prefix : {"0_dc_ondemand", "1_dc_spot", "2_multi_dc",
                             "3_geo_regional", "4_geo_worldwide"}) {
    Cluster c;
    std::string error;
    ASSERT_TRUE(loadScenarioMatrices(dir, prefix, c, error)) << error;
    EXPECT_EQ(c.size(), 64u) << prefix;
    for (size_t i = 0; i < c.size(); ++i)
      for (size_t j = 0; j < c.size(); ++j)
        ASSERT_EQ(c.bandwidthGbps(i, j), c.bandwidthGbps(j, i));
  }
}

} // namespace
