//===- Hash.h - FNV-1a hashing of bytes ------------------------*- C++ -*-===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//
//
// 64-bit FNV-1a: stable across runs, machines and compilers (unlike
// std::hash), so seeds drawn from names and fingerprints written to files
// mean the same thing everywhere. Header-only and dependency-free: the
// planner and the runtime both use it.
//
//===----------------------------------------------------------------------===//

#ifndef DTFM_SUPPORT_HASH_H
#define DTFM_SUPPORT_HASH_H

#include <cstdint>
#include <string_view>

namespace dtfm {

inline constexpr uint64_t kFnv1aOffset = 1469598103934665603ull;
inline constexpr uint64_t kFnv1aPrime = 1099511628211ull;

/// Folds `bytes` into `hash` (kFnv1aOffset to start a new hash).
constexpr uint64_t fnv1a(std::string_view bytes,
                         uint64_t hash = kFnv1aOffset) {
  for (unsigned char c : bytes) {
    hash ^= c;
    hash *= kFnv1aPrime;
  }
  return hash;
}

} // namespace dtfm

#endif // DTFM_SUPPORT_HASH_H
