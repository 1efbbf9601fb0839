//===- KernelSupport.h - Helpers shared by the CPU kernels ------*- C++ -*-===//
//
// Part of dtfm. Private to lib/Runtime/Cpu.
//
//===----------------------------------------------------------------------===//

#ifndef DTFM_LIB_RUNTIME_CPU_KERNELSUPPORT_H
#define DTFM_LIB_RUNTIME_CPU_KERNELSUPPORT_H

#include "dtfm/Runtime/Cpu/Kernels.h"

#include <cstdint>
#include <vector>

namespace dtfm::runtime::cpu {

/// Makes `t` a zero tensor of `shape` unless it already has that shape
/// (gradients accumulate into caller-provided tensors).
inline void ensure(Tensor *t, const std::vector<int64_t> &shape) {
  if (t && t->shape != shape)
    *t = Tensor(shape);
}

/// For every element of a row-major `shape`, in order, `offsetOf(coord)` of
/// its coordinate: the flat index maps of broadcasting, reductions, slices
/// and transposes.
template <typename OffsetOf>
std::vector<int64_t> indexMap(const std::vector<int64_t> &shape,
                              OffsetOf offsetOf) {
  int64_t total = 1;
  for (int64_t d : shape)
    total *= d;
  std::vector<int64_t> index(total), coord(shape.size(), 0);
  for (int64_t flat = 0; flat < total; ++flat) {
    index[flat] = offsetOf(coord);
    for (size_t d = shape.size(); d-- > 0;) {
      if (++coord[d] < shape[d])
        break;
      coord[d] = 0;
    }
  }
  return index;
}

} // namespace dtfm::runtime::cpu

#endif // DTFM_LIB_RUNTIME_CPU_KERNELSUPPORT_H
