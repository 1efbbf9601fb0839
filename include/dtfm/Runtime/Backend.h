//===- Backend.h - Which device runs a worker's program ----------*- C++
//-*-===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//
//
// dtfm-run --backend=cpu|cuda|auto. `auto` takes CUDA when this build has
// it, a device is present and every op of the plan has a CUDA kernel, and
// otherwise the CPU, saying why in one line. `cuda` refuses (one line) what
// `auto` would fall back from. The choice is made once, by the process that
// starts the workers, and passed on to them resolved.
//
//===----------------------------------------------------------------------===//

#ifndef DTFM_RUNTIME_BACKEND_H
#define DTFM_RUNTIME_BACKEND_H

#include "dtfm/Runtime/Executor.h"

#include <memory>
#include <string>

namespace dtfm::proto {
class Plan;
} // namespace dtfm::proto

namespace dtfm::runtime {

enum class Backend { Cpu, Cuda };
enum class BackendRequest { Cpu, Cuda, Auto };

/// "cpu", "cuda" or "auto"; false for anything else.
bool parseBackendRequest(const std::string &text, BackendRequest &request);
const char *backendName(Backend backend);

/// Whether this build has the CUDA backend.
bool cudaBuilt();

/// Resolves `request` for `plan` on this machine. On a fallback (auto
/// only) `notice` says why in one line; false with a one-line `error` when
/// `cuda` was asked for and cannot be had.
bool resolveBackend(BackendRequest request, const proto::Plan &plan,
                    Backend &backend, std::string &notice, std::string &error);

/// dtfm-run --gpu-attention: `auto` runs dtfm.causal_attention through the
/// fused kernels where its heads have them (flash::supportsHeadDim: 1 to
/// 128 dimensions) and through the unfused ones (the reference: products
/// on cuBLASLt, the probabilities in memory) otherwise; `fused` refuses a
/// plan whose heads have none, `unfused` always takes the reference.
enum class GpuAttention { Auto, Fused, Unfused };
/// "auto", "fused" or "unfused"; false for anything else.
bool parseGpuAttention(const std::string &text, GpuAttention &choice);

/// How the GPU runs a program (the CPU computes in fp32 either way).
struct GpuOptions {
  /// Matmuls the plan types f16/bf16 multiply in that type
  /// (--matmul-precision plan) or in fp32 (--matmul-precision fp32); see
  /// cuda::makeCudaExecutor.
  bool planPrecisionMatmuls = true;
  GpuAttention attention = GpuAttention::Auto;
};

/// The executor of `program` on `backend`; `rank` picks the GPU (ranks
/// share this host's devices round robin: a launcher's local rank, or the
/// world rank when every worker runs on this host). Null with `error` when
/// the device cannot be set up or `gpu` cannot run the program.
std::unique_ptr<StageExecutor> makeExecutor(Backend backend,
                                            const StageProgram &program,
                                            int rank, const GpuOptions &gpu,
                                            std::string &error);

} // namespace dtfm::runtime

#endif // DTFM_RUNTIME_BACKEND_H
