//===- Device.cpp - CUDA devices, buffers and cuBLASLt matmuls ------------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//

#include "dtfm/Runtime/Cuda/Device.h"

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <utility>

using namespace dtfm::runtime::cuda;

int dtfm::runtime::cuda::deviceCount(std::string *why) {
  int count = 0;
  cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) {
    if (why)
      *why = cudaGetErrorString(status);
    cudaGetLastError(); // clear it
    return 0;
  }
  if (count == 0 && why)
    *why = "no CUDA device";
  return count;
}

DeviceBuffer::DeviceBuffer(size_t bytes) : size(bytes) {
  if (bytes && cudaMalloc(&pointer, bytes) != cudaSuccess) {
    pointer = nullptr;
    size = 0;
  }
}

DeviceBuffer::DeviceBuffer(DeviceBuffer &&other) noexcept
    : pointer(std::exchange(other.pointer, nullptr)),
      size(std::exchange(other.size, 0)) {}

DeviceBuffer &DeviceBuffer::operator=(DeviceBuffer &&other) noexcept {
  if (this != &other) {
    if (pointer)
      cudaFree(pointer);
    pointer = std::exchange(other.pointer, nullptr);
    size = std::exchange(other.size, 0);
  }
  return *this;
}

DeviceBuffer::~DeviceBuffer() {
  if (pointer)
    cudaFree(pointer);
}

namespace {

cudaDataType_t dataType(ElementType type) {
  switch (type) {
  case ElementType::F16:
    return CUDA_R_16F;
  case ElementType::BF16:
    return CUDA_R_16BF;
  case ElementType::F32:
    break;
  }
  return CUDA_R_32F;
}

} // namespace

struct Matmul::Impl {
  cublasLtHandle_t handle = nullptr;
  DeviceBuffer workspace{size_t(32) << 20};
  struct Cached {
    cublasLtMatmulDesc_t op = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
    cublasLtMatmulAlgo_t algo;
  };
  std::map<decltype(MatmulShape().key()), Cached> cache;

  ~Impl() {
    for (auto &[key, c] : cache) {
      cublasLtMatmulDescDestroy(c.op);
      cublasLtMatrixLayoutDestroy(c.a);
      cublasLtMatrixLayoutDestroy(c.b);
      cublasLtMatrixLayoutDestroy(c.c);
    }
    if (handle)
      cublasLtDestroy(handle);
  }

  /// Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: the
  /// operands swap and every matrix is described by its transpose.
  bool prepare(const MatmulShape &s, Cached &out, std::string &error) {
    cudaDataType_t type = dataType(s.type);
    cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
    if (cublasLtMatmulDescCreate(&out.op, compute, CUDA_R_32F) !=
        CUBLAS_STATUS_SUCCESS) {
      error = "cublasLtMatmulDescCreate failed";
      return false;
    }
    cublasOperation_t opFirst = s.transB ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasOperation_t opSecond = s.transA ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasLtMatmulDescSetAttribute(out.op, CUBLASLT_MATMUL_DESC_TRANSA,
                                   &opFirst, sizeof opFirst);
    cublasLtMatmulDescSetAttribute(out.op, CUBLASLT_MATMUL_DESC_TRANSB,
                                   &opSecond, sizeof opSecond);
    // Column-major views: B^T is (transB ? k x n : n x k)... as stored.
    int64_t ldb = s.ldb ? s.ldb : (s.transB ? s.k : s.n);
    int64_t lda = s.lda ? s.lda : (s.transA ? s.m : s.k);
    int64_t ldc = s.ldc ? s.ldc : s.n;
    uint64_t firstRows = s.transB ? s.k : s.n, firstCols = s.transB ? s.n : s.k;
    uint64_t secondRows = s.transA ? s.m : s.k,
             secondCols = s.transA ? s.k : s.m;
    if (cublasLtMatrixLayoutCreate(&out.b, type, firstRows, firstCols, ldb) !=
            CUBLAS_STATUS_SUCCESS ||
        cublasLtMatrixLayoutCreate(&out.a, type, secondRows, secondCols, lda) !=
            CUBLAS_STATUS_SUCCESS ||
        cublasLtMatrixLayoutCreate(&out.c, s.floatOutput ? CUDA_R_32F : type,
                                   s.n, s.m, ldc) != CUBLAS_STATUS_SUCCESS) {
      error = "cublasLtMatrixLayoutCreate failed";
      return false;
    }
    if (s.batch > 1) {
      int32_t count = static_cast<int32_t>(s.batch);
      for (auto [layout, stride] :
           {std::pair{out.b, s.strideB}, std::pair{out.a, s.strideA},
            std::pair{out.c, s.strideC}}) {
        int64_t st = stride;
        cublasLtMatrixLayoutSetAttribute(
            layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof count);
        cublasLtMatrixLayoutSetAttribute(
            layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &st,
            sizeof st);
      }
    }
    cublasLtMatmulPreference_t preference;
    cublasLtMatmulPreferenceCreate(&preference);
    size_t limit = workspace.bytes();
    cublasLtMatmulPreferenceSetAttribute(
        preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &limit,
        sizeof limit);
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    cublasStatus_t status =
        cublasLtMatmulAlgoGetHeuristic(handle, out.op, out.b, out.a, out.c,
                                       out.c, preference, 1, &result, &found);
    cublasLtMatmulPreferenceDestroy(preference);
    if (status != CUBLAS_STATUS_SUCCESS || found == 0) {
      error = "cuBLASLt has no algorithm for a " + std::to_string(s.m) + "x" +
              std::to_string(s.n) + "x" + std::to_string(s.k) + " matmul";
      return false;
    }
    out.algo = result.algo;
    return true;
  }
};

Matmul::Matmul() : impl(std::make_unique<Impl>()) {
  cublasLtCreate(&impl->handle);
}

Matmul::~Matmul() = default;

size_t Matmul::cachedShapes() const { return impl->cache.size(); }

bool Matmul::run(const MatmulShape &shape, const void *a, const void *b,
                 void *c, cudaStream_t stream, std::string &error) {
  if (!impl->handle) {
    error = "cuBLASLt is not initialised (no CUDA device?)";
    return false;
  }
  auto it = impl->cache.find(shape.key());
  if (it == impl->cache.end()) {
    Impl::Cached fresh;
    if (!impl->prepare(shape, fresh, error))
      return false;
    it = impl->cache.emplace(shape.key(), fresh).first;
  }
  float alpha = 1.0f, beta = shape.accumulate ? 1.0f : 0.0f;
  const Impl::Cached &m = it->second;
  cublasStatus_t status = cublasLtMatmul(
      impl->handle, m.op, &alpha, b, m.b, a, m.a, &beta, c, m.c, c, m.c,
      &m.algo, impl->workspace.data(), impl->workspace.bytes(), stream);
  if (status != CUBLAS_STATUS_SUCCESS) {
    error = "cublasLtMatmul failed (status " +
            std::to_string(static_cast<int>(status)) + ")";
    return false;
  }
  return true;
}
