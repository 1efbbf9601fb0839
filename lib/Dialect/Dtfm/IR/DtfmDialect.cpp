//===- DtfmDialect.cpp - dtfm dialect -------------------------------------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//

#include "dtfm/Dialect/Dtfm/IR/DtfmDialect.h"
#include "dtfm/Dialect/Dtfm/IR/DtfmAttrs.h"
#include "dtfm/Dialect/Dtfm/IR/DtfmOps.h"

using namespace mlir;
using namespace mlir::dtfm;

#include "dtfm/Dialect/Dtfm/IR/DtfmOpsDialect.cpp.inc"

void DtfmDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "dtfm/Dialect/Dtfm/IR/DtfmOps.cpp.inc"
      >();
  registerAttributes();
}

/// The planning attributes that have a typed form must have it: a pass
/// reading `dtfm.schedule` finds a #dtfm.schedule or nothing.
LogicalResult DtfmDialect::verifyOperationAttribute(Operation *op,
                                                    NamedAttribute attr) {
  struct TypedForm {
    StringRef name;
    StringRef spelling;
    bool (*matches)(Attribute);
  };
  // An array of strings (device names).
  static bool (*const isNameList)(Attribute) = [](Attribute a) {
    auto list = dyn_cast<ArrayAttr>(a);
    return list && llvm::all_of(
                       list, [](Attribute item) { return isa<StringAttr>(item); });
  };
  static const TypedForm forms[] = {
      {kScheduleAttrName, "a #dtfm.schedule attribute",
       [](Attribute a) { return isa<ScheduleAttr>(a); }},
      {kClusterAttrName, "a #dtfm.cluster attribute",
       [](Attribute a) { return isa<ClusterAttr>(a); }},
      {kShapeAttrName, "a #dtfm.shape attribute",
       [](Attribute a) { return isa<ShapeAttr>(a); }},
      {kCandidatesAttrName, "a #dtfm.candidates attribute",
       [](Attribute a) { return isa<CandidatesAttr>(a); }},
      {kAssignmentAttrName, "a #dtfm.assignment attribute",
       [](Attribute a) { return isa<AssignmentAttr>(a); }},
      {kCostAttrName, "a #dtfm.cost attribute",
       [](Attribute a) { return isa<CostAttr>(a); }},
      {kStagesAttrName, "a #dtfm.stages attribute",
       [](Attribute a) { return isa<StagesAttr>(a); }},
      {kPeersAttrName, "a #dtfm.peers attribute",
       [](Attribute a) { return isa<PeersAttr>(a); }},
      {kStreamsAttrName, "a #dtfm.streams attribute",
       [](Attribute a) { return isa<StageStreamsAttr>(a); }},
      {kTpGroupsAttrName, "an array of non-empty arrays of device names",
       [](Attribute a) {
         auto list = dyn_cast<ArrayAttr>(a);
         return list && llvm::all_of(list, [](Attribute group) {
                  return isNameList(group) &&
                         !cast<ArrayAttr>(group).empty();
                });
       }},
      {kOnnxModelAttrName, "a string (the ONNX file's path)",
       [](Attribute a) { return isa<StringAttr>(a); }},
      {kOnnxTransposedAttrName, "a unit attribute",
       [](Attribute a) { return isa<UnitAttr>(a); }},
      {kTemplateAttrName, "a symbol reference (the program it runs)",
       [](Attribute a) { return isa<FlatSymbolRefAttr>(a); }},
      {kPeerDevicesAttrName, "an array of device names", isNameList},
      {kParamShardsAttrName, "an array of #dtfm.param_shard attributes",
       [](Attribute a) {
         auto list = dyn_cast<ArrayAttr>(a);
         return list && llvm::all_of(list, [](Attribute item) {
                  return isa<ParamShardAttr>(item);
                });
       }},
  };
  for (const TypedForm &form : forms)
    if (attr.getName() == form.name && !form.matches(attr.getValue()))
      return op->emitError() << form.name << " must be " << form.spelling;
  return success();
}
