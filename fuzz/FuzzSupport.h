//===- FuzzSupport.h - What the fuzz targets share ---------------*- C++ -*-===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//
//
// The readers under fuzz take paths (CSV matrices, ONNX models, checkpoint
// generations), so each target writes its input into a private scratch
// folder made once per process and removed at exit.
//
//===----------------------------------------------------------------------===//

#ifndef DTFM_FUZZ_FUZZSUPPORT_H
#define DTFM_FUZZ_FUZZSUPPORT_H

#include <cstddef>
#include <cstdint>
#include <string>

namespace dtfm::fuzz {

/// The scratch folder ("/tmp/dtfm-fuzz.XXXXXX"); aborts when it cannot be
/// made (the fuzzer then cannot do its work at all).
const std::string &scratchDir();

/// Writes `size` bytes to `<scratchDir>/<name>` and returns the path;
/// aborts on a failed write.
std::string writeScratch(const std::string &name, const uint8_t *data,
                         size_t size);

} // namespace dtfm::fuzz

#endif // DTFM_FUZZ_FUZZSUPPORT_H
