// RUN: dtfm-opt %s -split-input-file -verify-diagnostics --dtfm-print-costs -o /dev/null
// RUN: not dtfm-opt %s -split-input-file --dtfm-print-costs=format=xml 2>&1 | FileCheck %s --check-prefix=FORMAT

// FORMAT: error: dtfm-print-costs: unknown format 'xml' (expected table or json)

func.func @untyped() {
  // expected-error @+1 {{dtfm.cost must be a #dtfm.cost attribute}}
  %x = dtfm.input "x" {dtfm.cost = {fwd_flops = 0 : i64}} : tensor<2xf32>
  return
}

// -----

func.func @missing_field() {
  // COM: MLIR's struct parser wants every parameter but the bytes moved.
  // expected-error @+1 {{struct is missing required parameter: bwd_flops}}
  %x = dtfm.input "x" {dtfm.cost = #dtfm.cost<fwd_flops = 0>} : tensor<2xf32>
  return
}

// -----

func.func @negative() {
  // expected-error @+1 {{dtfm.cost: fwd_flops must be non-negative, got -1}}
  %x = dtfm.input "x" {dtfm.cost = #dtfm.cost<fwd_flops = -1, bwd_flops = 0, saved_bytes = 0, param_bytes = 0, result_bytes = [8]>} : tensor<2xf32>
  return
}

// -----

func.func @result_count() {
  // expected-error @+1 {{malformed 'dtfm.cost': expected 'result_bytes' with 1 entries}}
  %x = dtfm.input "x" {dtfm.cost = #dtfm.cost<fwd_flops = 0, bwd_flops = 0, saved_bytes = 0, param_bytes = 0, result_bytes = [8, 8]>} : tensor<2xf32>
  return
}
