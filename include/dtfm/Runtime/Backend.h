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

/// The executor of `program` on `backend`; `rank` picks the GPU (ranks
/// share this host's devices round robin: a launcher's local rank, or the
/// world rank when every worker runs on this host). `planPrecisionMatmuls`: on the
/// GPU, matmuls the plan types f16/bf16 multiply in that type (see
/// cuda::makeCudaExecutor); the CPU computes in fp32 either way. Null with
/// `error` when the device cannot be set up.
std::unique_ptr<StageExecutor> makeExecutor(Backend backend,
                                            const StageProgram &program,
                                            int rank, bool planPrecisionMatmuls,
                                            std::string &error);

} // namespace dtfm::runtime

#endif // DTFM_RUNTIME_BACKEND_H
