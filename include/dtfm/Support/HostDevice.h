//===- HostDevice.h - Code compiled for the host and the GPU ----*- C++ -*-===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//
//
// One home for the markers of plain C++ that the CUDA kernels compile for
// the device too (ElementMath.h, Int8Math.h, TopKSelect.h,
// FlashAttention.h): without nvcc they are empty.
//
//===----------------------------------------------------------------------===//

#ifndef DTFM_SUPPORT_HOSTDEVICE_H
#define DTFM_SUPPORT_HOSTDEVICE_H

#ifdef __CUDACC__
#define DTFM_HOST_DEVICE __host__ __device__
#define DTFM_UNROLL _Pragma("unroll")
#else
#define DTFM_HOST_DEVICE
#define DTFM_UNROLL
#endif

#endif // DTFM_SUPPORT_HOSTDEVICE_H
