//===- CustomKernels.cpp - A dtfm.custom op's registered kernels ----------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//

#include "dtfm/Runtime/CustomKernels.h"

using namespace dtfm;
using namespace dtfm::runtime;

const CustomOpDef *dtfm::runtime::customKernels(const std::string &kind,
                                                CustomKernel kernel,
                                                std::string &error) {
  const CustomOpDef *def = CustomOpRegistry::global().lookup(kind);
  if (!def) {
    error = "custom op kind '" + kind +
            "' is not registered (load its plugin with --load-dtfm-plugin)";
    return nullptr;
  }
  bool present = false;
  const char *what = "";
  switch (kernel) {
  case CustomKernel::CpuForward:
    present = static_cast<bool>(def->forward), what = "CPU forward";
    break;
  case CustomKernel::CpuBackward:
    present = static_cast<bool>(def->backward), what = "CPU backward";
    break;
  case CustomKernel::CudaForward:
    present = static_cast<bool>(def->cudaForward), what = "CUDA forward";
    break;
  case CustomKernel::CudaBackward:
    present = static_cast<bool>(def->cudaBackward), what = "CUDA backward";
    break;
  }
  if (!present) {
    error = "the plugin of custom op kind '" + kind + "' registers no " +
            what + " kernel";
    return nullptr;
  }
  return def;
}

CustomOpCall dtfm::runtime::customCall(
    const ProgramOp &op, const std::vector<std::vector<int64_t>> &shapes) {
  CustomOpCall call = op.attrs.custom;
  call.operands.clear();
  for (const std::vector<int64_t> &shape : shapes)
    call.operands.push_back({shape, DType::F32});
  return call;
}
