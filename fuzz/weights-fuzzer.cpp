//===- weights-fuzzer.cpp - Fuzzes the weights file readers ---------------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//
//
// The bytes as a weights file (--init-from): safetensors (its header
// through the strict JSON reader) or DTFMPAR1, told apart as
// format::readTensorFile does; what decodes is written back as safetensors
// in each dtype and must read back to the same names and shapes.
//
//===----------------------------------------------------------------------===//

#include "FuzzSupport.h"

#include "dtfm/Format/Safetensors.h"

#include <cstdlib>

using namespace dtfm;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string path = fuzz::writeScratch("weights.safetensors", data, size);
  format::TensorMap tensors;
  std::string error;
  if (!format::readTensorFile(path, tensors, error))
    return 0;
  for (format::WeightDtype dtype :
       {format::WeightDtype::F32, format::WeightDtype::F16,
        format::WeightDtype::BF16}) {
    format::TensorMap back;
    format::WeightMetadata metadata;
    if (!format::decodeSafetensors(format::encodeSafetensors(tensors, dtype),
                                   "again", back, metadata, error) ||
        back.size() != tensors.size())
      std::abort();
    for (const auto &[name, t] : tensors)
      if (back.at(name).shape != t.shape)
        std::abort();
  }
  return 0;
}
