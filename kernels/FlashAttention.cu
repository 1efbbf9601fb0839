//===- FlashAttention.cu - Fused causal attention -------------------------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//
//
// dtfm.causal_attention forward and backward without the [heads, s, s]
// probabilities: the row math is FlashAttention.h's (the host reference's),
// these kernels only stage chunks in shared memory and place the rows.
//
// A block has 128 threads: 128 / kLanes rows of kLanes adjacent threads,
// each lane holding kDims of the head (kDims + 4 apart in shared memory, so
// the lanes' slices start in different banks and stay 16-byte aligned).
// Chunks are padded with zeros to kDims per lane and to the chunk's rows,
// so the rows read them without bounds. The forward and the dQ pass run one
// block per (batch row, head, query block) and read the keys up to the
// block's last query; the dK/dV pass one per (batch row, key head, key
// block) over the queries from the block's first key on, each head of the
// group in turn.
//
//===----------------------------------------------------------------------===//

#include "dtfm/Runtime/Cuda/Kernels.h"
#include "dtfm/Runtime/FlashAttention.h"

#include <cuda_runtime.h>

using namespace dtfm::runtime::flash;

namespace {

constexpr int kBlockThreads = 128;

template <int kDims, int kLanes> struct Tiling {
  static constexpr int kRows = kBlockThreads / kLanes;
  static constexpr int kSlicePitch = kDims + 4;
  static constexpr int kRowPitch = kLanes * kSlicePitch;
};

/// Stages `count` rows of a [.., pitch]-strided tensor (row c at
/// source + c * sourcePitch, the head's dims from 0) into `chunk`, times
/// `scale`, zero past the head, the lanes' slices and `count`.
template <int kDims, int kLanes, int kChunk>
__device__ void stageChunk(float *chunk, const float *source,
                           int64_t sourcePitch, int count, int headDim,
                           float scale) {
  using T = Tiling<kDims, kLanes>;
  for (int e = threadIdx.x; e < kChunk * T::kRowPitch; e += blockDim.x) {
    int c = e / T::kRowPitch, rest = e % T::kRowPitch;
    int lane = rest / T::kSlicePitch, d = rest % T::kSlicePitch;
    int dim = lane * kDims + d;
    chunk[e] = c < count && d < kDims && dim < headDim
                   ? source[c * sourcePitch + dim] * scale
                   : 0.0f;
  }
}

/// This thread's row and lane, and how many of the lane's dims are the
/// head's.
template <int kDims, int kLanes> struct Place {
  int lane, dims;
  int64_t row;
  __device__ Place(int64_t firstRow, int64_t headDim) {
    lane = threadIdx.x % kLanes;
    row = firstRow + threadIdx.x / kLanes;
    int64_t left = headDim - lane * kDims;
    dims = static_cast<int>(left < 0 ? 0 : left > kDims ? kDims : left);
  }
};

template <int kDims, int kLanes>
__global__ void __launch_bounds__(kBlockThreads)
    forwardKernel(Layout layout, const float *q, const float *k, const float *v,
                  float *out, float *logSumExp, const float *dOut, float *delta,
                  float scale) {
  using T = Tiling<kDims, kLanes>;
  __shared__ __align__(16) float keys[kForwardChunk * T::kRowPitch];
  __shared__ __align__(16) float values[kForwardChunk * T::kRowPitch];
  int64_t head = blockIdx.x % layout.heads, n = blockIdx.x / layout.heads;
  int64_t kvHead = head / layout.group();
  int64_t firstRow = static_cast<int64_t>(blockIdx.y) * T::kRows;
  Place<kDims, kLanes> at(firstRow, layout.headDim);
  bool valid = at.row < layout.seq;
  int64_t slice = valid ? layout.query(n, at.row, head) + at.lane * kDims : 0;

  ForwardRow<kDims, kLanes, kForwardChunk> state;
  state.begin(q + slice, valid ? at.dims : 0, scale);
  int64_t end =
      firstRow + T::kRows < layout.seq ? firstRow + T::kRows : layout.seq;
  for (int64_t first = 0; first < end; first += kForwardChunk) {
    int count = static_cast<int>(end - first < kForwardChunk ? end - first
                                                             : kForwardChunk);
    stageChunk<kDims, kLanes, kForwardChunk>(
        keys, k + layout.key(n, first, kvHead), layout.keyPitch(), count,
        static_cast<int>(layout.headDim), 1.0f);
    stageChunk<kDims, kLanes, kForwardChunk>(
        values, v + layout.key(n, first, kvHead), layout.keyPitch(), count,
        static_cast<int>(layout.headDim), 1.0f);
    __syncthreads();
    state.take(keys + at.lane * T::kSlicePitch,
               values + at.lane * T::kSlicePitch, T::kRowPitch, count, first,
               at.row, kDims);
    __syncthreads(); // the next chunk overwrites these
  }
  if (valid && out)
    state.finish(out + slice, at.dims);
  if (valid && logSumExp && at.lane == 0)
    logSumExp[layout.row(n, head, at.row)] = state.logSumExp();
  if (dOut) { // every thread: laneSum shuffles
    float part = valid ? state.outputDot(dOut + slice, at.dims) : 0.0f;
    float rowDelta = laneSum<kLanes>(part);
    if (valid && at.lane == 0)
      delta[layout.row(n, head, at.row)] = rowDelta;
  }
}

template <int kDims, int kLanes>
__global__ void __launch_bounds__(kBlockThreads)
    keyValueGradKernel(Layout layout, const float *q, const float *k,
                       const float *v, const float *dOut,
                       const float *logSumExp, const float *delta, float *dk,
                       float *dv, float scale) {
  using T = Tiling<kDims, kLanes>;
  __shared__ __align__(16) float queries[kBackwardChunk * T::kRowPitch];
  __shared__ __align__(16) float dOuts[kBackwardChunk * T::kRowPitch];
  __shared__ float lse[kBackwardChunk], deltas[kBackwardChunk];
  int64_t kvHead = blockIdx.x % layout.kvHeads, n = blockIdx.x / layout.kvHeads;
  int64_t firstRow = static_cast<int64_t>(blockIdx.y) * T::kRows;
  Place<kDims, kLanes> at(firstRow, layout.headDim);
  bool valid = at.row < layout.seq;
  int64_t slice = valid ? layout.key(n, at.row, kvHead) + at.lane * kDims : 0;

  KeyRow<kDims, kLanes, kBackwardChunk> state;
  state.begin(k + slice, v + slice, valid ? at.dims : 0);
  for (int64_t g = 0; g < layout.group(); ++g) {
    int64_t head = kvHead * layout.group() + g;
    int64_t start = firstRow / kBackwardChunk * kBackwardChunk;
    for (int64_t first = start; first < layout.seq; first += kBackwardChunk) {
      int count = static_cast<int>(layout.seq - first < kBackwardChunk
                                       ? layout.seq - first
                                       : kBackwardChunk);
      stageChunk<kDims, kLanes, kBackwardChunk>(
          queries, q + layout.query(n, first, head), layout.queryPitch(), count,
          static_cast<int>(layout.headDim), scale);
      stageChunk<kDims, kLanes, kBackwardChunk>(
          dOuts, dOut + layout.query(n, first, head), layout.queryPitch(),
          count, static_cast<int>(layout.headDim), 1.0f);
      if (threadIdx.x < kBackwardChunk) {
        int c = threadIdx.x;
        lse[c] = c < count ? logSumExp[layout.row(n, head, first + c)] : 0.0f;
        deltas[c] = c < count ? delta[layout.row(n, head, first + c)] : 0.0f;
      }
      __syncthreads();
      state.take(queries + at.lane * T::kSlicePitch,
                 dOuts + at.lane * T::kSlicePitch, T::kRowPitch, lse, deltas,
                 count, first, at.row, kDims);
      __syncthreads();
    }
  }
  if (valid)
    state.finish(dk ? dk + slice : nullptr, dv ? dv + slice : nullptr, at.dims);
}

template <int kDims, int kLanes>
__global__ void __launch_bounds__(kBlockThreads)
    queryGradKernel(Layout layout, const float *q, const float *k,
                    const float *v, const float *dOut, const float *logSumExp,
                    const float *delta, float *dq, float scale) {
  using T = Tiling<kDims, kLanes>;
  __shared__ __align__(16) float keys[kForwardChunk * T::kRowPitch];
  __shared__ __align__(16) float values[kForwardChunk * T::kRowPitch];
  int64_t head = blockIdx.x % layout.heads, n = blockIdx.x / layout.heads;
  int64_t kvHead = head / layout.group();
  int64_t firstRow = static_cast<int64_t>(blockIdx.y) * T::kRows;
  Place<kDims, kLanes> at(firstRow, layout.headDim);
  bool valid = at.row < layout.seq;
  int64_t slice = valid ? layout.query(n, at.row, head) + at.lane * kDims : 0;
  int64_t rowAt = valid ? layout.row(n, head, at.row) : 0;

  QueryRow<kDims, kLanes, kForwardChunk> state;
  state.begin(q + slice, dOut + slice, valid ? logSumExp[rowAt] : 0.0f,
              valid ? delta[rowAt] : 0.0f, valid ? at.dims : 0, scale);
  int64_t end =
      firstRow + T::kRows < layout.seq ? firstRow + T::kRows : layout.seq;
  for (int64_t first = 0; first < end; first += kForwardChunk) {
    int count = static_cast<int>(end - first < kForwardChunk ? end - first
                                                             : kForwardChunk);
    stageChunk<kDims, kLanes, kForwardChunk>(
        keys, k + layout.key(n, first, kvHead), layout.keyPitch(), count,
        static_cast<int>(layout.headDim), 1.0f);
    stageChunk<kDims, kLanes, kForwardChunk>(
        values, v + layout.key(n, first, kvHead), layout.keyPitch(), count,
        static_cast<int>(layout.headDim), 1.0f);
    __syncthreads();
    state.take(keys + at.lane * T::kSlicePitch,
               values + at.lane * T::kSlicePitch, T::kRowPitch, count, first,
               at.row, kDims);
    __syncthreads();
  }
  if (valid)
    state.finish(dq + slice, at.dims, scale);
}

/// x: (batch row, head), which may be many; y: the block of rows (up to
/// 65535 of them: sequences up to 2 M tokens).
template <int kDims, int kLanes> dim3 gridFor(const Layout &l, int64_t heads) {
  int64_t rows = Tiling<kDims, kLanes>::kRows;
  return dim3(static_cast<unsigned>(l.batch * heads),
              static_cast<unsigned>((l.seq + rows - 1) / rows));
}

template <int kDims, int kLanes>
void forward(const Layout &l, const float *q, const float *k, const float *v,
             float *out, float *logSumExp, const float *dOut, float *delta,
             cudaStream_t stream) {
  forwardKernel<kDims, kLanes>
      <<<gridFor<kDims, kLanes>(l, l.heads), kBlockThreads, 0, stream>>>(
          l, q, k, v, out, logSumExp, dOut, delta, l.scale());
}

template <int kDims, int kLanes>
void backward(const Layout &l, const float *q, const float *k, const float *v,
              const float *dOut, const float *logSumExp, const float *delta,
              float *dq, float *dk, float *dv, cudaStream_t stream) {
  if (dk || dv)
    keyValueGradKernel<kDims, kLanes>
        <<<gridFor<kDims, kLanes>(l, l.kvHeads), kBlockThreads, 0, stream>>>(
            l, q, k, v, dOut, logSumExp, delta, dk, dv, l.scale());
  if (dq)
    queryGradKernel<kDims, kLanes>
        <<<gridFor<kDims, kLanes>(l, l.heads), kBlockThreads, 0, stream>>>(
            l, q, k, v, dOut, logSumExp, delta, dq, l.scale());
}

} // namespace

namespace dtfm::runtime::cuda {

// The head's dims pick the kernels: up to 16 and 32 in one lane, up to 64
// and 128 in two and four lanes of 32 (supportsHeadDim's range).
void flashAttention(const Layout &l, const float *q, const float *k,
                    const float *v, float *out, float *logSumExp,
                    const float *dOut, float *delta, cudaStream_t stream) {
  if (l.headDim <= 16)
    forward<16, 1>(l, q, k, v, out, logSumExp, dOut, delta, stream);
  else if (l.headDim <= 32)
    forward<32, 1>(l, q, k, v, out, logSumExp, dOut, delta, stream);
  else if (l.headDim <= 64)
    forward<32, 2>(l, q, k, v, out, logSumExp, dOut, delta, stream);
  else
    forward<32, 4>(l, q, k, v, out, logSumExp, dOut, delta, stream);
}

void flashAttentionBackward(const Layout &l, const float *q, const float *k,
                            const float *v, const float *dOut,
                            const float *logSumExp, const float *delta,
                            float *dq, float *dk, float *dv,
                            cudaStream_t stream) {
  if (l.headDim <= 16)
    backward<16, 1>(l, q, k, v, dOut, logSumExp, delta, dq, dk, dv, stream);
  else if (l.headDim <= 32)
    backward<32, 1>(l, q, k, v, dOut, logSumExp, delta, dq, dk, dv, stream);
  else if (l.headDim <= 64)
    backward<32, 2>(l, q, k, v, dOut, logSumExp, delta, dq, dk, dv, stream);
  else
    backward<32, 4>(l, q, k, v, dOut, logSumExp, delta, dq, dk, dv, stream);
}

} // namespace dtfm::runtime::cuda
