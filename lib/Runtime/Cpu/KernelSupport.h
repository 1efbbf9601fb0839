//===- KernelSupport.h - Helpers shared by the CPU kernels ------*- C++ -*-===//
//
// Part of dtfm. Private to lib/Runtime/Cpu.
//
//===----------------------------------------------------------------------===//

#ifndef DTFM_LIB_RUNTIME_CPU_KERNELSUPPORT_H
#define DTFM_LIB_RUNTIME_CPU_KERNELSUPPORT_H

#include "dtfm/Runtime/Cpu/Kernels.h"

namespace dtfm::runtime::cpu {

/// Makes `t` a zero tensor of `shape` unless it already has that shape
/// (gradients accumulate into caller-provided tensors).
inline void ensure(Tensor *t, const std::vector<int64_t> &shape) {
  if (t && t->shape != shape)
    *t = Tensor(shape);
}

} // namespace dtfm::runtime::cpu

#endif // DTFM_LIB_RUNTIME_CPU_KERNELSUPPORT_H
