//===- DevicePrograms.cpp - A planned module's device programs ------------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//

#include "dtfm/Dialect/Dtfm/IR/DevicePrograms.h"
#include "dtfm/Dialect/Dtfm/IR/DtfmDialect.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/Hashing.h"

using namespace mlir;
using namespace mlir::dtfm;

/// The op attribute that names a transfer's other end: a device's own.
static constexpr llvm::StringLiteral kPeerDevice = "peer_device";

func::FuncOp mlir::dtfm::programBody(func::FuncOp program) {
  auto name = program->getAttrOfType<FlatSymbolRefAttr>(kTemplateAttrName);
  if (!name)
    return program.isExternal() ? func::FuncOp() : program;
  auto body = SymbolTable::lookupNearestSymbolFrom<func::FuncOp>(program, name);
  if (!body || body.isExternal() || body->hasAttr(kTemplateAttrName))
    return func::FuncOp();
  return body;
}

FailureOr<SmallVector<StringAttr>> mlir::dtfm::peerDevices(func::FuncOp program) {
  func::FuncOp body = programBody(program);
  if (!body)
    return program.emitError() << "device program @" << program.getSymName()
                               << " names no program with a body to run ("
                               << kTemplateAttrName << ")";
  SmallVector<StringAttr> own;
  for (Operation &op : body.getBody().front())
    if (auto peer = op.getAttr(kPeerDevice)) {
      auto name = dyn_cast<StringAttr>(peer);
      if (!name)
        return op.emitOpError() << kPeerDevice << " must be a string";
      own.push_back(name);
    }
  auto listed = program->getAttrOfType<ArrayAttr>(kPeerDevicesAttrName);
  if (body == program || !listed)
    return own;
  if (listed.size() != own.size())
    return program.emitError()
           << "device program @" << program.getSymName() << " lists "
           << listed.size() << " peer devices for the " << own.size()
           << " transfers of @" << body.getSymName();
  SmallVector<StringAttr> peers;
  for (Attribute a : listed)
    peers.push_back(cast<StringAttr>(a)); // the dialect checks the form
  return peers;
}

/// The discardable attributes of `op` but the transfer's peer device.
static SmallVector<NamedAttribute> sharedAttrs(Operation &op) {
  SmallVector<NamedAttribute> attrs;
  for (NamedAttribute a : op.getDiscardableAttrs())
    if (a.getName() != kPeerDevice)
      attrs.push_back(a);
  return attrs;
}

/// A hash of a body that two bodies equal by sameBody share.
static llvm::hash_code bodyHash(func::FuncOp func) {
  llvm::hash_code hash = llvm::hash_value(func.getBody().front().getOperations().size());
  for (Operation &op : func.getBody().front()) {
    hash = llvm::hash_combine(hash, op.getName().getAsOpaquePointer(),
                              op.getNumOperands(), op.getNumResults(),
                              op.getNumRegions());
    for (Type type : op.getResultTypes())
      hash = llvm::hash_combine(hash, type.getAsOpaquePointer());
    for (NamedAttribute a : sharedAttrs(op))
      hash = llvm::hash_combine(hash, a.getName().getAsOpaquePointer(),
                                a.getValue().getAsOpaquePointer());
  }
  return hash;
}

/// Whether `a` and `b` run the same ops, all but the peer devices.
static bool sameBody(func::FuncOp a, func::FuncOp b) {
  Block &first = a.getBody().front(), &second = b.getBody().front();
  if (first.getOperations().size() != second.getOperations().size() ||
      first.getNumArguments() != 0 || second.getNumArguments() != 0)
    return false;
  DenseMap<Value, Value> counterpart;
  for (auto [x, y] : llvm::zip(first, second)) {
    if (x.getName() != y.getName() || x.getNumRegions() != 0 ||
        y.getNumRegions() != 0 || x.getNumOperands() != y.getNumOperands() ||
        !llvm::equal(x.getResultTypes(), y.getResultTypes()))
      return false;
    for (auto [u, v] : llvm::zip(x.getOperands(), y.getOperands()))
      if (counterpart.lookup(u) != v)
        return false;
    if (x.getPropertiesAsAttribute() != y.getPropertiesAsAttribute() ||
        sharedAttrs(x) != sharedAttrs(y))
      return false;
    for (auto [u, v] : llvm::zip(x.getResults(), y.getResults()))
      counterpart[u] = v;
  }
  return true;
}

void mlir::dtfm::shareDevicePrograms(ModuleOp module) {
  MLIRContext *context = module.getContext();
  DenseMap<size_t, SmallVector<func::FuncOp, 1>> bodies;
  for (func::FuncOp func : module.getOps<func::FuncOp>()) {
    if (!func->hasAttr(kDeviceAttrName) || func.isExternal() ||
        func->hasAttr(kTemplateAttrName))
      continue;
    SmallVector<func::FuncOp, 1> &same = bodies[static_cast<size_t>(bodyHash(func))];
    func::FuncOp twin;
    for (func::FuncOp earlier : same)
      if (sameBody(earlier, func)) {
        twin = earlier;
        break;
      }
    if (!twin) {
      same.push_back(func);
      continue;
    }
    SmallVector<Attribute> peers;
    for (Operation &op : func.getBody().front())
      if (Attribute peer = op.getAttr(kPeerDevice))
        peers.push_back(peer);
    func.getBody().getBlocks().clear();
    func.setPrivate();
    func->setAttr(kTemplateAttrName,
                  FlatSymbolRefAttr::get(twin.getSymNameAttr()));
    func->setAttr(kPeerDevicesAttrName, ArrayAttr::get(context, peers));
  }
}
