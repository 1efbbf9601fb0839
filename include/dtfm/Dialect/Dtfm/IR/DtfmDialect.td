//===- DtfmDialect.td - dtfm dialect definition ------------*- tablegen -*-===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//

#ifndef DTFM_DIALECT
#define DTFM_DIALECT

include "mlir/IR/OpBase.td"

def Dtfm_Dialect : Dialect {
  let name = "dtfm";
  let summary = "Operator DAGs of models to be trained on heterogeneous clusters";
  let description = [{
    The `dtfm` dialect describes a model as a DAG of coarse operators (a
    matmul, a layernorm, a fused causal attention, a convolution, ...) on
    statically shaped tensors, one micro-batch at a time. Every op reports its
    forward and backward FLOPs, the activation bytes it keeps for backward and
    the bytes of its results through the `CostOpInterface`; the planning passes
    partition and schedule the DAG across devices with those numbers.
  }];
  let cppNamespace = "::mlir::dtfm";
  let usePropertiesForAttributes = 1;
  let useDefaultAttributePrinterParser = 1;
  let hasOperationAttrVerify = 1;
  let extraClassDeclaration = [{
    /// Registers the attributes of DtfmAttrs.td.
    void registerAttributes();
  }];
}

/// Every tensor an op reads or makes has an element count and a byte size
/// that fit 64 bits with room to spare (mlir::dtfm::kMaxTensorBytes), so
/// that costs, buffers and the runtime's sizes computed from them cannot
/// wrap (a reshape to 2^62 x 2^60 elements would count 6).
def Dtfm_TensorsInRange : NativeOpTrait<"TensorsInRange"> {
  let cppNamespace = "::mlir::dtfm::OpTrait";
}

class Dtfm_Op<string mnemonic, list<Trait> traits = []>
    : Op<Dtfm_Dialect, mnemonic, !listconcat(traits, [Dtfm_TensorsInRange])>;

#endif // DTFM_DIALECT
