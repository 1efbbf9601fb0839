//===- DtfmAttrs.h - dtfm attributes ----------------------------*- C++ -*-===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//
//
// The typed planning state the passes exchange as module attributes
// (DtfmAttrs.td).
//
//===----------------------------------------------------------------------===//

#ifndef DTFM_DIALECT_DTFM_IR_DTFMATTRS_H
#define DTFM_DIALECT_DTFM_IR_DTFMATTRS_H

#include "dtfm/Planner/Cluster.h"

#include "mlir/IR/Attributes.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/Hashing.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/bit.h"

namespace mlir::dtfm {

/// A double attribute parameter (converts to and from double):
/// llvm::hash_value has no overload for double, so it is hashed and compared
/// by its bits.
struct StoredDouble {
  double value = 0;
  StoredDouble(double value) : value(value) {}
  operator double() const { return value; }
  bool operator==(const StoredDouble &other) const {
    return llvm::bit_cast<uint64_t>(value) ==
           llvm::bit_cast<uint64_t>(other.value);
  }
};

inline llvm::hash_code hash_value(StoredDouble stored) {
  return llvm::hash_value(llvm::bit_cast<uint64_t>(stored.value));
}

/// Parses a double written as a float literal (`1.5`, `1.0e+14`).
FailureOr<double> parseDouble(AsmParser &parser);

/// Prints `value` in the shortest decimal form that reads back exactly,
/// always as a float literal (with a `.`).
void printDouble(AsmPrinter &printer, double value);

/// parseDouble for a parameter that may be left out.
FailureOr<std::optional<StoredDouble>> parseOptionalDouble(AsmParser &parser);

/// Parses `true` or `false`.
FailureOr<bool> parseFlag(AsmParser &parser);

/// Parses `[a, b, ...]`, possibly empty, with each element read by
/// FieldParser<T> (attribute parameters in DtfmAttrs.td).
template <typename T>
FailureOr<SmallVector<T>> parseBracketList(AsmParser &parser) {
  SmallVector<T> elements;
  if (parser.parseCommaSeparatedList(
          AsmParser::Delimiter::Square, [&]() -> ParseResult {
            FailureOr<T> element = failure();
            if constexpr (std::is_same_v<T, StoredDouble>) {
              if (FailureOr<double> value = parseDouble(parser);
                  succeeded(value))
                element = StoredDouble(*value);
            } else {
              element = FieldParser<T>::parse(parser);
            }
            if (failed(element))
              return failure();
            elements.push_back(std::move(*element));
            return success();
          }))
    return failure();
  return elements;
}

/// Prints `[a, b, ...]`; attributes of the dtfm dialect without their
/// `#dtfm.mnemonic` prefix.
template <typename T>
void printBracketList(AsmPrinter &printer, ArrayRef<T> elements) {
  printer << '[';
  llvm::interleaveComma(elements, printer, [&](const T &element) {
    if constexpr (std::is_base_of_v<Attribute, T>)
      printer.printStrippedAttrOrType(element);
    else if constexpr (std::is_same_v<T, StoredDouble>)
      printDouble(printer, element);
    else
      printer << element;
  });
  printer << ']';
}

} // namespace mlir::dtfm

#define GET_ATTRDEF_CLASSES
#include "dtfm/Dialect/Dtfm/IR/DtfmAttrs.h.inc"

#endif // DTFM_DIALECT_DTFM_IR_DTFMATTRS_H
