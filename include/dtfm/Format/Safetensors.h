//===- Safetensors.h - The safetensors weight format -------------*- C++ -*-===//
//
// Part of dtfm. Plain C++ (no MLIR).
//
//===----------------------------------------------------------------------===//
//
// safetensors, the format the field exchanges weights in (Hugging Face,
// torchtitan, DeepSpeed, Megatron-Bridge):
//
//   uint64 N (little-endian), N bytes of JSON, then the data buffer.
//
// The JSON is one object: for each tensor {"dtype", "shape", "data_offsets":
// [begin, end]} (offsets into the buffer), and an optional "__metadata__"
// object of strings. dtfm writes F32, F16 or BF16 (round to nearest even),
// tensors in name order, the header padded with spaces to a multiple of 8
// bytes (the data stays aligned), and reads F32, F16, BF16 and F64 into
// float tensors. A file is read as strictly as the published reader does:
// the header at most 100 MB and inside the file, every tensor's byte count
// its shape times its dtype's size, the offsets covering the buffer exactly
// once (no hole, no overlap, nothing after), no other key, nothing but
// strings in the metadata; anything else is refused in one line naming
// the file and the tensor.
//
//===----------------------------------------------------------------------===//

#ifndef DTFM_FORMAT_SAFETENSORS_H
#define DTFM_FORMAT_SAFETENSORS_H

#include "dtfm/Format/TensorFile.h"

#include <cstdint>
#include <map>
#include <optional>
#include <string>

namespace dtfm::format {

/// The element types dtfm writes.
enum class WeightDtype { F32, F16, BF16 };

/// "f32", "f16", "bf16" (as --save-dtype spells them), or nullopt.
std::optional<WeightDtype> parseWeightDtype(const std::string &name);

/// The largest header dtfm reads (the published reader's limit).
constexpr uint64_t kMaxSafetensorsHeader = 100'000'000;

/// Strings of the "__metadata__" object.
using WeightMetadata = std::map<std::string, std::string>;

/// Whether `bytes` begin as a safetensors file might (a header length that
/// fits, then '{'): how --init-from tells it from a DTFMPAR1 file.
bool looksLikeSafetensors(const std::string &bytes);

/// The bytes of a safetensors file of `tensors` stored as `dtype`, with
/// `metadata` (plus "format": "pt", which Hugging Face's loaders expect).
std::string encodeSafetensors(const TensorMap &tensors, WeightDtype dtype,
                              const WeightMetadata &metadata = {});

/// The tensors (as f32) and metadata of a safetensors file's bytes; false
/// with a one-line `error` prefixed by `source`.
bool decodeSafetensors(const std::string &bytes, const std::string &source,
                       TensorMap &tensors, WeightMetadata &metadata,
                       std::string &error);

/// Writes encodeSafetensors' bytes to `path` through a temporary file and a
/// rename: never half-written.
bool writeSafetensorsFile(const std::string &path, const TensorMap &tensors,
                          WeightDtype dtype, const WeightMetadata &metadata,
                          std::string &error);

/// IEEE half and bfloat16 to and from float, rounding to nearest even
/// (NaN stays NaN, overflow goes to infinity).
uint16_t floatToHalf(float value);
float halfToFloat(uint16_t bits);
uint16_t floatToBfloat16(float value);
float bfloat16ToFloat(uint16_t bits);

} // namespace dtfm::format

#endif // DTFM_FORMAT_SAFETENSORS_H
