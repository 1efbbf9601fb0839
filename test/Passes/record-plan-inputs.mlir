// RUN: dtfm-opt %s -split-input-file --dtfm-record-plan-inputs="options={lr=0.5 cluster={a b.textproto} tp=2}" | FileCheck %s
// RUN: not dtfm-opt %s -split-input-file --dtfm-record-plan-inputs="options=lonely" 2>&1 | FileCheck %s --check-prefix=BAD

// COM: The module as it was (without its cluster and earlier inputs) and the
// COM: options, as two string attributes; the module itself is unchanged.
// CHECK-LABEL: module attributes
// CHECK-SAME: dtfm.model = "m"
// CHECK-SAME: dtfm.plan_input = "module attributes {dtfm.model = \22m\22} {\0A  func.func @m(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {\0A    %0 = dtfm.relu %arg0 : (tensor<2x4xf32>) -> tensor<2x4xf32>\0A    return %0 : tensor<2x4xf32>\0A  }\0A}\0A"
// CHECK-SAME: dtfm.plan_options = "lr=0.5 cluster={a b.textproto} tp=2"
// CHECK: func.func @m
// CHECK-NEXT: dtfm.relu
// BAD: error: dtfm-record-plan-inputs: option 'lonely' is not key=value
module attributes {dtfm.model = "m", dtfm.plan_input = "old", dtfm.plan_options = "old=1"} {
  func.func @m(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %y = dtfm.relu %x : (tensor<2x4xf32>) -> tensor<2x4xf32>
    return %y : tensor<2x4xf32>
  }
}
