//===- CudaSupportTest.cpp - Which programs the CUDA executor takes -------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//
//
// supportsProgram decides --backend=auto's fallback before any device is
// touched, so these run (and must pass) on machines without a GPU.
//
//===----------------------------------------------------------------------===//

#include "dtfm/Runtime/Cuda/Executor.h"

#include "plan.pb.h"

#include <gtest/gtest.h>

using namespace dtfm;

namespace {

/// Appends `name` with `operands` and one result of `shape`; returns the
/// result's id.
int64_t add(proto::DeviceProgram &program, const std::string &name,
            std::vector<int64_t> operands, std::vector<int64_t> shape) {
  static int64_t next = 1;
  proto::PlanOp *op = program.add_ops();
  op->set_name(name);
  for (int64_t id : operands)
    op->add_operands(id);
  proto::PlanValue *result = op->add_results();
  result->set_id(next);
  for (int64_t d : shape)
    result->add_shape(d);
  return next++;
}

TEST(CudaSupportTest, AddsThatRepeatAreTakenOtherBroadcastsAreNot) {
  proto::DeviceProgram program;
  int64_t x = add(program, "dtfm.input", {}, {4, 8, 16});
  int64_t bias = add(program, "dtfm.param", {}, {16});
  int64_t pos = add(program, "dtfm.param", {}, {1, 8, 16});
  int64_t y = add(program, "dtfm.add", {x, bias}, {4, 8, 16});
  add(program, "dtfm.add", {y, pos}, {4, 8, 16});
  std::string reason;
  EXPECT_TRUE(runtime::cuda::supportsProgram(program, reason)) << reason;

  int64_t column = add(program, "dtfm.param", {}, {4, 1, 16});
  add(program, "dtfm.add", {y, column}, {4, 8, 16});
  EXPECT_FALSE(runtime::cuda::supportsProgram(program, reason));
  EXPECT_EQ(reason, "op #6 dtfm.add: broadcasting [4x8x16] with [4x1x16] "
                    "has no CUDA kernel (only equal shapes, or one repeating "
                    "over the other's leading dimensions)");
}

TEST(CudaSupportTest, OpsWithoutKernelsAreNamed) {
  proto::DeviceProgram program;
  int64_t x = add(program, "dtfm.input", {}, {2, 3, 8, 8});
  add(program, "dtfm.max_pool2d", {x}, {2, 3, 4, 4});
  std::string reason;
  EXPECT_FALSE(runtime::cuda::supportsProgram(program, reason));
  EXPECT_EQ(reason, "op #1 dtfm.max_pool2d has no CUDA kernel");

  proto::DeviceProgram backward;
  int64_t a = add(backward, "dtfm.input", {}, {4});
  int64_t g = add(backward, "dtfm.input", {}, {4});
  add(backward, "dtfm.gelu", {a}, {4});
  proto::PlanOp *op = backward.add_ops();
  op->set_name("dtfm.backward");
  (*op->mutable_attrs())["forward"].set_s("dtfm.tanh");
  op->add_operands(a);
  op->add_operands(g);
  EXPECT_FALSE(runtime::cuda::supportsProgram(backward, reason));
  EXPECT_EQ(reason, "op #3 dtfm.backward of dtfm.tanh has no CUDA kernel");
}

TEST(CudaSupportTest, SoftmaxOnlyOverTheLastAxis) {
  proto::DeviceProgram program;
  int64_t x = add(program, "dtfm.input", {}, {4, 8});
  proto::PlanOp *last = program.add_ops();
  *last = program.ops(0);
  last->set_name("dtfm.softmax");
  last->clear_operands();
  last->add_operands(x);
  last->mutable_results(0)->set_id(x + 1000);
  std::string reason;
  EXPECT_TRUE(runtime::cuda::supportsProgram(program, reason)) << reason;
  (*last->mutable_attrs())["axis"].set_i(0);
  EXPECT_FALSE(runtime::cuda::supportsProgram(program, reason));
  EXPECT_EQ(reason, "op #1 dtfm.softmax: only the last axis has a CUDA kernel");
}

} // namespace
