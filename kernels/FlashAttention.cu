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

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <mma.h>

#include <algorithm>
#include <type_traits>

using namespace dtfm::runtime::flash;

namespace {

constexpr int kBlockThreads = 128;

/// The block of query rows, the last first: under the causal mask a later
/// block reads more keys, and starting those first shortens the tail.
__device__ inline int64_t lastBlocksFirst() {
  return static_cast<int64_t>(gridDim.y - 1 - blockIdx.y);
}

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

/// Feeds a query row (ForwardRow or QueryRow: the same take) every key and
/// value up to the block's last row, a chunk staged in shared memory at a
/// time; every thread of the block calls it.
template <int kDims, int kLanes, typename Row>
__device__ void
takeKeysOfBlock(Row &state, const Layout &layout, const float *k,
                const float *v, int64_t n, int64_t kvHead, int64_t firstRow,
                const Place<kDims, kLanes> &at, float *keys, float *values) {
  using T = Tiling<kDims, kLanes>;
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
}

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
  int64_t firstRow = lastBlocksFirst() * T::kRows;
  Place<kDims, kLanes> at(firstRow, layout.headDim);
  bool valid = at.row < layout.seq;
  int64_t slice = valid ? layout.query(n, at.row, head) + at.lane * kDims : 0;

  ForwardRow<kDims, kLanes, kForwardChunk> state;
  state.begin(q + slice, valid ? at.dims : 0, scale);
  takeKeysOfBlock(state, layout, k, v, n, kvHead, firstRow, at, keys, values);
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
  int64_t firstRow = lastBlocksFirst() * T::kRows;
  Place<kDims, kLanes> at(firstRow, layout.headDim);
  bool valid = at.row < layout.seq;
  int64_t slice = valid ? layout.query(n, at.row, head) + at.lane * kDims : 0;
  int64_t rowAt = valid ? layout.row(n, head, at.row) : 0;

  QueryRow<kDims, kLanes, kForwardChunk> state;
  state.begin(q + slice, dOut + slice, valid ? logSumExp[rowAt] : 0.0f,
              valid ? delta[rowAt] : 0.0f, valid ? at.dims : 0, scale);
  takeKeysOfBlock(state, layout, k, v, n, kvHead, firstRow, at, keys, values);
  if (valid)
    state.finish(dq + slice, at.dims, scale);
}

//===----------------------------------------------------------------------===//
// Tensor cores (f16/bf16 plans): the same algorithm on 64 x 64 tiles
//===----------------------------------------------------------------------===//
//
// A block has 4 warps; warp w owns rows 16w..16w+15 of the block's 64 rows
// (queries, or keys in the dK/dV pass) and computes its strips of every
// product with WMMA (16 x 16 x 16, the inputs rounded to the plan's half
// type in shared memory, fp32 accumulation); the softmax statistics, L and
// D stay fp32. Two lanes share a row for the elementwise steps (32 of the
// chunk's 64 columns each), so a warp only waits for itself between its
// products and the block only between chunks. The forward's output
// numerator lives in shared memory (fp32), where the lanes rescale it;
// dK, dV and dQ accumulate in fragments.

namespace wmma = nvcuda::wmma;

template <typename Half> __device__ inline Half toHalf(float x);
template <> __device__ inline __half toHalf<__half>(float x) {
  return __float2half_rn(x);
}
template <> __device__ inline __nv_bfloat16 toHalf<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}

template <int kDp> struct TcTiles {
  static constexpr int kRows = 64, kChunk = 64;  // 4 warps of 16 rows
  static constexpr int kLdH = kDp + 8;           // half tiles (rows of kDp)
  static constexpr int kLdS = kChunk + 4;        // fp32 scores (rows of kChunk)
  static constexpr int kLdP = kChunk + 8;        // half probabilities
  static constexpr int kLdO = kDp + 4;           // fp32 rows of kDp
  static constexpr int kHalfTile = kRows * kLdH; // elements
  static constexpr int kScoreTile = kRows * kLdS;
  static constexpr int kProbTile = kRows * kLdP;
  static constexpr int kOutTile = kRows * kLdO;
};

/// Rows [first, first + count) of a [.., pitch]-strided tensor (the head's
/// dims from 0) into a half tile, times `scale`; zeros past the head, past
/// `count` and up to kDp.
template <typename Half, int kDp>
__device__ void stageHalf(Half *tile, const float *source, int64_t pitch,
                          int count, int headDim, float scale) {
  using T = TcTiles<kDp>;
  for (int e = threadIdx.x; e < T::kRows * kDp; e += blockDim.x) {
    int r = e / kDp, d = e % kDp;
    float x = r < count && d < headDim ? source[r * pitch + d] * scale : 0.0f;
    tile[r * T::kLdH + d] = toHalf<Half>(x);
  }
}

/// The chunk of keys and values from `first` (count rows) into ks and vs,
/// once every warp is done with the last one; every thread calls it.
template <typename Half, int kDp>
__device__ void stageKeyValueChunk(Half *ks, Half *vs, const Layout &layout,
                                   const float *k, const float *v, int64_t n,
                                   int64_t kvHead, int64_t first, int count) {
  int headDim = static_cast<int>(layout.headDim);
  __syncthreads();
  stageHalf<Half, kDp>(ks, k + layout.key(n, first, kvHead), layout.keyPitch(),
                       count, headDim, 1.0f);
  stageHalf<Half, kDp>(vs, v + layout.key(n, first, kvHead), layout.keyPitch(),
                       count, headDim, 1.0f);
  __syncthreads();
}

/// C (16 x 16 fp32 at c, ldc) = A (16 x depth, row-major at a, lda) times
/// B, read as B[k][n] = b[n * ldb + k] (the rows of a tile: A B^T) when
/// `transposed`, else b[k * ldb + n]; accumulating into `acc`.
template <typename Half, int kDepth, bool kTransposed>
__device__ inline void
productStrip(wmma::fragment<wmma::accumulator, 16, 16, 16, float> &acc,
             const Half *a, int lda, const Half *b, int ldb) {
  using Layout = typename std::conditional<kTransposed, wmma::col_major,
                                           wmma::row_major>::type;
  wmma::fragment<wmma::matrix_a, 16, 16, 16, Half, wmma::row_major> fa;
  wmma::fragment<wmma::matrix_b, 16, 16, 16, Half, Layout> fb;
#pragma unroll
  for (int kk = 0; kk < kDepth / 16; ++kk) {
    wmma::load_matrix_sync(fa, a + kk * 16, lda);
    wmma::load_matrix_sync(fb, kTransposed ? b + kk * 16 : b + kk * 16 * ldb,
                           ldb);
    wmma::mma_sync(acc, fa, fb, acc);
  }
}

/// The warp's 16 x 64 scores: rows of `rows` (16 x kDp at ld kLdH) against
/// the 64 rows of `cols`, into `scores` (fp32, ld kLdS).
template <typename Half, int kDp>
__device__ inline void scoreStrip(const Half *rows, const Half *cols,
                                  float *scores) {
  using T = TcTiles<kDp>;
#pragma unroll
  for (int tile = 0; tile < T::kChunk / 16; ++tile) {
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
    wmma::fill_fragment(acc, 0.0f);
    productStrip<Half, kDp, true>(acc, rows, T::kLdH,
                                  cols + tile * 16 * T::kLdH, T::kLdH);
    wmma::store_matrix_sync(scores + tile * 16, acc, T::kLdS,
                            wmma::mem_row_major);
  }
}

template <typename Half, int kDp> constexpr size_t tcForwardBytes() {
  using T = TcTiles<kDp>;
  return 3 * T::kHalfTile * sizeof(Half) + T::kScoreTile * sizeof(float) +
         T::kProbTile * sizeof(Half) + T::kOutTile * sizeof(float);
}

template <typename Half, int kDp>
__global__ void __launch_bounds__(128)
    tcForwardKernel(Layout layout, const float *q, const float *k,
                    const float *v, float *out, float *logSumExp,
                    const float *dOut, float *delta, float scale) {
  using T = TcTiles<kDp>;
  extern __shared__ __align__(128) unsigned char memory[];
  Half *qs = reinterpret_cast<Half *>(memory);
  Half *ks = qs + T::kHalfTile, *vs = ks + T::kHalfTile;
  float *scores = reinterpret_cast<float *>(vs + T::kHalfTile);
  Half *probs = reinterpret_cast<Half *>(scores + T::kScoreTile);
  float *acc = reinterpret_cast<float *>(probs + T::kProbTile);
  int64_t head = blockIdx.x % layout.heads, n = blockIdx.x / layout.heads;
  int64_t kvHead = head / layout.group();
  int64_t firstRow = lastBlocksFirst() * T::kRows;
  int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  int row = warp * 16 + lane / 2, side = lane % 2; // side: which 32 columns
  int64_t query = firstRow + row;
  int headDim = static_cast<int>(layout.headDim);
  int64_t end =
      firstRow + T::kRows < layout.seq ? firstRow + T::kRows : layout.seq;

  stageHalf<Half, kDp>(qs, q + layout.query(n, firstRow, head),
                       layout.queryPitch(), static_cast<int>(end - firstRow),
                       headDim, scale);
  for (int e = threadIdx.x; e < T::kOutTile; e += blockDim.x)
    acc[e] = 0;
  float largest = minusInfinity(), sum = 0; // the row's, in both its lanes
  const Half *myRows = qs + warp * 16 * T::kLdH;
  float *myScores = scores + warp * 16 * T::kLdS;
  Half *myProbs = probs + warp * 16 * T::kLdP;
  float *myAcc = acc + warp * 16 * T::kLdO;
  for (int64_t first = 0; first < end; first += T::kChunk) {
    int count =
        static_cast<int>(end - first < T::kChunk ? end - first : T::kChunk);
    stageKeyValueChunk<Half, kDp>(ks, vs, layout, k, v, n, kvHead, first,
                                  count);
    scoreStrip<Half, kDp>(myRows, ks, myScores);
    __syncwarp();
    // The row's half of the chunk: mask, largest, weights, sums.
    const float *s = myScores + (lane / 2) * T::kLdS + side * 32;
    float chunkLargest = minusInfinity();
    for (int c = 0; c < 32; ++c) {
      int64_t key = first + side * 32 + c;
      if (side * 32 + c < count && key <= query)
        chunkLargest = largerOf(chunkLargest, s[c]);
    }
    chunkLargest =
        largerOf(chunkLargest, __shfl_xor_sync(0xffffffffu, chunkLargest, 1));
    float grown = largerOf(largest, chunkLargest);
    float rescale = expOf(largest - grown); // 0 before the first key
    largest = grown;
    float part = 0;
    Half *p = myProbs + (lane / 2) * T::kLdP + side * 32;
    for (int c = 0; c < 32; ++c) {
      int64_t key = first + side * 32 + c;
      float w =
          side * 32 + c < count && key <= query ? expOf(s[c] - largest) : 0.0f;
      part += w;
      p[c] = toHalf<Half>(w);
    }
    sum = sum * rescale + (part + __shfl_xor_sync(0xffffffffu, part, 1));
    float *o = myAcc + (lane / 2) * T::kLdO + side * (kDp / 2);
    // Only where the largest grew (most chunks after the first few leave it,
    // and the numerator's shared memory, alone).
    if (rescale != 1.0f)
      for (int d = 0; d < kDp / 2; ++d)
        o[d] *= rescale;
    __syncwarp();
    // The numerator += P V.
#pragma unroll
    for (int tile = 0; tile < kDp / 16; ++tile) {
      wmma::fragment<wmma::accumulator, 16, 16, 16, float> c;
      wmma::load_matrix_sync(c, myAcc + tile * 16, T::kLdO,
                             wmma::mem_row_major);
      productStrip<Half, T::kChunk, false>(c, myProbs, T::kLdP, vs + tile * 16,
                                           T::kLdH);
      wmma::store_matrix_sync(myAcc + tile * 16, c, T::kLdO,
                              wmma::mem_row_major);
    }
    __syncwarp();
  }
  bool valid = query < layout.seq;
  const float *o = myAcc + (lane / 2) * T::kLdO;
  float inverse = 1.0f / sum, dot = 0;
  for (int d = side * (kDp / 2); d < (side + 1) * (kDp / 2); ++d)
    if (valid && d < headDim) {
      float value = o[d] * inverse;
      if (out)
        out[layout.query(n, query, head) + d] = value;
      if (dOut)
        dot += dOut[layout.query(n, query, head) + d] * value;
    }
  dot += __shfl_xor_sync(0xffffffffu, dot, 1);
  if (valid && side == 0) {
    if (logSumExp)
      logSumExp[layout.row(n, head, query)] = largest + logOf(sum);
    if (dOut)
      delta[layout.row(n, head, query)] = dot;
  }
}

template <typename Half, int kDp> constexpr size_t tcKeyValueBytes() {
  using T = TcTiles<kDp>;
  return 4 * T::kHalfTile * sizeof(Half) + 2 * T::kScoreTile * sizeof(float) +
         T::kProbTile * sizeof(Half) + 2 * T::kRows * sizeof(float);
}

template <typename Half, int kDp>
__global__ void __launch_bounds__(128)
    tcKeyValueGradKernel(Layout layout, const float *q, const float *k,
                         const float *v, const float *dOut,
                         const float *logSumExp, const float *delta, float *dk,
                         float *dv, float scale) {
  using T = TcTiles<kDp>;
  using Acc = wmma::fragment<wmma::accumulator, 16, 16, 16, float>;
  extern __shared__ __align__(128) unsigned char memory[];
  Half *ks = reinterpret_cast<Half *>(memory);
  Half *vs = ks + T::kHalfTile, *qs = vs + T::kHalfTile,
       *dos = qs + T::kHalfTile;
  float *weights = reinterpret_cast<float *>(dos + T::kHalfTile); // S, P
  float *dps = weights + T::kScoreTile;                           // dP
  Half *halves = reinterpret_cast<Half *>(dps + T::kScoreTile);   // P, dS
  float *lse = reinterpret_cast<float *>(halves + T::kProbTile);
  float *deltas = lse + T::kRows;
  int64_t kvHead = blockIdx.x % layout.kvHeads, n = blockIdx.x / layout.kvHeads;
  int64_t firstRow = static_cast<int64_t>(blockIdx.y) * T::kRows;
  int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  int row = warp * 16 + lane / 2, side = lane % 2;
  int64_t key = firstRow + row;
  int headDim = static_cast<int>(layout.headDim);
  int keys = static_cast<int>(
      layout.seq - firstRow < T::kRows ? layout.seq - firstRow : T::kRows);
  stageHalf<Half, kDp>(ks, k + layout.key(n, firstRow, kvHead),
                       layout.keyPitch(), keys, headDim, 1.0f);
  stageHalf<Half, kDp>(vs, v + layout.key(n, firstRow, kvHead),
                       layout.keyPitch(), keys, headDim, 1.0f);
  Acc dkAcc[kDp / 16], dvAcc[kDp / 16];
#pragma unroll
  for (int t = 0; t < kDp / 16; ++t) {
    wmma::fill_fragment(dkAcc[t], 0.0f);
    wmma::fill_fragment(dvAcc[t], 0.0f);
  }
  const Half *myKeys = ks + warp * 16 * T::kLdH,
             *myValues = vs + warp * 16 * T::kLdH;
  float *myWeights = weights + warp * 16 * T::kLdS,
        *myDps = dps + warp * 16 * T::kLdS;
  Half *myHalves = halves + warp * 16 * T::kLdP;
  for (int64_t g = 0; g < layout.group(); ++g) {
    int64_t head = kvHead * layout.group() + g;
    for (int64_t first = firstRow; first < layout.seq; first += T::kChunk) {
      int count = static_cast<int>(
          layout.seq - first < T::kChunk ? layout.seq - first : T::kChunk);
      __syncthreads(); // the last chunk's queries are read
      stageHalf<Half, kDp>(qs, q + layout.query(n, first, head),
                           layout.queryPitch(), count, headDim, scale);
      stageHalf<Half, kDp>(dos, dOut + layout.query(n, first, head),
                           layout.queryPitch(), count, headDim, 1.0f);
      for (int c = threadIdx.x; c < T::kChunk; c += blockDim.x) {
        lse[c] = c < count ? logSumExp[layout.row(n, head, first + c)] : 0.0f;
        deltas[c] = c < count ? delta[layout.row(n, head, first + c)] : 0.0f;
      }
      __syncthreads();
      // S^T = K Q^T and dP^T = V dO^T for the warp's keys.
      scoreStrip<Half, kDp>(myKeys, qs, myWeights);
      scoreStrip<Half, kDp>(myValues, dos, myDps);
      __syncwarp();
      float *w = myWeights + (lane / 2) * T::kLdS + side * 32;
      const float *dp = myDps + (lane / 2) * T::kLdS + side * 32;
      Half *h = myHalves + (lane / 2) * T::kLdP + side * 32;
      for (int c = 0; c < 32; ++c) {
        int at = side * 32 + c;
        int64_t query = first + at;
        float p = at < count && query >= key && key < layout.seq
                      ? expOf(w[c] - lse[at])
                      : 0.0f;
        w[c] = p;
        h[c] = toHalf<Half>(p);
      }
      __syncwarp();
      // dV += P^T dO.
#pragma unroll
      for (int t = 0; t < kDp / 16; ++t)
        productStrip<Half, T::kChunk, false>(dvAcc[t], myHalves, T::kLdP,
                                             dos + t * 16, T::kLdH);
      __syncwarp();
      for (int c = 0; c < 32; ++c) {
        int at = side * 32 + c;
        h[c] = toHalf<Half>(w[c] * (dp[c] - deltas[at]));
      }
      __syncwarp();
      // dK += dS^T (Q times the scale).
#pragma unroll
      for (int t = 0; t < kDp / 16; ++t)
        productStrip<Half, T::kChunk, false>(dkAcc[t], myHalves, T::kLdP,
                                             qs + t * 16, T::kLdH);
    }
  }
  // The sums out through shared memory (the query tiles' room), added to
  // the gradients (this block alone writes these rows).
  __syncthreads();
  float *staged = reinterpret_cast<float *>(qs) + warp * 16 * T::kLdO;
  auto flush = [&](Acc(&sums)[kDp / 16], float *target) {
#pragma unroll
    for (int t = 0; t < kDp / 16; ++t)
      wmma::store_matrix_sync(staged + t * 16, sums[t], T::kLdO,
                              wmma::mem_row_major);
    __syncwarp();
    const float *mine = staged + (lane / 2) * T::kLdO;
    if (target && key < layout.seq)
      for (int d = side * (kDp / 2); d < (side + 1) * (kDp / 2); ++d)
        if (d < headDim)
          target[layout.key(n, key, kvHead) + d] += mine[d];
    __syncwarp(); // read before the next sums overwrite them
  };
  flush(dkAcc, dk);
  flush(dvAcc, dv);
}

template <typename Half, int kDp> constexpr size_t tcQueryBytes() {
  using T = TcTiles<kDp>;
  return 4 * T::kHalfTile * sizeof(Half) + 2 * T::kScoreTile * sizeof(float) +
         T::kProbTile * sizeof(Half) + 2 * T::kRows * sizeof(float);
}

template <typename Half, int kDp>
__global__ void __launch_bounds__(128)
    tcQueryGradKernel(Layout layout, const float *q, const float *k,
                      const float *v, const float *dOut, const float *logSumExp,
                      const float *delta, float *dq, float scale) {
  using T = TcTiles<kDp>;
  using Acc = wmma::fragment<wmma::accumulator, 16, 16, 16, float>;
  extern __shared__ __align__(128) unsigned char memory[];
  Half *qs = reinterpret_cast<Half *>(memory);
  Half *dos = qs + T::kHalfTile, *ks = dos + T::kHalfTile,
       *vs = ks + T::kHalfTile;
  float *scores = reinterpret_cast<float *>(vs + T::kHalfTile);
  float *dps = scores + T::kScoreTile;
  Half *halves = reinterpret_cast<Half *>(dps + T::kScoreTile);
  float *lse = reinterpret_cast<float *>(halves + T::kProbTile);
  float *deltas = lse + T::kRows;
  int64_t head = blockIdx.x % layout.heads, n = blockIdx.x / layout.heads;
  int64_t kvHead = head / layout.group();
  int64_t firstRow = lastBlocksFirst() * T::kRows;
  int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  int row = warp * 16 + lane / 2, side = lane % 2;
  int64_t query = firstRow + row;
  int headDim = static_cast<int>(layout.headDim);
  int64_t end =
      firstRow + T::kRows < layout.seq ? firstRow + T::kRows : layout.seq;
  int rows = static_cast<int>(end - firstRow);
  stageHalf<Half, kDp>(qs, q + layout.query(n, firstRow, head),
                       layout.queryPitch(), rows, headDim, scale);
  stageHalf<Half, kDp>(dos, dOut + layout.query(n, firstRow, head),
                       layout.queryPitch(), rows, headDim, 1.0f);
  for (int r = threadIdx.x; r < T::kRows; r += blockDim.x) {
    lse[r] = r < rows ? logSumExp[layout.row(n, head, firstRow + r)] : 0.0f;
    deltas[r] = r < rows ? delta[layout.row(n, head, firstRow + r)] : 0.0f;
  }
  Acc dqAcc[kDp / 16];
#pragma unroll
  for (int t = 0; t < kDp / 16; ++t)
    wmma::fill_fragment(dqAcc[t], 0.0f);
  const Half *myQueries = qs + warp * 16 * T::kLdH,
             *myDOuts = dos + warp * 16 * T::kLdH;
  float *myScores = scores + warp * 16 * T::kLdS,
        *myDps = dps + warp * 16 * T::kLdS;
  Half *myHalves = halves + warp * 16 * T::kLdP;
  for (int64_t first = 0; first < end; first += T::kChunk) {
    int count =
        static_cast<int>(end - first < T::kChunk ? end - first : T::kChunk);
    stageKeyValueChunk<Half, kDp>(ks, vs, layout, k, v, n, kvHead, first,
                                  count);
    scoreStrip<Half, kDp>(myQueries, ks, myScores);
    scoreStrip<Half, kDp>(myDOuts, vs, myDps);
    __syncwarp();
    const float *s = myScores + (lane / 2) * T::kLdS + side * 32;
    const float *dp = myDps + (lane / 2) * T::kLdS + side * 32;
    Half *h = myHalves + (lane / 2) * T::kLdP + side * 32;
    for (int c = 0; c < 32; ++c) {
      int at = side * 32 + c;
      int64_t key = first + at;
      float ds = at < count && key <= query
                     ? expOf(s[c] - lse[row]) * (dp[c] - deltas[row])
                     : 0.0f;
      h[c] = toHalf<Half>(ds);
    }
    __syncwarp();
    // dQ += dS K (times the scale at the end).
#pragma unroll
    for (int t = 0; t < kDp / 16; ++t)
      productStrip<Half, T::kChunk, false>(dqAcc[t], myHalves, T::kLdP,
                                           ks + t * 16, T::kLdH);
    __syncwarp();
  }
  __syncthreads();
  float *staged = scores + warp * 16 * T::kLdO; // scores and dP's room
#pragma unroll
  for (int t = 0; t < kDp / 16; ++t)
    wmma::store_matrix_sync(staged + t * 16, dqAcc[t], T::kLdO,
                            wmma::mem_row_major);
  __syncwarp();
  const float *mine = staged + (lane / 2) * T::kLdO;
  if (query < layout.seq)
    for (int d = side * (kDp / 2); d < (side + 1) * (kDp / 2); ++d)
      if (d < headDim)
        dq[layout.query(n, query, head) + d] += mine[d] * scale;
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

/// Launches a tensor-core kernel with its dynamic shared memory (above the
/// default 48 KB: the attribute first).
template <typename Kernel, typename... Args>
void launchTc(Kernel kernel, size_t bytes, const Layout &l, int64_t heads,
              cudaStream_t stream, Args... args) {
  cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                       static_cast<int>(bytes));
  dim3 grid(static_cast<unsigned>(l.batch * heads),
            static_cast<unsigned>((l.seq + 63) / 64));
  kernel<<<grid, 128, bytes, stream>>>(l, args...);
}

template <typename Half, int kDp>
void tcForward(const Layout &l, const float *q, const float *k, const float *v,
               float *out, float *logSumExp, const float *dOut, float *delta,
               cudaStream_t stream) {
  launchTc(tcForwardKernel<Half, kDp>, tcForwardBytes<Half, kDp>(), l, l.heads,
           stream, q, k, v, out, logSumExp, dOut, delta, l.scale());
}

template <typename Half, int kDp>
void tcBackward(const Layout &l, const float *q, const float *k, const float *v,
                const float *dOut, const float *logSumExp, const float *delta,
                float *dq, float *dk, float *dv, cudaStream_t stream) {
  if (dk || dv)
    launchTc(tcKeyValueGradKernel<Half, kDp>, tcKeyValueBytes<Half, kDp>(), l,
             l.kvHeads, stream, q, k, v, dOut, logSumExp, delta, dk, dv,
             l.scale());
  if (dq)
    launchTc(tcQueryGradKernel<Half, kDp>, tcQueryBytes<Half, kDp>(), l,
             l.heads, stream, q, k, v, dOut, logSumExp, delta, dq, l.scale());
}

/// The padded head (a multiple of the tensor cores' 16) and the half type
/// pick the instantiation.
template <typename Half, typename Run> void byHeadTc(int64_t headDim, Run run) {
  if (headDim <= 32)
    run(std::integral_constant<int, 32>());
  else if (headDim <= 64)
    run(std::integral_constant<int, 64>());
  else
    run(std::integral_constant<int, 128>());
}

} // namespace

namespace dtfm::runtime::cuda {

bool tensorCoreAttentionFits(int64_t headDim) {
  size_t need = 0;
  byHeadTc<__nv_bfloat16>(headDim, [&](auto dp) {
    constexpr int kDp = decltype(dp)::value;
    need = std::max({tcForwardBytes<__nv_bfloat16, kDp>(),
                     tcKeyValueBytes<__nv_bfloat16, kDp>(),
                     tcQueryBytes<__nv_bfloat16, kDp>()});
  });
  int device = 0, limit = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&limit, cudaDevAttrMaxSharedMemoryPerBlockOptin,
                             device) != cudaSuccess)
    return false;
  return need <= static_cast<size_t>(limit);
}

void flashAttentionTensorCores(const Layout &l, HalfType type, const float *q,
                               const float *k, const float *v, float *out,
                               float *logSumExp, const float *dOut,
                               float *delta, cudaStream_t stream) {
  auto run = [&](auto half) {
    using Half = decltype(half);
    byHeadTc<Half>(l.headDim, [&](auto dp) {
      tcForward<Half, decltype(dp)::value>(l, q, k, v, out, logSumExp, dOut,
                                           delta, stream);
    });
  };
  if (type == HalfType::BF16)
    run(__nv_bfloat16());
  else
    run(__half());
}

void flashAttentionBackwardTensorCores(const Layout &l, HalfType type,
                                       const float *q, const float *k,
                                       const float *v, const float *dOut,
                                       const float *logSumExp,
                                       const float *delta, float *dq, float *dk,
                                       float *dv, cudaStream_t stream) {
  auto run = [&](auto half) {
    using Half = decltype(half);
    byHeadTc<Half>(l.headDim, [&](auto dp) {
      tcBackward<Half, decltype(dp)::value>(l, q, k, v, dOut, logSumExp, delta,
                                            dq, dk, dv, stream);
    });
  };
  if (type == HalfType::BF16)
    run(__nv_bfloat16());
  else
    run(__half());
}

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
