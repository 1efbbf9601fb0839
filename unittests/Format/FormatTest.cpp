//===- FormatTest.cpp - Plan files, tensor files, stream entries ----------===//

#include "dtfm/Format/Int8.h"
#include "dtfm/Format/PlanFile.h"
#include "dtfm/Format/PlanInputs.h"
#include "dtfm/Format/Sparse.h"
#include "dtfm/Format/Stream.h"
#include "dtfm/Format/TensorFile.h"

#include "plan.pb.h"

#include <google/protobuf/util/message_differencer.h>

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <fstream>
#include <functional>
#include <unistd.h>
#include <sys/stat.h>

using namespace dtfm::format;

namespace {

TEST(Int8, RoundTripIsWithinHalfABlockScale) {
  // 600 values: blocks of 256, 256 and 88, of very different magnitudes.
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0, 1);
  std::vector<float> x(600);
  for (size_t i = 0; i < x.size(); ++i)
    x[i] = normal(rng) * (i < 256 ? 1e-3f : i < 512 ? 10.0f : 0.0f);
  x[300] = -50; // the second block's largest magnitude
  std::vector<char> bytes;
  dtfm::format::encodeInt8(x.data(), x.size(), bytes);
  ASSERT_EQ(bytes.size(), dtfm::format::int8Bytes(600));
  EXPECT_EQ(dtfm::format::int8Bytes(600), 3 * 4 + 600u); // a quarter and a bit
  std::vector<float> y(600);
  ASSERT_TRUE(dtfm::format::decodeInt8(bytes.data(), bytes.size(), 600, y.data()));
  for (size_t b = 0; b < 3; ++b) {
    float largest = 0;
    for (size_t i = b * 256; i < std::min<size_t>(600, (b + 1) * 256); ++i)
      largest = std::max(largest, std::fabs(x[i]));
    for (size_t i = b * 256; i < std::min<size_t>(600, (b + 1) * 256); ++i)
      EXPECT_LE(std::fabs(x[i] - y[i]), largest / 127 / 2 * (1 + 1e-6f)) << i;
  }
  EXPECT_EQ(y[300], -50.0f); // the largest comes back exactly (127 steps)
  EXPECT_EQ(y[599], 0.0f);   // an all-zero block stays zero
}

TEST(Int8, HostileBytesAreRefused) {
  std::vector<float> x(10, 1.0f), y(10);
  std::vector<char> bytes;
  dtfm::format::encodeInt8(x.data(), 10, bytes);
  EXPECT_FALSE(dtfm::format::decodeInt8(bytes.data(), bytes.size() - 1, 10,
                                  y.data()));
  EXPECT_FALSE(dtfm::format::decodeInt8(bytes.data(), bytes.size(), 11, y.data()));
  float bad = std::numeric_limits<float>::quiet_NaN();
  std::memcpy(bytes.data(), &bad, sizeof(float));
  EXPECT_FALSE(dtfm::format::decodeInt8(bytes.data(), bytes.size(), 10, y.data()));
  bad = -1;
  std::memcpy(bytes.data(), &bad, sizeof(float));
  EXPECT_FALSE(dtfm::format::decodeInt8(bytes.data(), bytes.size(), 10, y.data()));
}

TEST(Int8, FeedbackKeepsTheRoundingError) {
  std::vector<float> pending = {0.3f, -1.7f, 2.5f, 0.0f, 1e-4f};
  std::vector<float> before = pending, sent(5);
  moveInt8(pending.data(), 5, sent.data());
  for (size_t i = 0; i < 5; ++i)
    EXPECT_EQ(sent[i] + pending[i], before[i]) << i;
  EXPECT_LE(std::fabs(pending[0]), 2.5f / 127 / 2);
}

TEST(Sparse, CountsAndBytes) {
  EXPECT_EQ(topkCount(0, 100), 0u);
  EXPECT_EQ(topkCount(1, 100), 1u);   // at least one of a non-empty tensor
  EXPECT_EQ(topkCount(1000, 100), 10u);
  EXPECT_EQ(topkCount(1001, 100), 11u); // rounded up
  EXPECT_EQ(topkCount(10, 1.5), 7u);
  EXPECT_EQ(sparseBytes(10), 4u + 80u);
  EXPECT_EQ(sparseBytesOfDense(4000, 4, 100), 4.0 + 80.0);
}

TEST(Sparse, LargestMagnitudesTieByLowerIndex) {
  std::vector<float> x = {1, -5, 3, 5, -3, 0, 2};
  EXPECT_EQ(largestMagnitudes(x.data(), x.size(), 3),
            (std::vector<uint64_t>{1, 2, 3}));
  EXPECT_EQ(largestMagnitudes(x.data(), x.size(), 0), std::vector<uint64_t>{});
  EXPECT_EQ(largestMagnitudes(x.data(), x.size(), 99).size(), x.size());
}

// Error feedback loses nothing: what is sent plus the residual is the
// accumulated gradient, exactly, step after step; and over steps every
// entry is eventually sent (brute force on a small gradient stream).
TEST(Sparse, TopKFeedbackLosesNothing) {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0, 1);
  const size_t n = 50, k = topkCount(n, 10);
  std::vector<float> residual(n, 0.0f), sent(n), totalSent(n, 0.0f);
  std::vector<double> totalGrad(n, 0.0);
  for (int step = 0; step < 40; ++step) {
    std::vector<float> pending = residual;
    for (size_t i = 0; i < n; ++i) {
      float g = normal(rng);
      totalGrad[i] += g;
      pending[i] += g;
    }
    std::vector<float> accumulated = pending;
    moveTopK(pending.data(), n, k, sent.data());
    size_t nonzero = 0;
    for (size_t i = 0; i < n; ++i) {
      ASSERT_EQ(sent[i] + pending[i], accumulated[i]) << step << " " << i;
      ASSERT_TRUE(sent[i] == 0 || pending[i] == 0);
      nonzero += sent[i] != 0;
      totalSent[i] += sent[i];
    }
    EXPECT_EQ(nonzero, k);
    residual = pending;
  }
  // sum of what was sent + what is left = sum of the gradients (to float
  // rounding of the running sums).
  for (size_t i = 0; i < n; ++i)
    EXPECT_NEAR(totalSent[i] + residual[i], totalGrad[i], 1e-3) << i;
}

TEST(Sparse, RoundTripAddsEntries) {
  std::vector<float> x = {0, 2.5f, 0, -1, 0, 0, 7};
  std::vector<char> bytes;
  std::string error;
  ASSERT_TRUE(encodeSparse(x.data(), x.size(), 4, bytes, error)) << error;
  ASSERT_EQ(bytes.size(), sparseBytes(4));
  std::vector<float> sum(7, 1.0f);
  ASSERT_TRUE(addSparse(bytes.data(), bytes.size(), 7, 4, sum.data(), error))
      << error;
  EXPECT_EQ(sum, (std::vector<float>{1, 3.5f, 1, 0, 1, 1, 8}));
  // More nonzeros than the capacity is the sender's error.
  EXPECT_FALSE(encodeSparse(x.data(), x.size(), 2, bytes, error));
  EXPECT_EQ(error, "a top-k exchange with more than its 2 entries");
}

TEST(Sparse, HostileMessagesAreRefusedWhole) {
  std::vector<float> x = {0, 2.5f, 0, -1};
  std::vector<char> good;
  std::string error;
  ASSERT_TRUE(encodeSparse(x.data(), 4, 3, good, error));
  std::vector<float> sum(4, 0.0f);
  auto refused = [&](std::vector<char> bytes, size_t count, const char *why) {
    EXPECT_FALSE(addSparse(bytes.data(), bytes.size(), count, 3, sum.data(),
                           error));
    EXPECT_EQ(error, why);
    EXPECT_EQ(sum, std::vector<float>(4, 0.0f)); // nothing half-added
  };
  refused(std::vector<char>(good.begin(), good.end() - 1), 4,
          "a sparse message of 27 bytes (expected 28)");
  std::vector<char> bad = good;
  uint32_t many = 4;
  std::memcpy(bad.data(), &many, 4);
  refused(bad, 4, "a sparse message of 4 entries (at most 3)");
  refused(good, 3, "a sparse message whose entry 1 has index 3 out of 3");
  bad = good; // entry 1's index (3) before entry 0's (1)
  uint32_t zero = 0;
  std::memcpy(bad.data() + 4 + 8, &zero, 4);
  refused(bad, 4, "a sparse message whose entry 1 is out of order");
  bad = good;
  float nan = std::numeric_limits<float>::quiet_NaN();
  std::memcpy(bad.data() + 4 + 4, &nan, 4);
  refused(bad, 4, "a sparse message whose entry 0 is not finite");
}

TEST(StreamEntry, TextSpellingRoundTripsPerSlot) {
  StreamEntry e;
  ASSERT_TRUE(parseEntry("F3<1", Slot::Receive, e));
  EXPECT_EQ(e, (StreamEntry{Phase::Forward, 3, 1}));
  EXPECT_EQ(formatEntry(e, Slot::Receive), "F3<1");
  ASSERT_TRUE(parseEntry("B12", Slot::Compute, e));
  EXPECT_EQ(e, (StreamEntry{Phase::Backward, 12, -1}));
  EXPECT_EQ(formatEntry(e, Slot::Compute), "B12");
  ASSERT_TRUE(parseEntry("B0>7", Slot::Send, e));
  EXPECT_EQ(e, (StreamEntry{Phase::Backward, 0, 7}));
  EXPECT_EQ(formatEntry(e, Slot::Send), "B0>7");
  EXPECT_EQ(entryLabel(e), "B0");
}

TEST(StreamEntry, MalformedTextIsRefused) {
  StreamEntry e;
  for (const char *text : {"", "Q0", "F", "F<1", "Fx", "F3>1", "F3<", "F3<1x",
                           "F99999999999", "F3<-1", "F-3<1"})
    EXPECT_FALSE(parseEntry(text, Slot::Receive, e)) << text;
  EXPECT_FALSE(parseEntry("F3<1", Slot::Compute, e));
  EXPECT_FALSE(parseEntry("F3<1", Slot::Send, e));
  EXPECT_FALSE(parseEntry("F3", Slot::Send, e));
}

TEST(StreamEntry, ProgramEntriesRoundTripAndAreChecked) {
  Streams streams;
  streams[0] = {{Phase::Forward, 0, 0}, {Phase::Backward, 1, 2}};
  streams[1] = {{Phase::Forward, 0, -1}, {Phase::Backward, 1, -1}};
  streams[2] = {{Phase::Forward, 1, 2}};
  dtfm::proto::DeviceProgram program;
  program.set_stage(1);
  streamsToProgram(streams, program);
  Streams back;
  std::string error;
  dtfm::proto::Plan plan; // a whole program: its entries are its own
  ASSERT_TRUE(streamsFromProgram(plan, program, 2, 3, back, error)) << error;
  EXPECT_EQ(back, streams);
  // An entry's streams are its template's.
  *plan.add_templates() = program;
  plan.mutable_templates(0)->clear_stage();
  dtfm::proto::DeviceProgram entry;
  entry.set_stage(1);
  entry.set_template_index(0);
  ASSERT_TRUE(streamsFromProgram(plan, entry, 2, 3, back, error)) << error;
  EXPECT_EQ(back, streams);

  EXPECT_FALSE(streamsFromProgram(plan, program, 1, 3, back, error));
  EXPECT_EQ(error, "recv entry #1: micro-batch 1 outside [0, 1)");
  EXPECT_FALSE(streamsFromProgram(plan, program, 2, 2, back, error));
  EXPECT_EQ(error, "recv entry #1: peer stage 2 is not another of the "
                   "plan's 2 stages");
  dtfm::proto::DeviceProgram self = program;
  self.mutable_send_entries(0)->set_peer_stage(1);
  EXPECT_FALSE(streamsFromProgram(plan, self, 2, 3, back, error));
  EXPECT_EQ(error, "send entry #0: peer stage 1 is not another of the "
                   "plan's 3 stages");
  dtfm::proto::DeviceProgram phase = program;
  phase.mutable_compute_entries(1)->set_phase(
      static_cast<dtfm::proto::StreamEntry::Phase>(5));
  EXPECT_FALSE(streamsFromProgram(plan, phase, 2, 3, back, error));
  EXPECT_EQ(error, "compute entry #1: unknown phase 5");
}

TEST(StreamEntry, StageCountIsOneMoreThanTheHighestStage) {
  dtfm::proto::Plan plan;
  EXPECT_EQ(stageCount(plan), 0);
  plan.add_programs()->set_stage(2);
  plan.add_programs()->set_stage(0);
  EXPECT_EQ(stageCount(plan), 3);
}

std::string tempPath(const char *name) {
  return "/tmp/dtfm-format-test-" + std::to_string(::getpid()) + "-" + name;
}

TEST(TensorFile, EncodesDecodesAndWritesAtomically) {
  TensorMap tensors;
  tensors["w"] = Tensor({2, 3}, 1.5f);
  tensors["b"] = Tensor({3});
  tensors["b"].data = {1, -2, 3};
  tensors["s"] = Tensor({}, 4.0f);
  TensorMap back;
  std::string error;
  ASSERT_TRUE(decodeTensors(encodeTensors(tensors), "x", back, error)) << error;
  ASSERT_EQ(back.size(), 3u);
  EXPECT_EQ(back["w"].shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(back["b"].data, (std::vector<float>{1, -2, 3}));
  EXPECT_EQ(back["s"].data, (std::vector<float>{4}));

  std::string path = tempPath("t.bin");
  ASSERT_TRUE(writeTensorFile(path, tensors, error)) << error;
  back.clear();
  ASSERT_TRUE(readTensorFile(path, back, error)) << error;
  EXPECT_EQ(back["w"].data, tensors["w"].data);
  EXPECT_NE(::access((path + ".tmp").c_str(), F_OK), 0);
  std::remove(path.c_str());
  EXPECT_FALSE(writeTensorFile("/nonexistent-dir/t.bin", tensors, error));
  EXPECT_EQ(error, "cannot write '/nonexistent-dir/t.bin': its folder "
                   "'/nonexistent-dir' does not exist");
  // A symbolic link is refused, not replaced by a regular file.
  std::string link = tempPath("link.bin");
  std::remove(link.c_str());
  ASSERT_EQ(::symlink("/nonexistent-target", link.c_str()), 0);
  EXPECT_FALSE(writeTensorFile(link, tensors, error));
  EXPECT_EQ(error, "'" + link +
                       "' is a symbolic link: dtfm does not replace it (name "
                       "a regular file)");
  struct stat st{};
  EXPECT_TRUE(::lstat(link.c_str(), &st) == 0 && S_ISLNK(st.st_mode));
  std::remove(link.c_str());
}

TEST(TensorFile, CorruptBytesGetOneLineErrors) {
  TensorMap tensors;
  tensors["w"] = Tensor({2, 2}, 1.0f);
  std::string good = encodeTensors(tensors);
  TensorMap back;
  std::string error;
  EXPECT_FALSE(decodeTensors("garbage", "f", back, error));
  EXPECT_EQ(error, "f: not a dtfm tensor file");
  EXPECT_FALSE(
      decodeTensors(good.substr(0, good.size() - 1), "f", back, error));
  EXPECT_EQ(error, "f: truncated at tensor 'w'");
  EXPECT_FALSE(decodeTensors(good + "x", "f", back, error));
  EXPECT_EQ(error, "f: 1 trailing bytes after the last tensor");
  // A huge name length, a rank of 17, a negative dimension, and dimensions
  // whose product overflows: refused before anything is allocated.
  std::string bad = good;
  uint32_t hugeLength = 0xffffffffu;
  bad.replace(12, 4, reinterpret_cast<const char *>(&hugeLength), 4);
  EXPECT_FALSE(decodeTensors(bad, "f", back, error));
  EXPECT_EQ(error, "f: truncated or corrupt at tensor 0");
  bad = good;
  uint32_t rank = 17;
  bad.replace(17, 4, reinterpret_cast<const char *>(&rank), 4);
  EXPECT_FALSE(decodeTensors(bad, "f", back, error));
  EXPECT_EQ(error, "f: truncated or corrupt at tensor 0");
  bad = good;
  int64_t negative = -2;
  bad.replace(21, 8, reinterpret_cast<const char *>(&negative), 8);
  EXPECT_FALSE(decodeTensors(bad, "f", back, error));
  EXPECT_EQ(error, "f: corrupt shape of tensor 'w'");
  bad = good;
  int64_t big = int64_t(1) << 40;
  bad.replace(21, 8, reinterpret_cast<const char *>(&big), 8);
  bad.replace(29, 8, reinterpret_cast<const char *>(&big), 8);
  EXPECT_FALSE(decodeTensors(bad, "f", back, error));
  EXPECT_EQ(error, "f: truncated at tensor 'w'");
}

/// Two stages x `pipelines` replicas of a tiny program: each stage's
/// replicas differ only in what is a device's own.
static dtfm::proto::Plan replicatedPlan(int pipelines) {
  dtfm::proto::Plan plan;
  plan.set_format_version(kPlanFormatVersion);
  plan.set_model("m");
  plan.set_micro_batches(2);
  auto device = [](int stage, int pipeline) {
    return "s" + std::to_string(stage) + "p" + std::to_string(pipeline);
  };
  for (int q = 0; q < pipelines; ++q)
    for (int s = 0; s < 2; ++s) {
      dtfm::proto::DeviceProgram &p = *plan.add_programs();
      p.set_device(device(s, q));
      p.set_stage(s);
      p.set_pipeline(q);
      (s == 0 ? p.mutable_next() : p.mutable_prev())->assign(device(1 - s, q));
      p.set_speed_flops(1e12 * (q + 1));
      p.set_forward_flops(10 + s);
      p.add_compute_entries()->set_micro_batch(1);
      dtfm::proto::ParamShard &shard = *p.add_shards();
      shard.set_name("w");
      shard.set_begin(q);
      shard.set_end(q + 1);
      (*p.mutable_attrs())["dtfm.device"].set_s(p.device());
      (*p.mutable_attrs())["dtfm.stage"].set_i(s);
      dtfm::proto::PlanOp &op = *p.add_ops();
      op.set_name("dtfm.param");
      dtfm::proto::PlanOp &send = *p.add_ops();
      send.set_name(s == 0 ? "dtfm.send" : "dtfm.recv");
      (*send.mutable_attrs())["peer_device"].set_s(device(1 - s, q));
      (*send.mutable_attrs())["bytes"].set_i(64);
    }
  return plan;
}

TEST(PlanFile, ReplicasShareOneTemplatePerStage) {
  dtfm::proto::Plan plan = replicatedPlan(3);
  dtfm::proto::Plan shared = plan;
  sharePrograms(shared);
  ASSERT_EQ(shared.templates_size(), 2);
  ASSERT_EQ(shared.programs_size(), 6);
  for (const dtfm::proto::DeviceProgram &entry : shared.programs()) {
    EXPECT_TRUE(entry.has_template_index());
    EXPECT_EQ(entry.ops_size(), 0);
    EXPECT_EQ(entry.template_index(), static_cast<uint32_t>(entry.stage()));
    ASSERT_EQ(entry.op_attrs_size(), 1);
    EXPECT_EQ(entry.op_attrs(0).op(), 1u);
  }
  EXPECT_EQ(shared.templates(0).attrs().count("dtfm.device"), 0u);
  EXPECT_EQ(shared.templates(0).attrs().count("dtfm.stage"), 1u);
  EXPECT_EQ(shared.templates(0).ops(1).attrs().count("peer_device"), 0u);
  // Written and read back: still shared, each entry's shared part its
  // template; expanded, the same programs, field for field.
  std::string bytes, error;
  for (bool text : {false, true}) {
    ASSERT_TRUE(serializePlan(plan, text, bytes, error)) << error;
    dtfm::proto::Plan back;
    ASSERT_TRUE(parsePlan(bytes, "p", back, error)) << error;
    ASSERT_EQ(back.templates_size(), 2);
    for (const dtfm::proto::DeviceProgram &entry : back.programs())
      EXPECT_EQ(&sharedPart(back, entry),
                &back.templates(static_cast<int>(entry.stage())));
    std::vector<const dtfm::proto::OpAttrs *> own =
        ownOpAttrs(back.programs(2), 2);
    ASSERT_EQ(own.size(), 2u);
    ASSERT_NE(own[1], nullptr);
    EXPECT_EQ(own[1]->attrs().at("peer_device").s(), "s1p1");
    EXPECT_EQ(own[0], nullptr);
    ASSERT_TRUE(expandPrograms(back, error)) << error;
    EXPECT_EQ(back.templates_size(), 0);
    back.clear_checksum();
    EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(back, plan))
        << (text ? "text" : "binary");
    // Written whole: the programs as they were.
    ASSERT_TRUE(serializePlan(plan, text, bytes, error, /*share=*/false));
    ASSERT_TRUE(parsePlan(bytes, "p", back, error)) << error;
    EXPECT_EQ(back.templates_size(), 0);
    back.clear_checksum();
    EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(back, plan));
  }
  // A program that differs in more than its own (another forward) gets a
  // template of its own.
  plan.mutable_programs(4)->set_forward_flops(99);
  shared = plan;
  sharePrograms(shared);
  EXPECT_EQ(shared.templates_size(), 3);
}

TEST(PlanFile, HostileTemplatesAndEntriesAreRefused) {
  dtfm::proto::Plan good = replicatedPlan(2);
  sharePrograms(good);
  auto refused = [&](const std::function<void(dtfm::proto::Plan &)> &edit) {
    dtfm::proto::Plan plan = good;
    edit(plan);
    std::string bytes, error;
    EXPECT_TRUE(serializePlan(plan, false, bytes, error)) << error;
    dtfm::proto::Plan back;
    EXPECT_FALSE(parsePlan(bytes, "p", back, error));
    return error;
  };
  EXPECT_EQ(refused([](auto &p) { p.mutable_programs(1)->set_template_index(7); }),
            "p: device 's1p0': names template 7, but the plan has 2");
  EXPECT_EQ(refused([](auto &p) { p.mutable_programs(1)->add_ops(); }),
            "p: device 's1p0': names template 1 but holds more than its own "
            "fields (ops, streams, work or shared attributes)");
  EXPECT_EQ(refused([](auto &p) {
              (*p.mutable_programs(1)->mutable_attrs())["dtfm.stage"].set_i(1);
            }),
            "p: device 's1p0': names template 1 but holds more than its own "
            "fields (ops, streams, work or shared attributes)");
  EXPECT_EQ(refused([](auto &p) {
              p.mutable_programs(1)->mutable_op_attrs(0)->set_op(5);
            }),
            "p: device 's1p0': op_attrs names op 5, but template 1 has 2 ops");
  EXPECT_EQ(refused([](auto &p) {
              (*p.mutable_programs(1)->mutable_op_attrs(0)->mutable_attrs())
                  ["bytes"].set_i(1);
            }),
            "p: device 's1p0': op_attrs sets 'bytes' on op 1, which is its "
            "template's to set");
  EXPECT_EQ(refused([](auto &p) {
              *p.mutable_programs(1)->add_op_attrs() =
                  p.programs(1).op_attrs(0);
            }),
            "p: device 's1p0': op_attrs names op 1 twice");
  EXPECT_EQ(refused([](auto &p) { p.mutable_templates(0)->set_device("x"); }),
            "p: template 0 holds what only a device's entry may (its device, "
            "pipeline, peers, shards, speed, tensor-parallel group, peer "
            "devices or a template of its own)");
  EXPECT_EQ(refused([](auto &p) { *p.add_templates() = p.templates(0); }),
            "p: template 2 is named by no device");
  EXPECT_EQ(refused([](auto &p) {
              p.mutable_programs(2)->set_device("s1p0");
            }),
            "p: device 's1p0' has two programs");
  // A device's name becomes file names (its checkpoints).
  EXPECT_EQ(refused([](auto &p) {
              p.mutable_programs(2)->set_device("../../pwned");
            }),
            "p: device '../../pwned': the name is not letters, digits, '_', "
            "'-' and '.' (at most 128, not starting with '.'): device names "
            "become file names");
  EXPECT_EQ(refused([](auto &p) { p.set_format_version(2); }),
            "p: a version-2 plan with version 3's templates or link classes");
  // Version 2 (whole programs, no templates) is read as it is.
  dtfm::proto::Plan old = replicatedPlan(2);
  old.set_format_version(2);
  dtfm::proto::Plan back;
  std::string error;
  old.SerializeToString(&error);
  std::string bytes = error;
  EXPECT_TRUE(parsePlan(bytes, "p", back, error)) << error;
  EXPECT_EQ(back.programs_size(), 4);
}

TEST(PlanFile, VersionsAreCheckedInBothForms) {
  dtfm::proto::Plan plan;
  plan.set_format_version(kPlanFormatVersion);
  plan.set_model("m");
  plan.set_micro_batches(1);
  plan.add_programs()->set_device("d");
  std::string bytes, error;
  for (bool text : {false, true}) {
    ASSERT_TRUE(serializePlan(plan, text, bytes, error));
    dtfm::proto::Plan back;
    ASSERT_TRUE(parsePlan(bytes, "p", back, error)) << error;
    EXPECT_EQ(back.model(), "m");
  }
  dtfm::proto::Plan old = plan;
  old.set_format_version(1);
  ASSERT_TRUE(serializePlan(old, false, bytes, error));
  dtfm::proto::Plan back;
  EXPECT_FALSE(parsePlan(bytes, "p", back, error));
  EXPECT_EQ(error, "p: plan format version 1, but this dtfm reads versions " +
                       std::to_string(kOldestPlanFormatVersion) + " to " +
                       std::to_string(kPlanFormatVersion) +
                       " (an older dtfm wrote it: export the plan again)");
  // Version 1's text streams no longer parse: still refused by version.
  std::string v1 = "format_version: 1\nprograms {\n  device: \"d\"\n"
                   "  recv_stream: \"F0<1\"\n}\n";
  EXPECT_FALSE(parsePlan(v1, "old.txt", back, error));
  EXPECT_EQ(error.rfind("old.txt: plan format version 1, but", 0), 0u) << error;
  EXPECT_FALSE(parsePlan("programs { bogus: 1 }", "g", back, error));
  EXPECT_EQ(error, "g: not a plan file (neither binary nor text protobuf)");
}

TEST(PlanInputs, OptionsSplitJoinAndEdit) {
  std::vector<PlanOption> items;
  std::string error;
  ASSERT_TRUE(parsePlanOptions("{a=1 cluster={x y.textproto} b= c=2,3}",
                               items, error))
      << error;
  ASSERT_EQ(items.size(), 4u);
  EXPECT_EQ(items[1], (PlanOption{"cluster", "x y.textproto"}));
  EXPECT_EQ(items[2], (PlanOption{"b", ""}));
  EXPECT_EQ(joinPlanOptions(items), "a=1 cluster={x y.textproto} b= c=2,3");
  std::vector<PlanOption> again;
  ASSERT_TRUE(parsePlanOptions(joinPlanOptions(items), again, error));
  EXPECT_EQ(again, items);
  setPlanOption(items, "a", "9");
  setPlanOption(items, "d", "4");
  erasePlanOption(items, "cluster");
  EXPECT_EQ(joinPlanOptions(items), "a=9 b= c=2,3 d=4");
  EXPECT_EQ(findPlanOption(items, "d"), std::optional<std::string>("4"));
  EXPECT_FALSE(findPlanOption(items, "cluster"));

  EXPECT_FALSE(parsePlanOptions("a=1 lonely", items, error));
  EXPECT_EQ(error, "option 'lonely' is not key=value");
  EXPECT_FALSE(parsePlanOptions("=3", items, error));
  EXPECT_FALSE(parsePlanOptions("a={x y", items, error));
  EXPECT_EQ(error, "option 'a': unbalanced braces");
}

} // namespace
