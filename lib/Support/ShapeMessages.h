//===- ShapeMessages.h - What the op rules' messages share ------*- C++ -*-===//
//
// Part of dtfm. Private to lib/Support: helpers of OpShapes.cpp (the tensor
// ops' rules) and TrainingShapes.cpp (the training ops').
//
//===----------------------------------------------------------------------===//

#ifndef DTFM_LIB_SUPPORT_SHAPEMESSAGES_H
#define DTFM_LIB_SUPPORT_SHAPEMESSAGES_H

#include "dtfm/Support/OpShapes.h"

#include <cstdio>
#include <string>
#include <vector>

namespace dtfm::shapes::detail {

/// A number as a message shows it: "0", "1.5", "1e-08", "nan".
inline std::string num(double value) {
  char text[32];
  std::snprintf(text, sizeof(text), "%g", value);
  return text;
}

/// "" when `result` is `shape` of `element`.
inline std::string resultIs(const TensorType &result,
                            std::vector<int64_t> shape,
                            const std::string &element) {
  TensorType expected{std::move(shape), element};
  if (result != expected)
    return "expected result type " + typeText(expected) + ", found " +
           typeText(result);
  return "";
}

} // namespace dtfm::shapes::detail

#endif // DTFM_LIB_SUPPORT_SHAPEMESSAGES_H
