//===- Passes.td - dtfm passes -----------------------------*- tablegen -*-===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//

#ifndef DTFM_PASSES
#define DTFM_PASSES

include "mlir/Pass/PassBase.td"

def AnnotateCosts : Pass<"dtfm-annotate-costs", "mlir::ModuleOp"> {
  let summary = "Write every op's cost (FLOPs, bytes) as a `dtfm.cost` attribute";
  let description = [{
    For each op implementing `CostOpInterface`, attaches

      dtfm.cost = {fwd_flops, bwd_flops, saved_bytes, param_bytes,
                   result_bytes = array<i64: ...>}

    (all for one micro-batch), so that later passes and readers of the IR see
    the numbers without recomputing them. Existing annotations are replaced.
  }];
  let dependentDialects = ["::mlir::dtfm::DtfmDialect"];
  let statistics = [
    Statistic<"numAnnotated", "num-annotated", "Ops annotated with a cost">,
  ];
}

def PrintCosts : Pass<"dtfm-print-costs", "mlir::ModuleOp"> {
  let summary = "Print a per-op and per-layer cost table with totals";
  let description = [{
    Prints, for one micro-batch, each op's forward and backward FLOPs, saved
    activation bytes, result bytes and parameter bytes; the same summed per
    layer (the `dtfm.layer` attribute, in order of first appearance); and the
    totals: parameter count and bytes, forward, backward and training FLOPs,
    saved activation bytes. Uses `dtfm.cost` annotations where present and
    the cost interface otherwise. `format=json` prints one JSON object
    instead. The IR is left unchanged.
  }];
  let options = [
    Option<"format", "format", "std::string", /*default=*/"\"table\"",
           "Output format: table or json">,
    Option<"perOp", "per-op", "bool", /*default=*/"true",
           "Include the per-op rows">,
  ];
}

#endif // DTFM_PASSES
