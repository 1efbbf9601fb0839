//===- Hetero.cpp - Devices of mixed speed and memory in one plan ---------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//

#include "dtfm/Planner/Hetero.h"

#include <algorithm>
#include <numeric>

using namespace dtfm::planner;

std::vector<int> dtfm::planner::evenBounds(int blocks, int stages) {
  std::vector<int> bounds{0};
  for (int s = 0; s < stages; ++s)
    bounds.push_back(bounds.back() + blocks / stages +
                     (s < blocks % stages ? 1 : 0));
  return bounds;
}

HeteroModel::HeteroModel(HeteroProblem p)
    : problem(std::move(p)),
      links(*problem.cluster, {0, problem.boundaryBytes},
            problem.dataParallel) {}

/// The stage devices: each group at its slowest and smallest member.
static std::vector<StageDevice> stageDevices(const Cluster &cluster,
                                             const Partition &stages) {
  std::vector<StageDevice> devices;
  for (const std::vector<int> &group : stages) {
    StageDevice d{cluster.devices[group[0]].name,
                  std::numeric_limits<double>::infinity(),
                  std::numeric_limits<double>::infinity()};
    for (int member : group) {
      d.speed = std::min(d.speed, cluster.devices[member].speed());
      d.memoryBytes =
          std::min(d.memoryBytes, cluster.devices[member].memoryBytes);
    }
    devices.push_back(d);
  }
  return devices;
}

/// The even split as a plan, or false when a stage does not fit.
static bool evenPlan(const HeteroProblem &problem,
                     const std::vector<StageDevice> &devices, StagePlan &plan,
                     std::string &error) {
  int n = static_cast<int>(problem.blocks.size());
  int pp = static_cast<int>(devices.size());
  if (n < pp) {
    error = "fewer blocks than stages";
    return false;
  }
  plan = StagePlan();
  plan.bounds = evenBounds(n, pp);
  for (int s = 0; s < pp; ++s) {
    double flops = 0;
    for (int i = plan.bounds[s]; i < plan.bounds[s + 1]; ++i)
      flops += problem.blocks[i].flops;
    double memory = stageMemoryBytes(problem.blocks, plan.bounds[s],
                                     plan.bounds[s + 1], s, pp,
                                     problem.stageOptions);
    if (memory > devices[s].memoryBytes) {
      error = "device " + devices[s].name + " cannot hold its stage";
      return false;
    }
    plan.stageSeconds.push_back(flops / devices[s].speed);
    plan.stageMemoryBytes.push_back(memory);
    plan.bottleneckSeconds =
        std::max(plan.bottleneckSeconds, plan.stageSeconds.back());
  }
  return true;
}

HeteroCost HeteroModel::score(const Partition &stages, StagePlan plan) const {
  HeteroCost cost;
  const Cluster &cluster = *problem.cluster;
  int pp = static_cast<int>(stages.size());
  // FusionLLM eq. 3 over the stages.
  double sum = 0, slowestStep = 0;
  for (int s = 0; s < pp; ++s) {
    double compute = plan.stageSeconds[s];
    double comm = s + 1 < pp ? 2.0 * links.groupPipelineWeight(stages[s],
                                                               stages[s + 1])
                             : 0.0;
    sum += compute + comm;
    slowestStep = std::max({slowestStep, compute, comm});
  }
  int microBatches = std::max(1, problem.stageOptions.microBatches);
  cost.pipelineSeconds = sum + (microBatches - 1) * slowestStep;
  // Data-parallel synchronisation of each stage's own gradients.
  for (int s = 0; s < pp; ++s) {
    double parameterBytes = 0;
    for (int i = plan.bounds[s]; i < plan.bounds[s + 1]; ++i)
      parameterBytes += problem.blocks[i].parameterBytes;
    CostModel dp(cluster,
                 {parameterBytes * problem.gradientBytesPerParameterByte, 0},
                 problem.dataParallel);
    cost.dataParallelSeconds =
        std::max(cost.dataParallelSeconds, dp.groupDataParallelCost(stages[s]));
  }
  cost.plan = std::move(plan);
  cost.feasible = true;
  return cost;
}

HeteroCost HeteroModel::evaluate(const Partition &stages,
                                 bool rebalance) const {
  std::vector<StageDevice> devices = stageDevices(*problem.cluster, stages);
  HeteroCost best;
  StagePlan even;
  std::string evenError;
  bool evenFits = evenPlan(problem, devices, even, evenError);
  if (evenFits)
    best = score(stages, std::move(even));
  else
    best.error = evenError;
  if (!rebalance)
    return best;
  // The compute-optimal split, unless the even one is better overall (its
  // smaller stages can sync their gradients faster).
  StagePlan balanced;
  std::string error;
  if (!partitionChain(problem.blocks, devices, problem.stageOptions, balanced,
                      error)) {
    if (!best.feasible)
      best.error = error;
    return best;
  }
  HeteroCost candidate = score(stages, std::move(balanced));
  if (!best.feasible || candidate.iterationSeconds() < best.iterationSeconds())
    return candidate;
  return best;
}

Partition dtfm::planner::searchHetero(const HeteroModel &model,
                                      const SearchOptions &options,
                                      int64_t *evaluations) {
  const HeteroProblem &problem = model.getProblem();
  const Cluster &cluster = *problem.cluster;
  int n = static_cast<int>(cluster.size());
  int dp = options.dataParallel, pp = options.pipelineParallel;

  std::vector<Partition> seeds;
  Partition rank(pp), strided(pp), bySpeed(pp);
  for (int d = 0; d < n; ++d) {
    rank[d / dp].push_back(d);
    strided[d % pp].push_back(d);
  }
  std::vector<int> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    return cluster.devices[a].speed() > cluster.devices[b].speed();
  });
  for (int i = 0; i < n; ++i)
    bySpeed[i / dp].push_back(order[i]);
  seeds = {rank, strided, bySpeed};
  // OP-Fence's layout (already in stage order).
  {
    CostModel unused(cluster, {0, 0}, dp);
    SearchOptions fenceOptions = options;
    fenceOptions.progress = nullptr;
    seeds.push_back(
        searchLayout(unused, SearchAlgorithm::OpFence, fenceOptions).partition);
  }
  // DT-FM's communication-optimal layout, in its pipeline order, for its
  // own volumes: c_DP = one stage's share of the gradients.
  double parameterBytes = 0;
  for (const ChainBlock &block : problem.blocks)
    parameterBytes += block.parameterBytes;
  CostModel dtfm(cluster,
                 {parameterBytes * problem.gradientBytesPerParameterByte / pp,
                  problem.boundaryBytes},
                 dp);
  SearchOptions dtfmOptions = options;
  dtfmOptions.progress = nullptr;
  dtfmOptions.timeBudgetSeconds = options.timeBudgetSeconds / 4;
  SearchResult best = searchLayout(dtfm, SearchAlgorithm::Genetic, dtfmOptions);
  Partition ordered;
  for (int g : best.cost.order)
    ordered.push_back(best.partition[g]);
  seeds.push_back(ordered);

  LayoutObjective objective = [&](const Partition &p) {
    return model.evaluate(p).iterationSeconds();
  };
  return searchWithObjective(cluster, objective, options, seeds, evaluations);
}
