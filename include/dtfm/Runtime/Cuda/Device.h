//===- Device.h - CUDA devices, buffers and cuBLASLt matmuls -----*- C++ -*-===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//
//
// What the CUDA backend needs around its kernels: whether a device is there
// (and why not), device buffers, and matmuls through cuBLASLt -- fp32, and
// fp16/bf16 with fp32 accumulation -- with the algorithm chosen by
// cuBLASLt's heuristic once per shape and cached.
//
//===----------------------------------------------------------------------===//

#ifndef DTFM_RUNTIME_CUDA_DEVICE_H
#define DTFM_RUNTIME_CUDA_DEVICE_H

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <tuple>

typedef struct CUstream_st *cudaStream_t;

namespace dtfm::runtime::cuda {

/// CUDA devices present; 0 with `why` set when there are none (no driver,
/// no device, or the runtime's error).
int deviceCount(std::string *why = nullptr);

/// A device allocation (moves, never copies).
class DeviceBuffer {
public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t bytes);
  DeviceBuffer(DeviceBuffer &&other) noexcept;
  DeviceBuffer &operator=(DeviceBuffer &&other) noexcept;
  DeviceBuffer(const DeviceBuffer &) = delete;
  DeviceBuffer &operator=(const DeviceBuffer &) = delete;
  ~DeviceBuffer();

  void *data() const { return pointer; }
  float *floats() const { return static_cast<float *>(pointer); }
  size_t bytes() const { return size; }
  /// Whether the allocation succeeded (false for size 0 too).
  explicit operator bool() const { return pointer != nullptr; }

private:
  void *pointer = nullptr;
  size_t size = 0;
};

enum class ElementType { F32, F16, BF16 };

/// Row-major batched matmuls: C[b] = op(A[b]) op(B[b]) (+ C[b] when
/// accumulating), op = transpose or not, with element strides between the
/// batch's matrices (0: the same matrix for every batch).
struct MatmulShape {
  bool transA = false, transB = false;
  int64_t m = 0, n = 0, k = 0;
  int64_t batch = 1;
  int64_t strideA = 0, strideB = 0, strideC = 0;
  ElementType type = ElementType::F32;
  /// C in fp32 whatever `type` is: half operands, fp32 results (mixed
  /// precision).
  bool floatOutput = false;
  bool accumulate = false;
  /// Leading dimensions (row-major: elements between rows); 0 for dense.
  int64_t lda = 0, ldb = 0, ldc = 0;

  auto key() const {
    return std::make_tuple(transA, transB, m, n, k, batch, strideA, strideB,
                           strideC, static_cast<int>(type), floatOutput,
                           accumulate, lda, ldb, ldc);
  }
};

class Matmul {
public:
  Matmul();
  ~Matmul();
  /// False with `error` when cuBLASLt refuses (no algorithm for the shape).
  bool run(const MatmulShape &shape, const void *a, const void *b, void *c,
           cudaStream_t stream, std::string &error);
  /// Shapes whose algorithm is cached.
  size_t cachedShapes() const;

private:
  struct Impl;
  std::unique_ptr<Impl> impl;
};

} // namespace dtfm::runtime::cuda

#endif // DTFM_RUNTIME_CUDA_DEVICE_H
