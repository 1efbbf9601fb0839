// COM: End-to-end test through the importer: inputs built by dtfm-translate --import-gpt and a chain of passes, so it also breaks when the importer or an earlier pass changes (the hand-written pass tests are in test/Passes).
// RUN: dtfm-translate --import-gpt tiny -o %t.mlir
// RUN: dtfm-opt %t.mlir --dtfm-rebatch=micro-batch-size=3 | FileCheck %s
// RUN: not dtfm-opt %s --dtfm-rebatch=micro-batch-size=4 2>&1 | FileCheck %s --check-prefix=MOVED
// RUN: dtfm-opt %t.mlir --dtfm-autodiff -o %t.trained.mlir
// RUN: not dtfm-opt %t.trained.mlir --dtfm-rebatch=micro-batch-size=2 2>&1 | FileCheck %s --check-prefix=TRAINED

// COM: Every value computed from the inputs scales in dimension 0, also
// COM: after reshapes that merge the batch with the sequence.
// CHECK: dtfm.input "tokens" {{.*}}: tensor<3x32xi64>
// CHECK: dtfm.embedding {{.*}} -> tensor<3x32x64xf32>
// CHECK: dtfm.label "labels" {{.*}}: tensor<3x32xi64>
// CHECK: dtfm.cross_entropy {{.*}}: (tensor<3x32x256xf32>, tensor<3x32xi64>) -> tensor<f32>

// COM: A model that moves the batch out of dimension 0 is refused.
// MOVED: error: dtfm-rebatch: cannot change the micro-batch size from 2 to 4: {{.*}}'dtfm.transpose'
// TRAINED: error: dtfm-rebatch: cannot change the micro-batch size from 4 to 2: the module is a training graph; rebatch before --dtfm-autodiff

func.func @moved() -> tensor<f32> {
  %x = dtfm.input "x" : tensor<2x8xf32>
  %t = dtfm.transpose %x {perm = array<i64: 1, 0>} : (tensor<2x8xf32>) -> tensor<8x2xf32>
  %u = dtfm.transpose %t {perm = array<i64: 1, 0>} : (tensor<8x2xf32>) -> tensor<2x8xf32>
  %w = dtfm.param "w" init(normal, 0.1) : tensor<8x3xf32>
  %y = dtfm.matmul %u, %w : (tensor<2x8xf32>, tensor<8x3xf32>) -> tensor<2x3xf32>
  %l = dtfm.label "y" : tensor<2xi64>
  %loss = dtfm.cross_entropy %y, %l : (tensor<2x3xf32>, tensor<2xi64>) -> tensor<f32>
  return %loss : tensor<f32>
}
