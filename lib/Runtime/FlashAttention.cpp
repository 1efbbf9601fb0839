//===- FlashAttention.cpp - The fused attention's host reference ----------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//
//
// The kernels' algorithm on the host, one lane a row, the tensors read in
// place in the kernels' chunks (FlashAttention.h). The unit tests check it
// against the CPU kernels (which keep the probabilities), so that the math
// the GPU runs is checked where there is no GPU.
//
//===----------------------------------------------------------------------===//

#include "dtfm/Runtime/FlashAttention.h"

#include <algorithm>
#include <vector>

using namespace dtfm::runtime::flash;

namespace {

constexpr int kHostDims = static_cast<int>(kMaxHeadDim);

int64_t chunkCount(int64_t first, int64_t end, int chunk) {
  return std::min<int64_t>(chunk, end - first);
}

/// Feeds a query row (ForwardRow or QueryRow: the same take) the keys and
/// values it sees, read in place in the kernels' chunks.
template <typename Row>
void takeKeysUpTo(Row &state, const Layout &layout, const float *k,
                  const float *v, int64_t n, int64_t kvHead, int64_t row,
                  int dims) {
  for (int64_t first = 0; first <= row; first += kForwardChunk)
    state.take(k + layout.key(n, first, kvHead),
               v + layout.key(n, first, kvHead), layout.keyPitch(),
               static_cast<int>(chunkCount(first, layout.seq, kForwardChunk)),
               first, row, dims);
}

} // namespace

void dtfm::runtime::flash::forwardReference(const Layout &layout,
                                            const float *q, const float *k,
                                            const float *v, float *out,
                                            float *logSumExp, const float *dOut,
                                            float *delta) {
  int dims = static_cast<int>(layout.headDim);
  float scale = layout.scale();
  for (int64_t n = 0; n < layout.batch; ++n)
    for (int64_t head = 0; head < layout.heads; ++head) {
      int64_t kvHead = head / layout.group();
      for (int64_t row = 0; row < layout.seq; ++row) {
        ForwardRow<kHostDims, 1, kForwardChunk> state;
        state.begin(q + layout.query(n, row, head), dims, scale);
        takeKeysUpTo(state, layout, k, v, n, kvHead, row, dims);
        if (out)
          state.finish(out + layout.query(n, row, head), dims);
        if (logSumExp)
          logSumExp[layout.row(n, head, row)] = state.logSumExp();
        if (dOut && delta)
          delta[layout.row(n, head, row)] =
              state.outputDot(dOut + layout.query(n, row, head), dims);
      }
    }
}

void dtfm::runtime::flash::backwardReference(const Layout &layout,
                                             const float *q, const float *k,
                                             const float *v, const float *dOut,
                                             const float *logSumExp,
                                             const float *delta, float *dq,
                                             float *dk, float *dv) {
  int dims = static_cast<int>(layout.headDim);
  float scale = layout.scale();
  // The dK/dV pass: a key row over the later queries of its group's heads,
  // staged as the kernel stages them (the queries times the scale, one
  // pitch for both).
  std::vector<float> queries(static_cast<size_t>(kBackwardChunk * dims)),
      dOuts(queries.size());
  if (dk || dv)
    for (int64_t n = 0; n < layout.batch; ++n)
      for (int64_t kvHead = 0; kvHead < layout.kvHeads; ++kvHead)
        for (int64_t key = 0; key < layout.seq; ++key) {
          KeyRow<kHostDims, 1, kBackwardChunk> state;
          state.begin(k + layout.key(n, key, kvHead),
                      v + layout.key(n, key, kvHead), dims);
          for (int64_t g = 0; g < layout.group(); ++g) {
            int64_t head = kvHead * layout.group() + g;
            int64_t start = key / kBackwardChunk * kBackwardChunk;
            for (int64_t first = start; first < layout.seq;
                 first += kBackwardChunk) {
              int count = static_cast<int>(
                  chunkCount(first, layout.seq, kBackwardChunk));
              for (int c = 0; c < count; ++c)
                for (int d = 0; d < dims; ++d) {
                  int64_t at = layout.query(n, first + c, head) + d;
                  queries[static_cast<size_t>(c * dims + d)] = q[at] * scale;
                  dOuts[static_cast<size_t>(c * dims + d)] = dOut[at];
                }
              state.take(queries.data(), dOuts.data(), dims,
                         logSumExp + layout.row(n, head, first),
                         delta + layout.row(n, head, first), count, first, key,
                         dims);
            }
          }
          state.finish(dk ? dk + layout.key(n, key, kvHead) : nullptr,
                       dv ? dv + layout.key(n, key, kvHead) : nullptr, dims);
        }
  if (!dq)
    return;
  for (int64_t n = 0; n < layout.batch; ++n)
    for (int64_t head = 0; head < layout.heads; ++head) {
      int64_t kvHead = head / layout.group();
      for (int64_t row = 0; row < layout.seq; ++row) {
        QueryRow<kHostDims, 1, kForwardChunk> state;
        int64_t at = layout.row(n, head, row);
        state.begin(q + layout.query(n, row, head),
                    dOut + layout.query(n, row, head), logSumExp[at], delta[at],
                    dims, scale);
        takeKeysUpTo(state, layout, k, v, n, kvHead, row, dims);
        state.finish(dq + layout.query(n, row, head), dims, scale);
      }
    }
}
