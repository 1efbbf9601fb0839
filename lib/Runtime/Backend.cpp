//===- Backend.cpp - Which device runs a worker's program -----------------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//

#include "dtfm/Runtime/Backend.h"
#include "dtfm/Format/PlanFile.h"
#include "dtfm/Runtime/Cpu/Executor.h"

#include "plan.pb.h"

#if DTFM_HAVE_CUDA
#include "dtfm/Runtime/Cuda/Device.h"
#include "dtfm/Runtime/Cuda/Executor.h"
#endif

using namespace dtfm::runtime;

bool dtfm::runtime::parseGpuAttention(const std::string &text,
                                      GpuAttention &choice) {
  if (text == "auto")
    choice = GpuAttention::Auto;
  else if (text == "fused")
    choice = GpuAttention::Fused;
  else if (text == "unfused")
    choice = GpuAttention::Unfused;
  else
    return false;
  return true;
}

bool dtfm::runtime::parseBackendRequest(const std::string &text,
                                        BackendRequest &request) {
  if (text == "cpu")
    request = BackendRequest::Cpu;
  else if (text == "cuda")
    request = BackendRequest::Cuda;
  else if (text == "auto")
    request = BackendRequest::Auto;
  else
    return false;
  return true;
}

const char *dtfm::runtime::backendName(Backend backend) {
  return backend == Backend::Cuda ? "cuda" : "cpu";
}

bool dtfm::runtime::cudaBuilt() { return DTFM_HAVE_CUDA != 0; }

bool dtfm::runtime::resolveBackend(BackendRequest request,
                                   const proto::Plan &plan, Backend &backend,
                                   std::string &notice, std::string &error) {
  backend = Backend::Cpu;
  notice.clear();
  if (request == BackendRequest::Cpu)
    return true;
  // Why CUDA cannot run this plan here, if it cannot.
  std::string why;
#if DTFM_HAVE_CUDA
  // The plan first: what it needs does not depend on the machine.
  std::string reason;
  for (const proto::DeviceProgram *program : format::distinctPrograms(plan)) {
    StageProgram decoded;
    if (!decodeProgram(plan, *program, decoded, reason)) {
      error = "device program " + program->device() + ": " + reason;
      return false;
    }
    if (!cuda::supportsProgram(decoded, reason)) {
      why = "device program " + program->device() + ": " + reason;
      break;
    }
  }
  if (why.empty() && cuda::deviceCount(&reason) == 0)
    why = "no CUDA device (" + reason + ")";
#else
  (void)plan;
  why = "this dtfm-run was built without CUDA (-DDTFM_ENABLE_CUDA=OFF or no "
        "nvcc)";
#endif
  if (why.empty()) {
    backend = Backend::Cuda;
    return true;
  }
  if (request == BackendRequest::Cuda) {
    error = "--backend=cuda: " + why;
    return false;
  }
  notice = why + "; running on the CPU";
  return true;
}

std::unique_ptr<StageExecutor>
dtfm::runtime::makeExecutor(Backend backend,
                            const StageProgram &program, int rank,
                            const GpuOptions &gpu, std::string &error) {
  if (backend == Backend::Cpu)
    return std::make_unique<cpu::CpuExecutor>(program);
#if DTFM_HAVE_CUDA
  std::string why;
  int devices = cuda::deviceCount(&why);
  if (devices == 0) {
    error = "no CUDA device (" + why + ")";
    return nullptr;
  }
  return cuda::makeCudaExecutor(program, rank % devices, gpu, error);
#else
  (void)rank;
  (void)gpu;
  error = "this dtfm-run was built without CUDA";
  return nullptr;
#endif
}
