//===- WorkerPartsTest.cpp - Checkpoints, step lines, calibration ---------===//

#include "dtfm/Format/Stream.h"
#include "dtfm/Plan/SimInput.h"
#include "dtfm/Planner/Cluster.h"
#include "dtfm/Runtime/Backend.h"
#include "dtfm/Runtime/Calibration.h"
#include "dtfm/Runtime/Checkpoints.h"
#include "dtfm/Runtime/HostMemory.h"
#include "dtfm/Runtime/LaunchEnvironment.h"
#include "dtfm/Runtime/StepReport.h"
#include "dtfm/Support/Hash.h"

#include "plan.pb.h"

#include <gtest/gtest.h>

#include <cmath>
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

/// Writes generation `step` of `job`: each device's files, then the commit
/// record of them all (what the workers do together).
bool saveGeneration(const std::string &dir, int64_t step,
                    const std::vector<std::pair<std::string,
                                                format::TensorMap>> &files,
                    const std::string &job, std::string &error,
                    uint64_t planHash = 0x123456789abcdefull) {
  std::vector<std::string> entries;
  for (const auto &[device, state] : files) {
    std::string manifest;
    if (!CheckpointStore(dir, device, planHash, job)
             .save(step, state, manifest, error))
      return false;
    entries.push_back(device + " " + manifest);
  }
  std::string record;
  return CheckpointStore::commitRecord(step, job, entries, record, error) &&
         CheckpointStore(dir, files[0].first, planHash, job)
             .commit(step, record, error);
}

TEST(CheckpointStore, SavesLoadsPrunesAndRefusesAnotherPlan) {
  std::string dir = freshDir();
  CheckpointStore store(dir, "gpu0", 0x123456789abcdefull);
  format::TensorMap state;
  state["param/w"] = format::Tensor({2}, 1.5f);
  std::string error;
  for (int64_t step : {2, 4, 10})
    ASSERT_TRUE(saveGeneration(dir, step, {{"gpu0", state}}, "job", error))
        << error;
  EXPECT_EQ(store.steps(), (std::vector<int64_t>{2, 4, 10}));
  // Files of other devices and stray names are not this device's.
  CheckpointStore other(dir, "gpu1", 0x123456789abcdefull);
  EXPECT_TRUE(other.steps().empty());
  std::filesystem::create_directories(dir + "/gpu0.step-x.ckpt");
  EXPECT_EQ(store.steps().size(), 3u);
  store.prune(2);
  EXPECT_EQ(store.steps(), (std::vector<int64_t>{4, 10}));
  EXPECT_FALSE(std::filesystem::exists(CheckpointStore::commitPath(dir, 2)));
  // Workers sharing a directory: the first to prune removes the shared
  // commit records; the others' old files go all the same.
  format::TensorMap second = state;
  for (int64_t step : {12, 14, 16})
    ASSERT_TRUE(saveGeneration(dir, step, {{"gpu0", state}, {"gpu1", second}},
                               "job", error))
        << error;
  CheckpointStore gpu1(dir, "gpu1", 0x123456789abcdefull);
  store.prune(2);
  gpu1.prune(2);
  EXPECT_EQ(store.steps(), (std::vector<int64_t>{14, 16}));
  EXPECT_EQ(gpu1.steps(), (std::vector<int64_t>{14, 16}));
  format::TensorMap back;
  ASSERT_TRUE(store.load(16, back, error)) << error;
  EXPECT_EQ(back.size(), 1u);
  EXPECT_EQ(back["param/w"].data, state["param/w"].data);
  CheckpointStore otherPlan(dir, "gpu0", 0x123456789abcdeeull);
  EXPECT_FALSE(otherPlan.load(16, back, error));
  EXPECT_EQ(error, dir + "/gpu0.step-16.ckpt: a checkpoint of another plan");
  std::filesystem::remove_all(dir);
}

// A generation is complete once committed, and only the files its commit
// record lists belong to it: files of another run, a generation never
// committed, a forged record are refused; generations written before
// commit records still load.
TEST(CheckpointStore, GenerationsOfTwoRunsNeverMix) {
  std::string dir = freshDir(), error;
  format::TensorMap a, b;
  a["param/w"] = format::Tensor({2}, 1.0f);
  b["param/w"] = format::Tensor({2}, 2.0f);
  ASSERT_TRUE(saveGeneration(dir, 5, {{"gpu0", a}, {"gpu1", a}}, "run-a",
                             error))
      << error;
  CheckpointStore gpu0(dir, "gpu0", 0x123456789abcdefull),
      gpu1(dir, "gpu1", 0x123456789abcdefull);
  format::TensorMap back;
  ASSERT_TRUE(gpu0.load(5, back, error)) << error;
  ASSERT_TRUE(gpu1.load(5, back, error)) << error;
  // Another run's file in its place: refused, the generation not listed
  // as another.
  std::string manifest;
  ASSERT_TRUE(CheckpointStore(dir, "gpu1", 0x123456789abcdefull, "run-b")
                  .save(5, b, manifest, error))
      << error;
  EXPECT_FALSE(gpu1.load(5, back, error));
  EXPECT_EQ(error, dir + "/gpu1.step-5.ckpt: written by another run than the "
                         "one that committed step 5 (files of two runs)");
  ASSERT_TRUE(gpu0.load(5, back, error)) << error;
  // Of the same run but not the file the record lists (rewritten later).
  ASSERT_TRUE(CheckpointStore(dir, "gpu1", 0x123456789abcdefull, "run-a")
                  .save(5, b, manifest, error))
      << error;
  EXPECT_FALSE(gpu1.load(5, back, error));
  EXPECT_EQ(error, dir + "/gpu1.step-5.ckpt: not the file that the commit "
                         "record of step 5 lists (files of two runs)");
  // Written, never committed: not a generation.
  ASSERT_TRUE(CheckpointStore(dir, "gpu0", 0x123456789abcdefull, "run-a")
                  .save(7, a, manifest, error))
      << error;
  EXPECT_FALSE(gpu0.load(7, back, error));
  EXPECT_EQ(error, dir + "/step-7.commit: missing (the generation of step 7 "
                         "was never committed)");
  EXPECT_EQ(gpu0.steps(), (std::vector<int64_t>{5, 7}));
  EXPECT_EQ(gpu0.completeSteps(), (std::vector<int64_t>{5}));
  std::vector<Generation> listed = listGenerations(dir);
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_EQ(listed[0].step, 5);
  // A record that is not one (cut short, a device twice, another step).
  for (const std::string &forged :
       {std::string("dtfm-commit 1 step 7 job 00\nfile gpu0 plan 1 bytes 1"),
        std::string("dtfm-commit 1 step 7 job 00\nfile gpu0 plan 1 bytes 1 "
                    "fnv1a 1\nfile gpu0 plan 1 bytes 1 fnv1a 1\n"),
        std::string("dtfm-commit 1 step 8 job 00\nfile gpu0 plan 1 bytes 1 "
                    "fnv1a 1\n"),
        std::string("dtfm-commit 1 step 7 job 00\nfile ../x plan 1 bytes 1 "
                    "fnv1a 1\n")}) {
    ASSERT_TRUE(format::writeFileAtomically(
        CheckpointStore::commitPath(dir, 7), forged, error));
    EXPECT_FALSE(gpu0.load(7, back, error));
    EXPECT_EQ(error, dir + "/step-7.commit: not the commit record of step 7")
        << forged;
  }
  // A worker's line of another job or step is not committed.
  std::string record;
  EXPECT_FALSE(CheckpointStore::commitRecord(7, "run-b", {"gpu0 " + manifest},
                                             record, error));
  EXPECT_FALSE(CheckpointStore::commitRecord(8, "run-a", {"gpu0 " + manifest},
                                             record, error));
  EXPECT_FALSE(CheckpointStore::commitRecord(
      7, "run-a", {"gpu0 " + manifest, "gpu0 " + manifest}, record, error));
  ASSERT_TRUE(CheckpointStore::commitRecord(7, "run-a", {"gpu0 " + manifest},
                                            record, error))
      << error;
  // Written before commit records (version-1 manifests): complete as it
  // is.
  std::string bytes = format::encodeTensors(a);
  std::string legacyDir = dir + "/legacy";
  std::filesystem::create_directories(legacyDir);
  CheckpointStore legacy(legacyDir, "gpu0", 0x123456789abcdefull);
  format::TensorMap withMeta = a;
  format::Tensor meta({5});
  meta.data = {3, 0xcdef, 0x89ab, 0x4567, 0x0123};
  withMeta[CheckpointStore::kMetaEntry] = meta;
  bytes = format::encodeTensors(withMeta);
  char line[200];
  std::snprintf(line, sizeof line,
                "dtfm-checkpoint 1 step 3 plan 0123456789abcdef bytes %zu "
                "fnv1a %016llx\n",
                bytes.size(), static_cast<unsigned long long>(fnv1a(bytes)));
  ASSERT_TRUE(format::writeFileAtomically(legacy.path(3), bytes, error));
  ASSERT_TRUE(format::writeFileAtomically(legacy.manifestPath(3), line, error));
  ASSERT_TRUE(legacy.load(3, back, error)) << error;
  ASSERT_EQ(listGenerations(legacyDir).size(), 1u);
  std::filesystem::remove_all(dir);
}

// One job per checkpoint directory. flock locks belong to open files, so
// one process can play several processes: claims of one job join, another
// job is refused naming the holder, and a claim nobody holds is taken over.
TEST(CheckpointClaim, OneJobWritesADirectory) {
  std::string dir = freshDir(), error;
  std::unique_ptr<CheckpointClaim> first =
      CheckpointClaim::claim(dir, "job-a", error);
  ASSERT_TRUE(first) << error;
  std::unique_ptr<CheckpointClaim> joined =
      CheckpointClaim::claim(dir, "job-a", error);
  ASSERT_TRUE(joined) << error;
  EXPECT_FALSE(CheckpointClaim::claim(dir, "job-b", error));
  EXPECT_EQ(error.rfind("--checkpoint-dir " + dir +
                            " is in use by job job-a (host ",
                        0),
            0u)
      << error;
  EXPECT_NE(error.find(", pid " + std::to_string(::getpid()) + ", since "),
            std::string::npos)
      << error;
  first.reset(); // the job goes on while any of its processes holds it
  EXPECT_FALSE(CheckpointClaim::claim(dir, "job-b", error));
  joined.reset();
  std::unique_ptr<CheckpointClaim> next =
      CheckpointClaim::claim(dir, "job-b", error);
  ASSERT_TRUE(next) << error;
  // A hostile record is shown printable and bounded, never trusted.
  next.reset();
  {
    std::FILE *f = std::fopen(CheckpointClaim::lockPath(dir).c_str(), "w");
    std::fputs("garbage\x01\n", f);
    std::fclose(f);
  }
  ASSERT_TRUE(CheckpointClaim::claim(dir, "job-c", error)) << error;
  // A job id is fit as a --run-id, and no two are the same.
  std::string id = CheckpointClaim::freshJobId();
  EXPECT_TRUE(validRunId(id)) << id;
  EXPECT_NE(id, CheckpointClaim::freshJobId());
  std::filesystem::remove_all(dir);
  EXPECT_FALSE(CheckpointClaim::claim(dir, "job-a", error));
  EXPECT_EQ(error, "--checkpoint-dir " + dir + ": cannot use its lock file " +
                       dir + "/dtfm.lock (No such file or directory)");
}

// Another plan's generation: listed by step with each file's plan, and a
// program's state assembled from its members' shards (brute force: the
// whole moment is the concatenation of the pieces).
TEST(CheckpointStore, AssemblesStateAcrossPlans) {
  std::string dir = freshDir();
  std::string error;
  format::Tensor whole({10});
  for (int i = 0; i < 10; ++i)
    whole.data[i] = 0.5f * static_cast<float>(i);
  std::vector<format::TensorMap> files(3);
  for (int k = 0; k < 3; ++k) {
    ElementRange range = shardOf(10, k, 3);
    format::TensorMap &f = files[k];
    f["param/w"] = format::Tensor({2, 5}, 1.0f);
    f["opt.m/w"] = format::Tensor({range.size()});
    std::copy(whole.data.begin() + range.begin,
              whole.data.begin() + range.end, f["opt.m/w"].data.begin());
    f["shard/w"] = encodeShard(range);
    f["opt.step/w"] = format::Tensor({1}, 7.0f);
  }
  ASSERT_TRUE(saveGeneration(dir, 12,
                             {{"gpu0", files[0]},
                              {"gpu1", files[1]},
                              {"gpu2", files[2]}},
                             "job", error, 0xabcull))
      << error;
  ASSERT_TRUE(saveGeneration(dir, 6, {{"gpu0", files[0]}}, "job", error,
                             0xabcull))
      << error;
  std::vector<Generation> generations = listGenerations(dir);
  ASSERT_EQ(generations.size(), 2u);
  EXPECT_EQ(generations[0].step, 12);
  ASSERT_EQ(generations[0].files.size(), 3u);
  EXPECT_EQ(generations[0].files[2].first, "gpu2");
  EXPECT_EQ(generations[0].files[2].second, 0xabcull);
  std::vector<format::TensorMap> loaded;
  ASSERT_TRUE(loadGeneration(dir, generations[0], loaded, error)) << error;

  // Unsharded on the new plan: the whole moment, in the parameter's shape.
  format::TensorMap out;
  std::map<std::string, std::vector<int64_t>> parameters = {{"w", {2, 5}}};
  ASSERT_TRUE(assembleState(loaded, parameters, {}, {}, out, error)) << error;
  EXPECT_EQ(out["opt.m/w"].shape, (std::vector<int64_t>{2, 5}));
  EXPECT_EQ(out["opt.m/w"].data, whole.data);
  EXPECT_EQ(out["opt.step/w"].data[0], 7.0f);
  EXPECT_EQ(out.count("opt.v/w"), 0u);
  // Member 1 of 2 on the new plan: elements [5, 10).
  ASSERT_TRUE(assembleState(loaded, parameters, {{"w", shardOf(10, 1, 2)}}, {},
                            out, error))
      << error;
  EXPECT_EQ(out["opt.m/w"].data,
            std::vector<float>(whole.data.begin() + 5, whole.data.end()));
  // Step 6 has one member's file: the moment is not covered.
  ASSERT_TRUE(loadGeneration(dir, generations[1], loaded, error)) << error;
  EXPECT_FALSE(assembleState(loaded, parameters, {}, {}, out, error));
  EXPECT_EQ(error, "the checkpoint's files do not cover 'opt.m/w' (element 3 "
                   "is in none): a generation with a file missing");
  // Another model.
  EXPECT_FALSE(assembleState(files, {{"w", {10}}}, {}, {}, out, error));
  EXPECT_NE(error.find("a checkpoint of another model"), std::string::npos);
  // Error feedback: each new replica starts from the mean of the old
  // replicas' residuals (brute force over the three).
  for (int k = 0; k < 3; ++k) {
    files[k]["opt.residual/w"] = format::Tensor({2, 5});
    for (int i = 0; i < 10; ++i)
      files[k]["opt.residual/w"].data[i] = static_cast<float>(k * 10 + i);
  }
  ASSERT_TRUE(assembleState(files, parameters, {{"w", shardOf(10, 0, 2)}}, {},
                            out, error))
      << error;
  ASSERT_EQ(out["opt.residual/w"].shape, (std::vector<int64_t>{2, 5}));
  for (int i = 0; i < 10; ++i)
    EXPECT_FLOAT_EQ(out["opt.residual/w"].data[i], (0 + 10 + 20) / 3.0f + i);
  // Local steps: at an exchange the replicas agree and the anchor and the
  // outer velocity carry over whole (never sharded); between two, the
  // replicas differ and no other plan can take them.
  for (int k = 0; k < 3; ++k) {
    files[k]["opt.anchor/w"] = format::Tensor({2, 5}, 1.0f);
    files[k]["opt.outer_velocity/w"] = format::Tensor({2, 5}, 0.25f);
  }
  ASSERT_TRUE(assembleState(files, parameters, {{"w", shardOf(10, 1, 2)}}, {},
                            out, error))
      << error;
  EXPECT_EQ(out["opt.anchor/w"].data, std::vector<float>(10, 1.0f));
  EXPECT_EQ(out["opt.outer_velocity/w"].data, std::vector<float>(10, 0.25f));
  files[2]["param/w"].data[4] = 1.5f;
  EXPECT_FALSE(assembleState(files, parameters, {}, {}, out, error));
  EXPECT_EQ(error, "the replicas' parameter 'w' differs: a checkpoint between "
                   "two exchanges of local steps resumes only on its own plan "
                   "(on another, one written at an exchange: a step that "
                   "sync_every divides)");
  // Shard records: exact beyond 2^24, malformed ones refused.
  ElementRange big{(int64_t(1) << 40) + 3, (int64_t(1) << 41) + 5};
  std::optional<ElementRange> back = decodeShard(encodeShard(big));
  ASSERT_TRUE(back);
  EXPECT_EQ(back->begin, big.begin);
  EXPECT_EQ(back->end, big.end);
  format::Tensor bad = encodeShard({5, 2});
  EXPECT_FALSE(decodeShard(bad));
  bad.data[0] = 0.5f;
  EXPECT_FALSE(decodeShard(bad));
  std::filesystem::remove_all(dir);
}

proto::Plan oneDevicePlan();

TEST(StepReport, LinesAndJson) {
  IterationWork work{1000, 4e9, true, 80e9};
  StepFigures f{3, 2.5, 0.5, 0.25, true, 0xabcdef0123ull};
  f.seen = 3000;
  f.elapsedSeconds = 75;
  // Resumed after step 1 at 70 s: 5 s for 2 steps, 17 steps to go.
  LogStart start{1, 1000, 70};
  EXPECT_EQ(stepLine(f, work, 20, start),
            "step 3/20 loss 2.500000 | 2000 tok/s | 8.000 GFLOP/s, MFU 10.0% "
            "| 500.00 ms (simulated 250.00 ms, calibrated) | 1:15 elapsed, "
            "ETA 0:42");
  f.step = 20; // the last step: no ETA
  f.elapsedSeconds = 3725;
  EXPECT_EQ(stepLine(f, work, 20, start),
            "step 20/20 loss 2.500000 | 2000 tok/s | 8.000 GFLOP/s, MFU 10.0% "
            "| 500.00 ms (simulated 250.00 ms, calibrated) | 1:02:05 elapsed");
  f.step = 3;
  f.elapsedSeconds = 75;
  EXPECT_EQ(stepJson(f, work),
            "{\"step\":3,\"loss\":2.5,\"tokens_per_s\":2000,\"gflops\":8,"
            "\"measured_s\":0.5,\"simulated_s\":0.25,\"calibrated\":true,"
            "\"samples_hash\":\"000000abcdef0123\",\"tokens\":3000,"
            "\"mfu\":0.1,\"elapsed_s\":75}");
  work.tokenModel = false;
  work.peakFlops = 0; // no peak: no MFU
  f.seconds = 0; // nothing measured: rates are 0, never inf
  EXPECT_EQ(stepJson(f, work),
            "{\"step\":3,\"loss\":2.5,\"samples_per_s\":0,\"gflops\":0,"
            "\"measured_s\":0,\"simulated_s\":0.25,\"calibrated\":true,"
            "\"samples\":3000,\"elapsed_s\":75}");
}

/// `text` written to a fresh file under the test's temporary directory.
static std::string writeLog(const std::string &name, const std::string &text) {
  std::string path = ::testing::TempDir() + name;
  std::FILE *file = std::fopen(path.c_str(), "wb");
  std::fwrite(text.data(), 1, text.size(), file);
  std::fclose(file);
  return path;
}

TEST(StepReport, TheLogReadBack) {
  IterationWork work{1000, 4e9, true, 80e9};
  StepFigures f{1, 2.5, 0.5, 0.25, false, 7};
  f.lr = 0.001;
  f.gradNorm = 1.5;
  f.seen = 1000;
  f.elapsedSeconds = 0.5;
  std::string text = stepJson(f, work) + "\n";
  f.step = 2;
  f.loss = std::nan("");
  f.valLoss = 2.25;
  text += stepJson(f, work) + "\n";
  std::string path = writeLog("steps.jsonl", text + "{\"step\":3,\"lo");
  std::vector<LoggedStep> steps;
  bool incomplete = false;
  std::string error;
  ASSERT_TRUE(readStepLog(path, steps, incomplete, error)) << error;
  EXPECT_TRUE(incomplete); // the last record is still being written
  ASSERT_EQ(steps.size(), 2u);
  EXPECT_EQ(steps[0].step, 1);
  EXPECT_DOUBLE_EQ(steps[0].loss, 2.5);
  EXPECT_DOUBLE_EQ(steps[0].lr, 0.001);
  EXPECT_DOUBLE_EQ(steps[0].gradNorm, 1.5);
  EXPECT_DOUBLE_EQ(steps[0].seen, 1000);
  EXPECT_DOUBLE_EQ(steps[0].rate, 2000);
  EXPECT_DOUBLE_EQ(steps[0].mfu, 0.1);
  EXPECT_DOUBLE_EQ(steps[0].elapsedSeconds, 0.5);
  EXPECT_TRUE(std::isnan(steps[0].valLoss));
  EXPECT_TRUE(std::isnan(steps[1].loss)); // logged as null: diverged
  EXPECT_DOUBLE_EQ(steps[1].valLoss, 2.25);

  // Each bad record: one line naming the file and line.
  std::pair<std::string, std::string> bad[] = {
      {"{\"step\":1}\n[1]\n", ":2: a record is a JSON object, not an array"},
      {"{\"loss\":1}\n", ":1: a record needs \"step\", a positive integer"},
      {"{\"step\":0}\n", ":1: a record needs \"step\", a positive integer"},
      {"{\"step\":1.5}\n", ":1: a record needs \"step\", a positive integer"},
      {"{\"step\":2}\n{\"step\":2}\n",
       ":2: step 2 after step 2: the steps of a log increase"},
      {"{\"step\":1,\"loss\":\"low\"}\n",
       ":1: \"loss\" is a string, not a number"},
      {"{\"step\":1,}\n{\"step\":2}\n", ":1: at byte"},
      {std::string(70000, ' ') + "\n", ":1: a line of 70000 bytes"}};
  for (const auto &[log, message] : bad) {
    path = writeLog("bad.jsonl", log);
    EXPECT_FALSE(readStepLog(path, steps, incomplete, error)) << log;
    EXPECT_NE(error.find(path + message), std::string::npos) << error;
  }
  EXPECT_FALSE(readStepLog(path + ".none", steps, incomplete, error));
  EXPECT_NE(error.find("the step log "), std::string::npos);
}

TEST(StepReport, ThePeakOfThePlansDevices) {
  proto::Plan plan = oneDevicePlan();
  EXPECT_DOUBLE_EQ(iterationWork(plan).peakFlops, 1e9);
  plan.mutable_devices(0)->set_name("elsewhere"); // not a program's device
  EXPECT_DOUBLE_EQ(iterationWork(plan).peakFlops, 0);
}

// What the host can give new workers, from /proc/meminfo and the cgroup's
// files, and the refusal of workers that would not fit.
TEST(HostMemory, AvailableMemoryAndTheRefusal) {
  EXPECT_EQ(memAvailable("MemTotal:       24000000 kB\n"
                         "MemAvailable:   20000000 kB\n"),
            20000000.0 * 1024);
  EXPECT_FALSE(memAvailable("MemTotal: 1 kB\n"));
  EXPECT_FALSE(memAvailable("MemAvailable: lots\n"));
  EXPECT_EQ(cgroupHeadroom("3221225472\n", "1073741824\n"), 2147483648.0);
  EXPECT_EQ(cgroupHeadroom("100\n", "150\n"), 0.0); // over its limit
  EXPECT_FALSE(cgroupHeadroom("max\n", "1073741824\n"));
  EXPECT_FALSE(cgroupHeadroom("9223372036854771712\n", "1\n")); // v1: none
  EXPECT_FALSE(cgroupHeadroom("", "1\n"));
  EXPECT_FALSE(cgroupHeadroom("-5\n", "1\n"));
  std::optional<HostMemory> here = hostMemory();
  ASSERT_TRUE(here); // Linux has /proc/meminfo
  EXPECT_GT(here->availableBytes, 0);
  EXPECT_GT(procStatusBytes("VmRSS"), 0);

  proto::Plan plan = oneDevicePlan();
  HostMemory host{1e9, "MemAvailable"};
  EXPECT_EQ(hostMemoryProblem(plan, {0}, host, 6e8), "");
  EXPECT_EQ(hostMemoryProblem(plan, {0, 0}, host, 6e8),
            "the 2 workers this host starts would need 1.2 GB at their peak "
            "(the plan's predicted tensors, and 0.6 GB for each process), "
            "but 1 GB is available (MemAvailable): free memory, start fewer "
            "workers on this host, or plan with recomputation or sharded "
            "optimizer state (--dtfm-fit-memory)");
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
  ASSERT_TRUE(calibratedIteration(plan, {"d0"}, {0}, {}, 0, seconds, error))
      << error;
  EXPECT_DOUBLE_EQ(seconds, 7); // the plan's speed
  ASSERT_TRUE(calibratedIteration(plan, {"d0"}, {2e9}, {}, 0, seconds, error));
  EXPECT_DOUBLE_EQ(seconds, 3.5); // measured twice as fast
  // Half a core for one always-busy worker: the fixed point halves its
  // speed.
  ASSERT_TRUE(
      calibratedIteration(plan, {"d0"}, {2e9}, {}, 0.5, seconds, error));
  EXPECT_NEAR(seconds, 7, 0.02);
}

TEST(Calibration, TheRooflineKeepsTheBandwidthWhileTheSpeedChanges) {
  // The forward also copies 1 GB (no FLOPs) on a device of 1 GB/s: 1 s
  // more at any speed, which a measured speed does not shorten.
  proto::Plan plan = oneDevicePlan();
  plan.mutable_devices(0)->set_memory_bytes_per_second(1e9);
  proto::DeviceProgram &program = *plan.mutable_programs(0);
  proto::OpWork *term = program.add_forward_work();
  term->set_flops(2e9);
  term = program.add_forward_work();
  term->set_bytes(1e9);
  program.add_backward_work()->set_flops(4e9);
  planner::Cluster cluster;
  cluster.name = "one";
  cluster.devices.push_back({"d0", "r", 1e9, 1, 1e9, "", 1e9});
  cluster.delayMs = planner::SquareMatrix(1);
  cluster.bandwidthGbps = planner::SquareMatrix(1);
  plan.set_cluster_fingerprint(planner::clusterFingerprint(cluster));
  double seconds = 0;
  std::string error;
  ASSERT_TRUE(calibratedIteration(plan, {"d0"}, {0}, {}, 0, seconds, error))
      << error;
  EXPECT_DOUBLE_EQ(seconds, 8);
  ASSERT_TRUE(calibratedIteration(plan, {"d0"}, {2e9}, {}, 0, seconds, error));
  EXPECT_DOUBLE_EQ(seconds, 4.5);
  // A measured bandwidth replaces the plan's: the copy takes 0.5 s.
  ASSERT_TRUE(
      calibratedIteration(plan, {"d0"}, {2e9}, {2e9}, 0, seconds, error));
  EXPECT_DOUBLE_EQ(seconds, 4);
  // The speed a worker measures there: its 8 s of work at 1 GB/s.
  planner::RooflineWork work = plan::forwardWorkOf(plan, program);
  work.add(plan::backwardWorkOf(plan, program));
  EXPECT_DOUBLE_EQ(planner::speedForSeconds(work, 7, 1e9), 1e9);
}

TEST(Calibration, TheCpuProbeMeasuresAMemoryBandwidth) {
  std::string error;
  std::unique_ptr<StageExecutor> executor =
      makeExecutor(Backend::Cpu, StageProgram(), 0, GpuOptions(), error);
  ASSERT_TRUE(executor) << error;
  double bandwidth = executor->measureMemoryBandwidth();
  // Any machine that runs this streams between 100 MB/s and 10 TB/s.
  EXPECT_GT(bandwidth, 1e8);
  EXPECT_LT(bandwidth, 1e13);
}

} // namespace

TEST(CheckpointStore, AssemblesTensorParallelSlicesAtAnotherDegree) {
  // A [2, 4] parameter written as two column slices ([2, 2] each, "tp/w"),
  // slice 1's moment sharded over two data-parallel members.
  format::Tensor whole({2, 4}), moment({2, 4});
  for (int i = 0; i < 8; ++i) {
    whole.data[i] = static_cast<float>(i);
    moment.data[i] = 10.0f + static_cast<float>(i);
  }
  std::vector<format::TensorMap> files(3);
  for (int rank = 0; rank < 2; ++rank) {
    format::Tensor param = sliceOf(whole, 1, rank, 2);
    format::Tensor m = sliceOf(moment, 1, rank, 2);
    for (int file : rank == 0 ? std::vector<int>{0} : std::vector<int>{1, 2}) {
      format::TensorMap &f = files[file];
      f["param/w"] = param;
      f["tp/w"] = encodeSlice({1, rank, 2});
      if (rank == 0) {
        f["opt.m/w"] = m;
        continue;
      }
      ElementRange range = shardOf(4, file - 1, 2);
      f["shard/w"] = encodeShard(range);
      f["opt.m/w"] = format::Tensor({range.size()});
      std::copy(m.data.begin() + range.begin, m.data.begin() + range.end,
                f["opt.m/w"].data.begin());
    }
  }
  format::TensorMap out;
  std::string error;
  // Whole (tensor parallelism 1).
  ASSERT_TRUE(assembleState(files, {{"w", {2, 4}}}, {}, {}, out, error))
      << error;
  EXPECT_EQ(out["param/w"].data, whole.data);
  EXPECT_EQ(out["opt.m/w"].data, moment.data);
  // Slice 3 of 4 along dim 1: column 3.
  ASSERT_TRUE(
      assembleState(files, {{"w", {2, 1}}}, {}, {{"w", {1, 3, 4}}}, out, error))
      << error;
  EXPECT_EQ(out["param/w"].data, (std::vector<float>{3, 7}));
  EXPECT_EQ(out["opt.m/w"].data, (std::vector<float>{13, 17}));
  // A slice no file holds; slices that disagree.
  std::vector<format::TensorMap> missing(files.begin() + 1, files.end());
  EXPECT_FALSE(assembleState(missing, {{"w", {2, 4}}}, {}, {}, out, error));
  EXPECT_EQ(error, "no file of the checkpoint holds tensor-parallel slice 0 "
                   "of parameter 'w': a generation with a file missing");
  files[0]["tp/w"] = encodeSlice({0, 0, 2});
  EXPECT_FALSE(assembleState(files, {{"w", {2, 4}}}, {}, {}, out, error));
  EXPECT_EQ(error, "the checkpoint's files slice parameter 'w' in two ways");
  files[0]["tp/w"] = encodeSlice({5, 0, 2});
  EXPECT_FALSE(assembleState(files, {{"w", {2, 4}}}, {}, {}, out, error));
  EXPECT_EQ(error, "'tp/w' is not a slice of its parameter");
}

TEST(Checkpoints, DalysIntervalAgainstItsClosedForm) {
  // d = 10 s, M = 1 h: sqrt(2 d M) = 268.33 s, corrected by Daly.
  double young = std::sqrt(2 * 10.0 * 3600);
  double ratio = 10.0 / 7200;
  EXPECT_NEAR(dalyCheckpointInterval(10, 3600),
              young * (1 + std::sqrt(ratio) / 3 + ratio / 9) - 10, 1e-9);
  EXPECT_NEAR(dalyCheckpointInterval(10, 3600), 261.70, 0.01);
  // Cheap checkpoints: Young's sqrt(2 d M) to first order.
  EXPECT_NEAR(dalyCheckpointInterval(1e-4, 1e4) / std::sqrt(2 * 1e-4 * 1e4),
              1, 1e-3);
  // A checkpoint as long as two failure intervals: checkpoint every M.
  EXPECT_EQ(dalyCheckpointInterval(100, 50), 50);
  EXPECT_EQ(dalyCheckpointInterval(0, 50), 0);
  // Longer failure intervals, longer checkpoint intervals.
  EXPECT_LT(dalyCheckpointInterval(5, 600), dalyCheckpointInterval(5, 6000));
}
