//===- DtfmAttrs.cpp - dtfm attributes ------------------------------------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//
//
// The typed planning state's verifiers (DtfmAttrs.td). Stream entries are
// read through format/Stream.h, the one home of their spelling.
//
//===----------------------------------------------------------------------===//

#include "dtfm/Dialect/Dtfm/IR/DtfmAttrs.h"
#include "dtfm/Dialect/Dtfm/IR/DtfmDialect.h"
#include "dtfm/Format/Stream.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::dtfm;

#define GET_ATTRDEF_CLASSES
#include "dtfm/Dialect/Dtfm/IR/DtfmAttrs.cpp.inc"

void DtfmDialect::registerAttributes() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "dtfm/Dialect/Dtfm/IR/DtfmAttrs.cpp.inc"
      >();
}

//===----------------------------------------------------------------------===//
// ScheduleAttr
//===----------------------------------------------------------------------===//

LogicalResult ScheduleAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                   StringRef kind, int64_t microBatches,
                                   ArrayRef<int64_t> peakInFlight,
                                   ArrayRef<StageStreamsAttr> stages) {
  if (kind != "1f1b" && kind != "gpipe")
    return emitError() << "dtfm.schedule: unknown kind '" << kind
                       << "' (expected 1f1b or gpipe)";
  if (microBatches <= 0)
    return emitError() << "dtfm.schedule: micro_batches must be positive, got "
                       << microBatches;
  if (peakInFlight.size() != stages.size())
    return emitError() << "dtfm.schedule: " << stages.size() << " stages but "
                       << peakInFlight.size()
                       << " peak_in_flight values (one per stage)";
  int64_t numStages = stages.size();
  for (auto [s, stage] : llvm::enumerate(stages)) {
    ArrayRef<StringAttr> lists[3] = {stage.getRecv(), stage.getCompute(),
                                     stage.getSend()};
    for (int slot = 0; slot < 3; ++slot)
      for (StringAttr item : lists[slot]) {
        ::dtfm::format::StreamEntry entry;
        if (!::dtfm::format::parseEntry(item.getValue(),
                                        static_cast<::dtfm::format::Slot>(slot),
                                        entry) ||
            entry.peerStage >= numStages)
          return emitError() << "dtfm.schedule: stage " << s << " "
                             << ::dtfm::format::slotName(
                                    static_cast<::dtfm::format::Slot>(slot))
                             << ": malformed item '" << item.getValue() << "'";
      }
  }
  return success();
}
