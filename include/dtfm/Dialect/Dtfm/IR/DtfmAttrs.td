//===- DtfmAttrs.td - dtfm attribute definitions -----------*- tablegen -*-===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//
//
// The typed planning state the passes exchange as module attributes. Each
// attribute verifies its own form when it is built or parsed, so the passes
// that read it need not re-validate it.
//
//===----------------------------------------------------------------------===//

#ifndef DTFM_ATTRS
#define DTFM_ATTRS

include "dtfm/Dialect/Dtfm/IR/DtfmDialect.td"
include "mlir/IR/AttrTypeBase.td"

class Dtfm_Attr<string name, string attrMnemonic, list<Trait> traits = []>
    : AttrDef<Dtfm_Dialect, name, traits> {
  let mnemonic = attrMnemonic;
}

/// A list printed and parsed in square brackets, `[a, b]`, empty or not
/// (ArrayRefParameter alone cannot parse an empty list).
class Dtfm_BracketListParameter<string elementType, string desc>
    : ArrayRefParameter<elementType, desc> {
  let parser = "::mlir::dtfm::parseBracketList<" # elementType # ">($_parser)";
  let printer = "::mlir::dtfm::printBracketList($_printer, $_self)";
}

def Dtfm_StageStreamsAttr : Dtfm_Attr<"StageStreams", "streams"> {
  let summary = "The receive, compute and send streams of one pipeline stage";
  let description = [{
    Each entry keeps its text spelling (format/Stream.h): `"F3<1"` receives
    the forward of micro-batch 3 from stage 1, `"B3"` computes the backward
    of micro-batch 3, `"F3>1"` sends the forward of micro-batch 3 to
    stage 1. The enclosing `#dtfm.schedule` checks the entries, since only it
    knows how many stages there are.

    ```mlir
    #dtfm.streams<recv = ["B0<1"], compute = ["F0", "B0"], send = ["F0>1"]>
    ```
  }];
  let parameters = (ins
    Dtfm_BracketListParameter<"::mlir::StringAttr", "receive entries">:$recv,
    Dtfm_BracketListParameter<"::mlir::StringAttr", "compute entries">:$compute,
    Dtfm_BracketListParameter<"::mlir::StringAttr", "send entries">:$send
  );
  let assemblyFormat = "`<` struct(params) `>`";
}

def Dtfm_ScheduleAttr : Dtfm_Attr<"Schedule", "schedule"> {
  let summary = "The micro-batch schedule of a pipeline";
  let description = [{
    Written by --dtfm-schedule-microbatches as the module attribute
    `dtfm.schedule`: the schedule's kind (`"1f1b"` or `"gpipe"`), the number
    of micro-batches, the peak number of micro-batches each stage holds
    activations for, and the streams of each stage.

    ```mlir
    #dtfm.schedule<kind = "1f1b", micro_batches = 1, peak_in_flight = [1, 1],
                   stages = [<recv = ["B0<1"], compute = ["F0", "B0"],
                              send = ["F0>1"]>,
                             <recv = ["F0<0"], compute = ["F0", "B0"],
                              send = ["B0>0"]>]>
    ```

    The verifier checks the form: a known kind, a positive micro-batch
    count, one peak per stage, every entry well formed for its slot with its
    peer stage in range. Whether the streams run to completion (no cycle) is
    checked by --dtfm-verify-plan.
  }];
  let parameters = (ins
    StringRefParameter<"schedule kind: 1f1b or gpipe">:$kind,
    "int64_t":$micro_batches,
    Dtfm_BracketListParameter<"int64_t", "peak in-flight micro-batches per stage">:$peak_in_flight,
    Dtfm_BracketListParameter<"::mlir::dtfm::StageStreamsAttr", "streams per stage">:$stages
  );
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

/// A double printed in the shortest decimal form that reads back exactly
/// (held as a StoredDouble, which llvm::hash_value can hash).
class Dtfm_DoubleParameter<string desc>
    : AttrParameter<"::mlir::dtfm::StoredDouble", desc> {
  let parser = "::mlir::dtfm::parseDouble($_parser)";
  let printer = "::mlir::dtfm::printDouble($_printer, $_self)";
}

def Dtfm_DeviceAttr : Dtfm_Attr<"Device", "device"> {
  let summary = "One accelerator of a cluster";
  let description = [{
    A device of `#dtfm.cluster` (planner::Device): its name, region, peak
    FLOP/s in the training precision, the fraction of the peak reached in
    practice, and its memory in bytes (0: not given).

    ```mlir
    #dtfm.device<name = "a100-0", region = "us", peak_flops = 3.12e+14,
                 efficiency = 0.5, memory_bytes = 8.0e+10>
    ```
  }];
  let parameters = (ins
    StringRefParameter<"device name">:$name,
    StringRefParameter<"region">:$region,
    Dtfm_DoubleParameter<"peak FLOP/s">:$peak_flops,
    Dtfm_DoubleParameter<"fraction of the peak reached">:$efficiency,
    Dtfm_DoubleParameter<"memory in bytes">:$memory_bytes
  );
  let assemblyFormat = "`<` struct(params) `>`";
}

def Dtfm_ClusterAttr : Dtfm_Attr<"Cluster", "cluster"> {
  let summary = "The devices and links a module is planned for";
  let description = [{
    Set on the module as `dtfm.cluster` by --dtfm-import-cluster (or
    `dtfm-translate --import-cluster`), which reads a cluster file once; the
    planning passes read the cluster from here. `source` names the file it
    came from, so that whole-module diagnostics keep naming it. `delay_ms`
    and `bandwidth_gbps` are the n x n link matrices, row-major. Every
    double prints in the shortest form that reads back exactly.

    ```mlir
    #dtfm.cluster<name = "two", source = "two.textproto",
                  devices = [<name = "a", region = "r", peak_flops = 1.0e+14,
                              efficiency = 1.0, memory_bytes = 0.0>,
                             <name = "b", region = "r", peak_flops = 1.0e+14,
                              efficiency = 1.0, memory_bytes = 0.0>],
                  delay_ms = [0.0, 1.0, 1.0, 0.0],
                  bandwidth_gbps = [0.0, 10.0, 10.0, 0.0]>
    ```

    The verifier checks that both matrices are n x n, then everything
    planner::Cluster::validate checks (finite values, delays >= 0, positive
    bandwidths off the diagonal, devices with positive speed).
  }];
  let parameters = (ins
    StringRefParameter<"cluster name">:$name,
    StringRefParameter<"the file the cluster was imported from">:$source,
    Dtfm_BracketListParameter<"::mlir::dtfm::DeviceAttr", "devices">:$devices,
    Dtfm_BracketListParameter<"::mlir::dtfm::StoredDouble", "one-way latency in ms, row-major">:$delay_ms,
    Dtfm_BracketListParameter<"::mlir::dtfm::StoredDouble", "bandwidth in Gbit/s, row-major">:$bandwidth_gbps
  );
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// The attribute holding `cluster`, imported from `source`.
    static ClusterAttr get(::mlir::MLIRContext *context,
                           const ::dtfm::planner::Cluster &cluster,
                           ::llvm::StringRef source);
    /// The plain C++ cluster the planner works on.
    ::dtfm::planner::Cluster toCluster() const;
  }];
}

#endif // DTFM_ATTRS
