//===- ScheduleTest.cpp - GPipe and 1F1B on three slots -------------------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//

#include "dtfm/Planner/Schedule.h"

#include <gtest/gtest.h>

using namespace dtfm::planner;

namespace {

std::string computeString(const StageSchedule &stage) {
  std::string text;
  for (const Instruction &inst : stage[Slot::Compute])
    text += (text.empty() ? "" : " ") +
            std::string(1, dtfm::format::phaseLetter(inst.phase)) +
            std::to_string(inst.microBatch);
  return text;
}

/// The makespan with forward, B and W 1 each (1F1B's backward B + W = 2),
/// transfers 0.
double makespan(PipelineSchedule kind, int stages, int microBatches) {
  std::vector<std::array<double, 3>> seconds(stages, {1.0, 1.0, 1.0});
  std::vector<std::pair<double, double>> hops(stages, {0.0, 0.0});
  return pipelineMakespan(kind, seconds, hops, microBatches);
}

TEST(Schedule, TwoStagesFourMicroBatches) {
  auto gpipe = buildSchedule(PipelineSchedule::GPipe, 2, 4);
  EXPECT_EQ(computeString(gpipe[0]), "F0 F1 F2 F3 B3 B2 B1 B0");
  EXPECT_EQ(computeString(gpipe[1]), "F0 F1 F2 F3 B3 B2 B1 B0");
  auto onef = buildSchedule(PipelineSchedule::OneFOneB, 2, 4);
  EXPECT_EQ(computeString(onef[0]), "F0 F1 B0 F2 B1 F3 B2 B3");
  EXPECT_EQ(computeString(onef[1]), "F0 B0 F1 B1 F2 B2 F3 B3");
  // Stage 0 sends activations forward and receives gradients; stage 1 the
  // reverse.
  ASSERT_EQ(onef[0][Slot::Send].size(), 4u);
  EXPECT_EQ(onef[0][Slot::Send][0].peer, 1);
  EXPECT_EQ(onef[0][Slot::Send][0].phase, Phase::Forward);
  ASSERT_EQ(onef[0][Slot::Receive].size(), 4u);
  EXPECT_EQ(onef[0][Slot::Receive][0].phase, Phase::Backward);
  ASSERT_EQ(onef[1][Slot::Receive].size(), 4u);
  EXPECT_EQ(onef[1][Slot::Receive][0].phase, Phase::Forward);
  // The first forward of stage 1 waits for stage 0's first send.
  const Instruction &recv = onef[1][Slot::Receive][0];
  ASSERT_EQ(recv.deps.size(), 1u);
  EXPECT_EQ(recv.deps[0], (InstructionRef{0, Slot::Send, 0}));
  std::string error;
  EXPECT_TRUE(checkSchedule(gpipe, error)) << error;
  EXPECT_TRUE(checkSchedule(onef, error)) << error;
}

TEST(Schedule, PeakInFlightMatchesThePartitionersMemoryModel) {
  for (int stages = 1; stages <= 6; ++stages)
    for (int micro = 1; micro <= 9; ++micro)
      for (PipelineSchedule kind :
           {PipelineSchedule::GPipe, PipelineSchedule::OneFOneB}) {
        auto schedule = buildSchedule(kind, stages, micro);
        StagePartitionOptions options;
        options.schedule = kind;
        options.microBatches = micro;
        for (int s = 0; s < stages; ++s) {
          EXPECT_EQ(peakInFlight(schedule[s]),
                    inFlightMicroBatches(options, s, stages))
              << stages << " stages, " << micro << " micro-batches, stage "
              << s;
          EXPECT_EQ(schedule[s][Slot::Compute].size(),
                    static_cast<size_t>(2 * micro));
        }
        std::string error;
        EXPECT_TRUE(checkSchedule(schedule, error)) << error;
      }
}

TEST(Schedule, ParsingTheWrittenFormRebuildsTheDependencies) {
  for (PipelineSchedule kind :
       {PipelineSchedule::GPipe, PipelineSchedule::OneFOneB}) {
    auto built = buildSchedule(kind, 3, 5);
    std::vector<std::array<std::vector<std::string>, 3>> written;
    for (const StageSchedule &stage : built) {
      std::array<std::vector<std::string>, 3> slots;
      for (int slot = 0; slot < 3; ++slot)
        for (const Instruction &inst : stage.slots[slot]) {
          std::string text = (inst.phase == Phase::Forward ? "F" : "B") +
                             std::to_string(inst.microBatch);
          if (slot == 0)
            text += "<" + std::to_string(inst.peer);
          if (slot == 2)
            text += ">" + std::to_string(inst.peer);
          slots[slot].push_back(text);
        }
      written.push_back(slots);
    }
    std::vector<StageSchedule> parsed;
    std::string error;
    ASSERT_TRUE(parseSchedule(written, parsed, error)) << error;
    for (size_t s = 0; s < built.size(); ++s)
      for (int slot = 0; slot < 3; ++slot) {
        ASSERT_EQ(parsed[s].slots[slot].size(), built[s].slots[slot].size());
        for (size_t i = 0; i < built[s].slots[slot].size(); ++i)
          EXPECT_EQ(parsed[s].slots[slot][i].deps,
                    built[s].slots[slot][i].deps)
              << "stage " << s << " slot " << slot << " #" << i;
      }
    EXPECT_TRUE(checkSchedule(parsed, error)) << error;
  }
  std::vector<std::array<std::vector<std::string>, 3>> lonely(2);
  lonely[1][0] = {"F0<0"};
  std::vector<StageSchedule> parsed;
  std::string error;
  EXPECT_FALSE(parseSchedule(lonely, parsed, error));
  EXPECT_EQ(error, "stage 1 receives fwd micro-batch 0 that stage 0 never "
                   "sends");
}

TEST(Schedule, ParseRefusesRepeatedAndMissingComputes) {
  std::vector<std::array<std::vector<std::string>, 3>> one(1);
  one[0][1] = {"F0", "F0", "B0"};
  std::vector<StageSchedule> parsed;
  std::string error;
  EXPECT_FALSE(parseSchedule(one, parsed, error));
  EXPECT_EQ(error, "stage 0 compute: 'F0' twice");
  one[0][1] = {"F0", "F1", "B1"};
  EXPECT_FALSE(parseSchedule(one, parsed, error));
  EXPECT_EQ(error, "stage 0 never computes B0 (every stage computes F and B "
                   "of micro-batches 0..1)");
  one[0][1] = {"F0", "F1", "B1", "B0"};
  EXPECT_TRUE(parseSchedule(one, parsed, error)) << error;
}

TEST(Schedule, ZeroBubbleH1FillsTheCoolDownWithWeightGradients) {
  auto zb = buildSchedule(PipelineSchedule::ZeroBubbleH1, 2, 4);
  // Stage 0 waits for each gradient in the cool-down: its Ws fill that.
  EXPECT_EQ(computeString(zb[0]), "F0 F1 B0 W0 F2 B1 W1 F3 B2 W2 B3 W3");
  // Stage 1 puts off one W: it runs each W one micro-batch late.
  EXPECT_EQ(computeString(zb[1]), "F0 B0 F1 B1 W0 F2 B2 W1 F3 B3 W2 W3");
  auto deep = buildSchedule(PipelineSchedule::ZeroBubbleH1, 4, 8);
  EXPECT_EQ(computeString(deep[0]),
            "F0 F1 F2 F3 B0 W0 F4 B1 W1 F5 B2 W2 F6 B3 W3 F7 B4 W4 B5 W5 B6 "
            "W6 B7 W7");
  // W moves nothing: only the forwards and Bs have transfers.
  for (const StageSchedule &stage : deep)
    for (int slot : {0, 2})
      for (const Instruction &inst : stage.slots[slot])
        EXPECT_NE(inst.phase, Phase::Weight);
}

TEST(Schedule, ZeroBubbleH1PutsOffWhatTheMemoryOfOneFOneBAllows) {
  // Equal stages, 4 micro-batches: each stage puts off its index, within
  // 1F1B's first stage's 4 micro-batches (a micro-batch holds 4 bytes to
  // its B and 3 from its B to its W: stage s holds at most
  // (4 - s) x 4 + s x 3 <= 16).
  std::vector<ZeroBubbleStageBytes> equal(4, {0.0, 4.0, 3.0});
  EXPECT_EQ(zeroBubbleWeightDelays(equal, 4), (std::vector<int>{0, 1, 2, 3}));
  // The last stage's micro-batches are large (a vocabulary's logits): it
  // holds 8 to its B, 6 more to its W; 1F1B's peak stays 16 (stage 0's
  // 4 x 4; the last stage holds one micro-batch, 8). Putting off 1 W
  // holds F + W = 14; 2 would hold 8 + 2 x 6 = 20.
  std::vector<ZeroBubbleStageBytes> heavyLast = equal;
  heavyLast[3] = {0.0, 8.0, 6.0};
  EXPECT_EQ(zeroBubbleWeightDelays(heavyLast, 4),
            (std::vector<int>{0, 1, 2, 1}));
  // What a stage holds whatever the schedule counts: with 4 fixed bytes
  // more than the first stage's, the last has 12 for its micro-batches,
  // and one W put off holds 14: it puts off none,
  heavyLast[3].fixed = 4.0;
  EXPECT_EQ(zeroBubbleWeightDelays(heavyLast, 4)[3], 0);
  // and 6 fewer than the first stage's leave it room for 2.
  heavyLast[0].fixed = 10.0;
  EXPECT_EQ(zeroBubbleWeightDelays(heavyLast, 4)[3], 2);
  // A W that holds more than the forward did: putting off one, stage 1
  // would hold 3 forwards' 12 and that W's 5 at once, over 16: it puts off
  // none.
  std::vector<ZeroBubbleStageBytes> heavyWeights(4, {0.0, 4.0, 4.0});
  heavyWeights[1] = {0.0, 4.0, 5.0};
  EXPECT_EQ(zeroBubbleWeightDelays(heavyWeights, 4)[1], 0);
  // The delays build a schedule that still runs; a negative one leaves the
  // stage's backward whole (1F1B's order, no W).
  auto built = buildSchedule(PipelineSchedule::ZeroBubbleH1, 4, 4,
                             std::vector<int>{-1, 1, 2, 1});
  std::string error;
  EXPECT_TRUE(checkSchedule(built, error)) << error;
  EXPECT_EQ(computeString(built[0]), "F0 F1 F2 F3 B0 B1 B2 B3");
  EXPECT_EQ(computeString(built[3]), "F0 B0 F1 B1 W0 F2 B2 W1 F3 B3 W2 W3");
  EXPECT_EQ(peakInFlight(built[3]), 2);
  // The planner's replay takes the same delays: no stage split is 1F1B.
  std::vector<std::array<double, 3>> seconds(4, {1.0, 1.0, 1.0});
  std::vector<std::pair<double, double>> hops(4, {0.0, 0.0});
  EXPECT_DOUBLE_EQ(pipelineMakespan(PipelineSchedule::ZeroBubbleH1, seconds,
                                    hops, 8, {-1, -1, -1, -1}),
                   makespan(PipelineSchedule::OneFOneB, 4, 8));
  double limited = pipelineMakespan(PipelineSchedule::ZeroBubbleH1, seconds,
                                    hops, 8, {-1, 1, 2, 1});
  EXPECT_LT(limited, makespan(PipelineSchedule::OneFOneB, 4, 8));
  EXPECT_GT(limited, makespan(PipelineSchedule::ZeroBubbleH1, 4, 8));
}

TEST(Schedule, ZeroBubbleH1KeepsOneFOneBsMemoryAndCutsItsBubble) {
  for (int stages = 1; stages <= 8; ++stages)
    for (int micro = 1; micro <= 12; ++micro) {
      auto zb = buildSchedule(PipelineSchedule::ZeroBubbleH1, stages, micro);
      auto onef = buildSchedule(PipelineSchedule::OneFOneB, stages, micro);
      std::string error;
      ASSERT_TRUE(checkSchedule(zb, error)) << error;
      StagePartitionOptions options;
      options.schedule = PipelineSchedule::ZeroBubbleH1;
      options.microBatches = micro;
      for (int s = 0; s < stages; ++s) {
        // Held from the forward to the W: never more than 1F1B's first
        // stage holds (from the forward to the backward).
        EXPECT_LE(peakInFlight(zb[s]), peakInFlight(onef[0]))
            << stages << " stages, " << micro << " micro-batches, stage " << s;
        EXPECT_LE(peakInFlight(zb[s]), inFlightMicroBatches(options, s, stages));
        // Every micro-batch's F, B and W once; the Ws in order.
        ASSERT_EQ(zb[s][Slot::Compute].size(), static_cast<size_t>(3 * micro));
        int nextWeight = 0;
        for (const Instruction &inst : zb[s][Slot::Compute])
          if (inst.phase == Phase::Weight)
            EXPECT_EQ(inst.microBatch, nextWeight++);
      }
      // Unit F, B and W (1F1B's backward is B + W = 2): 1F1B takes
      // 3 (n + S - 1); ZB-H1 never more, and with enough micro-batches at
      // most 3n + S - 1 (the bubble a third of 1F1B's: the paper's
      // (S - 1)(F + B - W)).
      double zbTime = makespan(PipelineSchedule::ZeroBubbleH1, stages, micro),
             onefTime = makespan(PipelineSchedule::OneFOneB, stages, micro);
      EXPECT_DOUBLE_EQ(onefTime, 3.0 * (micro + stages - 1));
      EXPECT_LE(zbTime, onefTime) << stages << " stages, " << micro;
      if (micro >= stages)
        EXPECT_LE(zbTime, 3.0 * micro + stages - 1)
            << stages << " stages, " << micro << " micro-batches";
    }
}

TEST(Schedule, ParsingAZeroBubbleScheduleAsksForEveryW) {
  std::vector<std::array<std::vector<std::string>, 3>> one(1);
  one[0][1] = {"F0", "B0", "W0", "F1", "B1"};
  std::vector<StageSchedule> parsed;
  std::string error;
  EXPECT_FALSE(parseSchedule(one, parsed, error));
  EXPECT_EQ(error, "stage 0 never computes W1 (a stage that splits its "
                   "backward computes F, B and W of micro-batches 0..1)");
  // A W before its B never runs.
  one[0][1] = {"F0", "W0", "B0"};
  ASSERT_TRUE(parseSchedule(one, parsed, error)) << error;
  EXPECT_FALSE(checkSchedule(parsed, error));
  // W is a compute entry only.
  std::vector<std::array<std::vector<std::string>, 3>> two(2);
  two[0][1] = {"F0", "B0", "W0"};
  two[0][2] = {"W0>1"};
  EXPECT_FALSE(parseSchedule(two, parsed, error));
  EXPECT_EQ(error, "stage 0 send: malformed item 'W0>1'");
}

TEST(Schedule, CheckFindsACycle) {
  auto schedule = buildSchedule(PipelineSchedule::OneFOneB, 2, 2);
  // Make stage 0's first send wait for its last compute: stage 1 can never
  // start, so stage 0 never gets its first gradient.
  schedule[0][Slot::Send][0].deps.push_back(
      {0, Slot::Compute,
       static_cast<int>(schedule[0][Slot::Compute].size()) - 1});
  std::string error;
  EXPECT_FALSE(checkSchedule(schedule, error));
  EXPECT_NE(error.find("never runs"), std::string::npos) << error;
}

} // namespace
