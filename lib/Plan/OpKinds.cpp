//===- OpKinds.cpp - The op-kind table ------------------------------------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//

#include "dtfm/Plan/OpKinds.h"

#include <unordered_map>

using namespace dtfm::plan;
namespace math = dtfm::math;

namespace {

using KindTable = std::array<OpKindInfo, kNumOpKinds>;

/// Each list of OpKinds.def applied to its kinds' entries.
KindTable buildTable() {
  KindTable table;
  auto at = [&](OpKind kind) -> OpKindInfo & {
    return table[static_cast<size_t>(kind)];
  };
#define DTFM_OP(Kind, Name, MinOperands, MaxOperands, Results)                 \
  at(OpKind::Kind).name = Name;                                                \
  at(OpKind::Kind).minOperands = MinOperands;                                  \
  at(OpKind::Kind).maxOperands = MaxOperands;                                  \
  at(OpKind::Kind).results = Results;
#define DTFM_STRUCTURAL(Kind) at(OpKind::Kind).structural = true;
#define DTFM_UNARY_MATH(Kind, Op)                                              \
  at(OpKind::Kind).unaryMath = math::UnaryOp::Op;
#define DTFM_BINARY_MATH(Kind, Op)                                             \
  at(OpKind::Kind).binaryMath = math::BinaryOp::Op;
#define DTFM_TP_PASS_THROUGH(Kind)                                             \
  at(OpKind::Kind).tensorParallelPassThrough = true;
#define DTFM_SCRATCH(Kind, Buffer) at(OpKind::Kind).scratch = Scratch::Buffer;
#define DTFM_NOT_RECOMPUTABLE(Kind, When)                                      \
  at(OpKind::Kind).impurity = Impurity::When;
#include "dtfm/Plan/OpKinds.def"
  return table;
}

} // namespace

const OpKindInfo &dtfm::plan::opKindInfo(OpKind kind) {
  static const KindTable table = buildTable();
  return table[static_cast<size_t>(kind)];
}

std::optional<OpKind> dtfm::plan::opKindOf(std::string_view name) {
  static const std::unordered_map<std::string_view, OpKind> kinds = [] {
    std::unordered_map<std::string_view, OpKind> map;
    for (size_t i = 0; i < kNumOpKinds; ++i)
      map[opName(static_cast<OpKind>(i))] = static_cast<OpKind>(i);
    return map;
  }();
  auto it = kinds.find(name);
  if (it == kinds.end())
    return std::nullopt;
  return it->second;
}
