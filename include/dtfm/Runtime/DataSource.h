//===- DataSource.h - Training data for the workers --------------*- C++ -*-===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//
//
// Micro-batches addressed by their global index, so that every worker of a
// run (the first stage reading tokens, the last reading labels, every
// data-parallel replica its own share) builds exactly the data a
// single-device run of the same model would see: micro-batch k of step t
// of pipeline p is global index t * (pipelines * M) + p * M + k.
//
//  - token pairs (an integer input [B, S] and an integer label of the same
//    shape): B rows of S + 1 tokens from position k * B * (S + 1) of the
//    token file (int32, wrapping around), inputs the first S of a row and
//    labels the last S. Without a file, a synthetic stream from the seed
//    that a model can learn: each token is followed by a fixed successor
//    (a hash of the token and the seed) three times in four, by a random
//    token otherwise; each row seeded by its global sample index, so that
//    a plan with another micro-batch size sees the same samples, as with
//    a file.
//  - --inputs files: tensors named "<input>@<k>".
//  - anything else: seeded normal values (integers: tokens; booleans, i1
//    masks: 0 or 1), each row of the leading dimension by its global
//    sample index.
//
//===----------------------------------------------------------------------===//

#ifndef DTFM_RUNTIME_DATASOURCE_H
#define DTFM_RUNTIME_DATASOURCE_H

#include "dtfm/Runtime/Executor.h"

#include <cstdint>
#include <string>
#include <vector>

namespace dtfm::runtime {

class DataSource {
public:
  /// `vocabulary` bounds tokens (0: unknown); files are checked here.
  bool open(const std::string &tokensPath, const std::string &inputsPath,
            uint64_t seed, int64_t vocabulary, std::string &error);

  /// The inputs and labels in `specs` for global micro-batch `index`. An
  /// input the --inputs file gives for some micro-batches must be there
  /// for `index` too: running out of data is an error, not synthetic data.
  bool microBatch(int64_t index, const std::vector<InputSpec> &specs,
                  MicroBatch &batch, std::string &error) const;

private:
  uint64_t successor(uint64_t token, uint64_t range) const;

  std::string inputsPath;
  std::vector<int32_t> tokens;
  std::map<std::string, cpu::Tensor> given;
  uint64_t seed = 0;
  int64_t vocabulary = 0;
};

} // namespace dtfm::runtime

#endif // DTFM_RUNTIME_DATASOURCE_H
