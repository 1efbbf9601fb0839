//===- SimulatorTest.cpp - Hand-computed timelines -------------------------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//

#include "dtfm/Plan/Simulator.h"
#include "dtfm/Planner/Schedule.h"

#include <gtest/gtest.h>

using namespace dtfm;
using namespace dtfm::plan;

namespace {

/// Two devices at 1 FLOP/s, one link of 1 s latency and 1 byte/s.
planner::Cluster slowPair(double bytesPerSecond = 1) {
  planner::Cluster c;
  c.name = "pair";
  c.devices = {{"d0", "r", 1, 1, 1e9}, {"d1", "r", 1, 1, 1e9}};
  c.delayMs = planner::SquareMatrix(2, 1000);
  c.bandwidthGbps = planner::SquareMatrix(2, 8 * bytesPerSecond / 1e9);
  return c;
}

/// d0: forward 2, backward 4, optimizer 1 FLOPs, sends 1 byte forward;
/// d1: forward 3, backward 6, optimizer 2, sends 2 bytes back.
SimInput twoStages(planner::PipelineSchedule kind, int microBatches,
                   double bytesPerSecond = 1) {
  SimInput input;
  input.cluster = slowPair(bytesPerSecond);
  input.microBatches = microBatches;
  auto schedule = planner::buildSchedule(kind, 2, microBatches);
  const char *names[2] = {"d0", "d1"};
  for (int s = 0; s < 2; ++s) {
    SimProgram p;
    p.device = names[s];
    p.stage = s;
    p.prev = s == 1 ? "d0" : "";
    p.next = s == 0 ? "d1" : "";
    p.forwardFlops = s == 0 ? 2 : 3;
    p.backwardFlops = 2 * p.forwardFlops;
    p.optimizerFlops = s == 0 ? 1 : 2;
    if (s == 0)
      p.sendBytes[{'F', "d1"}] = 1;
    else
      p.sendBytes[{'B', "d0"}] = 2;
    for (int slot = 0; slot < 3; ++slot)
      for (const planner::Instruction &inst : schedule[s].slots[slot])
        p.streams[slot].push_back(inst.entry());
    input.programs.push_back(p);
  }
  return input;
}

/// Two replicas of one stage (d0, d1), one micro-batch: forward 2 and
/// backward 4 FLOPs at 1 FLOP/s, optimizer 2 FLOPs. Two gradient buckets:
/// b0 complete halfway through the backward, 3 s to all-reduce, half the
/// parameters; b1 complete at its end, 1 s, the other half.
SimInput twoReplicasWithBuckets() {
  SimInput input;
  input.cluster = slowPair();
  input.microBatches = 1;
  for (const char *name : {"d0", "d1"}) {
    SimProgram p;
    p.device = name;
    p.forwardFlops = 2;
    p.backwardFlops = 4;
    p.optimizerFlops = 2;
    p.streams[1] = {{format::Phase::Forward, 0, -1},
                    {format::Phase::Backward, 0, -1}};
    p.syncSeconds = 4;
    p.buckets = {{0.5, 3, 0.5}, {1.0, 1, 0.5}};
    input.programs.push_back(p);
  }
  return input;
}

double eventEnd(const SimResult &r, const std::string &device, int slot,
                const std::string &name) {
  for (const SimEvent &e : r.events)
    if (e.device == device && e.slot == slot && e.name == name)
      return e.end;
  ADD_FAILURE() << "no event " << name << " on " << device;
  return -1;
}

/// Four stages at 1 FLOP/s on free links (0 latency, 1 byte at 1 TB/s):
/// forward 1 FLOP, backward 2 of which `weight` are the weight gradients
/// (zero bubble's W), no optimizer work.
SimInput fourStages(planner::PipelineSchedule kind, int microBatches,
                    double weight) {
  SimInput input;
  input.cluster.name = "four";
  for (int s = 0; s < 4; ++s)
    input.cluster.devices.push_back(
        {"d" + std::to_string(s), "r", 1, 1, 1e9});
  input.cluster.delayMs = planner::SquareMatrix(4, 0);
  input.cluster.bandwidthGbps = planner::SquareMatrix(4, 8e3);
  input.microBatches = microBatches;
  auto schedule = planner::buildSchedule(kind, 4, microBatches);
  for (int s = 0; s < 4; ++s) {
    SimProgram p;
    p.device = "d" + std::to_string(s);
    p.stage = s;
    p.prev = s > 0 ? "d" + std::to_string(s - 1) : "";
    p.next = s < 3 ? "d" + std::to_string(s + 1) : "";
    p.forwardFlops = 1;
    p.backwardFlops = 2;
    p.weightFlops = weight;
    if (s < 3)
      p.sendBytes[{'F', p.next}] = 1;
    if (s > 0)
      p.sendBytes[{'B', p.prev}] = 1;
    for (int slot = 0; slot < 3; ++slot)
      for (const planner::Instruction &inst : schedule[s].slots[slot])
        p.streams[slot].push_back(inst.entry());
    input.programs.push_back(p);
  }
  return input;
}

TEST(Simulator, HandComputedZeroBubbleTimeline) {
  // 4 stages x 8 micro-batches, F = B = W = 1 s. 1F1B (B and W together):
  // 3 (8 + 4 - 1) = 33 s. ZB-H1: the first forward reaches d3 at 3; from
  // there d3 is never idle (F0 B0 F1 B1 F2 B2 F3 B3 W0 F4 B4 W1 ... B7 its
  // 20th item, ending at 23, then W4-W7 to 27); B7 then runs 23-24 on d2,
  // 24-25 on d1 and 25-26 on d0, which ends with W7 26-27: 3n + S - 1.
  SimResult onef, zb;
  std::string error;
  ASSERT_TRUE(
      simulate(fourStages(planner::PipelineSchedule::OneFOneB, 8, 0), onef,
               error))
      << error;
  ASSERT_TRUE(
      simulate(fourStages(planner::PipelineSchedule::ZeroBubbleH1, 8, 1), zb,
               error))
      << error;
  EXPECT_NEAR(onef.iterationSeconds, 33, 1e-6);
  EXPECT_NEAR(zb.iterationSeconds, 27, 1e-6);
  EXPECT_NEAR(eventEnd(zb, "d3", 1, "B7"), 23, 1e-6);
  EXPECT_NEAR(eventEnd(zb, "d1", 1, "B7"), 25, 1e-6);
  EXPECT_NEAR(eventEnd(zb, "d0", 1, "B7"), 26, 1e-6);
  EXPECT_NEAR(eventEnd(zb, "d0", 1, "W7"), 27, 1e-6);
  EXPECT_NEAR(eventEnd(zb, "d3", 1, "W7"), 27, 1e-6);
  for (const char *device : {"d0", "d1", "d2", "d3"})
    EXPECT_NEAR(zb.busySeconds[device], 24, 1e-6) << device;
  // The bubble: 1 - 96 / (4 x 27), against 1 - 96 / (4 x 33).
  EXPECT_NEAR(zb.bubbleFraction, 1 - 96.0 / 108.0, 1e-6);
  EXPECT_NEAR(onef.bubbleFraction, 1 - 96.0 / 132.0, 1e-6);
}

TEST(Simulator, HandComputedGPipeTimeline) {
  SimResult r;
  std::string error;
  ASSERT_TRUE(simulate(twoStages(planner::PipelineSchedule::GPipe, 2), r,
                       error))
      << error;
  // d0: F0 0-2, F1 2-4; sends 2-3 and 4-5, arriving at 4 and 6.
  EXPECT_DOUBLE_EQ(eventEnd(r, "d0", 2, "F1>d1"), 5);
  // d1: F0 4-7, F1 7-10, B1 10-16, B0 16-22; sends back 16-18 (arrives 19)
  // and 22-24 (arrives 25).
  EXPECT_DOUBLE_EQ(eventEnd(r, "d1", 1, "B0"), 22);
  // d0: B1 19-23, B0 25-29, optimizer 29-30.
  EXPECT_DOUBLE_EQ(eventEnd(r, "d0", 1, "B1"), 23);
  EXPECT_DOUBLE_EQ(eventEnd(r, "d0", 1, "B0"), 29);
  EXPECT_DOUBLE_EQ(r.iterationSeconds, 30);
  EXPECT_DOUBLE_EQ(r.busySeconds["d0"], 13);
  EXPECT_DOUBLE_EQ(r.busySeconds["d1"], 20);
  EXPECT_DOUBLE_EQ(r.bubbleFraction, 1 - 33.0 / 60.0);
  EXPECT_DOUBLE_EQ(r.linkBytes["d0->d1"], 2);
  EXPECT_DOUBLE_EQ(r.linkBytes["d1->d0"], 4);
  EXPECT_DOUBLE_EQ(r.achievedFlopsPerSecond(), 33.0 / 30.0);
}

TEST(Simulator, RecomputationIsBackwardTimeNotWork) {
  // The GPipe timeline above with d1 recomputing its forward (3 FLOPs) in
  // each backward: B1 10-19 and B0 19-28; the gradients arrive at d0 at 22
  // and 31, B0 ends at 35 and the optimizer at 36.
  SimInput input = twoStages(planner::PipelineSchedule::GPipe, 2);
  input.programs[1].recomputeFlops = 3;
  SimResult r;
  std::string error;
  ASSERT_TRUE(simulate(input, r, error)) << error;
  EXPECT_DOUBLE_EQ(eventEnd(r, "d1", 1, "B1"), 19);
  EXPECT_DOUBLE_EQ(eventEnd(r, "d0", 1, "B0"), 35);
  EXPECT_DOUBLE_EQ(r.iterationSeconds, 36);
  EXPECT_DOUBLE_EQ(r.busySeconds["d1"], 26);
  // The same 33 FLOPs of work, over a longer iteration.
  EXPECT_DOUBLE_EQ(r.achievedFlopsPerSecond(), 33.0 / 36.0);
}

TEST(Simulator, MoreBandwidthIsNeverSlower) {
  for (auto kind :
       {planner::PipelineSchedule::GPipe, planner::PipelineSchedule::OneFOneB})
    for (int micro = 1; micro <= 6; ++micro) {
      double previous = 1e300;
      for (double bandwidth : {0.25, 1.0, 4.0, 16.0, 1e6}) {
        SimResult r;
        std::string error;
        ASSERT_TRUE(simulate(twoStages(kind, micro, bandwidth), r, error));
        EXPECT_LE(r.iterationSeconds, previous + 1e-9);
        previous = r.iterationSeconds;
      }
    }
}

TEST(Simulator, OneMoreMicroBatchNeverShortensAnIteration) {
  for (auto kind :
       {planner::PipelineSchedule::GPipe, planner::PipelineSchedule::OneFOneB}) {
    double previous = 0;
    for (int micro = 1; micro <= 8; ++micro) {
      SimResult r;
      std::string error;
      ASSERT_TRUE(simulate(twoStages(kind, micro), r, error));
      EXPECT_GE(r.iterationSeconds, previous - 1e-9);
      previous = r.iterationSeconds;
    }
  }
}

TEST(Simulator, ComputeBoundPlansApproachTotalWorkOverTotalSpeed) {
  // Fast links: the pipeline fills, and with many micro-batches the
  // iteration tends to the slowest stage's work (here: d1, 9 per
  // micro-batch) -- the work-over-speed bound of the bottleneck stage.
  SimResult r;
  std::string error;
  ASSERT_TRUE(simulate(twoStages(planner::PipelineSchedule::OneFOneB, 64, 1e9),
                       r, error));
  double bound = 64 * 9.0 + 2;
  EXPECT_GE(r.iterationSeconds, bound);
  EXPECT_LE(r.iterationSeconds, bound * 1.05);
}

TEST(Simulator, OncePerIterationBytesMoveDuringTheSyncStep) {
  SimInput input = twoStages(planner::PipelineSchedule::GPipe, 2);
  // d1 returns a tied weight's gradient, 3 bytes, once: 1 s latency + 3 s.
  input.programs[1].iterationBytes["d0"] = 3;
  SimResult r;
  std::string error;
  ASSERT_TRUE(simulate(input, r, error)) << error;
  // d1's last send ends at 24; then 4 s of sync and its 2 s optimizer step.
  EXPECT_DOUBLE_EQ(eventEnd(r, "d1", 2, "grad sync"), 28);
  EXPECT_DOUBLE_EQ(eventEnd(r, "d1", 1, "optimizer"), 30);
  EXPECT_DOUBLE_EQ(r.linkBytes["d1->d0"], 4 + 3);
}

TEST(Simulator, HandComputedTwoReplicaBucketOverlap) {
  SimInput input = twoReplicasWithBuckets();
  SimResult r;
  std::string error;
  ASSERT_TRUE(simulate(input, r, error)) << error;
  // F0 0-2, B0 2-6. b0 is ready at 4: all-reduce 4-7; b1 at 6, after b0:
  // 7-8. The steps: b0's 7-8 (its bucket is back at 7, the backward done
  // at 6), b1's 8-9. Without the overlap: 6 + 4 + 2 = 12.
  EXPECT_DOUBLE_EQ(eventEnd(r, "d0", 2, "grad sync b0"), 7);
  EXPECT_DOUBLE_EQ(eventEnd(r, "d1", 2, "grad sync b1"), 8);
  EXPECT_DOUBLE_EQ(eventEnd(r, "d0", 1, "optimizer b0"), 8);
  EXPECT_DOUBLE_EQ(eventEnd(r, "d0", 1, "optimizer b1"), 9);
  EXPECT_DOUBLE_EQ(r.iterationSeconds, 9);
  EXPECT_DOUBLE_EQ(r.busySeconds["d0"], 8);

  for (SimProgram &p : input.programs)
    p.buckets.clear();
  ASSERT_TRUE(simulate(input, r, error)) << error;
  EXPECT_DOUBLE_EQ(r.iterationSeconds, 12);

  // Local steps every 4 iterations: the step right after the backward
  // (6-8), then a quarter of the 4 s exchange: the average iteration, 9 s.
  for (SimProgram &p : input.programs)
    p.syncEvery = 4;
  ASSERT_TRUE(simulate(input, r, error)) << error;
  EXPECT_DOUBLE_EQ(eventEnd(r, "d0", 1, "optimizer"), 8);
  EXPECT_DOUBLE_EQ(eventEnd(r, "d1", 2, "outer sync (1/4)"), 9);
  EXPECT_DOUBLE_EQ(r.iterationSeconds, 9);

  // Overlapping one step (Streaming DiLoCo): an exchange in two buckets of
  // 3 s and 10 s (fragments), each covered by the 8 s step up to 8 s: only
  // 2 s of the second is exposed, a quarter of it per iteration.
  for (SimProgram &p : input.programs) {
    p.syncOverlap = 1;
    p.buckets = {{1, 3, 0.5}, {1, 10, 0.5}};
  }
  ASSERT_TRUE(simulate(input, r, error)) << error;
  EXPECT_DOUBLE_EQ(r.iterationSeconds, 8.5);
}

TEST(Simulator, ClippingWaitsForEveryDeviceAndTheNorm) {
  // The GPipe timeline above clipped, with 2 s for the norm's reduction:
  // d1 is done at 24 (its last send; no syncs) and d0 at 29 (B0); the
  // norm is reduced 29-31, then d0 steps 31-32 and d1 31-33 (unclipped it
  // stepped 24-26).
  SimInput input = twoStages(planner::PipelineSchedule::GPipe, 2);
  input.clipSeconds = 2;
  SimResult r;
  std::string error;
  ASSERT_TRUE(simulate(input, r, error)) << error;
  EXPECT_DOUBLE_EQ(eventEnd(r, "d0", 2, "clip norm"), 31);
  EXPECT_DOUBLE_EQ(eventEnd(r, "d0", 1, "optimizer"), 32);
  EXPECT_DOUBLE_EQ(eventEnd(r, "d1", 1, "optimizer"), 33);
  EXPECT_DOUBLE_EQ(r.iterationSeconds, 33);
  EXPECT_DOUBLE_EQ(r.busySeconds["d1"], 20); // counted once
  EXPECT_DOUBLE_EQ(r.linkBytes["d1->d0"], 4);

  // Two replicas with buckets: the steps wait for both devices' last
  // bucket (8) and 2 s more, 10-12 (without clipping the last ended at 9).
  SimInput replicas = twoReplicasWithBuckets();
  replicas.clipSeconds = 2;
  ASSERT_TRUE(simulate(replicas, r, error)) << error;
  EXPECT_DOUBLE_EQ(eventEnd(r, "d0", 2, "grad sync b1"), 8);
  EXPECT_DOUBLE_EQ(eventEnd(r, "d1", 1, "optimizer"), 12);
  EXPECT_DOUBLE_EQ(r.iterationSeconds, 12);
}

TEST(Simulator, ErrorsAndTrace) {
  SimInput input = twoStages(planner::PipelineSchedule::GPipe, 1);
  using format::Phase;
  input.programs[1].streams[0] = {{Phase::Forward, 0, 0},
                                  {Phase::Forward, 1, 0}}; // nobody sends F1
  SimResult r;
  std::string error;
  EXPECT_FALSE(simulate(input, r, error));
  EXPECT_EQ(error, "d1: recv item 'F1<0' can never run (its input never "
                   "comes)");
  ASSERT_TRUE(simulate(twoStages(planner::PipelineSchedule::GPipe, 1), r,
                       error));
  std::string trace = chromeTrace(r);
  EXPECT_EQ(trace.rfind("{\"displayTimeUnit\":\"ms\",\"traceEvents\":[", 0),
            0u);
  EXPECT_NE(trace.find("\"ph\":\"X\",\"name\":\"F0\""), std::string::npos);
  EXPECT_NE(trace.find("\"name\":\"thread_name\""), std::string::npos);
}

} // namespace
