//===- ExampleOpsCuda.h - The example plugin's GPU kernels ------*- C++ -*-===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//
//
// GPU kernels of swiglu and rmsnorm (ExampleOpsCuda.cu), registered beside
// the CPU ones when the plugin is built with CUDA (DTFM_EXAMPLE_CUDA): the
// same math, enqueued on the worker's compute stream.
//
//===----------------------------------------------------------------------===//

#ifndef DTFM_EXAMPLE_OPS_CUDA_H
#define DTFM_EXAMPLE_OPS_CUDA_H

#include "dtfm/Support/CustomOps.h"

namespace example {

bool swigluCudaForward(const dtfm::CustomOpCall &call,
                       const std::vector<const dtfm::DeviceTensor *> &in,
                       const std::vector<dtfm::DeviceTensor> &out, void *stream,
                       std::string &error);
bool swigluCudaBackward(const dtfm::CustomOpCall &call,
                        const std::vector<const dtfm::DeviceTensor *> &in,
                        const dtfm::DeviceTensor &dOut,
                        const std::vector<bool> &wanted,
                        const std::vector<dtfm::DeviceTensor> &grads,
                        void *stream, std::string &error);
bool rmsnormCudaForward(const dtfm::CustomOpCall &call,
                        const std::vector<const dtfm::DeviceTensor *> &in,
                        const std::vector<dtfm::DeviceTensor> &out,
                        void *stream, std::string &error);
bool rmsnormCudaBackward(const dtfm::CustomOpCall &call,
                         const std::vector<const dtfm::DeviceTensor *> &in,
                         const dtfm::DeviceTensor &dOut,
                         const std::vector<bool> &wanted,
                         const std::vector<dtfm::DeviceTensor> &grads,
                         void *stream, std::string &error);

} // namespace example

#endif // DTFM_EXAMPLE_OPS_CUDA_H
