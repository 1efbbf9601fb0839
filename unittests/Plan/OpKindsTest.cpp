//===- OpKindsTest.cpp - The op-kind table against the dialect, kernels ---===//
//
// Part of dtfm. OpKinds.def is the one list of what dtfm knows about an op
// by its kind; these tests fail when it disagrees with the dialect (an op
// with no kind, other operand or result counts) or with a backend (a kind
// it claims without its kernel).
//
//===----------------------------------------------------------------------===//

#include "dtfm/Plan/OpKinds.h"
#include "dtfm/Plan/Program.h"
#include "dtfm/Plan/Verifier.h"
#include "dtfm/Runtime/Cpu/KernelTable.h"

#include "dtfm/Dialect/Dtfm/IR/DtfmDialect.h"
#include "dtfm/InitAll.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OpDefinition.h"

#include <gtest/gtest.h>

#include <map>
#include <set>

using namespace dtfm;
using namespace dtfm::plan;

namespace {

/// The dtfm dialect's registered ops by name.
class OpKindsTest : public ::testing::Test {
protected:
  OpKindsTest() : context(registry()) {
    auto *dialect = context.getOrLoadDialect<mlir::dtfm::DtfmDialect>();
    for (mlir::RegisteredOperationName op : context.getRegisteredOperations())
      if (&op.getDialect() == dialect)
        ops.emplace(op.getStringRef().str(), op);
  }
  static mlir::DialectRegistry registry() {
    mlir::DialectRegistry r;
    mlir::dtfm::registerAllDialects(r);
    return r;
  }
  mlir::MLIRContext context;
  std::map<std::string, mlir::RegisteredOperationName> ops;
};

/// The operand count the dialect fixes for `op` (ODS's ZeroOperands,
/// OneOperand or NOperands<N>), or -1 when it has optional or variadic
/// operands.
int fixedOperands(mlir::RegisteredOperationName op) {
  using namespace mlir::OpTrait;
  if (op.hasTrait<ZeroOperands>())
    return 0;
  if (op.hasTrait<OneOperand>())
    return 1;
  if (op.hasTrait<NOperands<2>::Impl>())
    return 2;
  if (op.hasTrait<NOperands<3>::Impl>())
    return 3;
  if (op.hasTrait<NOperands<4>::Impl>())
    return 4;
  if (op.hasTrait<NOperands<5>::Impl>())
    return 5;
  return -1;
}

/// The fewest operands the dialect allows when they vary (ODS's
/// AtLeastNOperands<N>, or VariadicOperands alone), else -1.
int leastOperands(mlir::RegisteredOperationName op) {
  using namespace mlir::OpTrait;
  if (op.hasTrait<AtLeastNOperands<1>::Impl>())
    return 1;
  if (op.hasTrait<AtLeastNOperands<2>::Impl>())
    return 2;
  if (op.hasTrait<AtLeastNOperands<3>::Impl>())
    return 3;
  return op.hasTrait<VariadicOperands>() ? 0 : -1;
}

int fixedResults(mlir::RegisteredOperationName op) {
  using namespace mlir::OpTrait;
  if (op.hasTrait<ZeroResults>())
    return 0;
  if (op.hasTrait<OneResult>())
    return 1;
  if (op.hasTrait<NResults<2>::Impl>())
    return 2;
  return -1;
}

TEST_F(OpKindsTest, EveryDialectOpHasAKindAndEveryKindAnOp) {
  std::set<std::string> dialectOps, kinds;
  for (const auto &[name, op] : ops)
    dialectOps.insert(name);
  for (size_t i = 0; i < kNumOpKinds; ++i) {
    std::string name = opName(static_cast<OpKind>(i));
    kinds.insert(name);
    EXPECT_EQ(opKindOf(name), static_cast<OpKind>(i));
  }
  EXPECT_EQ(dialectOps, kinds);
  EXPECT_FALSE(opKindOf("dtfm.nonsense"));
}

// The counts the plan verifier checks are the dialect's: fixed where the
// dialect fixes them; where operands vary, the table asks at least as many
// as the dialect does.
TEST_F(OpKindsTest, CountsAreTheDialects) {
  for (size_t i = 0; i < kNumOpKinds; ++i) {
    const OpKindInfo &info = opKindInfo(static_cast<OpKind>(i));
    auto it = ops.find(info.name);
    ASSERT_NE(it, ops.end()) << info.name;
    if (info.results == kNoBound) // its own rule checks the counts
      continue;
    EXPECT_EQ(fixedResults(it->second), info.results) << info.name;
    int fixed = fixedOperands(it->second);
    if (info.minOperands == info.maxOperands) {
      EXPECT_EQ(fixed, info.minOperands) << info.name;
      continue;
    }
    EXPECT_EQ(fixed, -1) << info.name;
    int least = leastOperands(it->second);
    EXPECT_GE(least, 0) << info.name;
    EXPECT_LE(least, info.minOperands) << info.name;
  }
}

// Each trait list holds kinds of the shape the trait needs.
TEST_F(OpKindsTest, TraitsFitTheirKinds) {
  // Each per-element function serves one kind.
  std::set<math::UnaryOp> unary;
  std::set<math::BinaryOp> binary;
  for (size_t i = 0; i < kNumOpKinds; ++i) {
    const OpKindInfo &info = opKindInfo(static_cast<OpKind>(i));
    bool oneToOne =
        info.minOperands == 1 && info.maxOperands == 1 && info.results == 1;
    if (info.unaryMath) {
      EXPECT_TRUE(unary.insert(*info.unaryMath).second) << info.name;
      EXPECT_TRUE(oneToOne) << info.name;
    }
    if (info.binaryMath) {
      EXPECT_TRUE(binary.insert(*info.binaryMath).second) << info.name;
      EXPECT_TRUE(info.minOperands == 2 && info.maxOperands == 2 &&
                  info.results == 1)
          << info.name;
    }
    EXPECT_FALSE(info.unaryMath && info.binaryMath) << info.name;
    if (info.tensorParallelPassThrough) {
      EXPECT_TRUE(oneToOne) << info.name;
    }
    if (info.structural) {
      EXPECT_FALSE(info.unaryMath || info.binaryMath) << info.name;
      EXPECT_EQ(info.scratch, Scratch::None) << info.name;
    }
  }
  EXPECT_EQ(unaryMathOf(OpKind::Silu), math::UnaryOp::Silu);
  EXPECT_EQ(binaryMathOf(OpKind::Div), math::BinaryOp::Div);
  EXPECT_FALSE(unaryMathOf(OpKind::Gelu));
}

// Every kind has its rule in the plan verifier: an op of it with no
// operands and no results is refused (a kind missing from forwardRule's
// switch would pass anything). dtfm.backward is checked against its
// forward instead.
TEST_F(OpKindsTest, EveryKindHasAVerifierRule) {
  for (size_t i = 0; i < kNumOpKinds; ++i) {
    auto kind = static_cast<OpKind>(i);
    if (kind == OpKind::Backward)
      continue;
    StageProgram program;
    ProgramOp &op = program.ops.emplace_back();
    op.kind = op.computes = kind;
    EXPECT_NE(verifyProgramOps(program), "") << opName(kind);
  }
}

// The CPU runs every kind that is not structural, and the elementwise math
// kinds forward and backward (CudaSupportTest checks that CUDA has every
// kernel the CPU has).
TEST_F(OpKindsTest, TheCpuRunsEveryComputingKind) {
  const OpTable<runtime::cpu::KernelEntry> &table = runtime::cpu::kernelTable();
  for (size_t i = 0; i < kNumOpKinds; ++i) {
    auto kind = static_cast<OpKind>(i);
    EXPECT_EQ(table[i].forward == nullptr, isStructural(kind)) << opName(kind);
    if (unaryMathOf(kind) || binaryMathOf(kind)) {
      EXPECT_NE(table[i].backward, nullptr) << opName(kind);
    }
  }
  // Ops that produce no gradient: constants, sums of gradients, compression.
  for (OpKind kind : {OpKind::Constant, OpKind::Accumulate,
                      OpKind::TopkCompress, OpKind::TopkDecompress})
    EXPECT_EQ(table[static_cast<size_t>(kind)].backward, nullptr);
  EXPECT_NE(table[static_cast<size_t>(OpKind::Linear)].backward, nullptr);
}

} // namespace
