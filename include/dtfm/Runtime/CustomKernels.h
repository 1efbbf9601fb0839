//===- CustomKernels.h - A dtfm.custom op's registered kernels --*- C++ -*-===//
//
// Part of dtfm. Plain C++ (no MLIR).
//
//===----------------------------------------------------------------------===//
//
// What both backends need to run a dtfm.custom op through the kernels its
// plugin registered (dtfm/Support/CustomOps.h): the definition with the
// kernel wanted, or the one line saying what is missing, and the call the
// kernel receives.
//
//===----------------------------------------------------------------------===//

#ifndef DTFM_RUNTIME_CUSTOMKERNELS_H
#define DTFM_RUNTIME_CUSTOMKERNELS_H

#include "dtfm/Runtime/PlanNames.h"
#include "dtfm/Support/CustomOps.h"

#include <string>
#include <vector>

namespace dtfm::runtime {

/// Which of a custom kind's kernels a backend runs.
enum class CustomKernel { CpuForward, CpuBackward, CudaForward, CudaBackward };

/// The registered definition of custom kind `kind`, when it has `kernel`;
/// null with a one-line `error` naming what is missing (the kind, or the
/// kernel and the plugin flag).
const CustomOpDef *customKernels(const std::string &kind, CustomKernel kernel,
                                 std::string &error);

/// The call a kernel of dtfm.custom `op` receives: its params and its
/// operands' shapes (fp32: the runtime's tensors are).
CustomOpCall customCall(const ProgramOp &op,
                        const std::vector<std::vector<int64_t>> &operandShapes);

} // namespace dtfm::runtime

#endif // DTFM_RUNTIME_CUSTOMKERNELS_H
