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

#endif // DTFM_ATTRS
