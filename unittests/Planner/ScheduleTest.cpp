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
            std::string(inst.phase == Phase::Forward ? "F" : "B") +
            std::to_string(inst.microBatch);
  return text;
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
