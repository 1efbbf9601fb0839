//===- Executor.h - Run a device program on a GPU ----------------*- C++
//-*-===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//
//
// The CUDA counterpart of the CPU executor (dtfm/Runtime/Executor.h), with
// the same numerics (the kernels are checked against the CPU ones) and the
// same state and files, so that a plan trains alike on either backend and
// checkpoints move between them.
//
// Values live on the device for the whole micro-batch (the forward's saved
// operands stay there for its backward); gradients are summed and the
// optimizer state kept on the device. Three CUDA streams carry DT-FM's three
// slots: received values are copied in on the receive stream, the compute
// stream waits for them through events, and values to send are copied out
// on the send stream once the compute stream's event says they are ready.
// Between workers on distinct GPUs the values go through NCCL send/recv on
// those streams (connectPeers); otherwise through the worker's transport
// (lib/Runtime/Transport.h), as host memory.
//
// Ops without a CUDA kernel -- custom ops whose plugin registered CPU
// kernels only, softmax over another axis than the last -- are refused
// before a worker starts (supportsProgram), so that --backend=auto can fall
// back to the CPU.
//
//===----------------------------------------------------------------------===//

#ifndef DTFM_RUNTIME_CUDA_EXECUTOR_H
#define DTFM_RUNTIME_CUDA_EXECUTOR_H

#include "dtfm/Runtime/Backend.h"
#include "dtfm/Runtime/Executor.h"

#include <memory>
#include <string>

namespace dtfm::runtime::cuda {

/// Whether every op of `program` has a CUDA kernel (a custom op: its plugin
/// registered one) and its operands a shape the kernel takes; otherwise
/// `reason` names the first that does not, as "op #N dtfm.custom has no
/// CUDA kernel (...)".
bool supportsProgram(const StageProgram &program, std::string &reason);

/// The executor of `program` on CUDA device `device`; null with `error`
/// when the device, its streams or cuBLASLt cannot be set up, or the
/// attention `gpu` asks for has no kernel for the program's heads. With
/// `gpu.planPrecisionMatmuls`, linear and matmul ops whose result the plan
/// types f16 or bf16 multiply in that type on tensor cores, accumulating in
/// fp32 (their results, the weights and every other op stay fp32).
std::unique_ptr<StageExecutor> makeCudaExecutor(const StageProgram &program,
                                                int device,
                                                const GpuOptions &gpu,
                                                std::string &error);

} // namespace dtfm::runtime::cuda

#endif // DTFM_RUNTIME_CUDA_EXECUTOR_H
