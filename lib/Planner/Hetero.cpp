//===- Hetero.cpp - Devices of mixed speed and memory in one plan ---------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//

#include "dtfm/Planner/Hetero.h"
#include "dtfm/Planner/Buckets.h"
#include "dtfm/Planner/Genetic.h"
#include "dtfm/Planner/Schedule.h"

#include <algorithm>
#include <functional>
#include <map>
#include <numeric>
#include <optional>
#include <queue>

using namespace dtfm::planner;

std::vector<int> dtfm::planner::evenBounds(int blocks, int stages) {
  std::vector<int> bounds{0};
  for (int s = 0; s < stages; ++s)
    bounds.push_back(bounds.back() + blocks / stages +
                     (s < blocks % stages ? 1 : 0));
  return bounds;
}

std::vector<int> dtfm::planner::splitMicroBatches(
    int pipelines, int total,
    const std::function<double(int, int)> &secondsWith) {
  // Greedy on non-decreasing finish times: each further micro-batch goes to
  // the pipeline that finishes earliest with it; this minimises the latest
  // finish (the n-th smallest of all pipelines' finish times is a lower
  // bound, and the greedy reaches it). Ties go to the lower index.
  std::vector<int> shares(pipelines, 1);
  // (finish time with one more, pipeline): the earliest on top.
  using Next = std::pair<double, int>;
  std::priority_queue<Next, std::vector<Next>, std::greater<Next>> next;
  for (int i = 0; i < pipelines; ++i)
    next.push({secondsWith(i, 2), i});
  for (int left = total - pipelines; left > 0; --left) {
    int best = next.top().second;
    next.pop();
    ++shares[best];
    next.push({secondsWith(best, shares[best] + 1), best});
  }
  return shares;
}

HeteroModel::HeteroModel(HeteroProblem p)
    : problem(std::move(p)) {
  // Stage memory may shard the optimizer state over each stage's group.
  problem.training.stages.dataParallel = problem.dataParallel;
  problem.training.stages.elementsPerParameterByte =
      problem.workload.gradientElementsPerByte;
  problem.training.stages.boundaryBytes = problem.workload.boundaryBytes;
  problem.training.stages.tied = problem.workload.tied;
}

/// The stage devices: each group at its slowest and smallest member.
static std::vector<StageDevice> stageDevices(const Cluster &cluster,
                                             const Partition &stages) {
  std::vector<StageDevice> devices;
  for (const std::vector<int> &group : stages)
    devices.push_back(stageDeviceOf(cluster, group));
  return devices;
}

/// The even split as a plan, or false when a stage does not fit.
static bool evenPlan(const HeteroProblem &problem,
                     const std::vector<StageDevice> &devices, StagePlan &plan,
                     std::string &error) {
  int n = static_cast<int>(problem.workload.blocks.size());
  int pp = static_cast<int>(devices.size());
  if (n < pp) {
    error = "fewer blocks than stages";
    return false;
  }
  return planForBounds(problem.workload.blocks, devices,
                       problem.training.stages, evenBounds(n, pp), plan, error);
}

/// What scoring needs of the partition alone, whatever the split of the
/// blocks: evaluate scores two splits of one partition.
struct HeteroModel::Layout {
  /// Pipeline i's device at each stage.
  std::vector<std::vector<int>> pipelines;
  /// Per boundary transfer (HeteroModel::score's numbering): its seconds,
  /// and those the link is occupied (without the latency).
  std::vector<double> seconds, occupancy;
  /// Each group as one stage device, and its links (with D_DP > 1).
  std::vector<StageDevice> groups;
  std::vector<GroupLinks> groupLinks;
};

HeteroModel::Layout
HeteroModel::layoutOf(const Partition &stages,
                      std::vector<StageDevice> groups) const {
  Layout layout;
  const Cluster &cluster = *problem.cluster;
  const Workload &workload = problem.workload;
  const TrainingOptions &training = problem.training;
  int pp = static_cast<int>(stages.size());
  int dp = static_cast<int>(stages[0].size());
  // Pipeline i's device at each stage, chained through the bottleneck
  // matchings of neighbouring groups (as --dtfm-assign-devices lays them out).
  std::vector<std::vector<int>> &pipelines = layout.pipelines;
  pipelines.assign(dp, std::vector<int>(pp));
  std::vector<int> position(dp);
  for (int i = 0; i < dp; ++i) {
    position[i] = i;
    pipelines[i][0] = stages[0][i];
  }
  std::vector<int> match;
  for (int s = 0; s + 1 < pp; ++s) {
    groupPipelineWeight(cluster, stages[s], stages[s + 1],
                        workload.boundaryBytes, &match);
    for (int i = 0; i < dp; ++i) {
      position[i] = match[position[i]];
      pipelines[i][s + 1] = stages[s + 1][position[i]];
    }
  }
  // Per micro-batch, boundary s of pipeline i carries the activation forward
  // (transfer 2k) and its gradient backward (2k + 1), k = i (pp - 1) + s;
  // AdaTopK, when asked for, compresses them as --dtfm-insert-compression.
  int boundaries = std::max(0, pp - 1);
  std::vector<LinkTransfer> transfers;
  transfers.reserve(2 * dp * boundaries);
  for (int i = 0; i < dp; ++i)
    for (int s = 0; s + 1 < pp; ++s) {
      int a = pipelines[i][s], b = pipelines[i][s + 1];
      // Activations in the model's element type, as its gradients.
      double elementBytes = 1 / workload.gradientElementsPerByte;
      transfers.push_back({workload.boundaryBytes, cluster.latencySeconds(a, b),
                           cluster.bandwidthGbps(a, b), elementBytes});
      transfers.push_back({workload.boundaryBytes, cluster.latencySeconds(b, a),
                           cluster.bandwidthGbps(b, a), elementBytes});
    }
  std::vector<double> &seconds = layout.seconds, &occupancy = layout.occupancy;
  seconds.resize(transfers.size());
  occupancy.resize(transfers.size());
  std::vector<LinkCompression> compressed;
  if (training.compression.targetRatio > 1 ||
      training.compression.linkCodec.mayCompress())
    compressed = planCompression(transfers, training.compression);
  for (size_t t = 0; t < transfers.size(); ++t) {
    double bytes =
        compressed.empty() ? transfers[t].denseBytes : compressed[t].bytes;
    seconds[t] = transfers[t].seconds(bytes);
    occupancy[t] = seconds[t] - transfers[t].latencySeconds;
  }
  layout.groups = std::move(groups);
  if (dp > 1)
    for (const std::vector<int> &group : stages)
      layout.groupLinks.emplace_back(cluster, group);
  return layout;
}

/// Per pipeline and stage, what does not depend on the micro-batch count:
/// the stage's compute, its send stream's occupancy, and the round trip
/// through it and the later stages.
struct HeteroModel::StageTimes {
  double compute = 0, send = 0, roundTrip = 0;
  /// The parts of `compute` the forward and a zero-bubble schedule's W run.
  double forward = 0, weight = 0;
  /// What the stage holds, by which ZB-H1 puts off its Ws within 1F1B's
  /// peak (zeroBubbleWeightDelays), as dtfm-schedule-microbatches does.
  ZeroBubbleStageBytes held;
  /// To the next stage and back (s + 1 < pp).
  double hopForward = 0, hopBackward = 0;
};

std::vector<std::vector<HeteroModel::StageTimes>>
HeteroModel::stageTimesOf(const Layout &layout, const StagePlan &plan) const {
  const Cluster &cluster = *problem.cluster;
  const Workload &workload = problem.workload;
  const std::vector<std::vector<int>> &pipelines = layout.pipelines;
  int dp = static_cast<int>(pipelines.size());
  int pp = static_cast<int>(pipelines[0].size());
  int boundaries = std::max(0, pp - 1);
  const std::vector<double> &seconds = layout.seconds,
                            &occupancy = layout.occupancy;
  const std::vector<StageDevice> &groups = layout.groups;
  // One micro-batch's compute of stage s on pipeline i's own device: its
  // FLOPs at that device's speed and ridge, and (tensor parallelism) its
  // group's sums on that group's own links, which a faster device does not
  // speed up.
  auto stageCompute = [&](int i, int s) {
    const Device &own = cluster.devices[pipelines[i][s]];
    double sums = plan.stageGroupSums.empty() ? 0 : plan.stageGroupSums[s];
    double sumBytes =
        plan.stageGroupSumBytes.empty() ? 0 : plan.stageGroupSumBytes[s];
    double flopSeconds =
        plan.stageSeconds[s] - groups[s].seconds(0, sums, sumBytes);
    double ridge = own.ridge();
    if (ridge != groups[s].ridge && !plan.bounds.empty()) {
      bool recomputed =
          !plan.stageMemory.empty() && plan.stageMemory[s].recomputed;
      flopSeconds = stageFlopsAt(workload.blocks, plan.bounds[s],
                                 plan.bounds[s + 1], recomputed, ridge) /
                    groups[s].speed;
    }
    return flopSeconds * groups[s].speed / own.speed() +
           own.groupSumSeconds(sums, sumBytes);
  };
  // Each stage's shares of its FLOPs in the forward and in weight
  // gradients (zero bubble's W).
  auto shares = [&](int s) {
    double flops = 0, forward = 0, weight = 0;
    if (!plan.bounds.empty())
      for (int b = plan.bounds[s]; b < plan.bounds[s + 1]; ++b) {
        flops += workload.blocks[b].flops;
        forward += workload.blocks[b].forwardFlops();
        weight += workload.blocks[b].weightFlops;
      }
    return flops > 0 ? std::pair(forward / flops, weight / flops)
                     : std::pair(1.0 / 3, 0.0);
  };
  // Per stage (the same on every pipeline; zero bubble only), what its
  // micro-batches hold to their B and W and what it holds whatever the
  // schedule (its state and largest passing buffer).
  double statePerByte = stateBytesPerParameterByte(problem.training.stages);
  auto heldOf = [&](int s) {
    ZeroBubbleStageBytes held;
    if (plan.bounds.empty() ||
        problem.training.stages.schedule != PipelineSchedule::ZeroBubbleH1)
      return held;
    bool recomputed =
        !plan.stageMemory.empty() && plan.stageMemory[s].recomputed;
    double scratch = 0;
    for (int b = plan.bounds[s]; b < plan.bounds[s + 1]; ++b) {
      const ChainBlock &block = workload.blocks[b];
      double toBackward = recomputed && block.inputBytes >= 0
                              ? block.inputBytes
                              : block.runtimeActivationBytes();
      held.untilBackward += toBackward;
      held.untilWeight += block.weightHeldBytes >= 0
                              ? block.weightHeldBytes
                              : block.runtimeActivationBytes();
      held.fixed += block.parameterBytes * statePerByte;
      scratch = std::max(scratch, block.scratchBytes);
    }
    held.fixed += scratch;
    return held;
  };
  std::vector<ZeroBubbleStageBytes> stageHeld(pp);
  for (int s = 0; s < pp; ++s)
    stageHeld[s] = heldOf(s);
  std::vector<std::vector<StageTimes>> times(dp, std::vector<StageTimes>(pp));
  for (int i = 0; i < dp; ++i) {
    int first = 2 * i * boundaries;
    double roundTrip = 0;
    for (int s = pp - 1; s >= 0; --s) {
      StageTimes &t = times[i][s];
      t.compute = stageCompute(i, s);
      auto [forwardShare, weightShare] = shares(s);
      t.forward = t.compute * forwardShare;
      t.weight = t.compute * weightShare;
      t.held = stageHeld[s];
      roundTrip += t.compute;
      if (s + 1 < pp) {
        int k = first + 2 * s;
        t.send += occupancy[k];
        roundTrip += seconds[k] + seconds[k + 1];
        t.hopForward = seconds[k];
        t.hopBackward = seconds[k + 1];
      }
      if (s > 0)
        t.send += occupancy[first + 2 * (s - 1) + 1];
      t.roundTrip = roundTrip;
    }
  }
  return times;
}

/// Each pipeline's time for an iteration of a given number of micro-batches,
/// as the runtime runs it: one micro-batch's forward and backward through
/// every stage (FusionLLM eq. 3's sum, latency included), then n_b - 1
/// steady steps. A step is bounded by every stage's compute (on the
/// pipeline's own device: the plan's stage time is its group's slowest
/// member's), by its one send stream (activations on, gradients back: the
/// link's latency overlaps the next transfer, only bytes / bandwidth occupy
/// it), and by the schedule's window: stage s keeps w_s micro-batches in
/// flight (1F1B: min(n_b, pp - s)), each one a round trip through the later
/// stages.
class HeteroModel::PipelineClock {
public:
  PipelineClock(std::vector<std::vector<StageTimes>> stageTimes,
                const StagePartitionOptions &stages)
      : times(std::move(stageTimes)), window(windowsOf(stages)),
        oneFOneB(stages.schedule != PipelineSchedule::GPipe),
        zeroBubble(stages.schedule == PipelineSchedule::ZeroBubbleH1),
        pp(static_cast<int>(times[0].size())), cycleSteps(times.size(), 0.0),
        steadySteps(times.size(), -1.0) {
    // With at least pp micro-batches the windows are pp - s, whatever their
    // count: the bound once per pipeline.
    if (oneFOneB)
      for (size_t i = 0; i < times.size(); ++i)
        cycleSteps[i] =
            cycleStep(static_cast<int>(i), [&](int s) { return pp - s; });
  }

  double seconds(int i, int microBatches) {
    bool steady = oneFOneB && microBatches >= pp;
    if (steady && steadySteps[i] >= 0)
      return fillAndDrain(i, microBatches) +
             (microBatches - 1) * steadySteps[i];
    window.microBatches = microBatches;
    double step = 0;
    for (int s = pp - 1; s >= 0; --s) {
      const StageTimes &t = times[i][s];
      int inFlight = inFlightMicroBatches(window, s, pp);
      step = std::max({step, t.compute, t.send, t.roundTrip / inFlight});
    }
    if (oneFOneB)
      step = std::max(step, microBatches >= pp
                                ? cycleSteps[i]
                                : cycleStep(i, [&](int s) {
                                    return inFlightMicroBatches(window, s, pp);
                                  }));
    if (steady)
      steadySteps[i] = step;
    return fillAndDrain(i, microBatches) + (microBatches - 1) * step;
  }

  /// The last round trip from stage 0 is the fill and drain. Zero bubble
  /// (ZB-H1) takes out of it what its order saves against 1F1B's when
  /// both are replayed with this pipeline's forward, B and W times and
  /// hops (pipelineMakespan) for min(n_b, 2 pp) micro-batches: the saving
  /// settles once there are pp (on even stages 2 (pp - 1) W), and fewer
  /// micro-batches than stages leave some Ws no bubble to fill. Each stage
  /// puts off only the Ws its memory allows (zeroBubbleWeightDelays).
  double fillAndDrain(int i, int microBatches) {
    if (!zeroBubble)
      return times[i][0].roundTrip;
    int replayed = std::min(microBatches, 2 * pp);
    auto [it, fresh] = savings.try_emplace({i, replayed}, 0.0);
    if (fresh) {
      std::vector<std::array<double, 3>> split(pp);
      std::vector<std::pair<double, double>> hops(pp, {0.0, 0.0});
      std::vector<ZeroBubbleStageBytes> held(pp);
      for (int s = 0; s < pp; ++s) {
        const StageTimes &t = times[i][s];
        double backward = t.compute - t.forward;
        split[s] = {t.forward, backward - t.weight, t.weight};
        hops[s] = {t.hopForward, t.hopBackward};
        held[s] = t.held;
      }
      // The Ws each stage may put off within 1F1B's peak; a stage that
      // can put off none keeps its backward whole.
      std::vector<int> delays = zeroBubbleWeightDelays(held, replayed);
      for (int &delay : delays)
        delay = delay > 0 ? delay : -1;
      it->second = std::max(
          0.0, pipelineMakespan(PipelineSchedule::OneFOneB, split, hops,
                                replayed) -
                   pipelineMakespan(PipelineSchedule::ZeroBubbleH1, split,
                                    hops, replayed, delays));
    }
    return times[i][0].roundTrip - it->second;
  }

  /// Pipeline i's compute alone, over its stages.
  double computeSeconds(int i) const {
    double total = 0;
    for (int s = 0; s < pp; ++s)
      total += times[i][s].compute;
    return total;
  }

private:
  /// 1F1B's streams keep a fixed order, which closes a cycle between any
  /// two stages s < s2 (not only through the last one): stage s's forward
  /// of micro-batch m reaches s2, whose next backward (of m - w2 + 1) comes
  /// back to s, after which s runs the forward of m + w - w2 + 1 (w, w2 the
  /// stages' windows). A cycle is the compute of stages s..s2 and the
  /// transfers between them, latency included, and advances w - w2 + 1
  /// micro-batches. On slow, far links it is the bound: two regions 10 ms
  /// and 1.12 Gbit/s apart take 88 ms a step against the send stream's
  /// 67 ms, as the simulator finds. Windows that hold every micro-batch on
  /// both stages have no steady state.
  double cycleStep(int i, const std::function<int(int)> &windowOf) const {
    double step = 0;
    for (int s = 0; s < pp; ++s)
      for (int s2 = s + 1; s2 + 1 < pp; ++s2) {
        int advance = windowOf(s) - windowOf(s2) + 1;
        if (advance <= 1)
          continue;
        double cycle = times[i][s].roundTrip - times[i][s2].roundTrip +
                       times[i][s2].compute;
        step = std::max(step, cycle / advance);
      }
    return step;
  }

  std::vector<std::vector<StageTimes>> times;
  StagePartitionOptions window;
  bool oneFOneB; // 1F1B's fixed order and windows (zero bubble's too)
  bool zeroBubble;
  /// Zero bubble: what it saves per (pipeline, micro-batches replayed),
  /// and the 1F1B and ZB-H1 orders per micro-batch count.
  std::map<std::pair<int, int>, double> savings;
  /// The windows of the forward-to-backward round trips: zero bubble's are
  /// 1F1B's (it holds a micro-batch longer only for its W).
  static StagePartitionOptions windowsOf(StagePartitionOptions stages) {
    if (stages.schedule == PipelineSchedule::ZeroBubbleH1)
      stages.schedule = PipelineSchedule::OneFOneB;
    return stages;
  }
  int pp;
  std::vector<double> cycleSteps;
  /// 1F1B with at least pp micro-batches: the windows and so the step no
  /// longer depend on the count (splitting micro-batches asks for many
  /// counts); -1 until known.
  std::vector<double> steadySteps;
};

void HeteroModel::scorePipelines(const Layout &layout, const StagePlan &plan,
                                 PipelineClock &clock, HeteroCost &cost) const {
  const TrainingOptions &training = problem.training;
  int dp = static_cast<int>(layout.pipelines.size());
  auto pipelineSeconds = [&](int i, int microBatches) {
    return clock.seconds(i, microBatches);
  };
  int microBatches = std::max(1, training.stages.microBatches);
  std::vector<double> evenSeconds(dp);
  for (int i = 0; i < dp; ++i)
    evenSeconds[i] = pipelineSeconds(i, microBatches);
  cost.pipelineSeconds =
      *std::max_element(evenSeconds.begin(), evenSeconds.end());
  cost.evenPipelineSeconds = cost.pipelineSeconds;
  // Uneven replicas: pipelines of different compute speed take different
  // shares of the iteration's micro-batches, so that they finish together.
  // Only compute decides whether to split: the step bound above is too
  // coarse for pipelines held up by their links to trade micro-batches on
  // (64 identical V100s world-wide: a split by link speed alone was
  // predicted at 29.5 s and simulates at 46.5 s, against 30.7 s even),
  // unless unevenByLinks asks for a split by the whole pipeline time.
  std::vector<double> computeSeconds(dp, 0.0);
  for (int i = 0; i < dp; ++i)
    computeSeconds[i] = clock.computeSeconds(i);
  auto differ = [](const std::vector<double> &seconds) {
    return std::adjacent_find(seconds.begin(), seconds.end(),
                              std::not_equal_to<double>()) != seconds.end();
  };
  if (dp > 1 && (differ(computeSeconds) ||
                 (training.unevenByLinks && differ(evenSeconds)))) {
    std::vector<int> shares =
        splitMicroBatches(dp, dp * microBatches, pipelineSeconds);
    double unevenSeconds = 0;
    for (int i = 0; i < dp; ++i)
      unevenSeconds = std::max(unevenSeconds, pipelineSeconds(i, shares[i]));
    // More micro-batches in flight on a pipeline may not fit (GPipe keeps
    // them all, 1F1B up to its window).
    StagePartitionOptions most = training.stages;
    most.microBatches = *std::max_element(shares.begin(), shares.end());
    StagePlan check;
    std::string error;
    if (unevenSeconds < cost.pipelineSeconds * (1 - kUnevenMinGain) &&
        planForBounds(problem.workload.blocks, layout.groups, most, plan.bounds,
                      check, error)) {
      cost.pipelineSeconds = unevenSeconds;
      cost.pipelineMicroBatches = std::move(shares);
    }
  }
}

/// One stage's synchronisation: the exchange left after the backward when
/// synchronous, one whole exchange (local steps take 1/H of it), and the
/// tied parameters' exchange.
struct HeteroModel::StageSync {
  double exposed = 0, exchange = 0, tied = 0;
  /// Local steps in fragments: one fragment's exchange (a 1/P share).
  double fragmentExchange = 0;
};

HeteroModel::StageSync HeteroModel::stageSyncOf(const Layout &layout,
                                                const StagePlan &plan,
                                                int s) const {
  const Cluster &cluster = *problem.cluster;
  const Workload &workload = problem.workload;
  const TrainingOptions &training = problem.training;
  const std::vector<std::vector<int>> &pipelines = layout.pipelines;
  int dp = static_cast<int>(pipelines.size());
  StageSync sync;
  double parameterBytes = 0;
  for (int i = plan.bounds[s]; i < plan.bounds[s + 1]; ++i)
    parameterBytes += workload.blocks[i].parameterBytes;
  double gradientBytes =
      parameterBytes * workload.gradientBytesPerParameterByte;
  if (dp > 1) {
    // The group's algorithm and codec as --dtfm-insert-grad-sync
    // chooses them (planGradientSync).
    GradientSyncPlan groupSync = planGradientSync(
        layout.groupLinks[s], gradientBytes,
        1 / workload.gradientElementsPerByte, problem.dataParallel,
        training.sync, training.dpCompression);
    auto exchange = [&](double bytes) {
      return groupSync.exchangeSeconds(bytes);
    };
    // The gradients in buckets, overlapping the last micro-batch's
    // backward (Planner/Buckets.h, as --dtfm-insert-grad-sync cuts them):
    // the backward runs from the stage's last block to its first, and a
    // block's gradients are complete once it has passed.
    double backwardFlops = 0, flops = 0;
    for (int i = plan.bounds[s]; i < plan.bounds[s + 1]; ++i) {
      backwardFlops += workload.blocks[i].backwardFlops;
      flops += workload.blocks[i].flops;
    }
    std::vector<double> bytes, ready;
    double done = 0;
    for (int i = plan.bounds[s + 1] - 1; i >= plan.bounds[s]; --i) {
      const ChainBlock &block = workload.blocks[i];
      done += block.backwardFlops;
      if (block.parameterBytes <= 0)
        continue;
      bytes.push_back(block.parameterBytes *
                      workload.gradientBytesPerParameterByte);
      ready.push_back(backwardFlops > 0 ? done / backwardFlops : 1.0);
    }
    double backwardSeconds =
        flops > 0 ? plan.stageSeconds[s] * backwardFlops / flops : 0;
    sync.exchange = exchange(gradientBytes);
    int64_t fragments = std::max<int64_t>(1, training.syncFragments);
    sync.fragmentExchange =
        fragments > 1 ? exchange(gradientBytes / static_cast<double>(fragments))
                      : sync.exchange;
    if (training.syncEvery < 1) // synchronous, or auto
      sync.exposed = exposedSyncSeconds(bytes, ready, training.bucketCapBytes,
                                        exchange, backwardSeconds);
  }
  // The tied parameters crossing stages, pipeline by pipeline: the slowest.
  auto stageOf = [&](int block) {
    return static_cast<int>(std::upper_bound(plan.bounds.begin() + 1,
                                             plan.bounds.end() - 1, block) -
                            plan.bounds.begin() - 1);
  };
  for (int i = 0; i < dp; ++i) {
    double mine = 0;
    for (const TiedParameter &t : workload.tied) {
      int owner = stageOf(t.owner), reader = stageOf(t.reader);
      if (owner == reader || (s != owner && s != reader))
        continue;
      int peer = s == owner ? reader : owner;
      mine +=
          cluster.transferSeconds(pipelines[i][s], pipelines[i][peer], t.bytes);
    }
    sync.tied = std::max(sync.tied, mine);
  }
  return sync;
}

void HeteroModel::scoreDataParallel(const Layout &layout, const StagePlan &plan,
                                    HeteroCost &cost) const {
  int pp = static_cast<int>(layout.pipelines[0].size());
  // Data-parallel synchronisation of each stage's own gradients, then the
  // tied parameters crossing stages.
  std::vector<StageSync> syncs;
  for (int s = 0; s < pp; ++s)
    syncs.push_back(stageSyncOf(layout, plan, s));
  auto largest = [&](double StageSync::*field) {
    double most = syncs[0].*field;
    for (const StageSync &sync : syncs)
      most = std::max(most, sync.*field);
    return most;
  };
  // Local steps: 1/H of one exchange per iteration.
  int64_t h = problem.training.syncEvery;
  if (h == kSyncEveryAuto)
    h = chooseSyncEvery(cost.pipelineSeconds, largest(&StageSync::exposed),
                        largest(&StageSync::exchange));
  cost.syncEvery = h;
  // Synchronous, the tied exchange starts after the last micro-batch while
  // the buckets are still on the group's links, and the steps wait for
  // both (as the simulator lays them out, planner::layOutBuckets); with
  // local steps it comes first, then the step and the parameter exchange.
  // Local steps in fragments, each overlapping tau steps (Streaming
  // DiLoCo; only with an explicit H): a fragment's exchange is exposed
  // only for what the tau steps do not cover.
  const TrainingOptions &training = problem.training;
  int64_t fragments = std::max<int64_t>(1, training.syncFragments);
  double overlapSeconds = static_cast<double>(std::max<int64_t>(
                              0, training.syncOverlap)) *
                          cost.pipelineSeconds;
  for (const StageSync &sync : syncs) {
    double outer = fragments == 1 && overlapSeconds == 0
                       ? sync.exchange
                       : static_cast<double>(fragments) *
                             std::max(0.0, sync.fragmentExchange -
                                               overlapSeconds);
    double seconds = h >= 1 ? outer / static_cast<double>(h) + sync.tied
                            : std::max(sync.exposed, sync.tied);
    cost.dataParallelSeconds = std::max(cost.dataParallelSeconds, seconds);
  }
  // Clipping: every update waits for the norm, reduced over every device
  // (one double per pipeline and one more), as the simulator charges it.
  if (problem.training.clipGradients) {
    std::vector<size_t> devices;
    for (const std::vector<int> &pipeline : layout.pipelines)
      for (int device : pipeline)
        devices.push_back(static_cast<size_t>(device));
    cost.dataParallelSeconds += problem.cluster->scalarReductionSeconds(
        devices, 8.0 * static_cast<double>(layout.pipelines.size() + 1));
  }
}

HeteroCost HeteroModel::score(const Layout &layout, StagePlan plan) const {
  HeteroCost cost;
  PipelineClock clock(stageTimesOf(layout, plan), problem.training.stages);
  scorePipelines(layout, plan, clock, cost);
  scoreDataParallel(layout, plan, cost);
  cost.plan = std::move(plan);
  cost.feasible = true;
  return cost;
}

HeteroCost HeteroModel::evaluate(const Partition &stages,
                                 bool rebalance) const {
  std::vector<StageDevice> devices = stageDevices(*problem.cluster, stages);
  HeteroCost best;
  // The partition's part of the score, once for both splits (when one is
  // scored).
  std::optional<Layout> layout;
  auto scored = [&](StagePlan plan) {
    if (!layout)
      layout = layoutOf(stages, devices);
    return score(*layout, std::move(plan));
  };
  if (!problem.fixedBounds.empty()) {
    StagePlan fixed;
    if (!planForBounds(problem.workload.blocks, devices,
                       problem.training.stages, problem.fixedBounds, fixed,
                       best.error))
      return best;
    return scored(std::move(fixed));
  }
  StagePlan even;
  std::string evenError;
  bool evenFits = evenPlan(problem, devices, even, evenError);
  if (evenFits)
    best = scored(std::move(even));
  else
    best.error = evenError;
  if (!rebalance)
    return best;
  // The compute-optimal split, unless the even one is better overall (its
  // smaller stages can sync their gradients faster).
  StagePlan balanced;
  std::string error;
  if (!partitionChain(problem.workload.blocks, devices, problem.training.stages,
                      balanced, error)) {
    if (!best.feasible)
      best.error = error;
    return best;
  }
  HeteroCost candidate = scored(std::move(balanced));
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

  Partition bySpeed(pp);
  std::vector<int> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    return cluster.devices[a].speed() > cluster.devices[b].speed();
  });
  for (int i = 0; i < n; ++i)
    bySpeed[i / dp].push_back(order[i]);
  std::vector<Partition> seeds = {rankOrderPartition(dp, pp),
                                  stridedPartition(dp, pp), bySpeed};
  // OP-Fence's layout (already in stage order).
  seeds.push_back(opFenceLayout(cluster, dp, pp));
  // DT-FM's communication-optimal layout, in its pipeline order, for its
  // own volumes: c_DP = one stage's share of the gradients.
  const Workload &workload = problem.workload;
  CostModel dtfm(
      cluster,
      {workload.parameterBytes() * workload.gradientBytesPerParameterByte / pp,
       workload.boundaryBytes},
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
  return searchWithObjective(objective, options, seeds, evaluations);
}
