//===- TopK.cu - AdaTopK compression: radix select and scatter ------------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//
//
// Top-k by magnitude without sorting. The magnitudes' IEEE bits order like
// the magnitudes, so a radix select finds the k-th largest in four passes
// over the data, 8 bits at a time: a histogram of the next digit among the
// keys that share the digits fixed so far, then one thread picks the digit
// where the count from the top reaches k. Then every key above the
// threshold is kept, plus the first (by index) of those equal to it until k
// (the CPU kernel's tie rule), compacted in index order by CUB's flagged
// select. O(n) work and 4 + 3 passes, against O(n log n) for a sort.
//
//===----------------------------------------------------------------------===//

#include "Common.cuh"
#include "dtfm/Runtime/Cuda/Kernels.h"

#include <cub/device/device_scan.cuh>
#include <cub/device/device_select.cuh>
#include <thrust/iterator/counting_iterator.h>
#include <cuda_runtime.h>

using namespace dtfm::runtime::cuda::detail;

namespace {

struct SelectState {
  unsigned prefix;    // digits fixed so far
  unsigned mask;      // which bits of the key they cover
  unsigned remaining; // how many are still to be found at or below prefix
  unsigned histogram[256];
  int selected; // CUB's count of selected elements
};

__device__ inline unsigned keyOf(float x) { return __float_as_uint(fabsf(x)); }

__global__ void histogramKernel(const float *x, int64_t n,
                                SelectState *state, int shift) {
  __shared__ unsigned local[256];
  for (int b = threadIdx.x; b < 256; b += blockDim.x)
    local[b] = 0;
  __syncthreads();
  unsigned prefix = state->prefix, mask = state->mask;
  DTFM_GRID_STRIDE(i, n) {
    // A gradient's magnitudes share few digits (their exponents): the
    // lanes of a warp with the same digit add once, through their lowest
    // lane, instead of queueing on one shared-memory counter.
    unsigned key = keyOf(x[i]);
    unsigned digit = (key & mask) == prefix ? (key >> shift) & 255u : 256u;
    unsigned peers = __match_any_sync(__activemask(), digit);
    if (digit < 256u && static_cast<int>(threadIdx.x % 32) == __ffs(peers) - 1)
      atomicAdd(&local[digit], static_cast<unsigned>(__popc(peers)));
  }
  __syncthreads();
  for (int b = threadIdx.x; b < 256; b += blockDim.x)
    if (local[b])
      atomicAdd(&state->histogram[b], local[b]);
}

__global__ void pickDigitKernel(SelectState *state, int shift) {
  unsigned above = 0;
  for (int digit = 255; digit >= 0; --digit) {
    unsigned count = state->histogram[digit];
    if (above + count >= state->remaining || digit == 0) {
      state->remaining -= above;
      state->prefix |= static_cast<unsigned>(digit) << shift;
      state->mask |= 255u << shift;
      break;
    }
    above += count;
  }
  for (int b = 0; b < 256; ++b)
    state->histogram[b] = 0;
}

__global__ void equalFlagsKernel(const float *x, int64_t n,
                                 const SelectState *state, int *equal) {
  unsigned threshold = state->prefix;
  DTFM_GRID_STRIDE(i, n) equal[i] = keyOf(x[i]) == threshold ? 1 : 0;
}

__global__ void keepFlagsKernel(const float *x, int64_t n,
                                const SelectState *state,
                                const int *equalBefore, char *keep) {
  unsigned threshold = state->prefix, ties = state->remaining;
  DTFM_GRID_STRIDE(i, n) {
    unsigned key = keyOf(x[i]);
    keep[i] = key > threshold ||
              (key == threshold && static_cast<unsigned>(equalBefore[i]) < ties);
  }
}

/// The kept values and their indices (as floats for AdaTopK's ops, exact
/// uint32 for the wire).
template <typename Index>
__global__ void gatherKernel(const float *x, const int *picked, int64_t k,
                             float *values, Index *indices) {
  DTFM_GRID_STRIDE(i, k) {
    int at = picked[i];
    values[i] = x[at];
    indices[i] = static_cast<Index>(at);
  }
}

__global__ void scatterKernel(const float *values, const float *indices,
                              int64_t k, float *out, int64_t n) {
  DTFM_GRID_STRIDE(i, k) {
    int64_t at = static_cast<int64_t>(indices[i]);
    if (at >= 0 && at < n)
      out[at] = values[i];
  }
}

/// Workspace: state, then int arrays (equal flags, their exclusive sum,
/// picked indices), the keep flags, then CUB's temporary storage.
struct Layout {
  size_t state, equal, equalBefore, picked, keep, cub, total;
};

size_t align(size_t bytes) { return (bytes + 255) / 256 * 256; }

Layout layoutFor(int64_t n) {
  size_t scanBytes = 0, selectBytes = 0;
  cub::DeviceScan::ExclusiveSum(nullptr, scanBytes, static_cast<int *>(nullptr),
                                static_cast<int *>(nullptr),
                                static_cast<int>(n));
  cub::DeviceSelect::Flagged(nullptr, selectBytes,
                             thrust::counting_iterator<int>(0),
                             static_cast<char *>(nullptr),
                             static_cast<int *>(nullptr),
                             static_cast<int *>(nullptr),
                             static_cast<int>(n));
  Layout l;
  size_t ints = align(sizeof(int) * static_cast<size_t>(n));
  l.state = 0;
  l.equal = align(sizeof(SelectState));
  l.equalBefore = l.equal + ints;
  l.picked = l.equalBefore + ints;
  l.keep = l.picked + ints;
  l.cub = l.keep + align(static_cast<size_t>(n));
  l.total = l.cub + align(std::max(scanBytes, selectBytes));
  return l;
}

} // namespace

namespace dtfm::runtime::cuda {

size_t topKWorkspaceBytes(int64_t n) { return layoutFor(n).total; }

/// The radix select and the compaction: picked[0, k) the indices kept, in
/// order (in the workspace; returned).
static const int *selectTopK(const float *x, int64_t n, int64_t k,
                             void *workspace, cudaStream_t stream) {
  Layout l = layoutFor(n);
  char *base = static_cast<char *>(workspace);
  auto *state = reinterpret_cast<SelectState *>(base + l.state);
  int *equal = reinterpret_cast<int *>(base + l.equal);
  int *equalBefore = reinterpret_cast<int *>(base + l.equalBefore);
  int *picked = reinterpret_cast<int *>(base + l.picked);
  char *keep = base + l.keep;
  void *scratch = base + l.cub;
  size_t scratchBytes = l.total - l.cub;

  SelectState initial{};
  initial.remaining = static_cast<unsigned>(k);
  cudaMemcpyAsync(state, &initial, sizeof initial, cudaMemcpyHostToDevice,
                  stream);
  for (int shift = 24; shift >= 0; shift -= 8) {
    histogramKernel<<<blocksFor(n), kThreads, 0, stream>>>(x, n, state,
                                                           shift);
    pickDigitKernel<<<1, 1, 0, stream>>>(state, shift);
  }
  equalFlagsKernel<<<blocksFor(n), kThreads, 0, stream>>>(x, n, state, equal);
  cub::DeviceScan::ExclusiveSum(scratch, scratchBytes, equal, equalBefore,
                                static_cast<int>(n), stream);
  keepFlagsKernel<<<blocksFor(n), kThreads, 0, stream>>>(x, n, state,
                                                         equalBefore, keep);
  cub::DeviceSelect::Flagged(scratch, scratchBytes,
                             thrust::counting_iterator<int>(0), keep, picked,
                             &state->selected, static_cast<int>(n), stream);
  return picked;
}

/// The selection, then the gather into indices of type Index.
template <typename Index>
static void selectAndGather(const float *x, int64_t n, int64_t k,
                            float *values, Index *indices, void *workspace,
                            cudaStream_t stream) {
  if (k <= 0 || n <= 0)
    return;
  if (k > n)
    k = n;
  const int *picked = selectTopK(x, n, k, workspace, stream);
  gatherKernel<<<blocksFor(k), kThreads, 0, stream>>>(x, picked, k, values,
                                                      indices);
}

void topK(const float *x, int64_t n, int64_t k, float *values,
          float *indices, void *workspace, cudaStream_t stream) {
  selectAndGather(x, n, k, values, indices, workspace, stream);
}

void topKExact(const float *x, int64_t n, int64_t k, float *values,
               uint32_t *indices, void *workspace, cudaStream_t stream) {
  selectAndGather(x, n, k, values, indices, workspace, stream);
}

void scatterTopK(const float *values, const float *indices, int64_t k,
                 float *out, int64_t n, cudaStream_t stream) {
  cudaMemsetAsync(out, 0, sizeof(float) * static_cast<size_t>(n), stream);
  scatterKernel<<<blocksFor(k), kThreads, 0, stream>>>(values, indices, k,
                                                       out, n);
}

} // namespace dtfm::runtime::cuda
