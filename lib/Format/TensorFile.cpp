//===- TensorFile.cpp - Host tensors and their file format ----------------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//

#include "dtfm/Format/TensorFile.h"
#include "dtfm/Format/Safetensors.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <sys/stat.h>

using namespace dtfm::format;

Tensor::Tensor(std::vector<int64_t> s, float fill) : shape(std::move(s)) {
  data.assign(static_cast<size_t>(numel()), fill);
}

static constexpr char kMagic[8] = {'D', 'T', 'F', 'M', 'P', 'A', 'R', '1'};

std::string dtfm::format::encodeTensors(const TensorMap &tensors) {
  std::string out(kMagic, sizeof(kMagic));
  auto put = [&](const void *p, size_t n) {
    out.append(static_cast<const char *>(p), n);
  };
  uint32_t count = static_cast<uint32_t>(tensors.size());
  put(&count, 4);
  for (const auto &[name, t] : tensors) {
    uint32_t length = static_cast<uint32_t>(name.size());
    uint32_t rank = static_cast<uint32_t>(t.shape.size());
    put(&length, 4);
    put(name.data(), length);
    put(&rank, 4);
    put(t.shape.data(), 8 * rank);
    put(t.data.data(), 4 * t.data.size());
  }
  return out;
}

bool dtfm::format::decodeTensors(const std::string &bytes,
                                 const std::string &source, TensorMap &tensors,
                                 std::string &error) {
  size_t at = 0;
  auto get = [&](void *p, size_t n) {
    if (n > bytes.size() - at)
      return false;
    std::memcpy(p, bytes.data() + at, n);
    at += n;
    return true;
  };
  char magic[8];
  uint32_t count = 0;
  if (!get(magic, 8) || std::memcmp(magic, kMagic, 8) != 0 || !get(&count, 4)) {
    error = source + ": not a dtfm tensor file";
    return false;
  }
  for (uint32_t i = 0; i < count; ++i) {
    uint32_t length = 0, rank = 0;
    std::string name;
    bool ok = get(&length, 4) && length <= bytes.size() - at;
    if (ok) {
      name.assign(bytes.data() + at, length);
      at += length;
      ok = get(&rank, 4) && rank <= 16;
    }
    if (!ok) {
      error = source + ": truncated or corrupt at tensor " + std::to_string(i);
      return false;
    }
    std::vector<int64_t> shape(rank);
    if (!get(shape.data(), 8 * static_cast<size_t>(rank))) {
      error = source + ": truncated at tensor '" + name + "'";
      return false;
    }
    // Every element must be in the bytes that remain: bounds the product
    // before anything is allocated.
    uint64_t left = (bytes.size() - at) / 4, elements = 1;
    for (int64_t d : shape) {
      if (d < 0 || d > (int64_t(1) << 40)) {
        error = source + ": corrupt shape of tensor '" + name + "'";
        return false;
      }
      if (d != 0 && elements > left / static_cast<uint64_t>(d))
        elements = left + 1;
      else
        elements *= static_cast<uint64_t>(d);
    }
    if (elements > left) {
      error = source + ": truncated at tensor '" + name + "'";
      return false;
    }
    Tensor t(shape);
    get(t.data.data(), 4 * t.data.size());
    tensors[name] = std::move(t);
  }
  if (at != bytes.size()) {
    error = source + ": " + std::to_string(bytes.size() - at) +
            " trailing bytes after the last tensor";
    return false;
  }
  return true;
}

bool dtfm::format::readTensorFile(const std::string &path, TensorMap &tensors,
                                  std::string &error) {
  std::string bytes;
  if (!readWholeFile(path, bytes, error))
    return false;
  if (bytes.compare(0, sizeof kMagic, kMagic, sizeof kMagic) == 0)
    return decodeTensors(bytes, path, tensors, error);
  if (looksLikeSafetensors(bytes)) {
    WeightMetadata metadata;
    return decodeSafetensors(bytes, path, tensors, metadata, error);
  }
  error = path + ": not a dtfm tensor file (DTFMPAR1) nor a safetensors file";
  return false;
}

bool dtfm::format::writeTensorFile(const std::string &path,
                                   const TensorMap &tensors,
                                   std::string &error) {
  return writeFileAtomically(path, encodeTensors(tensors), error);
}
