// RUN: dtfm-opt %s -split-input-file -verify-diagnostics --dtfm-print-costs -o /dev/null
// RUN: not dtfm-opt %s -split-input-file --dtfm-print-costs=format=xml 2>&1 | FileCheck %s --check-prefix=FORMAT

// FORMAT: error: dtfm-print-costs: unknown format 'xml' (expected table or json)

func.func @missing_field() {
  // expected-error @+1 {{malformed 'dtfm.cost': expected a non-negative integer 'bwd_flops'}}
  %x = dtfm.input "x" {dtfm.cost = {fwd_flops = 0 : i64}} : tensor<2xf32>
  return
}

// -----

func.func @negative() {
  // expected-error @+1 {{malformed 'dtfm.cost': expected a non-negative integer 'fwd_flops'}}
  %x = dtfm.input "x" {dtfm.cost = {fwd_flops = -1 : i64, bwd_flops = 0 : i64, saved_bytes = 0 : i64, param_bytes = 0 : i64, result_bytes = array<i64: 8>}} : tensor<2xf32>
  return
}

// -----

func.func @result_count() {
  // expected-error @+1 {{malformed 'dtfm.cost': expected 'result_bytes' with 1 entries}}
  %x = dtfm.input "x" {dtfm.cost = {fwd_flops = 0 : i64, bwd_flops = 0 : i64, saved_bytes = 0 : i64, param_bytes = 0 : i64, result_bytes = array<i64: 8, 8>}} : tensor<2xf32>
  return
}
