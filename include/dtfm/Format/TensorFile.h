//===- TensorFile.h - Host tensors and their file format ---------*- C++
//-*-===//
//
// Part of dtfm. Plain C++ (no MLIR).
//
//===----------------------------------------------------------------------===//
//
// The one encoding of named fp32 tensors, used by parameter files
// (--save/--params), the weights an ONNX import writes, checkpoints and the
// parameter messages workers send to rank 0:
//
//   "DTFMPAR1", uint32 count, then per tensor (in name order):
//   uint32 name length, name bytes, uint32 rank, int64 dims[rank],
//   float data[product of dims]            (all little-endian, as the host)
//
//===----------------------------------------------------------------------===//

#ifndef DTFM_FORMAT_TENSORFILE_H
#define DTFM_FORMAT_TENSORFILE_H

#include "dtfm/Format/FileIo.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace dtfm::format {

/// A dense fp32 tensor on the host (integer inputs such as token ids are
/// stored as floats holding exact integers).
struct Tensor {
  std::vector<int64_t> shape;
  std::vector<float> data;

  Tensor() = default;
  explicit Tensor(std::vector<int64_t> shape, float fill = 0);
  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : shape)
      n *= d;
    return n;
  }
  int64_t dim(int i) const { return shape[i < 0 ? shape.size() + i : i]; }
};

using TensorMap = std::map<std::string, Tensor>;

/// The bytes of `tensors` in the format above.
std::string encodeTensors(const TensorMap &tensors);

/// Decodes bytes written by encodeTensors; false with a one-line `error`
/// (prefixed by `source`) when they are not a tensor file, truncated,
/// corrupt (a rank above 16, a negative or huge dimension) or followed by
/// trailing bytes.
bool decodeTensors(const std::string &bytes, const std::string &source,
                   TensorMap &tensors, std::string &error);

/// The tensors of a file: a safetensors file (Safetensors.h, converted to
/// f32) or one in the format above, told apart by their first bytes.
bool readTensorFile(const std::string &path, TensorMap &tensors,
                    std::string &error);

/// Writes encodeTensors' bytes to `path` through a temporary file and a
/// rename: never half-written.
bool writeTensorFile(const std::string &path, const TensorMap &tensors,
                     std::string &error);

} // namespace dtfm::format

#endif // DTFM_FORMAT_TENSORFILE_H
