//===- ProgramTest.cpp - The typed stage program --------------------------===//

#include "dtfm/Plan/Program.h"
#include "dtfm/Format/PlanFile.h"
#include "dtfm/Plan/Dataflow.h"
#include "dtfm/Plan/Sharding.h"
#include "dtfm/Runtime/Executor.h"

#include "plan.pb.h"

#include <gtest/gtest.h>

#include <cmath>

#include <limits>

using namespace dtfm;
using namespace dtfm::plan;
using namespace dtfm::runtime;

namespace {

proto::PlanOp &addOp(proto::DeviceProgram &program, const std::string &name,
                     std::vector<int64_t> operands = {}) {
  proto::PlanOp &op = *program.add_ops();
  op.set_name(name);
  for (int64_t id : operands)
    op.add_operands(id);
  proto::PlanValue &result = *op.add_results();
  result.set_id(program.ops_size() - 1);
  result.add_shape(4);
  result.set_dtype("f32");
  return op;
}

TEST(Program, AttributesAreTypedWithTheDialectsDefaults) {
  proto::DeviceProgram program;
  addOp(program, "dtfm.input");
  addOp(program, "dtfm.softmax", {0});
  addOp(program, "dtfm.batchnorm", {0});
  proto::PlanOp &pool = addOp(program, "dtfm.max_pool2d", {0});
  (*pool.mutable_attrs())["kernel"].mutable_ints()->add_values(3);
  (*pool.mutable_attrs())["kernel"].mutable_ints()->add_values(2);
  proto::PlanOp &adamw = addOp(program, "dtfm.adamw_update", {0, 1});
  (*adamw.mutable_attrs())["lr"].set_f(0.5);
  proto::PlanOp &backward = addOp(program, "dtfm.backward", {0, 1});
  (*backward.mutable_attrs())["forward"].set_s("dtfm.gelu");
  (*backward.mutable_attrs())["dtfm.phase"].set_s("bwd");
  (*backward.mutable_nested_attrs())["dtfm.forward_attrs/tanh_approximation"]
      .set_unit(true);
  StageProgram decoded;
  std::string error;
  ASSERT_TRUE(decodeProgram(program, decoded, error)) << error;
  EXPECT_EQ(decoded.ops[1].attrs.axis, -1);
  EXPECT_DOUBLE_EQ(decoded.ops[2].attrs.epsilon, 1e-5);
  EXPECT_DOUBLE_EQ(decoded.ops[2].attrs.momentum, 0.1);
  EXPECT_EQ(decoded.ops[3].attrs.kernel, (std::array<int64_t, 2>{3, 2}));
  EXPECT_EQ(decoded.ops[3].attrs.window.strideH, 1);
  EXPECT_DOUBLE_EQ(decoded.ops[4].attrs.schedule.lr, 0.5);
  EXPECT_DOUBLE_EQ(decoded.ops[4].attrs.weightDecay, 0.01);
  EXPECT_DOUBLE_EQ(decoded.ops[4].attrs.epsilon, 1e-8);
  EXPECT_EQ(decoded.ops[4].phase, OpPhase::Optimizer);
  EXPECT_EQ(decoded.ops[5].kind, OpKind::Backward);
  EXPECT_EQ(decoded.ops[5].computes, OpKind::Gelu);
  EXPECT_TRUE(decoded.ops[5].attrs.tanhApproximation);
  EXPECT_EQ(decoded.opsOf(OpPhase::Backward), std::vector<int>{5});
  EXPECT_EQ(decoded.ops[5].describe(), "op #5 dtfm.backward of dtfm.gelu");
}

// avg_pool2d without divisor_padding counts all of its padding.
TEST(Program, AveragePoolingCountsItsPaddingUnlessToldOtherwise) {
  proto::DeviceProgram program;
  addOp(program, "dtfm.input");
  for (bool told : {false, true}) {
    proto::PlanOp &pool = addOp(program, "dtfm.avg_pool2d", {0});
    for (int64_t v : {1, 2, 1, 2})
      (*pool.mutable_attrs())["padding"].mutable_ints()->add_values(v);
    for (int64_t v : {0, 1, 0, 1})
      if (told)
        (*pool.mutable_attrs())["divisor_padding"]
            .mutable_ints()
            ->add_values(v);
  }
  StageProgram decoded;
  std::string error;
  ASSERT_TRUE(decodeProgram(program, decoded, error)) << error;
  const math::Window &all = decoded.ops[1].attrs.window,
                     &told = decoded.ops[2].attrs.window;
  EXPECT_EQ((std::array<int64_t, 4>{all.countTop, all.countLeft,
                                    all.countBottom, all.countRight}),
            (std::array<int64_t, 4>{1, 2, 1, 2}));
  EXPECT_EQ((std::array<int64_t, 4>{told.countTop, told.countLeft,
                                    told.countBottom, told.countRight}),
            (std::array<int64_t, 4>{0, 1, 0, 1}));
}

TEST(Program, MalformedOpsAreRefusedByName) {
  StageProgram decoded;
  std::string error;
  proto::DeviceProgram unknown;
  addOp(unknown, "dtfm.frobnicate");
  EXPECT_FALSE(decodeProgram(unknown, decoded, error));
  EXPECT_EQ(error, "op #0 dtfm.frobnicate: not an op the runtime knows");

  proto::DeviceProgram wrongType;
  (*addOp(wrongType, "dtfm.gather").mutable_attrs())["axis"].set_s("one");
  EXPECT_FALSE(decodeProgram(wrongType, decoded, error));
  EXPECT_EQ(error, "op #0 dtfm.gather: attribute 'axis' has the wrong type");

  proto::DeviceProgram window;
  (*addOp(window, "dtfm.conv2d").mutable_attrs())["strides"]
      .mutable_ints()
      ->add_values(2);
  EXPECT_FALSE(decodeProgram(window, decoded, error));
  EXPECT_EQ(error,
            "op #0 dtfm.conv2d: attribute 'strides' has 1 elements, not 2");

  proto::DeviceProgram dtype;
  addOp(dtype, "dtfm.relu").mutable_results(0)->set_dtype("f8");
  EXPECT_FALSE(decodeProgram(dtype, decoded, error));
  EXPECT_EQ(error, "op #0 dtfm.relu: result of unknown element type 'f8'");

  proto::DeviceProgram backward;
  (*addOp(backward, "dtfm.backward").mutable_attrs())["forward"].set_s("x");
  EXPECT_FALSE(decodeProgram(backward, decoded, error));
  EXPECT_EQ(error, "op #0 dtfm.backward: the gradient of 'x', which is not "
                   "an op the runtime knows");

  // A gradient bucket from a hostile plan.
  auto gradSync = [&](const char *key, double f, int64_t i) {
    proto::DeviceProgram program;
    proto::PlanOp &op = addOp(program, "dtfm.grad_sync", {0});
    (*op.mutable_attrs())["dtfm.phase"].set_s("opt");
    if (std::string(key) == "dtfm.bucket" ||
        std::string(key) == "dtfm.sync_every")
      (*op.mutable_attrs())[key].set_i(i);
    else if (std::string(key) == "dtfm.compression")
      (*op.mutable_attrs())[key].set_s(i == 1   ? "int8"
                                       : i == 2 ? "topk"
                                       : i == 3 ? "int4"
                                                : "fp8");
    else if (std::string(key) == "dtfm.topk_ratio") {
      (*op.mutable_attrs())["dtfm.compression"].set_s("topk");
      (*op.mutable_attrs())[key].set_f(f);
    } else if (std::string(key) == "dtfm.topk_warmup") {
      // i: the warm-up; f: the compression (1 int8, 2 topk with ratio 100).
      (*op.mutable_attrs())["dtfm.compression"].set_s(f == 1 ? "int8"
                                                             : "topk");
      (*op.mutable_attrs())["dtfm.topk_ratio"].set_f(100);
      (*op.mutable_attrs())[key].set_i(i);
    }
    else
      (*op.mutable_attrs())[key].set_f(f);
    return program;
  };
  EXPECT_FALSE(decodeProgram(gradSync("dtfm.bucket", 0, -2), decoded, error));
  EXPECT_EQ(error, "op #0 dtfm.grad_sync: dtfm.bucket -2 is negative");
  EXPECT_FALSE(
      decodeProgram(gradSync("dtfm.bucket_ready", 1.5, 0), decoded, error));
  EXPECT_EQ(error, "op #0 dtfm.grad_sync: dtfm.bucket_ready must be a "
                   "fraction in [0, 1]");
  EXPECT_FALSE(decodeProgram(gradSync("dtfm.bucket_seconds",
                                      std::numeric_limits<double>::infinity(),
                                      0),
                             decoded, error));
  EXPECT_EQ(error, "op #0 dtfm.grad_sync: dtfm.bucket_seconds must be finite "
                   "and >= 0");
  EXPECT_FALSE(decodeProgram(gradSync("dtfm.sync_every", 0, 0), decoded,
                             error));
  EXPECT_EQ(error, "op #0 dtfm.grad_sync: dtfm.sync_every must be between 1 "
                   "and 1000000, got 0");
  EXPECT_FALSE(
      decodeProgram(gradSync("dtfm.outer_momentum", 1.0, 0), decoded, error));
  EXPECT_EQ(error, "op #0 dtfm.grad_sync: dtfm.outer_lr must be finite and > "
                   "0 and dtfm.outer_momentum in [0, 1)");
  ASSERT_TRUE(
      decodeProgram(gradSync("dtfm.bucket", 0, 3), decoded, error))
      << error;
  EXPECT_EQ(decoded.ops[0].attrs.syncEvery, 0);
  EXPECT_EQ(decoded.ops[0].attrs.bucket, 3);
  EXPECT_DOUBLE_EQ(decoded.ops[0].attrs.bucketReady, -1);
  EXPECT_EQ(decoded.ops[0].attrs.compression, format::WireCodec::Dense);
  EXPECT_FALSE(
      decodeProgram(gradSync("dtfm.compression", 0, 0), decoded, error));
  EXPECT_EQ(error, "op #0 dtfm.grad_sync: unknown dtfm.compression 'fp8' "
                   "(expected int8, topk or int4)");
  ASSERT_TRUE(decodeProgram(gradSync("dtfm.compression", 0, 1), decoded,
                            error))
      << error;
  EXPECT_EQ(decoded.ops[0].attrs.compression, format::WireCodec::Int8);
  // Local steps in fragments: p of P needs H >= P and p < P.
  {
    proto::DeviceProgram local = gradSync("dtfm.sync_every", 0, 4);
    auto &attrs = *local.mutable_ops(0)->mutable_attrs();
    attrs["dtfm.sync_fragment"].set_i(1);
    attrs["dtfm.sync_fragments"].set_i(2);
    ASSERT_TRUE(decodeProgram(local, decoded, error)) << error;
    EXPECT_EQ(decoded.ops[0].attrs.syncFragment, 1);
    EXPECT_EQ(decoded.ops[0].attrs.syncFragments, 2);
    attrs["dtfm.sync_fragment"].set_i(2);
    EXPECT_FALSE(decodeProgram(local, decoded, error));
    EXPECT_EQ(error, "op #0 dtfm.grad_sync: dtfm.sync_fragment p of "
                     "dtfm.sync_fragments P needs dtfm.sync_every H with 1 "
                     "<= P <= H and 0 <= p < P, got p 2, P 2, H 4");
    attrs["dtfm.sync_fragment"].set_i(0);
    attrs["dtfm.sync_fragments"].set_i(5);
    EXPECT_FALSE(decodeProgram(local, decoded, error));
    proto::DeviceProgram synchronous = gradSync("dtfm.bucket", 0, 0);
    (*synchronous.mutable_ops(0)->mutable_attrs())["dtfm.sync_fragments"]
        .set_i(1);
    EXPECT_FALSE(decodeProgram(synchronous, decoded, error));
  }
  // An overlap below the fewest steps between two exchanges, a mixing in
  // [0, 1].
  {
    proto::DeviceProgram local = gradSync("dtfm.sync_every", 0, 4);
    auto &attrs = *local.mutable_ops(0)->mutable_attrs();
    attrs["dtfm.sync_fragments"].set_i(2);
    attrs["dtfm.sync_overlap"].set_i(1);
    attrs["dtfm.outer_mixing"].set_f(0.5);
    ASSERT_TRUE(decodeProgram(local, decoded, error)) << error;
    EXPECT_EQ(decoded.ops[0].attrs.syncOverlap, 1);
    EXPECT_DOUBLE_EQ(decoded.ops[0].attrs.outerMixing, 0.5);
    attrs["dtfm.sync_overlap"].set_i(2);
    EXPECT_FALSE(decodeProgram(local, decoded, error));
    EXPECT_EQ(error, "op #0 dtfm.grad_sync: dtfm.sync_overlap tau and "
                     "dtfm.outer_mixing alpha need dtfm.sync_every, 0 <= tau "
                     "< the steps between two exchanges and 0 <= alpha <= 1, "
                     "got tau 2, alpha 0.500000");
    attrs["dtfm.sync_overlap"].set_i(1);
    attrs["dtfm.outer_mixing"].set_f(std::nan(""));
    EXPECT_FALSE(decodeProgram(local, decoded, error));
  }
  // int4 carries local steps' exchange only.
  EXPECT_FALSE(
      decodeProgram(gradSync("dtfm.compression", 0, 3), decoded, error));
  EXPECT_EQ(error, "op #0 dtfm.grad_sync: dtfm.compression int4 without "
                   "dtfm.sync_every (every step's gradients travel as none, "
                   "int8 or topk)");
  {
    proto::DeviceProgram local = gradSync("dtfm.compression", 0, 3);
    (*local.mutable_ops(0)->mutable_attrs())["dtfm.sync_every"].set_i(4);
    ASSERT_TRUE(decodeProgram(local, decoded, error)) << error;
    EXPECT_EQ(decoded.ops[0].attrs.compression, format::WireCodec::Int4);
  }
  // Top-k needs its ratio, above 1.
  EXPECT_FALSE(
      decodeProgram(gradSync("dtfm.compression", 0, 2), decoded, error));
  EXPECT_EQ(error, "op #0 dtfm.grad_sync: dtfm.compression topk needs "
                   "dtfm.topk_ratio in (1, 1e6]");
  for (double bad : {1.0, 0.5, std::numeric_limits<double>::quiet_NaN(), 2e6})
    EXPECT_FALSE(
        decodeProgram(gradSync("dtfm.topk_ratio", bad, 0), decoded, error));
  ASSERT_TRUE(
      decodeProgram(gradSync("dtfm.topk_ratio", 100, 0), decoded, error))
      << error;
  EXPECT_EQ(decoded.ops[0].attrs.compression, format::WireCodec::TopK);
  EXPECT_EQ(decoded.ops[0].attrs.topkRatio, 100);
  EXPECT_EQ(decoded.ops[0].attrs.topkWarmup, 0);
  // Its warm-up: a step count, and only for top-k.
  ASSERT_TRUE(
      decodeProgram(gradSync("dtfm.topk_warmup", 2, 20), decoded, error))
      << error;
  EXPECT_EQ(decoded.ops[0].attrs.topkWarmup, 20);
  for (auto [compression, warmup] :
       {std::pair<double, int64_t>{2, -1}, {2, 2000000000}, {1, 20}}) {
    EXPECT_FALSE(decodeProgram(gradSync("dtfm.topk_warmup", compression, warmup),
                               decoded, error));
    EXPECT_EQ(error, "op #0 dtfm.grad_sync: dtfm.topk_warmup needs "
                     "dtfm.compression topk and a step count in [0, 1e9]");
  }
}

// dtfm.wire on a transfer: "int8" (pp-compression), nothing else, and never
// on a weight sent once per iteration.
TEST(Program, TransfersInTheInt8FormatAreParsedAndChecked) {
  auto transfer = [](const char *wire, bool once) {
    proto::DeviceProgram program;
    proto::PlanOp &op = addOp(program, "dtfm.recv");
    (*op.mutable_attrs())["dtfm.phase"].set_s("fwd");
    (*op.mutable_attrs())["dtfm.wire"].set_s(wire);
    if (once)
      (*op.mutable_attrs())["dtfm.once_per_iteration"].set_unit(true);
    return program;
  };
  StageProgram decoded;
  std::string error;
  ASSERT_TRUE(decodeProgram(transfer("int8", false), decoded, error)) << error;
  EXPECT_EQ(decoded.ops[0].attrs.wire, format::WireCodec::Int8);
  EXPECT_FALSE(decodeProgram(transfer("fp8", false), decoded, error));
  EXPECT_EQ(error, "op #0 dtfm.recv: unknown dtfm.wire 'fp8' (expected int8)");
  EXPECT_FALSE(decodeProgram(transfer("int8", true), decoded, error));
  EXPECT_EQ(error, "op #0 dtfm.recv: dtfm.wire int8 on a once-per-iteration "
                   "transfer (a weight)");
}

// A device's entry decodes as its whole program would: its template's ops
// with its own transfers' peers (plan.proto's op_attrs).
TEST(Program, EntriesDecodeAsTheirWholePrograms) {
  proto::Plan plan;
  for (const char *device : {"a", "b"}) {
    proto::DeviceProgram &program = *plan.add_programs();
    program.set_device(device);
    addOp(program, "dtfm.input");
    proto::PlanOp &send = addOp(program, "dtfm.send", {0});
    (*send.mutable_attrs())["dtfm.phase"].set_s("fwd");
    (*send.mutable_attrs())["peer"].set_i(1);
    (*send.mutable_attrs())["peer_device"].set_s(std::string("to-") + device);
  }
  proto::Plan whole = plan;
  format::sharePrograms(plan);
  ASSERT_EQ(plan.templates_size(), 1);
  for (int r = 0; r < 2; ++r) {
    StageProgram fromEntry, fromWhole;
    std::string error;
    ASSERT_TRUE(decodeProgram(plan, plan.programs(r), fromEntry, error))
        << error;
    ASSERT_TRUE(decodeProgram(whole.programs(r), fromWhole, error)) << error;
    ASSERT_EQ(fromEntry.ops.size(), fromWhole.ops.size());
    EXPECT_EQ(fromEntry.ops[1].attrs.peerDevice,
              std::string("to-") + whole.programs(r).device());
    EXPECT_EQ(fromEntry.ops[1].attrs.peerDevice,
              fromWhole.ops[1].attrs.peerDevice);
    EXPECT_EQ(fromEntry.ops[1].attrs.peerStage, 1);
    EXPECT_EQ(fromEntry.source, &plan.programs(r));
  }
}

TEST(Program, CheckpointStateIsCheckedAgainstTheProgram) {
  // One parameter "w" of 4 elements; a hostile checkpoint's optimizer state
  // (Adam moments, local steps' anchor) must have its shape.
  proto::DeviceProgram program;
  (*addOp(program, "dtfm.param").mutable_attrs())["name"].set_s("w");
  StageProgram decoded;
  std::string error;
  ASSERT_TRUE(decodeProgram(program, decoded, error)) << error;
  HostState host;
  std::map<std::string, cpu::Tensor> state = {{"param/w", cpu::Tensor({4})},
                                              {"opt.anchor/w", cpu::Tensor({4})},
                                              {"opt.m/w", cpu::Tensor({4})}};
  ASSERT_TRUE(host.restore(decoded, state, error)) << error;
  EXPECT_EQ(host.optimizer["w"].anchor.shape, (std::vector<int64_t>{4}));

  state["opt.anchor/w"] = cpu::Tensor({3});
  EXPECT_FALSE(host.restore(decoded, state, error));
  EXPECT_EQ(error,
            "state entry 'opt.anchor/w' does not have its parameter's shape");
  state["opt.anchor/w"] = cpu::Tensor({4});
  state["opt.outer_velocity/w"] = cpu::Tensor({2, 2});
  EXPECT_FALSE(host.restore(decoded, state, error));
  EXPECT_EQ(error, "state entry 'opt.outer_velocity/w' does not have its "
                   "parameter's shape");
  state.erase("opt.outer_velocity/w");
  state["opt.bogus/w"] = cpu::Tensor({4});
  EXPECT_FALSE(host.restore(decoded, state, error));
  EXPECT_EQ(error, "unknown state entry 'opt.bogus/w'");
}

} // namespace

namespace {

/// One op of a hand-built program: `kind` in `phase`, reading `operands`,
/// making one value per id of `results`.
ProgramOp makeOp(int index, OpKind kind, OpPhase phase,
                 std::vector<int64_t> operands, std::vector<int64_t> results) {
  ProgramOp op;
  op.index = index;
  op.kind = op.computes = kind;
  op.phase = phase;
  op.operands = std::move(operands);
  for (int64_t id : results)
    op.results.push_back(ProgramValue{id, {2, 2}, ElementType::F32});
  return op;
}

TEST(Program, ValuesAreFreedAfterTheirLastReader) {
  // x -> h = relu(x) -> y = relu(h) -> send y; the backward reads h and
  // the received gradient g, makes dx (never read) and dw (summed by the
  // optimizer); the forward's loss-like value z is read by nothing.
  StageProgram p;
  p.ops = {
      makeOp(0, OpKind::Input, OpPhase::Forward, {}, {1}),
      makeOp(1, OpKind::Relu, OpPhase::Forward, {1}, {2}),
      makeOp(2, OpKind::Relu, OpPhase::Forward, {2}, {3}),
      makeOp(3, OpKind::Send, OpPhase::Forward, {3}, {}),
      makeOp(4, OpKind::Relu, OpPhase::Forward, {2}, {4}),
      makeOp(5, OpKind::Recv, OpPhase::Backward, {}, {5}),
      makeOp(6, OpKind::Backward, OpPhase::Backward, {2, 5}, {6}),
      makeOp(7, OpKind::Backward, OpPhase::Backward, {6}, {7}),
      makeOp(8, OpKind::SgdUpdate, OpPhase::Optimizer, {100, 7}, {}),
  };
  p.ops[6].computes = p.ops[7].computes = OpKind::Relu;
  for (const ProgramOp &op : p.ops)
    p.byPhase[static_cast<int>(op.phase)].push_back(op.index);
  buildSteps(p);
  ValueLifetimes lifetimes = valueLifetimes(p);
  using Ids = std::vector<int64_t>;
  // Forward steps are ops 0-4, backward steps ops 5-7.
  EXPECT_EQ(lifetimes.freeAfterStep[0][1], Ids{1}); // x: relu(x) read it last
  EXPECT_EQ(lifetimes.freeAfterStep[0][2], Ids{});  // y: sent, see below
  EXPECT_EQ(lifetimes.freeAfterStep[0][4], Ids{4}); // z: nothing reads it
  // h and g: the first backward op reads them last; dx after the second.
  EXPECT_EQ(lifetimes.freeAfterStep[1][1], (Ids{2, 5}));
  // dw, the optimizer's, once made (and summed); dx, read by that op.
  EXPECT_EQ(lifetimes.freeAfterStep[1][2], (Ids{6, 7}));
  EXPECT_EQ(lifetimes.freeAfterSends[0], Ids{3});
  EXPECT_EQ(lifetimes.freeAfterSends[1], Ids{});

  // Recomputation: layer "a" (the two relus) runs again before its
  // backward; h is no longer kept from the forward, x (the layer's input)
  // is, until the recomputed relu(x) has read it.
  for (int i : {1, 2, 6, 7})
    p.ops[i].layer = "a";
  p.ops[4].layer = "b";
  p.recompute = true;
  buildSteps(p);
  ASSERT_EQ(p.steps[1].size(), 5u);
  EXPECT_EQ(p.steps[1][1].op, 1);
  EXPECT_TRUE(p.steps[1][1].recompute);
  EXPECT_EQ(p.steps[1][2].op, 2);
  EXPECT_EQ(p.steps[1][3].op, 6);
  EXPECT_EQ(recomputableLayers(p), std::vector<std::string>{"a"});
  lifetimes = valueLifetimes(p);
  EXPECT_EQ(lifetimes.freeAfterStep[0][4], (Ids{2, 4}));
  EXPECT_EQ(lifetimes.freeAfterStep[1][1], Ids{1}); // x, after relu(x) again
  EXPECT_EQ(lifetimes.freeAfterStep[1][2], Ids{3}); // y again: unread
  EXPECT_EQ(lifetimes.freeAfterStep[1][3], (Ids{5, 2}));
  EXPECT_EQ(lifetimes.freeAfterSends[0], Ids{3});
  // A layer with batch norm is not recomputed (its statistics would move
  // twice).
  p.ops[2].kind = p.ops[2].computes = OpKind::BatchNorm;
  EXPECT_TRUE(recomputableLayers(p).empty());

  // A value sent in the forward and read by the backward lives until then.
  p.ops[2].kind = p.ops[2].computes = OpKind::Relu;
  p.recompute = false;
  p.ops[6].operands = {3, 5};
  buildSteps(p);
  lifetimes = valueLifetimes(p);
  EXPECT_EQ(lifetimes.freeAfterSends[0], Ids{});
  EXPECT_EQ(lifetimes.freeAfterStep[1][1], (Ids{3, 5}));
  EXPECT_EQ(lifetimes.freeAfterStep[0][4], (Ids{2, 4}));
}

} // namespace

// Sharded optimizer state: the members' shards tile the tensor in order,
// differ in size by at most one element, and are exact for counts whose
// product with the group size does not fit in 64 bits.
TEST(Program, ShardsTileTheTensor) {
  for (int64_t elements : {0, 1, 7, 10, 4096})
    for (int64_t members : {1, 2, 3, 8}) {
      int64_t next = 0, smallest = elements, largest = 0;
      for (int64_t k = 0; k < members; ++k) {
        ElementRange shard = shardOf(elements, k, members);
        EXPECT_EQ(shard.begin, next);
        next = shard.end;
        smallest = std::min(smallest, shard.size());
        largest = std::max(largest, shard.size());
      }
      EXPECT_EQ(next, elements);
      EXPECT_LE(largest - smallest, 1);
    }
  int64_t huge = std::numeric_limits<int64_t>::max() / 2;
  EXPECT_EQ(shardOf(huge, 3, 4).end, huge);
  EXPECT_EQ(shardOf(huge, 1, 4).begin, huge / 4);
  // Outside the group: the whole tensor.
  EXPECT_EQ(shardOf(10, 4, 4).size(), 10);
}

// A sharded bucket's buffer: every element of every tensor has exactly one
// place, inside the chunk of the member whose shard holds it, the pieces
// of a chunk in tensor order from its start; with equal chunks every chunk
// is as long as the longest, the padding at its tail. Checked element by
// element against shardOf for small buckets.
TEST(Program, ShardedLayoutPlacesEveryShardInItsMembersChunk) {
  std::vector<std::vector<int64_t>> buckets = {
      {10}, {7, 1, 0, 5}, {3, 3, 3}, {1}, {4096, 17}};
  for (const std::vector<int64_t> &tensors : buckets)
    for (int64_t members : {1, 2, 3, 8})
      for (bool equal : {false, true}) {
        ShardedLayout layout = layoutShards(tensors, members, equal);
        ASSERT_EQ(layout.chunkStart.size(), static_cast<size_t>(members + 1));
        ASSERT_EQ(layout.pieces.size(), tensors.size());
        std::vector<int> owner(layout.totalElements(), -1);
        int64_t longest = 0, total = 0;
        for (int64_t k = 0; k < members; ++k) {
          int64_t used = 0;
          for (size_t t = 0; t < tensors.size(); ++t) {
            ElementRange shard = shardOf(tensors[t], k, members);
            EXPECT_EQ(layout.pieces[t][k], layout.chunkStart[k] + used);
            for (int64_t i = 0; i < shard.size(); ++i) {
              int64_t at = layout.pieces[t][k] + i;
              ASSERT_LT(at, layout.chunkStart[k + 1]);
              EXPECT_EQ(owner[at], -1) << "two elements at " << at;
              owner[at] = static_cast<int>(t);
            }
            used += shard.size();
          }
          longest = std::max(longest, used);
          total += used;
          if (!equal) {
            EXPECT_EQ(layout.chunkElements(k), used);
          }
        }
        for (int64_t k = 0; k < members && equal; ++k)
          EXPECT_EQ(layout.chunkElements(k), longest);
        EXPECT_EQ(layout.totalElements(), equal ? longest * members : total);
      }
}

TEST(Program, TensorParallelSlicesJoinBackIntoTheWholeTensor) {
  // A [2, 3, 4] tensor of 0..23, cut into 2 slices along each dimension
  // that 2 divides: slice r holds exactly the elements whose index along
  // the dimension is in [r * n / 2, (r + 1) * n / 2), in order.
  cpu::Tensor whole({2, 4, 6});
  for (size_t i = 0; i < whole.data.size(); ++i)
    whole.data[i] = static_cast<float>(i);
  for (int64_t dim = 0; dim < 3; ++dim) {
    std::vector<cpu::Tensor> slices;
    for (int64_t r = 0; r < 2; ++r)
      slices.push_back(sliceOf(whole, dim, r, 2));
    std::vector<int64_t> shape = whole.shape;
    shape[dim] /= 2;
    EXPECT_EQ(slices[1].shape, shape);
    // Element [i, j, k] of slice 1 is element [.., + n / 2 along dim, ..].
    int64_t strides[3] = {24, 6, 1};
    int64_t offset = strides[dim] * whole.shape[dim] / 2;
    EXPECT_EQ(slices[1].data[0], whole.data[offset]);
    cpu::Tensor joined = joinSlices(slices, dim);
    EXPECT_EQ(joined.shape, whole.shape);
    EXPECT_EQ(joined.data, whole.data);
  }
}

TEST(Program, LocalStepsFragmentsTakeTurns) {
  // H = 10, P = 4: fragments after steps 2, 5, 7 and 10 of every 10.
  OpAttrs attrs;
  attrs.syncEvery = 10;
  attrs.syncFragments = 4;
  std::vector<std::vector<int64_t>> due(4);
  for (int64_t p = 0; p < 4; ++p) {
    attrs.syncFragment = p;
    for (int64_t step = 1; step <= 20; ++step)
      if (localStepsDue(attrs, step))
        due[p].push_back(step);
  }
  EXPECT_EQ(due[0], (std::vector<int64_t>{2, 12}));
  EXPECT_EQ(due[1], (std::vector<int64_t>{5, 15}));
  EXPECT_EQ(due[2], (std::vector<int64_t>{7, 17}));
  EXPECT_EQ(due[3], (std::vector<int64_t>{10, 20}));
  // One fragment: every H-th step, as local steps always were.
  attrs.syncFragments = 1;
  attrs.syncFragment = 0;
  for (int64_t step = 1; step <= 30; ++step)
    EXPECT_EQ(localStepsDue(attrs, step), step % 10 == 0) << step;
  attrs.syncEvery = 0;
  EXPECT_FALSE(localStepsDue(attrs, 10));
  // The fewest steps between two exchanges: what an overlap must stay below.
  EXPECT_EQ(localStepsMinGap(10, 4), 2); // after 2, 5, 7, 10
  EXPECT_EQ(localStepsMinGap(10, 1), 10);
  EXPECT_EQ(localStepsMinGap(4, 2), 2);
  EXPECT_EQ(localStepsMinGap(3, 3), 1);
}
