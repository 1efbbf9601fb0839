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

#include "mlir/IR/Attributes.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"

namespace mlir::dtfm {

/// Parses `[a, b, ...]`, possibly empty, with each element read by
/// FieldParser<T> (attribute parameters in DtfmAttrs.td).
template <typename T>
FailureOr<SmallVector<T>> parseBracketList(AsmParser &parser) {
  SmallVector<T> elements;
  if (parser.parseCommaSeparatedList(
          AsmParser::Delimiter::Square, [&]() -> ParseResult {
            FailureOr<T> element = FieldParser<T>::parse(parser);
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
    else
      printer << element;
  });
  printer << ']';
}

} // namespace mlir::dtfm

#define GET_ATTRDEF_CLASSES
#include "dtfm/Dialect/Dtfm/IR/DtfmAttrs.h.inc"

#endif // DTFM_DIALECT_DTFM_IR_DTFMATTRS_H
