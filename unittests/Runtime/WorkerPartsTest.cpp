//===- WorkerPartsTest.cpp - Checkpoints, step lines, calibration ---------===//

#include "dtfm/Format/Stream.h"
#include "dtfm/Planner/Cluster.h"
#include "dtfm/Runtime/Calibration.h"
#include "dtfm/Runtime/Checkpoints.h"
#include "dtfm/Runtime/StepReport.h"

#include "plan.pb.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <unistd.h>

using namespace dtfm;
using namespace dtfm::runtime;

namespace {

std::string freshDir() {
  std::string dir = "/tmp/dtfm-ckpt-test-" + std::to_string(::getpid());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

TEST(CheckpointStore, SavesLoadsPrunesAndRefusesAnotherPlan) {
  std::string dir = freshDir();
  CheckpointStore store(dir, "gpu0", 0x123456789abcdefull);
  format::TensorMap state;
  state["param/w"] = format::Tensor({2}, 1.5f);
  std::string error;
  for (int64_t step : {2, 4, 10})
    ASSERT_TRUE(store.save(step, state, error)) << error;
  EXPECT_EQ(store.steps(), (std::vector<int64_t>{2, 4, 10}));
  // Files of other devices and stray names are not this device's.
  CheckpointStore other(dir, "gpu1", 0x123456789abcdefull);
  EXPECT_TRUE(other.steps().empty());
  std::filesystem::create_directories(dir + "/gpu0.step-x.ckpt");
  EXPECT_EQ(store.steps().size(), 3u);
  store.prune(2);
  EXPECT_EQ(store.steps(), (std::vector<int64_t>{4, 10}));
  format::TensorMap back;
  ASSERT_TRUE(store.load(10, back, error)) << error;
  EXPECT_EQ(back.size(), 1u);
  EXPECT_EQ(back["param/w"].data, state["param/w"].data);
  CheckpointStore otherPlan(dir, "gpu0", 0x123456789abcdeeull);
  EXPECT_FALSE(otherPlan.load(10, back, error));
  EXPECT_EQ(error, dir + "/gpu0.step-10.ckpt: a checkpoint of another plan");
  std::filesystem::remove_all(dir);
}

TEST(StepReport, LinesAndJson) {
  IterationWork work{1000, 4e9, true};
  StepFigures f{3, 2.5, 0.5, 0.25, true};
  EXPECT_EQ(stepLine(f, work), "step 3 loss 2.500000 | 2000 tok/s | 8.000 "
                               "GFLOP/s | 500.00 ms (simulated 250.00 ms, "
                               "calibrated)");
  EXPECT_EQ(stepJson(f, work),
            "{\"step\":3,\"loss\":2.5,\"tokens_per_s\":2000,\"gflops\":8,"
            "\"measured_s\":0.5,\"simulated_s\":0.25,\"calibrated\":true}");
  work.tokenModel = false;
  f.seconds = 0; // nothing measured: rates are 0, never inf
  EXPECT_EQ(stepJson(f, work),
            "{\"step\":3,\"loss\":2.5,\"samples_per_s\":0,\"gflops\":0,"
            "\"measured_s\":0,\"simulated_s\":0.25,\"calibrated\":true}");
}

/// A one-device plan: forward 2 GFLOP, backward 4, optimizer 1, on a
/// device of 1 GFLOP/s as planned.
proto::Plan oneDevicePlan() {
  planner::Cluster cluster;
  cluster.name = "one";
  cluster.devices.push_back({"d0", "r", 1e9, 1, 1e9});
  cluster.delayMs = planner::SquareMatrix(1);
  cluster.bandwidthGbps = planner::SquareMatrix(1);
  proto::Plan plan;
  plan.set_micro_batches(1);
  plan.set_cluster_name("one");
  plan.set_cluster_fingerprint(planner::clusterFingerprint(cluster));
  proto::PlanDevice &device = *plan.add_devices();
  device.set_name("d0");
  device.set_region("r");
  device.set_peak_flops(1e9);
  device.set_efficiency(1);
  device.set_memory_bytes(1e9);
  plan.add_delay_ms(0);
  plan.add_bandwidth_gbps(0);
  proto::DeviceProgram &program = *plan.add_programs();
  program.set_device("d0");
  program.set_forward_flops(2e9);
  program.set_backward_flops(4e9);
  program.set_optimizer_flops(1e9);
  format::Streams streams;
  streams[1] = {{format::Phase::Forward, 0, -1},
                {format::Phase::Backward, 0, -1}};
  format::streamsToProgram(streams, program);
  return plan;
}

TEST(Calibration, MeasuredSpeedsAndSharedCores) {
  proto::Plan plan = oneDevicePlan();
  double seconds = 0;
  std::string error;
  ASSERT_TRUE(calibratedIteration(plan, {"d0"}, {0}, 0, seconds, error))
      << error;
  EXPECT_DOUBLE_EQ(seconds, 7); // the plan's speed
  ASSERT_TRUE(calibratedIteration(plan, {"d0"}, {2e9}, 0, seconds, error));
  EXPECT_DOUBLE_EQ(seconds, 3.5); // measured twice as fast
  // Half a core for one always-busy worker: the fixed point halves its
  // speed.
  ASSERT_TRUE(calibratedIteration(plan, {"d0"}, {2e9}, 0.5, seconds, error));
  EXPECT_NEAR(seconds, 7, 0.02);
}

} // namespace
