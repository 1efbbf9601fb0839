//===- DevicePrograms.h - A planned module's device programs ----*- C++ -*-===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//
//
// --dtfm-emit-stage-programs makes one func.func per device (dtfm.device).
// The replicas of a stage (at a tensor-parallel rank) run the same ops and
// differ only in their attributes and in the devices their transfers reach:
// the first keeps its body, and each other is a private declaration that
// names it (dtfm.template = @first), keeps its own attributes, and lists
// the device at the other end of each transfer of that body in op order
// (dtfm.peer_devices). So a plan's IR grows with its stages, not with its
// devices. plan.pb shares programs the same way (proto/plan.proto).
//
//===----------------------------------------------------------------------===//

#ifndef DTFM_DIALECT_DTFM_IR_DEVICEPROGRAMS_H
#define DTFM_DIALECT_DTFM_IR_DEVICEPROGRAMS_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"

namespace mlir::dtfm {

/// The function whose body `program` runs: the one its dtfm.template names,
/// else itself; null when the name resolves to no function with a body.
func::FuncOp programBody(func::FuncOp program);

/// The device at the other end of each transfer (an op with a
/// `peer_device`) of `program`'s body, in op order, as `program` runs it.
/// Fails, with an error on `program`, where its dtfm.peer_devices does not
/// list one device per such op or its template is missing.
FailureOr<SmallVector<StringAttr>> peerDevices(func::FuncOp program);

/// Turns each device program whose body is the same as an earlier one's
/// (op for op: names, operands, result types and attributes, all but the
/// transfers' `peer_device`) into a declaration naming that one, with its
/// transfers' devices in dtfm.peer_devices. Deterministic: the first of
/// each set of equal bodies, in module order, keeps its body.
void shareDevicePrograms(ModuleOp module);

} // namespace mlir::dtfm

#endif // DTFM_DIALECT_DTFM_IR_DEVICEPROGRAMS_H
