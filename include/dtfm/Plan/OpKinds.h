//===- OpKinds.h - The op kinds of a plan and their traits ------*- C++ -*-===//
//
// Part of dtfm. Plain C++ (no MLIR, no backend).
//
//===----------------------------------------------------------------------===//
//
// The op kinds a stage program may hold and what dtfm knows about each of
// them by kind alone, from one table (OpKinds.def): its name, how many
// operands and results it takes, whether a backend runs it, its per-element
// math, how tensor parallelism treats it, the scratch its CPU kernel needs
// and whether it may run twice. The plan verifier, the memory model, both
// backends' kernel tables and --dtfm-tensor-parallel look traits up here
// rather than keeping lists of kinds of their own.
//
//===----------------------------------------------------------------------===//

#ifndef DTFM_PLAN_OPKINDS_H
#define DTFM_PLAN_OPKINDS_H

#include "dtfm/Support/ElementMath.h"

#include <array>
#include <cstdint>
#include <optional>
#include <string_view>

namespace dtfm::plan {

enum class OpKind : uint8_t {
#define DTFM_OP(Kind, Name, MinOperands, MaxOperands, Results) Kind,
#include "dtfm/Plan/OpKinds.def"
};

inline constexpr size_t kNumOpKinds = 0
#define DTFM_OP(Kind, Name, MinOperands, MaxOperands, Results) +1
#include "dtfm/Plan/OpKinds.def"
    ;

/// A table with one entry per op kind: each backend's kernels.
template <typename T> using OpTable = std::array<T, kNumOpKinds>;

/// The largest buffer a kind's CPU kernel allocates and frees while it runs
/// (what the memory model adds to the peak; MemoryModel.cpp sizes it).
enum class Scratch {
  None,
  AttentionProbabilities, // heads x S x S; the backward recomputes them
  LogitsSoftmax,          // the loss's softmax of its logits
  RecomputedOutput,       // the backward recomputes the forward's output
  BroadcastIndexTables,   // the forward's two int64 index tables
};

/// When running an op a second time would change state.
enum class Impurity {
  None,
  WhenTraining, // unless its `inference` attribute is set
  Always,
};

/// A count with no bound (OpKinds.def's -1).
inline constexpr int kNoBound = -1;

/// What the table (OpKinds.def) says about one kind.
struct OpKindInfo {
  const char *name = "";
  /// The operand and result counts the plan verifier checks (kNoBound:
  /// any number of operands; for results, the kind's own rule decides).
  int minOperands = 0, maxOperands = 0, results = 0;
  bool structural = false;
  std::optional<math::UnaryOp> unaryMath;
  std::optional<math::BinaryOp> binaryMath;
  bool tensorParallelPassThrough = false;
  Scratch scratch = Scratch::None;
  Impurity impurity = Impurity::None;
};

const OpKindInfo &opKindInfo(OpKind kind);

/// "dtfm.linear" for OpKind::Linear.
inline const char *opName(OpKind kind) { return opKindInfo(kind).name; }
/// The kind of a dialect op name; nullopt for a name no kind has.
std::optional<OpKind> opKindOf(std::string_view name);

/// Kinds the phase loop and the optimizer step run themselves (values from
/// outside the program, transfers, gradient syncs, updates): no backend
/// kernel table has an entry for them. dtfm.backward runs through the
/// backward entry of the kind it differentiates.
inline bool isStructural(OpKind kind) { return opKindInfo(kind).structural; }

/// The per-element function of an elementwise unary math op, or none; its
/// constants (pow's exponent, clip's bounds) are unaryParamsOf its
/// attributes (Program.h).
inline std::optional<math::UnaryOp> unaryMathOf(OpKind kind) {
  return opKindInfo(kind).unaryMath;
}
/// The per-element function of a broadcasting binary op, or none.
inline std::optional<math::BinaryOp> binaryMathOf(OpKind kind) {
  return opKindInfo(kind).binaryMath;
}

} // namespace dtfm::plan

#endif // DTFM_PLAN_OPKINDS_H
