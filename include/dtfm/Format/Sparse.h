//===- Sparse.h - Top-k gradients on the wire ------------------*- C++ -*-===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//
//
// The sparse wire format of top-k data-parallel exchanges
// (dp-compression=topk:R): a message of fixed size for a given capacity --
// a uint32 count of entries, then `capacity` slots of (uint32 index, float32
// value), the first `count` used, indices strictly increasing, the rest
// zero; little-endian. sparseBytes(capacity) = 4 + 8 * capacity bytes, so
// that every member of a group knows the size of every other's message.
//
// One home for the format and for how many entries a tensor keeps
// (topkCount): the runtime's exchange encodes with it, the planner counts
// its bytes, and the selection (largestMagnitudes) is the CPU AdaTopK
// kernel's too.
//
//===----------------------------------------------------------------------===//

#ifndef DTFM_FORMAT_SPARSE_H
#define DTFM_FORMAT_SPARSE_H

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace dtfm::format {

/// Bytes of a sparse message of `capacity` entries.
constexpr size_t sparseBytes(size_t capacity) {
  return sizeof(uint32_t) + capacity * (sizeof(uint32_t) + sizeof(float));
}

/// Entries a tensor of `elements` values keeps under top-k with ratio
/// `ratio` (keep 1 / ratio): ceil(elements / ratio), at least 1 of a
/// non-empty tensor.
size_t topkCount(size_t elements, double ratio);

/// Bytes on the wire of `denseBytes` of values `elementBytes` wide under
/// top-k with `ratio`.
double sparseBytesOfDense(double denseBytes, double elementBytes,
                          double ratio);

/// The indices of the k entries of x[0, count) with the largest magnitude
/// (ties: the lower index), in increasing order.
std::vector<uint64_t> largestMagnitudes(const float *x, size_t count,
                                        size_t k);

/// Top-k with error feedback: moves the k entries of largest magnitude of
/// `pending` (a gradient plus what the last exchange left) into
/// sent[0, count) (zero elsewhere); `pending` keeps the others, the
/// residual. sent + pending afterwards is pending before, exactly.
void moveTopK(float *pending, size_t count, size_t k, float *sent);

/// Encodes the nonzero entries of x[0, count) into `out` (resized to
/// sparseBytes(capacity)); false with `error` when there are more than
/// `capacity` of them or count does not fit an index.
bool encodeSparse(const float *x, size_t count, size_t capacity,
                  std::vector<char> &out, std::string &error);

/// Adds a message's entries into sum[0, count): false with `error`, having
/// added nothing, when the message is not sparseBytes(capacity) long, holds
/// more than `capacity` entries, an index out of order or out of range, or
/// a value that is not finite (a hostile peer).
bool addSparse(const char *bytes, size_t size, size_t count, size_t capacity,
               float *sum, std::string &error);

} // namespace dtfm::format

#endif // DTFM_FORMAT_SPARSE_H
