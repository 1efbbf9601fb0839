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

#include "dtfm/Runtime/Cpu/KernelTable.h"
#include "dtfm/Runtime/Cuda/Executor.h"

#include "plan.pb.h"

#include "dtfm/Support/CustomOps.h"

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
  result->set_dtype("f32");
  for (int64_t d : shape)
    result->add_shape(d);
  return next++;
}

/// Decodes `program` and asks the CUDA backend whether it takes it.
bool supports(const proto::DeviceProgram &program, std::string &reason) {
  plan::StageProgram decoded;
  if (!plan::decodeProgram(program, decoded, reason))
    return false;
  return runtime::cuda::supportsProgram(decoded, reason);
}

TEST(CudaSupportTest, BroadcastsOfAnyShapeAreTakenRanksAboveEightAreNot) {
  proto::DeviceProgram program;
  int64_t x = add(program, "dtfm.input", {}, {4, 8, 16});
  int64_t bias = add(program, "dtfm.param", {}, {16});
  int64_t column = add(program, "dtfm.param", {}, {4, 1, 16});
  int64_t y = add(program, "dtfm.add", {x, bias}, {4, 8, 16});
  add(program, "dtfm.mul", {y, column}, {4, 8, 16});
  std::string reason;
  EXPECT_TRUE(supports(program, reason)) << reason;

  std::vector<int64_t> deep(9, 2);
  int64_t z = add(program, "dtfm.input", {}, deep);
  add(program, "dtfm.exp", {z}, deep);
  EXPECT_FALSE(supports(program, reason));
  EXPECT_EQ(reason, "op #6 dtfm.exp: operand 0 of rank 9 (the CUDA kernels "
                    "take up to 8)");
}

TEST(CudaSupportTest, ConvolutionalAndOnnxOpsAndTheirBackwardsAreTaken) {
  proto::DeviceProgram program;
  std::vector<std::string> forwards = {"dtfm.conv2d",
                                       "dtfm.batchnorm",
                                       "dtfm.max_pool2d",
                                       "dtfm.avg_pool2d",
                                       "dtfm.global_avg_pool",
                                       "dtfm.sub",
                                       "dtfm.div",
                                       "dtfm.sqrt",
                                       "dtfm.tanh",
                                       "dtfm.erf",
                                       "dtfm.pow",
                                       "dtfm.sigmoid",
                                       "dtfm.clip",
                                       "dtfm.reduce_mean",
                                       "dtfm.concat",
                                       "dtfm.slice",
                                       "dtfm.transpose",
                                       "dtfm.gather",
                                       "dtfm.where"};
  int64_t x = add(program, "dtfm.input", {}, {2, 3, 8, 8});
  for (const std::string &name : forwards) {
    int64_t y = add(program, name, {x}, {2, 3, 8, 8});
    proto::PlanOp *op = program.add_ops();
    op->set_name("dtfm.backward");
    (*op->mutable_attrs())["forward"].set_s(name);
    op->add_operands(x);
    op->add_operands(y);
  }
  std::string reason;
  EXPECT_TRUE(supports(program, reason)) << reason;
}

TEST(CudaSupportTest, OpsWithoutKernelsAreNamed) {
  proto::DeviceProgram program;
  int64_t x = add(program, "dtfm.input", {}, {2, 3});
  add(program, "dtfm.custom", {x}, {2, 3});
  std::string reason;
  EXPECT_FALSE(supports(program, reason));
  EXPECT_EQ(reason, "op #1 dtfm.custom has no CUDA kernel (custom op kind '' "
                    "is not registered (load its plugin with "
                    "--load-dtfm-plugin))");

  proto::DeviceProgram backward;
  int64_t a = add(backward, "dtfm.input", {}, {4});
  int64_t g = add(backward, "dtfm.input", {}, {4});
  add(backward, "dtfm.gelu", {a}, {4});
  proto::PlanOp *op = backward.add_ops();
  op->set_name("dtfm.backward");
  (*op->mutable_attrs())["forward"].set_s("dtfm.custom");
  op->add_operands(a);
  op->add_operands(g);
  EXPECT_FALSE(supports(backward, reason));
  EXPECT_EQ(reason, "op #3 dtfm.backward of dtfm.custom has no CUDA kernel "
                    "(custom op kind '' is not registered (load its plugin "
                    "with --load-dtfm-plugin))");
}

// A custom op runs on the GPU exactly when its plugin registered the GPU
// kernel it needs: forward for the op, backward for its dtfm.backward.
TEST(CudaSupportTest, CustomOpsNeedTheirPluginsGpuKernels) {
  auto infer = [](const CustomOpCall &call, std::vector<TensorDesc> &results,
                  std::string &) {
    results = call.operands;
    return true;
  };
  auto cost = [](const CustomOpCall &, const std::vector<TensorDesc> &) {
    return CustomOpCost();
  };
  CustomOpDef cpuOnly{"test_cpu_only", "", infer, cost};
  cpuOnly.forward = [](const CustomOpCall &,
                       const std::vector<const KernelTensor *> &,
                       std::vector<KernelTensor> &,
                       std::string &) { return true; };
  CustomOpDef forwardOnly{"test_gpu_forward", "", infer, cost};
  forwardOnly.cudaForward = [](const CustomOpCall &,
                               const std::vector<const DeviceTensor *> &,
                               const std::vector<DeviceTensor> &, void *,
                               std::string &) { return true; };
  CustomOpDef both = forwardOnly;
  both.kind = "test_gpu_both";
  both.cudaBackward = [](const CustomOpCall &,
                         const std::vector<const DeviceTensor *> &,
                         const DeviceTensor &, const std::vector<bool> &,
                         const std::vector<DeviceTensor> &, void *,
                         std::string &) { return true; };
  CustomOpRegistry &registry = CustomOpRegistry::global();
  for (const CustomOpDef &def : {cpuOnly, forwardOnly, both})
    if (!registry.lookup(def.kind))
      ASSERT_TRUE(registry.add(def)) << def.kind;
  auto program = [](const std::string &kind, bool withBackward) {
    proto::DeviceProgram p;
    int64_t x = add(p, "dtfm.input", {}, {2, 3});
    int64_t y = add(p, "dtfm.custom", {x}, {2, 3});
    (*p.mutable_ops(1)->mutable_attrs())["kind"].set_s(kind);
    if (withBackward) {
      proto::PlanOp *op = p.add_ops();
      op->set_name("dtfm.backward");
      (*op->mutable_attrs())["forward"].set_s("dtfm.custom");
      (*op->mutable_attrs())["kind"].set_s(kind);
      op->add_operands(x);
      op->add_operands(y);
    }
    return p;
  };
  std::string reason;
  EXPECT_FALSE(supports(program("test_cpu_only", false), reason));
  EXPECT_EQ(reason, "op #1 dtfm.custom has no CUDA kernel (the plugin of "
                    "custom op kind 'test_cpu_only' registers no CUDA forward "
                    "kernel)");
  EXPECT_TRUE(supports(program("test_gpu_forward", false), reason)) << reason;
  EXPECT_FALSE(supports(program("test_gpu_forward", true), reason));
  EXPECT_EQ(reason, "op #2 dtfm.backward of dtfm.custom has no CUDA kernel "
                    "(the plugin of custom op kind 'test_gpu_forward' "
                    "registers no CUDA backward kernel)");
  EXPECT_TRUE(supports(program("test_gpu_both", true), reason)) << reason;
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
  EXPECT_TRUE(supports(program, reason)) << reason;
  (*last->mutable_attrs())["axis"].set_i(0);
  EXPECT_FALSE(supports(program, reason));
  EXPECT_EQ(reason, "op #1 dtfm.softmax: only the last axis has a CUDA kernel");
}

// --gpu-attention fused refuses heads the fused kernels do not take, before
// any device is touched (auto would run them unfused).
TEST(CudaSupportTest, FusedAttentionRefusesHeadsOverTheLimit) {
  proto::DeviceProgram program;
  int64_t q = add(program, "dtfm.input", {}, {2, 8, 512});
  int64_t attention =
      add(program, "dtfm.causal_attention", {q, q, q}, {2, 8, 512});
  (*program.mutable_ops(1)->mutable_attrs())["num_heads"].set_i(2);
  (void)attention;
  plan::StageProgram decoded;
  std::string error;
  ASSERT_TRUE(plan::decodeProgram(program, decoded, error)) << error;
  runtime::GpuOptions gpu;
  gpu.attention = runtime::GpuAttention::Fused;
  EXPECT_EQ(runtime::cuda::makeCudaExecutor(decoded, 0, gpu, error), nullptr);
  EXPECT_EQ(error, "--gpu-attention fused: op #1 dtfm.causal_attention has "
                   "heads of 256 dimensions, and the fused kernels take 1 to "
                   "128 (--gpu-attention auto runs those unfused)");
}

} // namespace

namespace {

TEST(CudaSupportTest, EveryKindWithACpuKernelButCustomHasACudaKernel) {
  // Decoding and the tables need no GPU: a program of one op per kind, and
  // its backward where the CPU has one. dtfm.tp_all_reduce is the other
  // exception: its sum needs a communicator per tensor-parallel group,
  // which the CUDA executor does not have yet (the support check refuses
  // it in one line).
  for (size_t i = 0; i < plan::kNumOpKinds; ++i) {
    auto kind = static_cast<plan::OpKind>(i);
    const runtime::cpu::KernelEntry &cpu = runtime::cpu::kernelTable()[i];
    if (!cpu.forward || kind == plan::OpKind::Custom ||
        kind == plan::OpKind::TpAllReduce)
      continue;
    proto::DeviceProgram program;
    int64_t x = add(program, "dtfm.input", {}, {2, 3});
    int64_t y = add(program, plan::opName(kind), {x, x}, {2, 3});
    if (cpu.backward) {
      proto::PlanOp *op = program.add_ops();
      op->set_name("dtfm.backward");
      (*op->mutable_attrs())["forward"].set_s(plan::opName(kind));
      op->add_operands(x);
      op->add_operands(y);
    }
    std::string reason;
    EXPECT_TRUE(supports(program, reason)) << reason;
  }
}

} // namespace
