//===- TopK.cu - AdaTopK compression: select and scatter ------------------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//
//
// Top-k by magnitude without sorting, in the steps of
// format/TopKSelect.h (which the host reference runs and the unit tests
// check against the CPU kernel): two passes over the tensor -- a histogram
// of the keys' top 12 bits, read back to pick the threshold bin, and an
// order-preserving compaction (CUB's select) of the candidates at or above
// it -- then, on the candidates only (a few percent of a gradient), the
// key's remaining 19 bits a digit at a time, the tie rule (the first
// equal keys by index, through a scan) and the compaction of what is
// kept. Against the first version (four 8-bit histogram passes, a scan and
// a select over the whole tensor: about ten passes' worth of traffic, 4%
// of an H100's bandwidth), two.
//
//===----------------------------------------------------------------------===//

#include "Common.cuh"
#include "dtfm/Format/TopKSelect.h"
#include "dtfm/Runtime/Cuda/Kernels.h"

#include <cub/device/device_scan.cuh>
#include <cub/device/device_select.cuh>
#include <cuda_runtime.h>
#include <thrust/iterator/counting_iterator.h>

#include <vector>

using namespace dtfm::runtime::cuda::detail;
namespace topk = dtfm::format::topk;

namespace {

/// The histograms' grid: enough blocks to fill the device, few enough that
/// merging their bins into the global counts stays cheap.
constexpr unsigned kHistogramBlocks = 512;
unsigned histogramBlocks(int64_t n) {
  unsigned blocks = blocksFor(n);
  return blocks < kHistogramBlocks ? blocks : kHistogramBlocks;
}

struct SelectState {
  topk::Threshold threshold;
  unsigned histogram[topk::kMaxDigitBins + 1];
  int selected; // CUB's count of selected elements
};

/// Adds `count` to bin `bin` of a shared histogram: the lanes of a warp with
/// the same bin add once, through their lowest lane (a gradient's keys
/// share few bins: their exponents), instead of queueing on one counter.
__device__ inline void addToBin(unsigned *bins, unsigned bin, unsigned limit) {
  unsigned peers = __match_any_sync(__activemask(), bin);
  if (bin < limit && static_cast<int>(threadIdx.x % 32) == __ffs(peers) - 1)
    atomicAdd(&bins[bin], static_cast<unsigned>(__popc(peers)));
}

/// Step 1: counts of the keys' coarse bins into `coarse` (zeroed).
__global__ void coarseHistogramKernel(const float *x, int64_t n,
                                      unsigned *coarse) {
  __shared__ unsigned local[topk::kCoarseBins];
  for (int b = threadIdx.x; b < topk::kCoarseBins; b += blockDim.x)
    local[b] = 0;
  __syncthreads();
  DTFM_GRID_STRIDE(i, n) {
    addToBin(local, topk::coarseBin(topk::keyOf(x[i])), topk::kCoarseBins);
  }
  __syncthreads();
  for (int b = threadIdx.x; b < topk::kCoarseBins; b += blockDim.x)
    if (local[b])
      atomicAdd(&coarse[b], local[b]);
}

/// Step 2's test: a key in the threshold bin or above.
struct AtLeastKey {
  const float *x;
  uint32_t least;
  __device__ bool operator()(int i) const { return topk::keyOf(x[i]) >= least; }
};

__global__ void gatherValuesKernel(const float *x, const int *at, int64_t m,
                                   float *out) {
  DTFM_GRID_STRIDE(i, m) out[i] = x[at[i]];
}

/// Step 3: one digit's counts among the candidates that share the prefix.
__global__ void digitHistogramKernel(const float *x, int64_t m,
                                     SelectState *state, topk::Digit d) {
  __shared__ unsigned local[topk::kMaxDigitBins];
  unsigned bins = 1u << d.bits;
  for (unsigned b = threadIdx.x; b < bins; b += blockDim.x)
    local[b] = 0;
  __syncthreads();
  topk::Threshold t = state->threshold;
  DTFM_GRID_STRIDE(i, m) {
    addToBin(local, t.digitOf(topk::keyOf(x[i]), d), bins);
  }
  __syncthreads();
  for (unsigned b = threadIdx.x; b < bins; b += blockDim.x)
    if (local[b])
      atomicAdd(&state->histogram[b], local[b]);
}

__global__ void fixDigitKernel(SelectState *state, topk::Digit d) {
  state->threshold.fix(state->histogram, d);
  for (int b = 0; b <= topk::kMaxDigitBins; ++b)
    state->histogram[b] = 0;
}

/// Step 4: the ties at the threshold (their exclusive sum ranks them by
/// index), then what is kept.
__global__ void equalFlagsKernel(const float *x, int64_t m,
                                 const SelectState *state, int *equal) {
  uint32_t threshold = state->threshold.prefix;
  DTFM_GRID_STRIDE(i, m) equal[i] = topk::keyOf(x[i]) == threshold ? 1 : 0;
}

__global__ void keepFlagsKernel(const float *x, int64_t m,
                                const SelectState *state,
                                const int *equalBefore, char *keep) {
  uint32_t threshold = state->threshold.prefix;
  uint64_t ties = state->threshold.remaining;
  DTFM_GRID_STRIDE(i, m) {
    uint32_t key = topk::keyOf(x[i]);
    keep[i] = key > threshold || (key == threshold &&
                                  static_cast<uint64_t>(equalBefore[i]) < ties);
  }
}

/// The kept values and their indices (as floats for AdaTopK's ops, exact
/// uint32 for the wire): entry i is candidate picked[i] (candidate i when
/// every candidate is kept).
template <typename Index>
__global__ void gatherKernel(const float *candidateValues,
                             const int *candidates, const int *picked,
                             int64_t k, float *values, Index *indices) {
  DTFM_GRID_STRIDE(i, k) {
    int c = picked ? picked[i] : static_cast<int>(i);
    values[i] = candidateValues[c];
    indices[i] = static_cast<Index>(candidates[c]);
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

/// Workspace: the state, the coarse counts, the candidates' indices and
/// values, two int arrays reused by step 4 (equal flags then keep flags;
/// their exclusive sum then the picked candidates), CUB's storage. The
/// candidates may be all n (every key equal).
struct Layout {
  size_t state, coarse, candidates, candidateValues, flags, ranks, cub, total;
};

size_t align(size_t bytes) { return (bytes + 255) / 256 * 256; }

Layout layoutFor(int64_t n) {
  size_t scanBytes = 0, flaggedBytes = 0, ifBytes = 0;
  int items = static_cast<int>(n);
  cub::DeviceScan::ExclusiveSum(nullptr, scanBytes, static_cast<int *>(nullptr),
                                static_cast<int *>(nullptr), items);
  cub::DeviceSelect::Flagged(
      nullptr, flaggedBytes, thrust::counting_iterator<int>(0),
      static_cast<char *>(nullptr), static_cast<int *>(nullptr),
      static_cast<int *>(nullptr), items);
  cub::DeviceSelect::If(nullptr, ifBytes, thrust::counting_iterator<int>(0),
                        static_cast<int *>(nullptr),
                        static_cast<int *>(nullptr), items,
                        AtLeastKey{nullptr, 0});
  Layout l;
  size_t words = align(sizeof(int) * static_cast<size_t>(n));
  l.state = 0;
  l.coarse = align(sizeof(SelectState));
  l.candidates = l.coarse + align(sizeof(unsigned) * topk::kCoarseBins);
  l.candidateValues = l.candidates + words;
  l.flags = l.candidateValues + words;
  l.ranks = l.flags + words;
  l.cub = l.ranks + words;
  l.total = l.cub + align(std::max(scanBytes, std::max(flaggedBytes, ifBytes)));
  return l;
}

/// The selection (n > 0, 0 < k <= n) and the gather into indices of type
/// Index. The host reads the coarse counts back once (16 KB) to size the
/// candidates' steps.
template <typename Index>
void selectAndGather(const float *x, int64_t n, int64_t k, float *values,
                     Index *indices, void *workspace, cudaStream_t stream) {
  Layout l = layoutFor(n);
  char *base = static_cast<char *>(workspace);
  auto *state = reinterpret_cast<SelectState *>(base + l.state);
  auto *coarse = reinterpret_cast<unsigned *>(base + l.coarse);
  int *candidates = reinterpret_cast<int *>(base + l.candidates);
  float *candidateValues = reinterpret_cast<float *>(base + l.candidateValues);
  int *equal = reinterpret_cast<int *>(base + l.flags);
  char *keep = base + l.flags; // once the ranks are summed
  int *equalBefore = reinterpret_cast<int *>(base + l.ranks);
  int *picked = reinterpret_cast<int *>(base + l.ranks); // once kept
  void *scratch = base + l.cub;
  size_t scratchBytes = l.total - l.cub;

  // 1. The coarse bins, read back.
  cudaMemsetAsync(coarse, 0, sizeof(unsigned) * topk::kCoarseBins, stream);
  coarseHistogramKernel<<<histogramBlocks(n), kThreads, 0, stream>>>(x, n,
                                                                     coarse);
  std::vector<unsigned> counts(topk::kCoarseBins, 0);
  if (cudaMemcpyAsync(counts.data(), coarse, sizeof(unsigned) * counts.size(),
                      cudaMemcpyDeviceToHost, stream) != cudaSuccess ||
      cudaStreamSynchronize(stream) != cudaSuccess)
    return; // the stream's error reaches the executor's next check
  topk::BinPick pick =
      topk::pickBin(counts.data(), topk::kCoarseBins, static_cast<uint64_t>(k));
  int64_t m = static_cast<int64_t>(pick.above + counts[pick.bin]);
  if (m < k)
    return; // counts that do not add up: only a failed device gives them

  // 2. The candidates, in index order, and their values.
  cub::DeviceSelect::If(scratch, scratchBytes,
                        thrust::counting_iterator<int>(0), candidates,
                        &state->selected, static_cast<int>(n),
                        AtLeastKey{x, pick.bin << topk::kCoarseShift}, stream);
  gatherValuesKernel<<<blocksFor(m), kThreads, 0, stream>>>(x, candidates, m,
                                                            candidateValues);
  if (m == k) { // the threshold bin is taken whole
    gatherKernel<<<blocksFor(k), kThreads, 0, stream>>>(
        candidateValues, candidates, nullptr, k, values, indices);
    return;
  }

  // 3. The rest of the key among the candidates.
  SelectState initial{};
  initial.threshold = topk::coarseThreshold(pick, static_cast<uint64_t>(k));
  cudaMemcpyAsync(state, &initial, sizeof initial, cudaMemcpyHostToDevice,
                  stream);
  for (topk::Digit d : topk::kRefineDigits) {
    digitHistogramKernel<<<histogramBlocks(m), kThreads, 0, stream>>>(
        candidateValues, m, state, d);
    fixDigitKernel<<<1, 1, 0, stream>>>(state, d);
  }

  // 4. Above the threshold and the first ties, in index order.
  equalFlagsKernel<<<blocksFor(m), kThreads, 0, stream>>>(candidateValues, m,
                                                          state, equal);
  cub::DeviceScan::ExclusiveSum(scratch, scratchBytes, equal, equalBefore,
                                static_cast<int>(m), stream);
  keepFlagsKernel<<<blocksFor(m), kThreads, 0, stream>>>(
      candidateValues, m, state, equalBefore, keep);
  cub::DeviceSelect::Flagged(scratch, scratchBytes,
                             thrust::counting_iterator<int>(0), keep, picked,
                             &state->selected, static_cast<int>(m), stream);
  gatherKernel<<<blocksFor(k), kThreads, 0, stream>>>(
      candidateValues, candidates, picked, k, values, indices);
}

} // namespace

namespace dtfm::runtime::cuda {

size_t topKWorkspaceBytes(int64_t n) { return layoutFor(n).total; }

void topK(const float *x, int64_t n, int64_t k, float *values, float *indices,
          void *workspace, cudaStream_t stream) {
  if (n > 0 && k > 0)
    selectAndGather(x, n, k < n ? k : n, values, indices, workspace, stream);
}

void topKExact(const float *x, int64_t n, int64_t k, float *values,
               uint32_t *indices, void *workspace, cudaStream_t stream) {
  if (n > 0 && k > 0)
    selectAndGather(x, n, k < n ? k : n, values, indices, workspace, stream);
}

void scatterTopK(const float *values, const float *indices, int64_t k,
                 float *out, int64_t n, cudaStream_t stream) {
  cudaMemsetAsync(out, 0, sizeof(float) * static_cast<size_t>(n), stream);
  scatterKernel<<<blocksFor(k), kThreads, 0, stream>>>(values, indices, k, out,
                                                       n);
}

} // namespace dtfm::runtime::cuda
