//===- Json.h - Numbers and strings in JSON lines --------------*- C++ -*-===//
//
// Part of dtfm. Plain C++ (no MLIR).
//
//===----------------------------------------------------------------------===//

#ifndef DTFM_SUPPORT_JSON_H
#define DTFM_SUPPORT_JSON_H

#include <cmath>
#include <cstdio>
#include <string>

namespace dtfm {

/// A number for a JSON line: `null` where it is not finite (an infeasible
/// plan's infinite time, a diverged loss), which JSON cannot spell
/// otherwise. `precision` digits after the point, or significant digits
/// when `general` ("%g").
inline std::string jsonNumber(double value, int precision = 6,
                              bool general = false) {
  if (!std::isfinite(value))
    return "null";
  char text[64];
  std::snprintf(text, sizeof text, general ? "%.*g" : "%.*f", precision,
                value);
  return text;
}

/// `text` as the inside of a JSON string: quotes, backslashes and control
/// characters escaped (a planner's error may hold any of them).
inline std::string jsonEscape(const std::string &text) {
  std::string out;
  for (unsigned char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20) {
      char code[8];
      std::snprintf(code, sizeof code, "\\u%04x", c);
      out += code;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

} // namespace dtfm

#endif // DTFM_SUPPORT_JSON_H
