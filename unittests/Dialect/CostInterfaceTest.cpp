//===- CostInterfaceTest.cpp - CostOpInterface on hand-computed cases -----===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//

#include "dtfm/Analysis/CostAnalysis.h"
#include "dtfm/InitAll.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

using namespace mlir;
using namespace mlir::dtfm;

namespace {

class CostInterfaceTest : public ::testing::Test {
protected:
  CostInterfaceTest() {
    DialectRegistry registry;
    registerAllDialects(registry);
    context.appendDialectRegistry(registry);
    context.loadAllAvailableDialects();
  }

  /// Parses `body` inside a function and returns the op named `opName`.
  CostOpInterface parseOp(StringRef body, StringRef opName) {
    std::string source =
        ("func.func @f() {\n" + body + "\n  return\n}\n").str();
    module = parseSourceString<ModuleOp>(source, &context);
    EXPECT_TRUE(module) << source;
    CostOpInterface found;
    module->walk([&](CostOpInterface op) {
      if (op->getName().getStringRef() == opName)
        found = op;
    });
    EXPECT_TRUE(found) << opName.str();
    return found;
  }

  MLIRContext context;
  OwningOpRef<ModuleOp> module;
};

TEST_F(CostInterfaceTest, BatchedMatmulAgainstParameter) {
  CostOpInterface op = parseOp(R"mlir(
    %a = dtfm.input "a" : tensor<2x3x4xf32>
    %w = dtfm.param "w" init(zeros) : tensor<4x5xf32>
    %c = dtfm.matmul %a, %w : (tensor<2x3x4xf32>, tensor<4x5xf32>) -> tensor<2x3x5xf32>
  )mlir", "dtfm.matmul");
  EXPECT_EQ(op.getForwardFlops(), 2 * (2 * 3 * 5) * 4);
  EXPECT_EQ(op.getBackwardFlops(), 2 * op.getForwardFlops());
  // Only the activation is kept: the weight is a parameter.
  EXPECT_EQ(op.getSavedActivationBytes(), 2 * 3 * 4 * 4);
  EXPECT_EQ(op.getResultBytes(0), 2 * 3 * 5 * 4);
}

TEST_F(CostInterfaceTest, LinearWithBias) {
  CostOpInterface op = parseOp(R"mlir(
    %x = dtfm.input "x" : tensor<8x16xf32>
    %w = dtfm.param "w" init(zeros) : tensor<16x32xf32>
    %b = dtfm.param "b" init(zeros) : tensor<32xf32>
    %y = dtfm.linear %x, %w, %b : (tensor<8x16xf32>, tensor<16x32xf32>, tensor<32xf32>) -> tensor<8x32xf32>
  )mlir", "dtfm.linear");
  EXPECT_EQ(op.getForwardFlops(), 2 * 8 * 32 * 16 + 8 * 32);
  EXPECT_EQ(op.getBackwardFlops(), 4 * 8 * 32 * 16 + 8 * 32);
  EXPECT_EQ(op.getSavedActivationBytes(), 8 * 16 * 4);
}

TEST_F(CostInterfaceTest, CausalAttention) {
  CostOpInterface op = parseOp(R"mlir(
    %q = dtfm.input "q" : tensor<2x8x16xf32>
    %o = dtfm.causal_attention %q, %q, %q {num_heads = 4 : i64} : (tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  )mlir", "dtfm.causal_attention");
  EXPECT_EQ(op.getForwardFlops(), 4 * 2 * 8 * 8 * 16 + 6 * 2 * 4 * 8 * 8);
  // Q, K and V; the backward recomputes the [2, 4, 8, 8] probabilities.
  EXPECT_EQ(op.getSavedActivationBytes(), 3 * (2 * 8 * 16 * 4));
}

TEST_F(CostInterfaceTest, PaddedConvolution) {
  CostOpInterface op = parseOp(R"mlir(
    %x = dtfm.input "x" : tensor<1x3x8x8xf32>
    %w = dtfm.param "w" init(zeros) : tensor<4x3x3x3xf32>
    %y = dtfm.conv2d %x, %w {padding = array<i64: 1, 1, 1, 1>} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x8x8xf32>
  )mlir", "dtfm.conv2d");
  EXPECT_EQ(op.getForwardFlops(), 2 * (4 * 8 * 8) * (3 * 3 * 3));
  EXPECT_EQ(op.getBackwardFlops(), 2 * op.getForwardFlops());
  EXPECT_EQ(op.getSavedActivationBytes(), 3 * 8 * 8 * 4);
}

TEST_F(CostInterfaceTest, CrossEntropy) {
  CostOpInterface op = parseOp(R"mlir(
    %l = dtfm.input "l" : tensor<2x5x10xf16>
    %t = dtfm.label "t" : tensor<2x5xi64>
    %loss = dtfm.cross_entropy %l, %t : (tensor<2x5x10xf16>, tensor<2x5xi64>) -> tensor<f32>
  )mlir", "dtfm.cross_entropy");
  EXPECT_EQ(op.getForwardFlops(), 5 * 100 + 2 * 10);
  EXPECT_EQ(op.getBackwardFlops(), 2 * 100);
  EXPECT_EQ(op.getSavedActivationBytes(), 100 * 2);
  EXPECT_EQ(op.getResultBytes(0), 4);
}

TEST_F(CostInterfaceTest, ParameterBytesAndAnalysisTotals) {
  CostOpInterface op = parseOp(R"mlir(
    %p = dtfm.param "p" init(normal, 0.02) : tensor<3x4xf16>
    %f = dtfm.param "f" init(ones) frozen : tensor<4xf16>
  )mlir", "dtfm.param");
  EXPECT_EQ(op.getParameterBytes(), 4 * 2);
  EXPECT_EQ(op.getBackwardFlops(), 0);
  CostAnalysis analysis(module->getOperation());
  ASSERT_TRUE(analysis.isValid());
  EXPECT_EQ(analysis.getTotals().trainableParameters, 12);
  EXPECT_EQ(analysis.getTotals().frozenParameters, 4);
  EXPECT_EQ(analysis.getTotals().parameterBytes, 32);
}

} // namespace
