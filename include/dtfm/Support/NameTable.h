//===- NameTable.h - One spelling per enum value ----------------*- C++ -*-===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//
//
// The spellings of an enum's values (pass options, attributes, plan files)
// in one table, read both ways: a value's name, and the value a name
// stands for.
//
//===----------------------------------------------------------------------===//

#ifndef DTFM_SUPPORT_NAMETABLE_H
#define DTFM_SUPPORT_NAMETABLE_H

#include <cstddef>
#include <optional>
#include <string_view>
#include <utility>

namespace dtfm {

template <typename Enum> using NameEntry = std::pair<Enum, const char *>;

/// The spelling of `value` in `table` ("?" when it has none).
template <typename Enum, size_t N>
constexpr const char *nameOf(const NameEntry<Enum> (&table)[N], Enum value) {
  for (const NameEntry<Enum> &entry : table)
    if (entry.first == value)
      return entry.second;
  return "?";
}

/// The value `name` spells in `table`, if any.
template <typename Enum, size_t N>
constexpr std::optional<Enum> valueNamed(const NameEntry<Enum> (&table)[N],
                                         std::string_view name) {
  for (const NameEntry<Enum> &entry : table)
    if (name == entry.second)
      return entry.first;
  return std::nullopt;
}

} // namespace dtfm

#endif // DTFM_SUPPORT_NAMETABLE_H
