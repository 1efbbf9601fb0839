//===- checkpoint-fuzzer.cpp - Fuzzes the checkpoint reader ---------------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//
//
// The first byte chooses what is under test. Even: the rest is a .ckpt
// file with its correct manifest (the plan hash taken from its own meta
// entry when it has one), so that decoding and the plan and finiteness
// checks see every input. Odd: the rest is the manifest's line (up to the
// first newline) and then the .ckpt, so that the manifest check sees
// anything. The directory is then read as another plan's would be
// (--resume-from): its generations listed, loaded, and a program's state
// assembled from it, with the shards (and tensor-parallel slices) its
// entries record, for the parameters it names whole, for each of them
// sharded over two, and for each as slice 1 of 2 of its last dimension.
//
//===----------------------------------------------------------------------===//

#include "FuzzSupport.h"

#include "dtfm/Runtime/Checkpoints.h"

using namespace dtfm;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size == 0)
    return 0;
  bool givenManifest = data[0] & 1;
  std::string rest(reinterpret_cast<const char *>(data + 1), size - 1);
  std::string manifest, ckpt = rest;
  if (givenManifest) {
    size_t newline = rest.find('\n');
    size_t end = newline == std::string::npos ? rest.size() : newline + 1;
    manifest = rest.substr(0, end);
    ckpt = rest.substr(end);
  }

  // The plan hash the checkpoint says it belongs to, when it says so.
  format::TensorMap decoded;
  std::string error;
  uint64_t planHash = 0x5eed;
  if (format::decodeTensors(ckpt, "fuzz.ckpt", decoded, error))
    planHash = runtime::CheckpointStore::recordedPlanHash(decoded).value_or(
        planHash);

  runtime::CheckpointStore store(fuzz::scratchDir(), "dev", planHash);
  if (!givenManifest)
    manifest = store.manifest(1, ckpt);
  fuzz::writeScratch("dev.step-1.ckpt",
                     reinterpret_cast<const uint8_t *>(ckpt.data()),
                     ckpt.size());
  fuzz::writeScratch("dev.step-1.manifest",
                     reinterpret_cast<const uint8_t *>(manifest.data()),
                     manifest.size());
  format::TensorMap state;
  store.load(1, state, error);

  for (const runtime::Generation &g :
       runtime::listGenerations(fuzz::scratchDir())) {
    std::vector<format::TensorMap> files;
    if (!runtime::loadGeneration(fuzz::scratchDir(), g, files, error))
      continue;
    std::map<std::string, std::vector<int64_t>> parameters, sliced;
    std::map<std::string, plan::ElementRange> halves;
    std::map<std::string, plan::TensorParallelSlice> slices;
    for (const auto &[key, tensor] : files.front())
      if (key.rfind("param/", 0) == 0 && tensor.numel() <= (1 << 20)) {
        std::string name = key.substr(6);
        parameters[name] = tensor.shape;
        halves[name] = plan::shardOf(tensor.numel(), 1, 2);
        // Slice 1 of 2 along the last dimension, where it halves.
        if (!tensor.shape.empty() && tensor.shape.back() % 2 == 0) {
          sliced[name] = tensor.shape;
          sliced[name].back() /= 2;
          slices[name] = {static_cast<int64_t>(tensor.shape.size()) - 1, 1, 2};
        }
      }
    format::TensorMap out;
    runtime::assembleState(files, parameters, {}, {}, out, error);
    runtime::assembleState(files, parameters, halves, {}, out, error);
    runtime::assembleState(files, sliced, {}, slices, out, error);
  }
  return 0;
}
