//===- StageDegrees.cpp - A tensor-parallel degree per stage --------------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//

#include "dtfm/Planner/StageDegrees.h"

#include <algorithm>
#include <limits>
#include <optional>
#include <set>
#include <tuple>

using namespace dtfm::planner;

bool dtfm::planner::stageTensorParallelGroups(
    const Cluster &cluster, const std::vector<int64_t> &degrees,
    int dataParallel, std::vector<std::vector<std::vector<int>>> &stageGroups,
    std::string &error) {
  std::vector<std::vector<int>> free = nodeMembers(cluster);
  auto slowest = [&](const std::vector<int> &node) {
    double speed = std::numeric_limits<double>::infinity();
    for (int d : node)
      speed = std::min(speed, cluster.devices[d].speed());
    return speed;
  };
  std::stable_sort(free.begin(), free.end(),
                   [&](const std::vector<int> &a, const std::vector<int> &b) {
                     return slowest(a) < slowest(b);
                   });
  size_t pp = degrees.size();
  stageGroups.assign(pp, {});
  std::vector<size_t> order(pp);
  for (size_t s = 0; s < pp; ++s)
    order[s] = s;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return degrees[a] > degrees[b];
  });
  for (size_t s : order)
    for (int k = 0; k < dataParallel; ++k) {
      auto node = std::find_if(free.begin(), free.end(),
                               [&](const std::vector<int> &devices) {
                                 return static_cast<int64_t>(devices.size()) >=
                                        degrees[s];
                               });
      if (node == free.end()) {
        error = "stage " + std::to_string(s) + " needs " +
                std::to_string(dataParallel) + " groups of " +
                std::to_string(degrees[s]) +
                " devices inside a node and cluster '" + cluster.name +
                "' has no node left with " + std::to_string(degrees[s]) +
                " free devices";
        return false;
      }
      stageGroups[s].emplace_back(node->begin(), node->begin() + degrees[s]);
      node->erase(node->begin(), node->begin() + degrees[s]);
    }
  return true;
}

Workload dtfm::planner::spliceStageWorkloads(
    const std::vector<const Workload *> &stageModels,
    const std::vector<int> &bounds) {
  Workload spliced = *stageModels.front();
  for (size_t s = 0; s < stageModels.size(); ++s)
    for (int i = bounds[s]; i < bounds[s + 1]; ++i)
      spliced.blocks[i] = stageModels[s]->blocks[i];
  return spliced;
}

/// The groups as devices (groupCluster), stage-major, and the layout on
/// them: stage s holds its groups' indices.
static Cluster
groupedLayout(const Cluster &cluster,
              const std::vector<std::vector<std::vector<int>>> &stageGroups,
              Partition &layout) {
  std::vector<std::vector<int>> groups;
  layout.assign(stageGroups.size(), {});
  for (size_t s = 0; s < stageGroups.size(); ++s)
    for (const std::vector<int> &group : stageGroups[s]) {
      layout[s].push_back(static_cast<int>(groups.size()));
      groups.push_back(group);
    }
  return groupCluster(cluster, groups);
}

/// hetero's model with the bounds fixed, on the groups as devices.
static HeteroCost scoreOnGroups(const Cluster &grouped, const Partition &layout,
                                const Workload &workload,
                                const TrainingOptions &training,
                                const StageDegreeChoice &choice,
                                const std::vector<int> &bounds) {
  HeteroProblem hetero;
  hetero.cluster = &grouped;
  hetero.workload = workload;
  hetero.training = training;
  hetero.training.stages.microBatches = choice.microBatches;
  hetero.dataParallel = choice.dataParallel;
  hetero.pipelineParallel = static_cast<int>(layout.size());
  hetero.fixedBounds = bounds;
  return HeteroModel(std::move(hetero)).evaluate(layout);
}

HeteroCost dtfm::planner::scoreStageLayout(const Cluster &cluster,
                                           const Workload &workload,
                                           const TrainingOptions &training,
                                           const StageDegreeChoice &choice,
                                           const std::vector<int> &bounds) {
  Partition layout;
  Cluster grouped = groupedLayout(cluster, choice.groups, layout);
  return scoreOnGroups(grouped, layout, workload, training, choice, bounds);
}

namespace {
/// The problem's models at one micro-batch size, made once per size; with
/// `wholeTied`, the blocks that own or read a tied parameter as the whole
/// model has them: a table whose embedding and head run at different
/// degrees stays whole (shardTensorParallel), in both stages.
class ScaledModels {
public:
  explicit ScaledModels(const StageDegreeProblem &problem)
      : problem(problem) {}
  const Workload &at(int64_t degree, int64_t size, bool wholeTied) {
    if (degree == 1 || !problem.workloadAt.count(1))
      wholeTied = false;
    auto key = std::make_tuple(degree, size, wholeTied);
    auto it = scaled.find(key);
    if (it != scaled.end())
      return it->second;
    Workload model = problem.workloadAt.at(degree).withMicroBatchSize(size);
    if (wholeTied) {
      const Workload &whole = at(1, size, false);
      for (const TiedParameter &tied : whole.tied)
        for (int block : {tied.owner, tied.reader})
          model.blocks.at(block) = whole.blocks.at(block);
      model.tied = whole.tied;
    }
    return scaled.emplace(key, std::move(model)).first->second;
  }

private:
  const StageDegreeProblem &problem;
  std::map<std::tuple<int64_t, int64_t, bool>, Workload> scaled;
};

/// One plan on groups already made (`grouped`, `layout`: groupedLayout of
/// `stageGroups`); not scored in full (cost.error says why) when its
/// compute alone, n_b x its slowest stage, takes `beat` or more.
StageDegreeChoice scoreWith(const StageDegreeProblem &problem,
                            ScaledModels &models,
                            const std::vector<int64_t> &degrees,
                            int dataParallel, int64_t size,
                            const std::vector<std::vector<std::vector<int>>>
                                &stageGroups,
                            const Cluster &grouped, const Partition &layout,
                            double beat) {
  StageDegreeChoice choice;
  choice.degrees = degrees;
  choice.dataParallel = dataParallel;
  choice.microBatchSize = size;
  choice.microBatches =
      static_cast<int>(problem.globalBatch / (dataParallel * size));
  choice.groups = stageGroups;
  int pp = static_cast<int>(degrees.size());
  std::vector<const Workload *> stageModels;
  std::vector<const std::vector<ChainBlock> *> stageChains;
  std::vector<StageDevice> devices;
  // The chain's ends (GPT's embedding and tied head) on stages of
  // different degrees: their tables stay whole.
  bool wholeTied = degrees.front() != degrees.back();
  for (int s = 0; s < pp; ++s) {
    stageModels.push_back(&models.at(degrees[s], size, wholeTied));
    stageChains.push_back(&stageModels.back()->blocks);
    devices.push_back(stageDeviceOf(grouped, layout[s]));
  }
  StagePartitionOptions stages = problem.training.stages;
  stages.dataParallel = dataParallel;
  stages.microBatches = choice.microBatches;
  stages.boundaryBytes = stageModels.front()->boundaryBytes;
  stages.tied = stageModels.front()->tied;
  StagePlan plan;
  if (!partitionChain(stageChains, devices, stages, plan, choice.cost.error))
    return choice;
  if (choice.microBatches * plan.bottleneckSeconds >= beat) {
    choice.cost.error = "its compute alone takes longer than a plan found";
    choice.cost.plan = std::move(plan);
    return choice;
  }
  choice.cost = scoreOnGroups(grouped, layout,
                              spliceStageWorkloads(stageModels, plan.bounds),
                              problem.training, choice, plan.bounds);
  return choice;
}

/// Every sequence of `length` of `degrees` with two distinct ones at least.
void mixedSequences(const std::vector<int64_t> &degrees, size_t length,
                    std::vector<int64_t> &prefix,
                    std::vector<std::vector<int64_t>> &out) {
  if (prefix.size() == length) {
    if (std::set<int64_t>(prefix.begin(), prefix.end()).size() > 1)
      out.push_back(prefix);
    return;
  }
  for (int64_t degree : degrees) {
    prefix.push_back(degree);
    mixedSequences(degrees, length, prefix, out);
    prefix.pop_back();
  }
}
} // namespace

StageDegreeChoice
dtfm::planner::scoreStageDegrees(const StageDegreeProblem &problem,
                                 const std::vector<int64_t> &degrees,
                                 int dataParallel, int64_t microBatchSize) {
  std::vector<std::vector<std::vector<int>>> stageGroups;
  std::string error;
  if (!stageTensorParallelGroups(*problem.cluster, degrees, dataParallel,
                                 stageGroups, error)) {
    StageDegreeChoice choice;
    choice.degrees = degrees;
    choice.dataParallel = dataParallel;
    choice.microBatchSize = microBatchSize;
    choice.cost.error = error;
    return choice;
  }
  ScaledModels models(problem);
  Partition layout;
  Cluster grouped = groupedLayout(*problem.cluster, stageGroups, layout);
  return scoreWith(problem, models, degrees, dataParallel, microBatchSize,
                   stageGroups, grouped, layout,
                   std::numeric_limits<double>::infinity());
}

bool dtfm::planner::searchStageDegrees(const StageDegreeProblem &problem,
                                       StageDegreeChoice &best,
                                       int64_t &scored, std::string &error) {
  scored = 0;
  std::vector<int64_t> degrees;
  for (const auto &entry : problem.workloadAt)
    degrees.push_back(entry.first);
  if (degrees.size() < 2) {
    error = "the model shards to one tensor-parallel degree only";
    return false;
  }
  size_t blocks = problem.workloadAt.begin()->second.blocks.size();
  int lowest = problem.fixedPipelineParallel > 0
                   ? problem.fixedPipelineParallel
                   : 2;
  int highest = problem.fixedPipelineParallel > 0
                    ? problem.fixedPipelineParallel
                    : problem.maxStages;
  ScaledModels models(problem);
  bool found = false, slower = false;
  std::string firstError;
  for (int pp = lowest; pp <= highest && static_cast<size_t>(pp) <= blocks;
       ++pp) {
    std::vector<std::vector<int64_t>> sequences;
    std::vector<int64_t> prefix;
    mixedSequences(degrees, static_cast<size_t>(pp), prefix, sequences);
    for (const std::vector<int64_t> &sequence : sequences)
      for (int dp = std::max(1, problem.fixedDataParallel);
           problem.fixedDataParallel == 0 || dp == problem.fixedDataParallel;
           ++dp) {
        std::vector<std::vector<std::vector<int>>> stageGroups;
        std::string why;
        // Groups for D_DP but not for D_DP + 1: none for larger either.
        if (!stageTensorParallelGroups(*problem.cluster, sequence, dp,
                                       stageGroups, why)) {
          if (firstError.empty())
            firstError = why;
          break;
        }
        Partition layout;
        std::optional<Cluster> grouped; // made for the first size that fits
        for (int64_t size : problem.microBatchSizes) {
          if (size <= 0 || problem.globalBatch % (dp * size) != 0)
            continue;
          if (!grouped)
            grouped = groupedLayout(*problem.cluster, stageGroups, layout);
          ++scored;
          StageDegreeChoice choice = scoreWith(
              problem, models, sequence, dp, size, stageGroups, *grouped,
              layout,
              found ? std::min(problem.beat, best.iterationSeconds())
                    : problem.beat);
          if (!choice.cost.feasible) {
            slower = slower || choice.microBatches *
                                       choice.cost.plan.bottleneckSeconds >=
                                   problem.beat;
            if (firstError.empty())
              firstError = choice.cost.error;
            continue;
          }
          if (!(choice.iterationSeconds() < problem.beat)) {
            slower = true;
            continue;
          }
          if (!found ||
              choice.iterationSeconds() < best.iterationSeconds()) {
            best = std::move(choice);
            found = true;
          }
        }
      }
  }
  if (!found)
    error = slower ? "no plan with a degree per stage is predicted faster "
                     "than " + std::to_string(problem.beat) + " s"
            : firstError.empty() ? "no plan with a degree per stage fits the "
                                   "global batch"
                                 : firstError;
  return found;
}
